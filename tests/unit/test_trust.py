"""The rules a root tool applies to what it reads back (system/trust.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgfsbench.system.trust import (
    UntrustedPath,
    check_workdir_trusted,
    inside,
    make_trusted_dir,
    open_written_by_others,
    path_problem,
    read_trusted,
)


def test_a_directory_of_ours_not_writable_by_others_is_trusted(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    assert path_problem(work) is None
    assert path_problem(work / "not" / "yet") is None  # made later, under a checked parent


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777])
def test_group_or_other_writable_is_refused_with_the_fix(tmp_path: Path, mode: int) -> None:
    work = tmp_path / "work"
    work.mkdir()
    work.chmod(mode)
    why = path_problem(work)
    assert why is not None and "writable by" in why and "chmod go-w" in why
    with pytest.raises(UntrustedPath, match="--workdir"):
        check_workdir_trusted(work)


def test_a_sticky_world_writable_parent_is_accepted_but_never_the_workdir_itself(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    tmp_path.chmod(0o755)
    (shared / "work").mkdir(mode=0o755)
    assert path_problem(shared / "work") is None
    assert path_problem(shared) is not None  # as a work directory itself: refused


def test_a_writable_directory_on_the_way_is_refused(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    middle = tmp_path / "middle"
    middle.mkdir()
    middle.chmod(0o777)  # not sticky: anyone could rename what is inside
    (middle / "work").mkdir(mode=0o755)
    why = path_problem(middle / "work")
    assert why is not None and str(middle) in why


def test_a_symlink_on_the_way_is_followed_and_its_target_checked(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(real)
    assert path_problem(tmp_path / "link") is None
    real.chmod(0o777)
    assert path_problem(tmp_path / "link") is not None


def test_made_directories_are_checked_after_they_are_made(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    old = os.umask(0o077)
    try:
        make_trusted_dir(tmp_path / "a" / "b")
    finally:
        os.umask(old)
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o755


def test_files_read_back_are_regular_ours_and_not_through_a_link(tmp_path: Path) -> None:
    good = tmp_path / "j.jsonl"
    good.write_text("x")
    good.chmod(0o600)
    assert read_trusted(good) == b"x"
    good.chmod(0o666)
    with pytest.raises(UntrustedPath, match="writable by others"):
        read_trusted(good)
    link = tmp_path / "link.jsonl"
    link.symlink_to(good)
    with pytest.raises(UntrustedPath, match="symbolic link"):
        read_trusted(link)


def test_files_others_write_are_never_read_through_a_link_or_a_fifo(tmp_path: Path) -> None:
    log = tmp_path / "txlog.1"
    log.write_bytes(b"1 2 3\n")
    with open_written_by_others(log) as fh:
        assert fh.read() == b"1 2 3\n"
    secret = tmp_path / "secret"
    secret.write_text("root's")
    (tmp_path / "txlog.2").symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        open_written_by_others(tmp_path / "txlog.2")
    os.mkfifo(tmp_path / "txlog.3")
    with pytest.raises(OSError, match="not a regular file"):
        open_written_by_others(tmp_path / "txlog.3")


def test_inside_resolves_the_way_but_not_the_last_name(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    assert inside(root / "cells" / "x", root)
    assert not inside(root / "out" / "victim", root)  # a link on the way leads out
    assert inside(root / "out", root)  # the link itself: removed, not followed
    assert not inside(f"{root}/../etc", root) and not inside("relative/path", root)
    assert not inside(root, root)
