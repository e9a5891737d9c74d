"""What a run records beyond TPS: checkpoints, latency, WAL, OS and wait-event series."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.func.conftest import (
    pgfsbench,
    runs_of,
    show,
    start,
    wait_measuring,
    write_spec,
)

# timing: the tests marked `exclusive` run alone (scripts/test.sh); the storage ceiling's
# test asserts figures measured and kept, not their size: it runs beside others

SPEC = """
[defaults]
scale = 2
clients = 4
threads = 2
duration = "{duration}"
warmup = "1s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:1G"
"""


def run_with(
    base: Path, duration: str, during: Callable[[Path], None], defaults: str = ""
) -> dict[str, Any]:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(duration=duration).replace("[defaults]\n", "[defaults]\n" + defaults),
    )
    results = base / "r.sqlite"
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    try:
        wait_measuring(proc, 120)
        mnt = next((base / "work" / "cells").glob("run-*/mnt/data"))
        during(mnt)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    return show(results, run["run_id"])


@pytest.mark.exclusive
def test_forced_checkpoint_and_everything_a_run_records(base: Path) -> None:
    def force_checkpoint(mnt: Path) -> None:
        time.sleep(2)
        sock = next(mnt.parents[1].glob("sock")) if (mnt.parents[1] / "sock").exists() else None
        host = str(sock) if sock else next(Path("/tmp").glob("pgfsb-*"))
        subprocess.run(
            ["psql", "-h", str(host), "-U", "postgres", "-c", "CHECKPOINT", "pgbench"],
            check=True,
            capture_output=True,
        )

    run = run_with(base, "6s", force_checkpoint)
    forced = [c for c in run["checkpoints"] if 0 < (c["started_s"] or -1) < 6]
    assert forced and forced[0]["reason"].startswith("immediate force")
    assert forced[0]["buffers"] > 0
    lat = run["latency_ms"]
    assert set(lat) == {"p50", "p90", "p95", "p99", "p999", "max"}
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    assert run["wal_bytes"] > 0 and run["wal_fpi"] is not None
    series = run["series"]
    for name in (
        "tps",
        "lat_p99_ms",
        "dirty_kb",
        "writeback_kb",
        "disk_write_mbps",
        "cpu_iowait_pct",
        "waits",
        "wal_mbps",
        "checkpoint_buffers_per_s",
    ):
        assert series[name]["values"], name
    assert max(v or 0 for v in series["disk_write_mbps"]["values"]) > 0
    assert max(v or 0 for v in series["checkpoint_buffers_per_s"]["values"]) > 0
    env = run["environment"]
    assert env["vm"]["vm.dirty_ratio"] and env["pgbench"].startswith("pgbench")
    assert any(d.startswith("loop") for d in env["devices"])
    assert "txlog" in run["artifacts"]
    # the run's own commands: its set-up first, its teardown last (not the next run's)
    commands = [
        ln
        for ln in Path(run["artifacts"]["commands"]["path"]).read_text().splitlines()
        if ln and not ln.startswith("#")
    ]
    assert "mkfs" in " ".join(commands[:6]), commands[:6]
    assert any(c.startswith("losetup --detach") for c in commands[-3:]), commands[-3:]
    # the observer ran under SCHED_BATCH, its backend too (a local server)
    assert run["metrics"]["observer"]["sched"] == {
        "policy": "batch",
        "thread": "batch",
        "backend": "batch",
    }


@pytest.mark.exclusive
def test_frozen_filesystem_shows_zero_tps_and_waiting_backends(base: Path) -> None:
    frozen_at: list[float] = []

    def freeze(mnt: Path) -> None:
        time.sleep(3)
        subprocess.run(["fsfreeze", "-f", str(mnt)], check=True)
        try:
            frozen_at.append(time.time())
            time.sleep(3)
        finally:
            subprocess.run(["fsfreeze", "-u", str(mnt)], check=True)

    thread_errors: list[BaseException] = []

    def during(mnt: Path) -> None:
        t = threading.Thread(target=lambda: _guard(freeze, mnt, thread_errors))
        t.start()
        t.join()

    # without pgbench's transaction log (txlog = false): the samplers still see it all
    run = run_with(base, "10s", during, defaults="txlog = false\n")
    assert not thread_errors and frozen_at
    assert "txlog" not in run["artifacts"] and not run["latency_ms"]
    assert run["metrics"]["observer"]["on"] is True
    assert run["metrics"]["observer"]["txlog"] is False
    tps = run["series"]["tps"]["values"]
    assert sum(1 for v in tps if v == 0) >= 2, tps
    waits = run["series"]["waits"]["values"]
    waiting = [
        w
        for w in waits
        if w and sum(n for e, n in w.items() if not e.startswith(("CPU/", "Client/"))) >= 1
    ]
    assert len(waiting) >= 2, waits
    events = {e for w in waiting for e in w}
    assert events & {
        "IO/WALSync",
        "IO/WALWrite",
        "LWLock/WALWrite",
        "IO/DataFileWrite",
        "IO/DataFileExtend",
        "IO/WALInitWrite",
        "IO/WALInitSync",
        "Lock/transactionid",
        "Lock/tuple",
    }, events
    # the diagnosis: frozen, from the writers asleep until it thawed, and confident
    (ep,) = [e for e in run["stalls"] if e["kind"] == "stall"]
    assert ep["cause"] == "fs_frozen" and ep["confidence"] == "high", ep
    assert "percpu_rwsem_wait" in ep["evidence"][0] and "data volume" in ep["evidence"][0]
    blocked = [b for b in run["series"]["blocked"]["values"] if b]
    assert any(k.startswith("benchmark|percpu_rwsem_wait|data") for b in blocked for k in b)


def _guard(fn: Callable[[Path], None], mnt: Path, errors: list[BaseException]) -> None:
    try:
        fn(mnt)
    except BaseException as exc:
        errors.append(exc)
        subprocess.run(["fsfreeze", "-u", str(mnt)], check=False)


def test_storage_ceiling_is_measured_once_and_kept(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "1s"
warmup = "0s"
repetitions = 2
ceiling_seconds = 1
[storage.ext4]
fs = "ext4"
device = "loop:512M"
ceiling = true
""",
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    first, second = (show(results, r["run_id"]) for r in runs_of(results))
    c1, c2 = first["metrics"]["ceiling"], second["metrics"]["ceiling"]
    assert c1["cached"] is False and c2["cached"] is True
    assert c1["identity"] == c2["identity"]
    assert c1["pg_test_fsync"]["file sync methods using one 8kB write: fdatasync"] > 0
    assert c1["fio"]["write_iops"] > 0
    text = pgfsbench("results", "show", str(first["run_id"]), "--results", str(results)).stdout
    assert "storage ceiling" in text


@pytest.mark.exclusive
def test_pg_sampler_pipelined_sees_a_lock_wait_and_typed_counters(results_server: str) -> None:
    import psycopg

    from pgfsbench.collect.samplers import Job, PgSampler, Statements, Ticker

    with (
        psycopg.connect(results_server, autocommit=True) as holder,
        psycopg.connect(results_server, autocommit=True) as waiter,
    ):
        holder.execute("CREATE TABLE held (x int)")
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE held IN ACCESS EXCLUSIVE MODE")
        blocked = threading.Thread(target=lambda: waiter.execute("SELECT * FROM held"))
        blocked.start()
        sampler = PgSampler(results_server, 15, counters_every=10)
        sampler.open()
        job = Job("pg", 1, sampler.tick)
        ticker = Ticker("test-observer", 0.1, [job])
        ticker.start()
        time.sleep(0.75)
        # from another thread while the ticker runs: the connection is shared under a lock
        snapshot = sampler.snapshot()
        time.sleep(0.75)
        backend_cpu = sampler.backend_cpu_seconds()  # its server process, still there
        ticker.stop()
        samples = sampler.close(job.errors)
        holder.execute("COMMIT")
        blocked.join(timeout=10)
    assert not samples.errors, samples.errors
    assert sampler.behind == 0
    assert len(samples.waits) >= 10
    assert all(counts.get("Lock/relation") == 1 for _, counts in samples.waits[2:])
    # the holder is idle in its transaction: waiting for its client
    assert all(counts.get("Client/ClientRead") == 1 for _, counts in samples.waits[2:])
    times = [t for t, _ in samples.waits]
    assert times == sorted(times) and 0.05 < (times[-1] - times[0]) / (len(times) - 1) < 0.2
    assert len(samples.counters) >= 2
    first, last = samples.counters[0], samples.counters[-1]
    assert isinstance(first["t"], float) and isinstance(first["xact_commit"], int)
    assert isinstance(first["wal_lsn"], float) and first["wal_lsn"] > 0
    # one transaction per batch: ten ticks between two counter rows are ten commits
    assert last["own_commits"] - first["own_commits"] >= 10
    assert snapshot is not None and isinstance(snapshot["wal_lsn"], float)
    assert snapshot["wal_lsn"] >= first["wal_lsn"]
    assert ticker.cpu_seconds > 0 and backend_cpu is not None

    # a statement that fails raises psycopg's class with the server's message once its
    # batch is in; the rest of that batch is dropped and the connection still works
    with psycopg.connect(results_server, autocommit=True) as conn:
        statements = Statements(
            conn.pgconn,
            {
                "ratio": "SELECT 1 / 0 AS r",
                "one": "SELECT 1::int8 AS n, 2.5 AS x",
                "slow": "SELECT pg_sleep(0.3)",
            },
        )
        assert statements.run(("one",))["one"] == (["n", "x"], [(1, 2.5)])
        try:
            statements.run(("ratio", "one"))
        except psycopg.errors.DivisionByZero as exc:
            assert "division by zero" in str(exc)
        else:
            raise AssertionError("no error raised")
        assert statements.run(("one",))["one"][1] == [(1, 2.5)]
        # a batch not yet answered: no waiting for it, and it is there later
        statements.send(("slow", "one"))
        assert statements.receive() is None and statements.in_flight
        got = statements.receive(wait=5.0)
        assert got is not None and got["one"][1] == [(1, 2.5)] and not statements.in_flight

    # a tick's lean path (one statement, one value): the same answers, the same errors
    with psycopg.connect(results_server, autocommit=True) as conn:
        statements = Statements(
            conn.pgconn,
            {
                "slow": "SELECT 'late' FROM pg_sleep(0.3)",
                "fails": "SELECT (1 / 0)::text",
                "none": "SELECT 'x' WHERE false",
            },
        )

        def settled() -> bytes | None:
            for _ in range(500):
                done, value = statements.receive_value()
                if done:
                    return value
                time.sleep(0.02)
            raise AssertionError("no answer in 10 s")

        assert statements.receive_value() == (False, None)  # nothing in flight
        statements.send(("slow",))
        assert statements.receive_value() == (False, None) and statements.in_flight
        assert settled() == b"late" and not statements.in_flight
        statements.send(("fails",))
        try:
            settled()
        except psycopg.errors.DivisionByZero:
            pass
        else:
            raise AssertionError("no error raised")
        assert not statements.in_flight
        statements.send(("none",))
        assert settled() is None
        assert statements.run(("slow",))["slow"][1] == [("late",)]


@pytest.mark.exclusive
def test_observation_whose_backend_is_killed_records_why_and_ends_at_once(
    results_server: str, base: Path
) -> None:
    import psycopg

    from pgfsbench.collect.observation import Observation

    obs = Observation(results_server, 15, (), base / "no-server.log", wait_hz=10)
    obs.start()
    obs.mark_measured_start()
    time.sleep(0.5)
    assert obs.pg is not None
    with psycopg.connect(results_server, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (obs.pg.backend_pid,))
    time.sleep(0.5)
    started = time.monotonic()
    result = obs.finish()
    assert time.monotonic() - started < 2
    errors = result.metrics["pg_sampler_errors"]
    assert errors and "server closed the connection" in errors[0]
    assert len(result.series["waits"][1]) >= 1  # what it saw before is kept
    assert result.metrics["observer"]["sampler_cpu_s"] > 0
    assert result.wal_bytes is None  # no end counters: not a made-up figure


@pytest.mark.exclusive
def test_observer_yields_on_wakeup_under_sched_batch_and_says_so(
    results_server: str, base: Path
) -> None:
    import os

    from pgfsbench.collect.observation import Observation
    from pgfsbench.collect.samplers import Job

    seen: dict[bool, tuple[int, int]] = {}
    for batch in (True, False):
        obs = Observation(results_server, 15, (), base / "no-server.log", wait_hz=10, batch=batch)
        assert obs.pg is not None
        policies: list[int] = []

        def probe(into: list[int] = policies) -> None:
            into.append(os.sched_getscheduler(0))

        # what the sampler thread runs under, seen from inside it
        obs._ticker.jobs.append(Job("probe", 1, probe))
        obs.start()
        obs.mark_measured_start()
        time.sleep(0.4)
        assert obs.pg.backend_pid is not None
        backend = os.sched_getscheduler(obs.pg.backend_pid)
        result = obs.finish()
        assert policies and len(set(policies)) == 1
        seen[batch] = (policies[0], backend)
        sched = result.metrics["observer"]["sched"]
        if batch:
            assert sched == {"policy": "batch", "thread": "batch", "backend": "batch"}, sched
        else:
            assert sched == {"policy": "normal"}
    assert seen[True] == (os.SCHED_BATCH, os.SCHED_BATCH)
    assert seen[False] == (os.SCHED_OTHER, os.SCHED_OTHER)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's own thread untouched
    # not watched: nothing scheduled, nothing said
    idle = Observation(results_server, 15, (), base / "no-server.log", enabled=False)
    idle.start()
    assert "sched" not in idle.finish().metrics["observer"]
