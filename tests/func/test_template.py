"""initdb templates: the second cluster of the same binaries and options is a copy."""

from __future__ import annotations

from pathlib import Path

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
