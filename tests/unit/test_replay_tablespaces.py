"""A capture's tablespaces restored into the replay's data: each a directory in
pg_tblspc, copied from the capture's tablespaces/OID; the link pg_basebackup left in the
copy is never followed, and a capture that lacks a tablespace's copy is refused by name."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgfsbench.system.errors import CapabilityError
from pgfsbench.system.held import Held
from pgfsbench.system.trust import UntrustedPath
from pgfsbench.workloads.replay import restore_tablespaces

OID = "16400"


@pytest.fixture
def capture() -> Iterator[Path]:
    """A capture as pgfsbench capture leaves it: base/ with pg_tblspc/OID a link to where
    the server kept the tablespace (here a directory holding a file that must not be
    copied), tablespaces/OID the copy."""
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        root = Path(d)
        (root / "server-side" / "PG_15_202209061" / "5").mkdir(parents=True)
        (root / "server-side" / "PG_15_202209061" / "5" / "secret").write_text("not the capture's")
        capture = root / "capture"
        (capture / "base" / "pg_tblspc").mkdir(parents=True)
        (capture / "base" / "PG_VERSION").write_text("15\n")
        os.symlink(root / "server-side", capture / "base" / "pg_tblspc" / OID)
        relation = capture / "tablespaces" / OID / "PG_15_202209061" / "5"
        relation.mkdir(parents=True)
        (relation / "16401").write_bytes(b"\x01" * 8192)
        (root / "target").mkdir()
        yield capture


def restore(capture: Path) -> list[str]:
    with Held.open(capture / "base") as source, Held.open(capture.parent / "target") as target:
        return restore_tablespaces(capture, source, target, None)


def test_a_tablespace_becomes_a_directory_from_the_captures_copy(capture: Path) -> None:
    assert restore(capture) == [OID]
    restored = capture.parent / "target" / "pg_tblspc" / OID
    assert restored.is_dir() and not restored.is_symlink()
    assert (restored / "PG_15_202209061" / "5" / "16401").read_bytes() == b"\x01" * 8192
    assert not (restored / "PG_15_202209061" / "5" / "secret").exists()  # the link was not followed


def test_an_in_place_tablespace_is_copied_as_it_is(capture: Path) -> None:
    (capture / "base" / "pg_tblspc" / OID).unlink()
    shutil.rmtree(capture / "tablespaces")
    (capture / "base" / "pg_tblspc" / OID / "PG_15_202209061" / "5").mkdir(parents=True)
    (capture / "base" / "pg_tblspc" / OID / "PG_15_202209061" / "5" / "1").write_text("in")
    assert restore(capture) == [OID]
    assert (capture.parent / "target/pg_tblspc" / OID / "PG_15_202209061/5/1").read_text() == "in"


def test_a_tablespace_without_its_copy_is_refused_by_name(capture: Path) -> None:
    shutil.rmtree(capture / "tablespaces")
    with pytest.raises(CapabilityError, match=f"tablespace {OID} has no copy"):
        restore(capture)


def test_a_copy_that_is_a_link_is_not_followed(capture: Path) -> None:
    shutil.rmtree(capture / "tablespaces" / OID)
    os.symlink(capture.parent / "server-side", capture / "tablespaces" / OID)
    with pytest.raises(UntrustedPath):
        restore(capture)
    assert not list((capture.parent / "target" / "pg_tblspc").rglob("secret"))


@pytest.mark.parametrize("name", ["pg_default", "16400.bak"])
def test_an_entry_that_is_no_oid_is_refused(capture: Path, name: str) -> None:
    os.symlink("/", capture / "base" / "pg_tblspc" / name)
    with pytest.raises(CapabilityError, match="not a tablespace's OID"):
        restore(capture)


def test_no_pg_tblspc_nothing_to_do(capture: Path) -> None:
    shutil.rmtree(capture / "base" / "pg_tblspc")
    shutil.rmtree(capture / "tablespaces")
    assert restore(capture) == []


def test_pg_basebackup_runs_without_a_password_in_its_argv() -> None:
    """The copy's command line: tar format into its own directory, never prompting, each
    file bounded; the password only in the passfile line (escaped as libpq reads it)."""
    from pgfsbench.workloads.capture_copy import Source, basebackup_argv, passfile_line

    source = Source({"host": "/run/pg", "port": "5432", "user": "u", "dbname": "d"}, "s3:cr\\et")
    argv = basebackup_argv("/usr/bin/pg_basebackup", source, 1 << 30)
    assert argv[:3] == ["prlimit", f"--fsize={1 << 30}", "--"]
    assert "-Ft" in argv and "-w" in argv and argv[argv.index("-D") + 1] == "backup"
    assert not any("s3:cr" in a or "password" in a for a in argv)
    assert passfile_line("s3:cr\\et") == "*:*:*:*:s3\\:cr\\\\et\n"


def test_an_in_place_tablespace_with_a_planted_file_leaves_it_out(capture: Path) -> None:
    (capture / "base" / "pg_tblspc" / OID).unlink()
    shutil.rmtree(capture / "tablespaces")
    version = capture / "base" / "pg_tblspc" / OID / "PG_15_202209061"
    (version / "5").mkdir(parents=True)
    (version / "5" / "16401").write_bytes(b"x")
    (version / "evil.so").write_bytes(b"\x7fELF")
    assert restore(capture) == [OID]
    restored = capture.parent / "target" / "pg_tblspc" / OID / "PG_15_202209061"
    assert (restored / "5" / "16401").exists() and not (restored / "evil.so").exists()
