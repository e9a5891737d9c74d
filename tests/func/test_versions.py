"""PostgreSQL versions and I/O methods as dimensions: PostgreSQL 18 (from the test-only
wheel, scripts/fetch-postgresql.sh) next to Debian's 15 in one campaign, io_method sync and
worker, io_uring reported as not supported here (the wheel is built without liburing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.func.conftest import pgfsbench, refused, runs_of, show, write_spec

PG18 = Path(os.environ.get("PGFSB_PG18_BINDIR", "/opt/pgfsbench-test/postgresql-18.6.0/bin"))


def test_pg18_io_methods_next_to_15_in_one_campaign(base: Path) -> None:
    if not (PG18 / "postgres").is_file():
        pytest.skip(f"no PostgreSQL 18 in {PG18} (scripts/fetch-postgresql.sh installs it)")
    spec = write_spec(
        base / "s.toml",
        f"""
[defaults]
scale = 1
clients = 2
threads = 1
duration = "3s"
warmup = "0s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:512M"
[postgres.pg15]
settings = {{ shared_buffers = "64MB" }}
[postgres.pg18-sync]
bindir = "{PG18}"
settings = {{ shared_buffers = "64MB", io_method = "sync" }}
[postgres.pg18-worker]
bindir = "{PG18}"
settings = {{ shared_buffers = "64MB", io_method = "worker", io_workers = 2 }}
[postgres.pg18-io-uring]
bindir = "{PG18}"
settings = {{ shared_buffers = "64MB", io_method = "io_uring" }}
[workload.tpcb]
builtin = "tpcb-like"
""",
    )
    results = base / "r.sqlite"
    proc = pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    assert (
        "not supported here: ext4/pg18-io-uring/default/tpcb: io_method = io_uring is "
        "not supported here" in proc.stdout
    ), proc.stdout[-2000:]
    runs = {r["cell"].split("/")[1]: r for r in runs_of(results)}
    assert set(runs) == {"pg15", "pg18-sync", "pg18-worker"}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    assert runs["pg15"]["pg_version"].startswith("15.")
    assert runs["pg18-sync"]["pg_version"] == "18.6"
    for name, method in (("pg18-sync", "sync"), ("pg18-worker", "worker")):
        full = show(results, runs[name]["run_id"])
        env = full["environment"]
        assert "PostgreSQL) 18.6" in env["postgresql"] and env["pg_bindir"] == str(PG18)
        settings = {s["name"]: s["setting"] for s in env["pg_settings_changed"]}
        assert settings["io_method"] == method
        assert settings["data_checksums"] == "off"  # one default for every version
        series = full["series"]
        assert "io_reads_per_s" in series and "aio_in_flight" in series, sorted(series)
        assert "wal_syncs_per_s" in series  # from pg_stat_io on 18
    pg15 = show(results, runs["pg15"]["run_id"])
    assert "aio_in_flight" not in pg15["series"]
    # comparable in one group: same workload, clients, scale
    cmp = pgfsbench("compare", "pg15", "pg18-worker", "--results", str(results))
    assert "pg18-worker" in cmp.stdout


def test_a_setting_the_version_does_not_know_is_refused(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[storage.t]
fs = "tmpfs"
[postgres.p]
settings = { io_method = "worker" }
""",
    )
    assert "has no setting io_method" in refused(base, spec, status=2)
