"""initdb templates: the second cluster of the same binaries and options is a copy."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import find_binaries
from pgfsbench.postgres.instance import Instance
from pgfsbench.postgres.template import Templates
from pgfsbench.spec import InitdbOptions
from pgfsbench.system.held import Held, Owner
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from tests.func.conftest import pgfsbench, runs_of, show, write_spec

SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "1s"
warmup = "0s"
repetitions = 1
[storage.a]
fs = "tmpfs"
size = "512M"
wal = { fs = "tmpfs", size = "256M" }
[storage.b]
fs = "tmpfs"
size = "512M"
wal = { fs = "tmpfs", size = "256M" }
[storage.c]
fs = "tmpfs"
size = "512M"
[workload.rw]
builtin = "tpcb-like"
"""


def test_cells_of_the_same_initdb_copy_the_first_cluster(base: Path) -> None:
    spec = write_spec(base / "s.toml", SPEC)
    results = base / "r.sqlite"
    work = base / "work"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(work))
    runs = {r["storage"]: r for r in runs_of(results)}
    assert [runs[s]["status"] for s in "abc"] == ["ok", "ok", "ok"]
    copied = {
        s: show(results, runs[s]["run_id"])["environment"]["initdb_output"].startswith(
            "(a copy of the initdb template"
        )
        for s in "abc"
    }
    # a and b share binaries and options (a WAL directory of their own): one ran initdb,
    # the other is its copy; c (WAL inside the data directory) is another template's
    assert sorted([copied["a"], copied["b"]]) == [False, True] and not copied["c"]
    assert len(list((work / "initdb-templates").iterdir())) == 2
    # the copy is a cluster that ran: its WAL in its own volume, written by the benchmark
    copy = "a" if copied["a"] else "b"
    detail = show(results, runs[copy]["run_id"])
    assert detail["space"]["after_load"]["wal_dir_bytes"] > 0 and detail["tps"] > 0
    # its commands.sh says what the copy stands for
    commands = (Path(detail["artifacts_dir"]) / "commands.sh").read_text()
    assert "# a copy of the initdb template" in commands and "initdb --pgdata" in commands


def test_a_copy_that_fails_leaves_nothing_of_it_and_initdb_runs(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that refuses the copy half-way (owners, modes): what was copied goes,
    initdb makes the cluster, and its output says why."""
    runner = Runner()
    journal = Journal.create(base, runner)  # the clusters are made in its work directory
    binaries = find_binaries()
    templates = Templates(base / "templates")
    try:
        with journal.scope():
            made = []
            for name in ("first", "second"):
                pgdata = base / name / "pgdata"
                pgdata.parent.mkdir()
                shutil.chown(pgdata.parent, "postgres", "postgres")
                instance = Instance(
                    binaries, pgdata, None, base / "sock", base / f"{name}.log", "postgres"
                )
                made.append((pgdata, instance))
            first, second = made
            first[1].init(journal, runner, InitdbOptions(), templates)
            (template,) = (t for t in templates.root.iterdir() if not t.name.startswith("."))
            real_copy = Templates.copy_into

            def half_copy(
                self: Templates, t: Path, pgdata: Held, wal: Path | None, o: Owner | None
            ) -> str:
                real_copy(self, t, pgdata, wal, o)
                raise OSError(errno.EPERM, "failed to preserve ownership")

            monkeypatch.setattr(Templates, "copy_into", half_copy)
            output = second[1].init(journal, runner, InitdbOptions(), templates)
            assert output.startswith(f"copying the initdb template {template.name} failed")
            assert "failed to preserve ownership" in output and "ran initdb" in output
            # the cluster is initdb's, complete: its own system identifier (pg_control's
            # first 8 bytes), where a copy has the template's
            assert (second[0] / "PG_VERSION").read_text() == (first[0] / "PG_VERSION").read_text()
            control = (second[0] / "global" / "pg_control").read_bytes()[:8]
            assert control != (template / "pgdata" / "global" / "pg_control").read_bytes()[:8]
    finally:
        journal.close()
