"""Host lock, results migrations, exports, device-guard parsing, the CLI's last resort."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pgfsbench.results.records import (
    RunOutcome,
    RunPreparation,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store, check_writable, engine_url
from pgfsbench.storage.devices import parse_pool_members
from pgfsbench.system.errors import HostBusy, StoreError, UsageError
from pgfsbench.system.hostlock import holder_of, host_lock

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_second_campaign_on_the_host_is_refused_with_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    with host_lock("pgfsbench run", Path("/var/tmp/w1"), lock):
        holder = holder_of(lock)
        assert holder is not None and holder["workdir"] == "/var/tmp/w1"
        with pytest.raises(HostBusy) as info, host_lock("pgfsbench run", Path("/w2"), lock):
            pass
        message = str(info.value)
        import os

        assert f"pid {os.getpid()}" in message and "/var/tmp/w1" in message
        assert "started 20" in message
    assert holder_of(lock) is None
    with host_lock("pgfsbench run", Path("/w2"), lock):  # free again
        pass


def test_the_lock_dies_with_its_process(tmp_path: Path) -> None:
    lock = tmp_path / "host.lock"
    code = (
        "import sys, os, signal; from pathlib import Path; "
        "from pgfsbench.system.hostlock import host_lock\n"
        f"with host_lock('x', Path('/w'), Path({str(lock)!r})):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -9
    assert holder_of(lock) is None


def test_a_results_file_from_0_1_0_opens_upgrades_and_keeps_every_run(tmp_path: Path) -> None:
    old = tmp_path / "v1.sqlite"
    shutil.copy(DATA / "results" / "v1-pgfsbench-0.1.0.sqlite", old)
    with sqlite3.connect(old) as conn:
        before = conn.execute("SELECT id, cell, status, tps FROM run ORDER BY id").fetchall()
        series = conn.execute("SELECT count(*) FROM series").fetchone()[0]
    store = Store(str(old))
    runs = store.list_runs()
    assert [(r.run_id, r.cell, r.status, r.tps) for r in runs] == before
    assert all(r.host == "vm" and len(r.uuid or "") == 36 for r in runs)
    assert [r.throughput for r in runs] == [r.tps for r in runs]
    assert sum(len(store.get_run(r.run_id).series) for r in runs) == series
    rid = store.start_run(
        StoredRun(
            campaign_id=1,
            cell="c",
            storage="s",
            fs="ext4",
            postgres="p",
            kernel="k",
            workload="w",
            repetition=1,
            host="h2",
            uuid="00000000-0000-0000-0000-000000000001",
        )
    )
    store.prepare_run(rid, RunPreparation(space_bytes=5 << 30))
    store.finish_run(rid, RunOutcome(RunStatus.OK, throughput=1.0))
    store.close()
    again = Store(str(old))  # opening twice migrates nothing twice
    assert len(again.list_runs()) == 7 and again.get_run(rid).space_bytes == 5 << 30
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone()[0] == "0003"


def test_a_newer_results_file_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "new.sqlite"
    Store(str(db)).close()
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match="newer pgfsbench"):
        Store(str(db))


def test_results_targets_are_checked_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"mysql:// is not supported"):
        engine_url("mysql://u@h/db")
    with pytest.raises(UsageError, match="does not exist"):
        check_writable(str(tmp_path / "no" / "r.sqlite"))
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(UsageError, match="not a file"):
        check_writable(str(tmp_path / "dir.sqlite"))
    check_writable(str(tmp_path / "fine.sqlite"))


def test_export_series_keeps_the_histogram_and_follows_the_extension(tmp_path: Path) -> None:
    from pgfsbench.cli.results import export_format
    from pgfsbench.results.export import export_runs

    store = Store(str(tmp_path / "r.sqlite"))
    cid = store.start_campaign(StoredCampaign(name="t"))
    rid = store.start_run(
        StoredRun(
            campaign_id=cid,
            cell="a/b/c/d",
            storage="a",
            fs="ext4",
            postgres="b",
            kernel="c",
            workload="d",
            repetition=1,
        )
    )
    store.put_series(rid, "tps", [1.0, 2.0], t0=1.0)
    store.put_series(rid, "latency_histogram", [[700, 3], [710, 5]], step=0.0)
    store.put_series(rid, "waits", [{"IO/WALSync": 2.0}, None])
    store.finish_run(rid, RunOutcome(RunStatus.OK, tps=1.5))
    n = export_runs(store, tmp_path / "s.parquet", "parquet", series=True)
    frame = pl.read_parquet(tmp_path / "s.parquet")
    assert n == frame.height == 6  # 2 tps, 2 histogram buckets, 1 wait event, 1 empty second
    hist = frame.filter(pl.col("series") == "latency_histogram_ms")
    assert hist["value"].to_list() == [3.0, 5.0]
    assert 1.0 < hist["t"][0] < 1.2  # e^(7.005) us = 1.1 ms
    assert export_format(Path("x.csv"), None) == "csv"
    assert export_format(Path("x.PARQUET"), "parquet") == "parquet"
    with pytest.raises(UsageError, match=r"ends in \.csv but --format is parquet"):
        export_format(Path("x.csv"), "parquet")
    with pytest.raises(UsageError, match=r"\.csv or \.parquet"):
        export_format(Path("x.json"), None)


OPENZFS_STATUS = """  pool: tank
 state: ONLINE
config:

\tNAME                                            STATE     READ WRITE CKSUM
\ttank                                            ONLINE       0     0     0
\t  mirror-0                                      ONLINE       0     0     0
\t    /dev/sdb1                                   ONLINE       0     0     0
\t    /dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1  ONLINE       0     0     0
\tlogs
\t  /dev/nvme0n1p2                                ONLINE       0     0     0
\tcache
\t  /dev/nvme0n1p3                                ONLINE       0     0     0

errors: No known data errors

  pool: other
 state: ONLINE
config:

\tNAME        STATE     READ WRITE CKSUM
\tother       ONLINE       0     0     0
\t  raidz1-0  ONLINE       0     0     0
\t    sdc     ONLINE       0     0     0
\t    sdd     ONLINE       0     0     0

errors: No known data errors
"""


def test_pool_members_are_read_from_every_pool_and_group() -> None:
    assert parse_pool_members(OPENZFS_STATUS) == {
        "tank",
        "/dev/sdb1",
        "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1",
        "/dev/nvme0n1p2",
        "/dev/nvme0n1p3",
        "other",
        "sdc",
        "sdd",
    }


def test_a_bug_becomes_one_line_and_a_traceback_file(tmp_path: Path) -> None:
    code = (
        "import sys\nimport pgfsbench.spec as r\n"
        "def boom(*a, **k):\n    raise RuntimeError('a bug\\nsecond line')\n"
        "r.load_spec = boom\nfrom pgfsbench.cli import main\n"
        f"sys.argv = ['pgfsbench', 'plan', 'x.toml', '--workdir', {str(tmp_path)!r}]\n"
        "main()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 70
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "internal error (RuntimeError: a bug)" in proc.stderr
    (written,) = (tmp_path / "tracebacks").glob("traceback-*.txt")
    assert str(written) in proc.stderr and "RuntimeError" in written.read_text()


def test_the_store_knows_the_newest_migration() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from pgfsbench.results.store import HEAD_REVISION

    cfg = Config()
    cfg.set_main_option(
        "script_location",
        str(Path(__file__).resolve().parents[2] / "src" / "pgfsbench" / "results" / "migrations"),
    )
    assert ScriptDirectory.from_config(cfg).get_current_head() == HEAD_REVISION


def test_a_new_store_has_what_the_migrations_build(tmp_path: Path) -> None:
    """An empty store is created at the head in one step: it must hold exactly what
    running every migration builds (tables, columns and their types, keys, indexes)."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import create_engine, inspect

    from pgfsbench.results import schema
    from pgfsbench.results.store import HEAD_REVISION, _alembic_config

    Store(str(tmp_path / "fast.sqlite"))
    migrated = create_engine(f"sqlite:///{tmp_path / 'migrated.sqlite'}")
    with migrated.begin() as conn:
        command.upgrade(_alembic_config(conn), "head")
        # SQLite's INTEGER is 64-bit: migration 0002 widens to BIGINT on other databases only
        differences = [
            d
            for d in compare_metadata(MigrationContext.configure(conn), schema.metadata)
            if not (
                isinstance(d, list)
                and d[0][0] == "modify_type"
                and str(d[0][5]) == "INTEGER"
                and str(d[0][6]) == "BIGINT"
            )
        ]
        assert differences == []

    def described(path: Path) -> dict[str, object]:
        with create_engine(f"sqlite:///{path}").connect() as conn:
            ins = inspect(conn)
            return {
                t: (
                    sorted(
                        (c["name"], str(c["type"]).replace("BIGINT", "INTEGER"), c["nullable"])
                        for c in ins.get_columns(t)
                    ),
                    ins.get_pk_constraint(t)["constrained_columns"],
                    sorted(str(i["column_names"]) for i in ins.get_indexes(t)),
                    sorted(str(f["referred_table"]) for f in ins.get_foreign_keys(t)),
                )
                for t in ins.get_table_names()
            }

    fast, slow = described(tmp_path / "fast.sqlite"), described(tmp_path / "migrated.sqlite")
    assert set(fast) == set(slow) and "run" in fast
    for table in slow:
        assert fast[table] == slow[table], table
    with sqlite3.connect(tmp_path / "fast.sqlite") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
    Store(str(tmp_path / "fast.sqlite"))  # opened again: already at the head


def test_the_cli_starts_fast() -> None:
    """The CLI imports the engine, the store and the statistics only when a command needs
    them (scipy, alembic and polars take seconds): `pgfsbench --help` must not."""
    code = (
        "import sys, pgfsbench.cli, pgfsbench.cli.run, pgfsbench.cli.results, "
        "pgfsbench.cli.compare, pgfsbench.cli.cleanup\n"
        "heavy = [m for m in ('scipy', 'alembic', 'polars', 'plotly', 'psycopg') "
        "if m in sys.modules]\nprint(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
