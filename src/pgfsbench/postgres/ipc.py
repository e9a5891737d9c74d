"""The shared memory a dead PostgreSQL server leaves behind, found from its data directory
and released.

A server that exits removes its shared memory. One that is killed (SIGKILL, the OOM
killer, a host that ends the run, initdb's own server killed with initdb) leaves, until
reboot:

- its System V segment (56 bytes with the default ``shared_memory_type = mmap``, the
  whole of shared_buffers with ``sysv``);
- its dynamic shared memory (``dynamic_shared_memory_type = posix``, the Linux default):
  a control segment ``/dev/shm/PostgreSQL.<handle>``, whose handle is in the System V
  segment's header, and the segments listed in it (PostgreSQL 15's statistics alone keep
  one of 1 MiB; parallel queries and hash joins make more, up to GBs).

PostgreSQL removes them itself when a server starts again on the same data directory; a
benchmark's data directory is thrown away instead, so pgfsbench removes them the way
PostgreSQL does (``PGSharedMemoryAttach`` ties a segment to a data directory by the
device and inode in its header; ``dsm_cleanup_using_control_segment`` removes what the
control segment lists), and nothing else: postmaster.pid is not needed (initdb's cleanup
may have removed it), a segment must carry PostgreSQL's magic number and this data
directory's device and inode, be owned by its owner, and have nothing attached.
64-bit layouts only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

SHMEM_MAGIC = 679834894  # PGShmemMagic
DSM_CONTROL_MAGIC = 0x9A503D32  # PG_DYNSHMEM_CONTROL_MAGIC
SHM_DIR = Path("/dev/shm")
SYSVIPC_SHM = Path("/proc/sysvipc/shm")
IPC_RMID = 0
SHM_RDONLY = 0o10000
_WORD = ctypes.sizeof(ctypes.c_size_t)  # Size, size_t and pointers in the server's structs


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
            found.append(
                SysvSegment(
                    key=int(row["key"]),
                    shmid=int(row["shmid"]),
                    size=int(row["size"]),
                    creator_pid=int(row["cpid"]),
                    attached=int(row["nattch"]),
                    uid=int(row["uid"]),
                )
            )
        except (KeyError, ValueError):
            continue
    return found


@dataclass(frozen=True)
class ShmemHeader:
    """What pgfsbench reads of a PGShmemHeader (64-bit layout): int32 magic, pid_t
    creatorPID, Size totalsize, Size freeoffset, dsm_handle dsm_control, void *index,
    dev_t device, ino_t inode: the device and inode of the data directory, which
    PostgreSQL itself checks to tie a segment to a data directory."""

    magic: int
    creator_pid: int
    dsm_control: int
    device: int
    inode: int


HEADER_SIZE = 56


def shmem_header(data: bytes) -> ShmemHeader | None:
    if len(data) < HEADER_SIZE or _WORD != 8:
        return None
    magic, creator, _total, _free, control, _index, device, inode = struct.unpack_from(
        "=iIQQI4xQQQ", data, 0
    )
    return ShmemHeader(magic, creator, control, device, inode)


def dsm_control(data: bytes) -> DsmControl | None:
    """The segments a dsm control segment lists, as PostgreSQL reads them after a crash:
    slots with a reference count, except those in the main region (odd handles, 14+).

    A {uint32 magic, nitems, maxitems} header, then maxitems items aligned to 8 bytes:
    {dsm_handle handle; uint32 refcnt; [size_t first_page; size_t npages (14+)];
    void *impl_private_pm_handle; bool pinned}, 24 or 40 bytes: the segment is exactly
    that long, so its length says which. None when it does not look like one
    (PostgreSQL's own sanity check: magic, nitems <= maxitems, the items fit)."""
    if len(data) < 16 or _WORD != 8:
        return None
    magic, nitems, maxitems = struct.unpack_from("=III", data, 0)
    if magic != DSM_CONTROL_MAGIC or maxitems == 0 or nitems > maxitems:
        return None
    item, rest = divmod(len(data) - 16, maxitems)
    if rest or item not in (24, 40):
        return None
    main_region = item == 40  # PostgreSQL 14+: odd handles live in the main segment
    handles = []
    for i in range(nitems):
        handle, refcnt = struct.unpack_from("=II", data, 16 + i * item)
        if refcnt == 0 or handle == 0 or (main_region and handle & 1):
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


def data_dir_identity(pgdata: Path) -> tuple[int, int, int] | None:
    """(device, inode) of a data directory, as PostgreSQL writes them in its header, and
    its owner's uid, the server's."""
    try:
        st = pgdata.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_uid


def release_shared_memory(pgdata: Path, identity: tuple[int, int, int] | None = None) -> list[str]:
    """Remove the shared memory dead servers of ``pgdata`` left: every System V segment
    that nothing has attached, owned by the data directory's owner, whose PostgreSQL
    header names this data directory's device and inode (``identity``, else the
    directory's own), with the dynamic shared memory its control segment lists. Other
    segments are not read: those of other users, and those in use. What was removed,
    one line each."""
    identity = identity or data_dir_identity(pgdata)
    if identity is None:
        return []
    device, inode, uid = identity
    try:
        segments = parse_sysvipc(SYSVIPC_SHM.read_text())
    except OSError:
        return []
    done: list[str] = []
    for seg in segments:
        if seg.attached or seg.uid != uid or seg.size < HEADER_SIZE:
            continue
        raw = _read_segment(seg.shmid, HEADER_SIZE)
        header = shmem_header(raw) if raw is not None else None
        if (
            header is None
            or header.magic != SHMEM_MAGIC
            or (header.device, header.inode) != (device, inode)
        ):
            continue
        if header.dsm_control:
            done += _release_dsm(header.dsm_control, seg.uid)
        if _remove_segment(seg.shmid):
            done.append(f"removed shared memory segment {seg.shmid} ({seg.size} bytes) of {pgdata}")
    return done


DSM_CONTROL_MAX = 1 << 20  # a control segment's bytes read at most (it lists handles)


def _segment_file(shm: int, name: str, uid: int) -> os.stat_result | None:
    """A dynamic shared memory file of ``uid``'s in /dev/shm (held as ``shm``): a regular
    file with one link, never through a link, else None (/dev/shm is everyone's: a FIFO,
    a link or another user's file planted under a segment's name is not PostgreSQL's)."""
    try:
        st = os.stat(name, dir_fd=shm, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_uid != uid:
        return None
    return st


def _read_control(shm: int, name: str, uid: int) -> bytes | None:
    """The control segment's bytes: opened without following a link or blocking on a
    FIFO, checked once open, bounded."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=shm)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid or st.st_nlink != 1:
            return None
        return os.read(fd, DSM_CONTROL_MAX)
    finally:
        os.close(fd)


def _release_dsm(control_handle: int, uid: int) -> list[str]:
    try:
        shm = os.open(SHM_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        control_name = f"PostgreSQL.{control_handle}"
        raw = _read_control(shm, control_name, uid)
        control = dsm_control(raw) if raw is not None else None
        if control is None:
            return []  # another dynamic_shared_memory_type, gone already, or not its
        removed = []
        for handle in control.handles:
            name = f"PostgreSQL.{handle}"
            st = _segment_file(shm, name, uid)
            if st is not None:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=shm)
                    removed.append(f"{SHM_DIR / name} ({st.st_size} bytes)")
        if _segment_file(shm, control_name, uid) is not None:
            with contextlib.suppress(OSError):
                os.unlink(control_name, dir_fd=shm)
                removed.append(str(SHM_DIR / control_name))
        return [f"removed dynamic shared memory {', '.join(removed)}"] if removed else []
    finally:
        os.close(shm)


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
