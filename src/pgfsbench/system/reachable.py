"""A program of pgfsbench's that root starts as another user (the replayer as the server's
account, the wire relay as an unprivileged uid of its own) must be one that user can reach.
Built beside the interpreter, it sits in the checkout's ``.venv/bin``; a checkout under a
directory closed to others (root's home is 0700) puts it out of their reach, and the child
fails with a bare "Permission denied". So: where the user cannot execute it, a copy of
root's, made once per content, is run instead, from
``/var/cache/pgfsbench-bin/<sha256>/``, a directory only root writes and anyone can
traverse, on a filesystem that allows execution (``/run`` and ``/tmp`` often do not)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from pgfsbench.system.errors import CapabilityError
from pgfsbench.system.held import Held
from pgfsbench.system.runner import identity
from pgfsbench.system.trust import UntrustedPath

CACHE_DIR = Path("/var/cache")
COPIES = "pgfsbench-bin"  # under /var/cache: root's, 0755, one directory per content


def _allows(st: os.stat_result, uid: int, gids: Sequence[int], bit: int) -> bool:
    """Whether ``st``'s mode grants ``bit`` (execute/search: 1) to this uid and groups,
    as the kernel decides it: the owner's bits for the owner, else the group's for a
    member, else the others'."""
    if st.st_uid == uid:
        return bool(st.st_mode & (bit << 6))
    if st.st_gid in gids:
        return bool(st.st_mode & (bit << 3))
    return bool(st.st_mode & bit)


def can_execute(path: Path, uid: int, gids: Sequence[int]) -> bool:
    """Whether ``uid`` (with ``gids``) can execute ``path``: every directory on its way
    searchable, the file itself (links resolved, as exec resolves them) executable."""
    if uid == 0:
        return True
    try:
        real = Path(os.path.realpath(path))
        for directory in reversed(real.parents):
            if not _allows(directory.stat(), uid, gids, 1):
                return False
        st = real.stat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and _allows(st, uid, gids, 1)


def _digest(fd: int) -> str:
    h = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    return h.hexdigest()


def executable_for(binary: Path, user: str | int | None) -> Path:
    """``binary`` when ``user`` can execute it; else root's copy of it that anyone can
    execute (made once per content; the copy's content is read from the one descriptor
    its digest was taken from, so what runs is what was hashed)."""
    uid, gid, groups = identity(user)
    if uid is None or os.geteuid() != 0:
        return binary
    gids = [*(groups or []), *([gid] if gid is not None else [])]
    if can_execute(binary, uid, gids):
        return binary
    src = os.open(binary, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(src)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise UntrustedPath(
                f"{binary}: not root's alone (uid {st.st_uid}, mode {st.st_mode & 0o7777:o}); "
                "not copied for another user to run"
            )
        digest = _digest(src)
        with (
            Held.open(CACHE_DIR) as cache,
            cache.ensure_dir(COPIES, 0o755) as copies,
            copies.ensure_dir(digest, 0o755) as here,
        ):
            if not here.exists(binary.name):

                def fill(fd: int) -> None:
                    done = 0
                    while done < st.st_size:
                        sent = os.sendfile(fd, src, done, st.st_size - done)
                        if sent == 0:
                            break
                        done += sent
                    if _digest_of_written(fd) != digest:
                        raise UntrustedPath(f"{binary} changed while it was copied")

                with contextlib.suppress(FileExistsError):  # another pgfsbench made it
                    here.create_from(binary.name, fill, 0o755)
            copy = here.path / binary.name
            if os.statvfs(here.fd).f_flag & os.ST_NOEXEC:
                raise CapabilityError(
                    f"{binary} cannot be executed by {user!r} (a directory on its way is closed "
                    f"to it) and {here.path} is on a filesystem mounted noexec: build pgfsbench "
                    "in a directory others can traverse"
                )
            found = here.lstat(binary.name)
            if not stat.S_ISREG(found.st_mode) or found.st_uid != 0 or found.st_mode & 0o022:
                raise UntrustedPath(f"{copy} is not root's alone; not run")
            return copy
    finally:
        os.close(src)


def _digest_of_written(fd: int) -> str:
    """What was written to ``fd`` (opened write-only): read back through /proc."""
    back = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        return _digest(back)
    finally:
        os.close(back)
