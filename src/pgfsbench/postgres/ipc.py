"""The shared memory a killed postmaster leaves behind, found from its data directory and
released.

A postmaster that exits removes its shared memory. One that is killed (SIGKILL, the OOM
killer, a host that ends the run) leaves, until reboot:

- its System V segment (56 bytes with the default ``shared_memory_type = mmap``, the
  whole of shared_buffers with ``sysv``), named on line 7 of ``postmaster.pid``;
- its dynamic shared memory (``dynamic_shared_memory_type = posix``, the Linux default):
  a control segment ``/dev/shm/PostgreSQL.<handle>``, whose handle is in the System V
  segment's header, and the segments listed in it (PostgreSQL 15's statistics alone keep
  one of 1 MiB; parallel queries and hash joins make more, up to GBs).

PostgreSQL removes them itself when a server starts again on the same data directory; a
benchmark's data directory is thrown away instead, so pgfsbench removes them, the way
PostgreSQL does (``dsm_cleanup_using_control_segment``), and touches nothing it cannot tie
to that data directory: the segment named in ``postmaster.pid`` must have been created by
the postmaster that file names, carry PostgreSQL's magic number and that creator pid, and
have nothing attached; only the segments its control segment lists are removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.system.errors import InstanceError

SHMEM_MAGIC = 679834894  # PGShmemMagic
DSM_CONTROL_MAGIC = 0x9A503D32  # PG_DYNSHMEM_CONTROL_MAGIC
SHM_DIR = Path("/dev/shm")
SYSVIPC_SHM = Path("/proc/sysvipc/shm")
IPC_RMID = 0
SHM_RDONLY = 0o10000
_WORD = ctypes.sizeof(ctypes.c_size_t)  # Size, size_t and pointers in the server's structs


@dataclass(frozen=True)
class ShmemId:
    """Line 7 of postmaster.pid: the System V key and id of the server's segment."""

    key: int
    shmid: int


@dataclass(frozen=True)
class SysvSegment:
    """A row of /proc/sysvipc/shm."""

    key: int
    shmid: int
    size: int
    creator_pid: int
    attached: int
    uid: int


@dataclass(frozen=True)
class DsmControl:
    """The parts of a dynamic shared memory control segment that name its segments."""

    nitems: int
    maxitems: int
    handles: tuple[int, ...]  # in use (reference count above 0), outside the main region


def shmem_id(pidfile_text: str) -> ShmemId | None:
    """The key and id on line 7 of a postmaster.pid ("%9lu %9lu"); None when absent."""
    lines = pidfile_text.splitlines()
    if len(lines) < 7:
        return None
    parts = lines[6].split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return ShmemId(int(parts[0]), int(parts[1]))


def parse_sysvipc(text: str) -> list[SysvSegment]:
    """/proc/sysvipc/shm: one header line, then one segment per line."""
    rows = text.splitlines()
    if not rows:
        return []
    names = rows[0].split()
    found = []
    for line in rows[1:]:
        values = line.split()
        if len(values) != len(names):
            continue
        row = dict(zip(names, values, strict=True))
        try:
            found.append(SysvSegment(key=int(row["key"]), shmid=int(row["shmid"]),
                                     size=int(row["size"]), creator_pid=int(row["cpid"]),
                                     attached=int(row["nattch"]), uid=int(row["uid"])))
        except (KeyError, ValueError):
            continue
    return found


def shmem_header(data: bytes) -> tuple[int, int, int] | None:
    """(magic, creator pid, dsm control handle) of a PGShmemHeader: int32 magic, pid_t
    creatorPID, Size totalsize, Size freeoffset, dsm_handle dsm_control."""
    offset = 8 + 2 * _WORD
    if len(data) < offset + 4:
        return None
    magic, creator = struct.unpack_from("=iI", data, 0)
    (control,) = struct.unpack_from("=I", data, offset)
    return magic, creator, control


def dsm_control(data: bytes, major: int) -> DsmControl | None:
    """The segments a dsm control segment lists, as PostgreSQL reads them after a crash:
    slots with a reference count, except those in the main region (odd handles, 14+).

    Its items are {dsm_handle handle; uint32 refcnt; [size_t first_page; size_t npages
    (14+)]; void *impl_private_pm_handle; bool pinned}, after a {magic, nitems, maxitems}
    header aligned to the word. None when it does not look like one (PostgreSQL's own
    sanity check: magic, nitems <= maxitems, the items fit)."""
    if len(data) < 12:
        return None
    magic, nitems, maxitems = struct.unpack_from("=III", data, 0)
    words = 4 if major >= 14 else 2  # first_page, npages, the pointer, the bool (padded)
    item = 8 + words * _WORD
    start = -(-12 // _WORD) * _WORD
    if magic != DSM_CONTROL_MAGIC or nitems > maxitems or start + maxitems * item > len(data):
        return None
    handles = []
    for i in range(nitems):
        handle, refcnt = struct.unpack_from("=II", data, start + i * item)
        if refcnt == 0 or handle == 0 or (major >= 14 and handle & 1):
            continue
        handles.append(handle)
    return DsmControl(nitems, maxitems, tuple(handles))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmdt.argtypes = [ctypes.c_void_p]
    libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    return libc


def _read_segment(shmid: int, size: int) -> bytes | None:
    libc = _libc()
    address = libc.shmat(shmid, None, SHM_RDONLY)
    if address is None or address == ctypes.c_void_p(-1).value:
        return None
    try:
        return ctypes.string_at(address, size)
    finally:
        libc.shmdt(address)


def _remove_segment(shmid: int) -> bool:
    return int(_libc().shmctl(shmid, IPC_RMID, None)) == 0


def _segment(shmid: int) -> SysvSegment | None:
    try:
        rows = parse_sysvipc(SYSVIPC_SHM.read_text())
    except OSError:
        return None
    return next((s for s in rows if s.shmid == shmid), None)


def release_shared_memory(pgdata: Path, major: int) -> list[str]:
    """Remove what the killed postmaster of ``pgdata`` left in shared memory; what was
    removed, one line each. Call only once the postmaster is gone: a segment still
    attached (a server process still alive) is left, and that is an error."""
    try:
        text = (pgdata / "postmaster.pid").read_text()
        postmaster = abs(int(text.splitlines()[0]))  # negative: a standalone backend
    except (OSError, ValueError, IndexError):
        return []
    ident = shmem_id(text)
    if ident is None:
        return []
    seg = _segment(ident.shmid)
    if seg is None or seg.key != ident.key or seg.creator_pid != postmaster:
        return []  # gone already, or the id was reused by someone else since
    if seg.attached:
        raise InstanceError(f"the shared memory of {pgdata} (System V segment {seg.shmid}) "
                            f"is still attached by {seg.attached} process(es): left for "
                            "`pgfsbench cleanup` once they are gone")
    header = _read_segment(seg.shmid, min(seg.size, 64))
    if header is None:
        return []
    fields = shmem_header(header)
    if fields is None or fields[0] != SHMEM_MAGIC or fields[1] != postmaster:
        return []
    done = []
    if fields[2]:
        done += _release_dsm(fields[2], major, seg.uid)
    if _remove_segment(seg.shmid):
        done.append(f"removed shared memory segment {seg.shmid} ({seg.size} bytes) of "
                    f"{pgdata}")
    return done


def _release_dsm(control_handle: int, major: int, uid: int) -> list[str]:
    control_path = SHM_DIR / f"PostgreSQL.{control_handle}"
    try:
        if control_path.stat().st_uid != uid:
            return []
        control = dsm_control(control_path.read_bytes(), major)
    except OSError:
        return []  # another dynamic_shared_memory_type, or gone already
    if control is None:
        return []
    removed = []
    for handle in control.handles:
        path = SHM_DIR / f"PostgreSQL.{handle}"
        with contextlib.suppress(OSError):
            if path.stat().st_uid == uid:
                size = path.stat().st_size
                path.unlink()
                removed.append(f"{path} ({size} bytes)")
    with contextlib.suppress(OSError):
        control_path.unlink()
        removed.append(str(control_path))
    return [f"removed dynamic shared memory {', '.join(removed)}"] if removed else []


def postmaster_orphans(pgdata: Path, postmaster: int) -> list[int]:
    """Server processes of ``pgdata`` still alive after its postmaster died (a postgres
    whose working directory is the data directory, the postmaster's pid excepted, negative
    for a standalone backend, which is then one of them): they keep the shared memory
    attached until they notice and exit."""
    where = os.path.realpath(pgdata)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == postmaster:
            continue
        try:
            exe = Path(os.readlink(entry / "exe")).name
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if exe in ("postgres", "postmaster") and cwd == where:
            found.append(int(entry.name))
    return found
