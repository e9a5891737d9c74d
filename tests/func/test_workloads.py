"""The workloads the seeds ran, for real at tiny size: sysbench, a client sweep, a rate at a
share of the maximum, pgbouncer in front of the server, huge pages."""

from __future__ import annotations

import json
import os
import signal
import statistics
from pathlib import Path

import pytest

from pgfsbench.system.cpus import format_cpu_list
from tests.func.conftest import (
    BESIDE,
    leftovers,
    pgfsbench,
    runs_of,
    show,
    signal_mid_measurement,
    write_spec,
)

TINY = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "{duration}"
warmup = "1s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "512M"
"""
# sysbench at tiny size with the second seed's read/write mix
OLTP = """
[workload.oltp]
tool = "sysbench"
script = "oltp_read_write"
tables = 2
table_size = 1000
mix = "80/20"
"""


def test_sysbench_oltp_with_the_seeds_80_20_mix(base: Path) -> None:
    spec = write_spec(base / "s.toml", TINY.format(duration="3s") + OLTP)
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok" and run["throughput"] > 0 and run["load_seconds"] > 0
    detail = show(results, run["run_id"])
    tool = detail["metrics"]["tool"]
    assert tool["name"] == "sysbench" and tool["qps"] > run["throughput"]
    assert tool["reads"] / (tool["reads"] + tool["writes"]) == pytest.approx(0.8, abs=0.01)
    lat = detail["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["max"]
    for name in ("tps", "qps", "lat_p99_ms", "errors_per_s", "waits", "disk_write_mbps"):
        assert detail["series"][name]["values"], name
    assert "sysbench_output" in detail["artifacts"]
    assert detail["environment"]["sysbench"].startswith("sysbench 1.")


def test_a_client_sweep_and_a_rate_at_half_the_maximum(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        TINY.format(duration="5s")
        + """
[workload.sweep]
builtin = "select-only"
clients = [1, 4]
[workload.paced]
builtin = "tpcb-like"
rate = ["max", "50%"]
""",
    )
    results = base / "r.sqlite"
    # txlog = "auto" at 1 TPS a CPU: the unpaced runs go without pgbench's log, the paced
    # one keeps it (its latency is what it is for)
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--set",
        "txlog_max_tps_per_cpu=1",
    )
    runs = {r["cell"]: r for r in runs_of(results)}
    assert set(runs) == {
        "ram/default/default/sweep@clients=1,rate=max",
        "ram/default/default/sweep@clients=4,rate=max",
        "ram/default/default/paced@clients=2,rate=max",
        "ram/default/default/paced@clients=2,rate=50%",
    }
    assert all(r["status"] == "ok" for r in runs.values())
    full = runs["ram/default/default/paced@clients=2,rate=max"]
    half = show(results, runs["ram/default/default/paced@clients=2,rate=50%"]["run_id"])
    pacing = half["metrics"]["rate"]
    assert pacing["max_from"].startswith("the same cell unthrottled")
    assert pacing["max_tps"] == pytest.approx(full["throughput"], rel=1e-6)
    assert half["throughput"] == pytest.approx(full["throughput"] / 2, rel=0.10)
    assert "schedule_lag_ms" in half["metrics"]["latency_log"]
    assert half["metrics"]["observer"]["txlog"] is True
    assert half["metrics"]["observer"]["txlog_left_out"] is None
    sweep = show(results, runs["ram/default/default/sweep@clients=4,rate=max"]["run_id"])
    observer = sweep["metrics"]["observer"]
    assert observer["on"] is True and observer["txlog"] is False
    assert "above txlog_max_tps_per_cpu = 1:" in observer["txlog_left_out"]
    assert not sweep["latency_ms"] and "txlog" not in sweep["artifacts"]
    assert sweep["series"]["waits"]["values"]  # the samplers still ran
    # the sampler's own transactions are not counted as the workload's commits (beside
    # other tests a paced pgbench falls behind its schedule in some seconds: 0.85 seen)
    commits = [v for v in half["series"]["commits_per_s"]["values"][2:] if v is not None]
    low = 0.75 if BESIDE else 0.90
    assert low * half["throughput"] <= statistics.median(commits) <= 1.10 * half["throughput"]
    summary = json.loads(
        pgfsbench("results", "summary", "--results", str(results), "--json").stdout
    )
    groups = {c["group"] for c in summary["cells"]}
    [left_out] = [w for w in summary["warnings"] if w.startswith("no latency percentiles")]
    assert "for 3 cell(s)" in left_out and "sweep@clients=1,rate=max" in left_out
    assert "sweep, 1 clients, scale 1, on vm" in groups or any("1 clients" in g for g in groups)


def test_pgbouncer_in_front_and_gone_after_sigkill_and_cleanup(base: Path) -> None:
    """With server_cpus, the server side (PostgreSQL, pgbouncer) on its CPU and the
    clients on the others."""
    two = len(os.sched_getaffinity(0)) >= 2
    spec = write_spec(
        base / "s.toml",
        TINY.format(duration="4s").replace(
            "[defaults]\n", '[defaults]\nserver_cpus = "0"\n' if two else "[defaults]\n"
        )
        + """
[postgres.pooled]
pooler = { kind = "pgbouncer", pool_mode = "transaction", default_pool_size = 2 }
[workload.w]
clients = 6
threads = 2
""",
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    detail = show(results, run["run_id"])
    pooler = detail["storage_details"]["pooler"]
    assert pooler["version"].startswith("PgBouncer") or "bouncer" in pooler["version"].lower()
    settings = [ln.split("=")[0].strip() for ln in pooler["config"].splitlines() if "=" in ln]
    assert "listen_addr" not in settings and "pool_mode = transaction" in pooler["config"]
    through = [v for v in detail["series"]["pooler_tps"]["values"] if v]
    assert through and statistics.median(through) == pytest.approx(run["throughput"], rel=0.3)
    waiting = [v for v in detail["series"]["pooler_clients_waiting"]["values"] if v is not None]
    assert max(waiting) >= 1  # 6 clients, 2 slots (a second the sampler missed is None)
    assert detail["metrics"]["pooler"]["avg_wait_ms"] > 0
    if two:
        others = format_cpu_list(os.sched_getaffinity(0) - {0})
        assert detail["metrics"]["cpus"] == {
            "server": "0",
            "clients": others,
            "postmaster_at_end": "0",
            "pooler_at_end": "0",
            "clients_at_end": others,
        }
    long = write_spec(
        base / "long.toml",
        TINY.format(duration="120s")
        + """
[postgres.pooled]
pooler = { kind = "pgbouncer" }
""",
    )
    code, _, _ = signal_mid_measurement(long, base / "r2.sqlite", base / "work2", signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert any("pgbouncer" in x for x in leftovers(base))
    pgfsbench("cleanup", "--workdir", str(base / "work2"))
    assert not any("pgbouncer" in x for x in leftovers(base))


def test_prepared_statements_through_a_transaction_pooler(base: Path) -> None:
    """Debian 12's pgbouncer (1.18) in transaction mode loses server-side prepared
    statements: sysbench (which prepares by default) runs without them and says so, more
    threads than server connections; pgbench -M prepared is refused before anything is
    made."""
    pooled = """
[postgres.pooled]
pooler = { kind = "pgbouncer", pool_mode = "transaction", default_pool_size = 2 }
"""
    spec = write_spec(base / "s.toml", TINY.format(duration="3s") + pooled + OLTP + "clients = 8\n")
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok" and run["throughput"] > 0, run
    detail = show(results, run["run_id"])
    why = detail["metrics"]["tool"]["prepared_statements_disabled"]
    assert "transaction mode does not keep server-side prepared statements" in why
    assert detail["metrics"]["tool"]["prepared_statements"] is False
    waiting = [v for v in detail["series"]["pooler_clients_waiting"]["values"] if v is not None]
    assert max(waiting) >= 1  # 8 threads, 2 slots
    refused = write_spec(
        base / "refused.toml",
        TINY.format(duration="3s")
        + pooled
        + """
[workload.w]
builtin = "select-only"
protocol = "prepared"
""",
    )
    done = pgfsbench(
        "run",
        str(refused),
        "--results",
        str(base / "r2.sqlite"),
        "--workdir",
        str(base / "work2"),
        check=False,
    )
    assert done.returncode != 0
    assert "pgbench -M prepared through the pooler of postgres pooled" in done.stderr
    assert not (base / "work2").exists() and runs_of(base / "r2.sqlite") == []


@pytest.mark.exclusive  # host-wide settings: run alone
def test_huge_pages_are_reserved_for_the_server_and_given_back(base: Path) -> None:
    nr = Path("/proc/sys/vm/nr_hugepages")
    before = nr.read_text().strip()
    spec = write_spec(
        base / "s.toml",
        TINY.format(duration="2s")
        + """
[postgres.huge]
settings = { huge_pages = "on", shared_buffers = "64MB" }
""",
    )
    results = base / "r.sqlite"
    proc = pgfsbench(
        "run", str(spec), "--results", str(results), "--workdir", str(base / "work"), check=False
    )
    assert nr.read_text().strip() == before  # given back, whatever happened
    (run,) = runs_of(results)
    if run["status"] != "ok":
        assert "the kernel gave" in run["error"], run["error"]
        pytest.skip(f"this kernel gave too few huge pages: {run['error']}")
    assert proc.returncode == 0
    hp = show(results, run["run_id"])["metrics"]["huge_pages"]
    assert hp["asked"] > 0 and hp["obtained"] == hp["asked"]
    at_end = hp["at_end"]
    in_use = at_end["HugePages_Total"] - at_end["HugePages_Free"] + at_end["HugePages_Rsvd"]
    assert in_use >= hp["asked"] * 0.9  # the server really mapped them


def test_a_hundred_clients_on_a_server_left_as_initdb_made_it(base: Path) -> None:
    """The seeds' runs: 100 clients, postgresql.conf unchanged. initdb's max_connections
    (100) cannot admit them and the sampler: pgfsbench raises it, and says so."""
    text = TINY.format(duration="2s").replace("clients = 2", "clients = 100")
    spec = write_spec(base / "s.toml", text + '[workload.rw]\nbuiltin = "tpcb-like"\n')
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok" and run["clients"] == 100 and run["throughput"] > 0
    detail = show(results, run["run_id"])
    (change,) = detail["metrics"]["settings_set_by_pgfsbench"]
    assert change["setting"] == "max_connections" and change["to"] == 103
    assert any("max_connections raised from" in w for w in detail["warnings"])
    changed = {s["name"]: s["setting"] for s in detail["environment"]["pg_settings_changed"]}
    assert changed["max_connections"] == "103"
