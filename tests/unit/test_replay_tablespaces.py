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
        (root / "server-side" / "PG_15_x" / "5").mkdir(parents=True)
        (root / "server-side" / "PG_15_x" / "5" / "secret").write_text("not the capture's")
        capture = root / "capture"
        (capture / "base" / "pg_tblspc").mkdir(parents=True)
        (capture / "base" / "PG_VERSION").write_text("15\n")
        os.symlink(root / "server-side", capture / "base" / "pg_tblspc" / OID)
        relation = capture / "tablespaces" / OID / "PG_15_x" / "5"
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
    assert (restored / "PG_15_x" / "5" / "16401").read_bytes() == b"\x01" * 8192
    assert not (restored / "PG_15_x" / "5" / "secret").exists()  # the link was not followed


def test_an_in_place_tablespace_is_copied_as_it_is(capture: Path) -> None:
    (capture / "base" / "pg_tblspc" / OID).unlink()
    (capture / "base" / "pg_tblspc" / OID / "PG_15_x").mkdir(parents=True)
    (capture / "base" / "pg_tblspc" / OID / "PG_15_x" / "f").write_text("in place")
    assert restore(capture) == [OID]
    assert (capture.parent / "target/pg_tblspc" / OID / "PG_15_x/f").read_text() == "in place"


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
    assert restore(capture) == []


def test_pg_basebackup_maps_each_tablespace_into_the_capture(tmp_path: Path) -> None:
    """Each tablespace's location mapped to tablespaces/OID of the capture, an '=' in
    either path escaped as pg_basebackup reads it."""
    from pgfsbench.system.runner import Runner
    from pgfsbench.workloads.capture import base_backup

    argv_file = tmp_path / "argv"
    fake = tmp_path / "pg_basebackup"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv_file}\n')
    fake.chmod(0o755)
    spaces = [
        {"oid": 16400, "name": "a", "location": "/srv/fast=1"},
        {"oid": 16401, "name": "b", "location": "/srv/slow"},
    ]
    out = tmp_path / "cap=ture"
    base_backup(Runner(), str(fake), "host=/x", out / "base", spaces, out / "tablespaces")
    argv = argv_file.read_text().splitlines()
    mapped = [a for a in argv if a.startswith("--tablespace-mapping=")]
    into = str(out).replace("=", "\\=")
    assert mapped == [
        f"--tablespace-mapping=/srv/fast\\=1={into}/tablespaces/16400",
        f"--tablespace-mapping=/srv/slow={into}/tablespaces/16401",
    ]
    assert argv[argv.index("-D") + 1] == str(out / "base")
