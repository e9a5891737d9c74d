"""What a root tool may believe: paths and files that only root (or whoever runs pgfsbench)
could have written.

pgfsbench keeps its state in a work directory, by default under /var/tmp, where every local
user may create files. Whatever it reads back from there as root (journals it undoes,
templates it copies and starts, images it attaches, lists of children it ends) is only as
trustworthy as the directories on the way to it. The rules are those of sshd's StrictModes
and systemd-tmpfiles' safe paths:

- the work directory and every directory on its path are owned by root or by the user
  running pgfsbench, and not writable by group or others; a world-writable directory on
  the way is accepted only if it is sticky (/tmp, /var/tmp), where nobody may rename or
  remove what another user owns;
- a symlink on the way is accepted only if it is owned by a trusted user;
- a file read back is opened without following a symlink and checked after it is open:
  a regular file of a trusted owner, not writable by group or others.

A work directory that breaks a rule is refused with what is wrong and how to mend it; it
is never mended silently (that would hide that someone else was there first).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from pgfsbench.system.errors import GuardError


class UntrustedPath(GuardError):
    """A path that someone other than root (or the user running pgfsbench) could have
    written is refused."""


def trusted_uids() -> frozenset[int]:
    """Root, and the user pgfsbench runs as."""
    return frozenset({0, os.geteuid()})


def _owner_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def directory_problem(st: os.stat_result, path: Path, *, last: bool) -> str | None:
    """Why a directory on the way to (``last``: or being) the work directory is not safe."""
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid not in trusted_uids():
        return (
            f"{path} is owned by {_owner_name(st.st_uid)}, not root: whoever owns it can "
            f"plant files pgfsbench would trust (remove it, or `chown root: {path}` after "
            "checking what is in it)"
        )
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (not last and st.st_mode & stat.S_ISVTX and st.st_mode & stat.S_IWOTH):
        who = (
            "group and others"
            if writable == (stat.S_IWGRP | stat.S_IWOTH)
            else ("its group" if writable & stat.S_IWGRP else "others")
        )
        return (
            f"{path} (mode {stat.filemode(st.st_mode)}) is writable by {who}: anyone who can "
            f"write there can plant files pgfsbench would trust (`chmod go-w {path}`)"
        )
    return None


def path_problem(path: Path) -> str | None:
    """Why ``path`` (a work directory, existing or to be made) is not safe to work in, or
    None. Checked component by component from /, as the kernel walks it: a '..' is
    refused as given (normalised away first, 'link/..' would be checked as its parent,
    while the kernel goes up from where the link points)."""
    if ".." in Path(path).parts:
        return f"{path}: give the path without '..'"
    absolute = Path(os.path.normpath(Path(path).absolute()))
    current = Path("/")
    pending = list(absolute.parts[1:])
    hops = 0
    while True:
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None  # the rest will be made by pgfsbench, under a checked parent
        except OSError as exc:
            return f"{current}: {exc.strerror}"
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > 40:
                return f"{path}: too many symbolic links"
            if st.st_uid not in trusted_uids():
                return (
                    f"{current} is a symbolic link owned by {_owner_name(st.st_uid)}: "
                    "pgfsbench does not follow it (give the real path with --workdir)"
                )
            target = Path(os.readlink(current))
            resolved = target if target.is_absolute() else current.parent / target
            pending = list(Path(os.path.normpath(resolved)).parts[1:]) + pending
            current = Path("/")
            continue
        why = directory_problem(st, current, last=not pending)
        if why is not None:
            return why
        if not pending:
            return None
        current = current / pending.pop(0)


def check_workdir_trusted(workdir: Path, option: str = "--workdir") -> None:
    """Refuse a work directory that someone else could have written into (see the module)."""
    why = path_problem(workdir)
    if why is not None:
        raise UntrustedPath(f"{option} {workdir}: {why}")


def make_trusted_dir(path: Path, mode: int = 0o755) -> None:
    """Create ``path`` (and its missing parents) for pgfsbench, then check it is ours: a
    directory someone created between the check and the mkdir is refused, not adopted."""
    missing = []
    probe = Path(os.path.normpath(Path(path).absolute()))
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode)
        except FileExistsError:
            pass  # checked below, like any directory that was already there
        else:
            directory.chmod(mode)  # the umask may have taken bits away
    check_workdir_trusted(path)


def file_problem(st: os.stat_result, path: Path) -> str | None:
    """Why a file pgfsbench reads back from its work directory cannot be trusted."""
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if st.st_uid not in trusted_uids():
        return f"{path} is owned by {_owner_name(st.st_uid)}, not root"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"{path} (mode {stat.filemode(st.st_mode)}) is writable by others"
    return None


def read_trusted(path: Path) -> bytes:
    """The content of a file pgfsbench wrote, opened without following a symlink and
    checked once open (so a swap after the check is no use); UntrustedPath otherwise."""
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        why = file_problem(os.fstat(fd), path)
        if why is not None:
            raise UntrustedPath(why)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open that refuses a symlink in the last component (ELOOP becomes UntrustedPath)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a symlink
            raise UntrustedPath(f"{path} is a symbolic link; not followed") from None
        raise


def open_written_by_others(path: Path) -> BinaryIO:
    """A file someone else writes (the server's log, pgbench's transaction logs: the
    `postgres` OS user's), opened for reading by root: never through a symlink, never a
    FIFO or a device; OSError otherwise, as a missing file is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "a symbolic link, not followed", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def read_text_nofollow(path: Path) -> str:
    """A file's text, never through a symlink (for files others may write: a server's
    log, a daemon's statistics)."""
    with open_written_by_others(path) as fh:
        return fh.read().decode(errors="replace")


def inside(path: str | Path, root: Path) -> bool:
    """Is ``path`` (absolute, without '..') within ``root`` once the links on the way to it
    are resolved? The last component is not resolved (a link there is removed, not
    followed)."""
    text = str(path)
    if not Path(text).is_absolute() or ".." in Path(text).parts:
        return False
    candidate = Path(os.path.normpath(text))
    parent = Path(os.path.realpath(candidate.parent))
    real_root = Path(os.path.realpath(root))
    full = parent / candidate.name
    return full != real_root and real_root in full.parents


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
