"""Parsers of what a dead server leaves in shared memory (captured on PostgreSQL 15,
Debian 12, x86_64); the removal itself is tested across a real SIGKILL in
tests/func/test_faults.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pgfsbench.postgres.ipc import (
    DSM_CONTROL_MAGIC,
    SHMEM_MAGIC,
    ShmemHeader,
    dsm_control,
    parse_sysvipc,
    shmem_header,
)

SYSVIPC = (
    "\n".join(
        [  # as the kernel writes it, the columns' padding shortened
            "       key      shmid perms        size  cpid  lpid nattch   uid   gid  cuid  cgid"
            "      atime      dtime      ctime        rss       swap",
            "         2     557089   600          56  3244 19739      0   101     0   101     0"
            " 1795518112 1795518112 1795516636       4096          0",
            "     32769     819208   600    14680064  4100  4100      2   101     0   101     0"
            " 1795518112 1795518112 1795516636       4096          0",
        ]
    )
    + "\n"
)


def test_proc_sysvipc_rows() -> None:
    first, second = parse_sysvipc(SYSVIPC)
    assert (first.key, first.shmid, first.size, first.creator_pid, first.attached, first.uid) == (
        2,
        557089,
        56,
        3244,
        0,
        101,
    )
    assert second.attached == 2 and second.size == 14680064
    assert parse_sysvipc("") == []
    assert parse_sysvipc(SYSVIPC.splitlines()[0] + "\n1 2 3\n") == []  # a torn line


def test_the_header_of_the_system_v_segment_names_the_data_directory() -> None:
    # as read from a segment left by initdb's killed server: device 39, inode 5
    header = struct.pack("=iIQQI4xQQQ", SHMEM_MAGIC, 17025, 149520384, 56, 3150750794, 0, 39, 5)
    assert len(header) == 56
    assert shmem_header(header) == ShmemHeader(
        magic=SHMEM_MAGIC, creator_pid=17025, dsm_control=3150750794, device=39, inode=5
    )
    assert shmem_header(header[:40]) is None


def control_segment(items: list[tuple[int, int]], maxitems: int, item_size: int) -> bytes:
    body = b"".join(struct.pack("=II", h, r).ljust(item_size, b"\0") for h, r in items)
    return (struct.pack("=III4x", DSM_CONTROL_MAGIC, len(items), maxitems) + body).ljust(
        16 + maxitems * item_size, b"\0"
    )


def test_the_control_segment_lists_what_is_in_use_outside_the_main_region() -> None:
    # as captured: 674 slots of 40 bytes (PostgreSQL 14+), the statistics' 1 MiB segment
    # in use (reference count 4), two slots freed; plus an odd, main-region handle
    data = control_segment(
        [(3191162642, 4), (1641203180, 0), (3461755032, 0), (77, 2), (12, 1)], 674, 40
    )
    assert len(data) == 26976
    found = dsm_control(data)
    assert found is not None
    assert found.nitems == 5 and found.maxitems == 674
    assert found.handles == (3191162642, 12)  # moribund (1) is still there to remove


def test_before_14_items_are_smaller_and_odd_handles_are_ordinary() -> None:
    found = dsm_control(control_segment([(77, 2), (3191162642, 3)], 100, 24))
    assert found is not None and found.handles == (77, 3191162642)


def test_what_is_not_a_control_segment_is_left_alone() -> None:
    good = control_segment([(10, 2)], 64, 40)
    assert dsm_control(good) is not None
    assert dsm_control(b"\0" * 32) is None
    assert dsm_control(b"PostgreSQL") is None
    assert dsm_control(struct.pack("=III", DSM_CONTROL_MAGIC, 65, 64) + good[12:]) is None
    assert dsm_control(good[:-1]) is None  # items of no known size
    assert dsm_control(control_segment([(10, 2)], 64, 32)) is None


def test_a_fifo_or_a_link_planted_as_a_segment_hangs_nothing_and_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/dev/shm is everyone's: a FIFO planted under the control segment's name hung every
    teardown and `cleanup` on 0206292 (it was read by path, blocking). Now nothing is
    opened through a link or blocks on a FIFO; what is not the server user's regular file
    is left where it is; the real segments are removed."""
    import os
    import threading

    from pgfsbench.postgres import ipc

    monkeypatch.setattr(ipc, "SHM_DIR", tmp_path)
    uid = os.geteuid()
    os.mkfifo(tmp_path / "PostgreSQL.7")
    done: list[list[str]] = []
    worker = threading.Thread(target=lambda: done.append(ipc._release_dsm(7, uid)), daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive() and done == [[]]
    assert (tmp_path / "PostgreSQL.7").exists()
    # a real control segment listing a segment, and a planted link among its handles
    (tmp_path / "PostgreSQL.8").write_bytes(control_segment([(10, 2), (11, 2)], 64, 40))
    (tmp_path / "PostgreSQL.10").write_bytes(b"\0" * 4096)
    victim = tmp_path / "victim"
    victim.write_text("root's")
    (tmp_path / "PostgreSQL.11").symlink_to(victim)
    (said,) = ipc._release_dsm(8, uid)
    assert "PostgreSQL.10" in said and "PostgreSQL.8" in said and "PostgreSQL.11" not in said
    assert not (tmp_path / "PostgreSQL.10").exists() and victim.read_text() == "root's"
