"""initdb templates: keys and copies (no server needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.postgres.template import Templates, template_key
from pgfsbench.system.held import Held


def _binaries(tmp_path: Path) -> Binaries:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("initdb", "postgres"):
        (bindir / name).write_text("#!/bin/sh\n")
    return Binaries(bindir, "15.18", "postgres (PostgreSQL) 15.18")


def test_the_key_is_the_same_for_any_data_directory_and_differs_by_option(
    tmp_path: Path,
) -> None:
    b = _binaries(tmp_path)
    one = template_key(b, ["initdb", "--pgdata", "/a/pg", "-E", "UTF8"], Path("/a/pg"), None, "u")
    two = template_key(b, ["initdb", "--pgdata", "/b/pg", "-E", "UTF8"], Path("/b/pg"), None, "u")
    assert one == two
    other = template_key(
        b, ["initdb", "--pgdata", "/a/pg", "-E", "LATIN1"], Path("/a/pg"), None, "u"
    )
    assert other != one
    assert template_key(b, ["initdb"], Path("/a/pg"), None, "v") != template_key(
        b, ["initdb"], Path("/a/pg"), None, "u"
    )
    # a new build of the same version is another template
    before = template_key(b, ["initdb"], Path("/a/pg"), None, "u")
    (b.bindir / "postgres").write_text("#!/bin/sh\n# rebuilt\n")
    assert template_key(b, ["initdb"], Path("/a/pg"), None, "u") != before


def _cluster(root: Path, wal_elsewhere: bool) -> tuple[Path, Path | None]:
    pgdata = root / "pgdata"
    pgdata.mkdir(parents=True, mode=0o700)
    (pgdata / "PG_VERSION").write_text("15\n")
    (pgdata / "base").mkdir(mode=0o700)
    (pgdata / "base" / "1").write_bytes(b"x" * 8192)
    wal = root / "wal" if wal_elsewhere else pgdata / "pg_wal"
    wal.mkdir(mode=0o700)
    # a WAL segment as initdb leaves it: zero-filled, every block allocated
    (wal / "000000010000000000000001").write_bytes(bytes(1 << 20))
    if wal_elsewhere:
        (pgdata / "pg_wal").symlink_to(wal)
        return pgdata, wal
    return pgdata, None


def test_a_copy_has_every_block_and_its_wal_where_initdb_would_put_it(tmp_path: Path) -> None:
    pgdata, wal = _cluster(tmp_path / "made", wal_elsewhere=True)
    templates = Templates(tmp_path / "templates")
    templates.save("k", pgdata, wal, "initdb said this")
    found = templates.find("k")
    assert found is not None and not (found / "pgdata" / "pg_wal").is_symlink()
    assert [p.name for p in templates.root.iterdir()] == ["k"]  # no partial copy left

    target = tmp_path / "cell" / "pgdata"
    target.mkdir(parents=True, mode=0o700)
    waldir = tmp_path / "cell" / "wal"
    waldir.mkdir(mode=0o700)
    with Held.open(target) as held:
        output = templates.copy_into(found, held, waldir, None)
    assert output.startswith("(a copy of the initdb template k)") and "initdb said" in output
    assert (target / "pg_wal").is_symlink() and (target / "pg_wal").resolve() == waldir
    segment = waldir / "000000010000000000000001"
    assert segment.stat().st_size == 1 << 20
    assert segment.stat().st_blocks * 512 >= 1 << 20  # no holes
    assert (target / "base" / "1").read_bytes() == b"x" * 8192
    assert stat.S_IMODE(os.stat(target / "base").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(waldir).st_mode) == 0o700

    # the same template into a cluster with its WAL inside
    inside = tmp_path / "cell2" / "pgdata"
    inside.mkdir(parents=True, mode=0o700)
    with Held.open(inside) as held:
        templates.copy_into(found, held, None, None)
    assert (inside / "pg_wal").is_dir() and not (inside / "pg_wal").is_symlink()
    assert (inside / "pg_wal" / "000000010000000000000001").stat().st_blocks * 512 >= 1 << 20


def test_an_incomplete_template_is_not_found(tmp_path: Path) -> None:
    templates = Templates(tmp_path)
    (tmp_path / "k" / "pgdata").mkdir(parents=True)
    assert templates.find("k") is None


def test_a_work_directory_keeps_the_templates_used_last(tmp_path: Path) -> None:
    templates = Templates(tmp_path / "t", keep=2)
    for i, key in enumerate(("a", "b", "c")):
        pgdata, _ = _cluster(tmp_path / f"made-{key}", wal_elsewhere=False)
        templates.save(key, pgdata, None, "")
        os.utime(templates.root / key, (1000 + i, 1000 + i))  # saved one after the other
        if key == "b":
            assert templates.find("a") is not None  # a used again: now the newest
    assert sorted(p.name for p in templates.root.iterdir()) == ["a", "c"]
