"""Read throughput: full scans (seqscan) and pg_dump, each in MB/s, with a cold cache (the
page cache really dropped, PostgreSQL restarted) and a warm one."""

from __future__ import annotations

from pathlib import Path

from tests.func.conftest import pgfsbench, runs_of, show, write_spec


def test_seqscan_and_dump_cold_and_warm(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 4
clients = 1
threads = 1
duration = "3s"
warmup = "1s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:512M"
[postgres.small]
settings = { shared_buffers = "16MB" }
[workload.scan-warm]
builtin = "seqscan"
parallel_workers = 1
[workload.scan-cold]
builtin = "seqscan"
cache = "cold"
[workload.dump-cold]
tool = "pg_dump"
cache = "cold"
[workload.dump-dir]
tool = "pg_dump"
format = "directory"
jobs = 2
""",
    )
    results = base / "r.sqlite"
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--set",
        "load_per=cell",
    )
    runs = {r["workload"]: r for r in runs_of(results)}
    assert set(runs) == {"scan-warm", "scan-cold", "dump-cold", "dump-dir"}
    for name, r in runs.items():
        assert r["status"] == "ok", r
        full = show(results, r["run_id"])
        assert full["throughput_unit"] == "MB/s", full
        assert full["throughput"] > 0
        cache = full["metrics"]["cache"]
        if name.endswith("cold"):
            assert cache["state"] == "cold" and cache["postgres_restarted"]
            # the page cache really fell (the loaded data was in it)
            assert cache["cached_kb_after"] < cache["cached_kb_before"], cache
            assert full["warmup_tps"] is None  # no warm-up: it would warm the cache
            assert full["transactions"] == 1  # one pass: a second would find it cached
        else:
            assert cache == {"state": "warm"}
            assert "read_mbps" in full["series"]  # per second (a cold pass may be < 1 s)
    scan = show(results, runs["scan-warm"]["run_id"])["metrics"]["tool"]
    assert scan["table_bytes"] > 4 * 10_000_000 and scan["scans_per_s"] > 0
    assert scan["parallel_workers"] == 1
    dump = show(results, runs["dump-dir"]["run_id"])["metrics"]["tool"]
    assert dump["dumps"] >= 1 and dump["format"] == "directory" and dump["jobs"] == 2
    assert not list((base / "work").rglob("dump"))  # the scratch dumps are gone


def test_bulk_load_in_parallel_streams_with_each_phase_timed(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 2
clients = 1
threads = 1
duration = "2s"
warmup = "0s"
repetitions = 1
[storage.xfs]
fs = "xfs"
device = "loop:512M"
[postgres.p]
settings = { shared_buffers = "32MB", max_wal_size = "1GB" }
[workload.copy-after]
tool = "copy"
rows_per_scale = 50000
streams = 2
[workload.copy-before]
tool = "copy"
rows_per_scale = 50000
indexes = "before"
""",
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    runs = {r["workload"]: r for r in runs_of(results)}
    for name, r in runs.items():
        assert r["status"] == "ok", r
        full = show(results, r["run_id"])
        tool = full["metrics"]["tool"]
        assert full["throughput_unit"] == "MB/s" and full["throughput"] > 0
        assert tool["rows"] == 100_000 and tool["rows_per_s"] > 0
        assert tool["source_bytes"] > 100_000 * 84  # the rows really were generated
        assert tool["wal_bytes_per_mb"] > 0 and tool["table_bytes"] > 0
        phases = tool["phases_s"]
        assert phases["copy"] > 0 and phases["vacuum_analyze"] >= 0
        assert ("index" in phases) == (name == "copy-after")
        assert full["load_phases"]["generate_source"] > 0
    assert show(results, runs["copy-after"]["run_id"])["metrics"]["tool"]["streams"] == 2
