"""Root's acts where another user can write: only through directories held by descriptor.

pgfsbench runs as root and hands directories to PostgreSQL's OS user (the data directory,
the benchmark's scratch directory, pgbouncer's), a user it shares with the distribution's
PostgreSQL, so any database superuser on the host (``COPY ... TO PROGRAM``) acts as it.
Whatever that user can write, it can replace between two of root's system calls: a file
root writes by path may by then be a symbolic link to ``/etc/shadow``, a directory root
chowns may be a link to ``/root``. The rule of this module, and of no other place in
pgfsbench (``tests/unit/test_held.py`` fails on a by-path act elsewhere):

- a directory is opened once, by a path whose every component only root (or whoever runs
  pgfsbench) can write (``system/trust.py``'s rules), and from there each step down is an
  ``openat(O_DIRECTORY | O_NOFOLLOW)`` of one name: a link on the way is refused, and
  nothing reached so can be anything the other user could not already reach;
- files are created ``O_CREAT | O_EXCL | O_NOFOLLOW`` beneath that descriptor, under a
  name of their own, then renamed into place (a rename replaces a link, never follows it);
  ownership and modes are set on the open descriptor (``fchown``, ``fchmod``);
- a file of the other user's is opened ``O_NOFOLLOW | O_NONBLOCK`` and used only if it is
  then a regular file with one link (not a FIFO that would hang root, not a hard link to
  a file of root's);
- a tree is copied entry by entry the same way: regular files and directories only, into
  a directory the other user cannot enter until the copy is whole.

The other way to act safely, as that user (``runuser``), is the runner's ``user=``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from pgfsbench.system.trust import UntrustedPath, path_problem, trusted_uids

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20
MODE_BITS = 0o777  # never a set-id or sticky bit on what root makes for another user


@dataclass(frozen=True)
class Owner:
    """A user (and its primary group) that files are handed to."""

    uid: int
    gid: int

    @classmethod
    def of(cls, user: str | None) -> Owner | None:
        """The OS user's ids; None for none (files stay root's)."""
        if user is None:
            return None
        entry = pwd.getpwnam(user)
        return cls(entry.pw_uid, entry.pw_gid)


def _one_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise UntrustedPath(f"{name!r} is not a single name in a directory")
    return name


def _refused(path: Path, exc: OSError) -> UntrustedPath:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
        return UntrustedPath(f"{path} is not a directory (a symbolic link?); not followed")
    return UntrustedPath(f"{path}: {exc.strerror}")


class Held:
    """A directory held by its descriptor; every act in it is by one name beneath it."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path  # for messages and for the children's argv only

    # ---- opening
    @classmethod
    def open(cls, path: Path) -> Held:
        """``path`` held: its longest leading part that only trusted users can write is
        opened by path, the rest step by step without following a link."""
        absolute = Path(os.path.normpath(Path(path).absolute()))
        if ".." in Path(path).parts:
            raise UntrustedPath(f"{path}: '..' is not followed")
        anchor = absolute
        rest: list[str] = []
        while path_problem(anchor) is not None or not anchor.is_dir():
            if anchor == anchor.parent:
                raise UntrustedPath(f"{path}: no directory on its way is root's alone")
            rest.insert(0, anchor.name)
            anchor = anchor.parent
        if anchor.is_symlink():
            # a link only trusted users could have made (path_problem followed it, as the
            # kernel will): its target is opened, checked the same way
            target = Path(os.path.realpath(anchor))
            if path_problem(target) is not None:
                raise UntrustedPath(f"{anchor} leads to {target}: {path_problem(target)}")
            anchor = target
        try:
            fd = os.open(anchor, _DIR_FLAGS)
        except OSError as exc:
            raise _refused(anchor, exc) from None
        held = cls(fd, anchor)
        st = os.fstat(fd)
        if st.st_uid not in trusted_uids():  # swapped between the check and the open
            held.close()
            raise UntrustedPath(f"{anchor} changed owner while it was opened")
        try:
            return held.descend(*rest) if rest else held
        finally:
            if rest:
                held.close()

    def descend(self, *names: str) -> Held:
        """A directory some names below this one, each opened without following a link."""
        fd = self.fd
        path = self.path
        opened: list[int] = []
        try:
            for name in names:
                path = path / _one_name(name)
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    raise _refused(path, exc) from None
                opened.append(fd)
        except BaseException:
            for f in opened:
                os.close(f)
            raise
        for f in opened[:-1]:
            os.close(f)
        return Held(os.dup(self.fd) if not opened else opened[-1], path)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Held:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---- the directory itself
    def stat(self) -> os.stat_result:
        return os.fstat(self.fd)

    def hand_to(self, owner: Owner | None, mode: int | None = None) -> None:
        """Set this directory's mode and owner on its descriptor."""
        if mode is not None:
            os.fchmod(self.fd, mode & MODE_BITS)
        if owner is not None:
            os.fchown(self.fd, owner.uid, owner.gid)

    def mark_used(self) -> None:
        """This directory's times set to now, on its descriptor (a cache's "used last")."""
        os.utime(self.fd)

    def sync_filesystem(self) -> None:
        """syncfs(2) on this directory's filesystem (never sync(2): another filesystem,
        frozen or slow, must not hold pgfsbench up)."""
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syncfs(self.fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(self.path))

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))  # noqa: PTH208 (a descriptor, not a path)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(_one_name(name), dir_fd=self.fd, follow_symlinks=False)

    def exists(self, name: str) -> bool:
        try:
            self.lstat(name)
        except FileNotFoundError:
            return False
        return True

    # ---- directories beneath
    def make_dir(self, name: str, mode: int = 0o700, owner: Owner | None = None) -> Held:
        """A new directory (FileExistsError if the name is taken), handed to ``owner``."""
        os.mkdir(_one_name(name), 0o700, dir_fd=self.fd)
        made = self.descend(name)
        if made.stat().st_uid != os.geteuid():  # replaced between the mkdir and the open
            made.close()
            raise UntrustedPath(f"{self.path / name} was replaced as it was made")
        made.hand_to(owner, mode)
        return made

    def ensure_dir(self, name: str, mode: int = 0o700, owner: Owner | None = None) -> Held:
        """This directory made, or the one there when it is root's or ``owner``'s."""
        try:
            return self.make_dir(name, mode, owner)
        except FileExistsError:
            pass
        found = self.descend(name)
        uid = found.stat().st_uid
        if uid not in trusted_uids() and (owner is None or uid != owner.uid):
            found.close()
            raise UntrustedPath(f"{self.path / name} is owned by uid {uid}; not adopted")
        found.hand_to(owner, mode)
        return found

    # ---- files beneath
    def write(
        self, name: str, data: bytes | str, mode: int = 0o600, owner: Owner | None = None
    ) -> None:
        """``name`` with this content, made anew under a name of its own and renamed into
        place: whatever stood there (a link included) is replaced, never written through."""
        _one_name(name)
        temp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            self._create(temp, data, mode, owner)
            os.rename(temp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            # a full disk, a failed chown, an interrupt: no temporary file stays behind
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=self.fd)
            raise

    def create(
        self, name: str, data: bytes | str, mode: int = 0o600, owner: Owner | None = None
    ) -> None:
        """A new file (FileExistsError if the name is taken)."""
        self._create(_one_name(name), data, mode, owner)

    def create_sized(self, name: str, size: int, mode: int = 0o600) -> None:
        """A new sparse file of ``size`` bytes (a loop device's image), root's."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(_one_name(name), flags, mode & MODE_BITS, dir_fd=self.fd)
        try:
            os.ftruncate(fd, size)
        finally:
            os.close(fd)

    def _create(self, name: str, data: bytes | str, mode: int, owner: Owner | None) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=self.fd)
        try:
            _write_all(fd, data.encode() if isinstance(data, str) else data)
            os.fchmod(fd, mode & MODE_BITS)
            if owner is not None:
                os.fchown(fd, owner.uid, owner.gid)
        finally:
            os.close(fd)

    def create_from(
        self,
        name: str,
        fill: Callable[[int], None],
        mode: int = 0o600,
        mtime: float | None = None,
    ) -> None:
        """A new file (FileExistsError if the name is taken), root's, its content written
        by ``fill`` on its descriptor (what an archive holds, say); removed if that fails."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(_one_name(name), flags, 0o600, dir_fd=self.fd)
        try:
            fill(fd)
            os.fchmod(fd, mode & MODE_BITS)
            if mtime is not None:
                os.utime(fd, (mtime, mtime))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=self.fd)
            raise
        finally:
            os.close(fd)

    def open_new(self, name: str, mode: int = 0o600, owner: Owner | None = None) -> int:
        """A descriptor of ``name`` made anew for writing (whatever stood there removed,
        never written through; FileExistsError if someone takes the name meanwhile)."""
        self.remove(_one_name(name))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=self.fd)
        os.fchmod(fd, mode & MODE_BITS)
        if owner is not None:
            os.fchown(fd, owner.uid, owner.gid)
        return fd

    def open_log(self, name: str, mode: int = 0o600) -> int:
        """A descriptor to append to ``name``, made if missing; a file that is there must
        be root's, regular and with one link (see ``open_existing``)."""
        try:
            fd = os.open(
                _one_name(name),
                os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                mode & MODE_BITS,
                dir_fd=self.fd,
            )
        except FileExistsError:
            return self.open_existing(name, os.O_WRONLY | os.O_APPEND)
        return fd

    def open_existing(self, name: str, flags: int, owner: Owner | None = None) -> int:
        """A descriptor of a regular file with one link, owned by root or ``owner``, opened
        without following a link or blocking on a FIFO; UntrustedPath otherwise."""
        path = self.path / _one_name(name)
        try:
            fd = os.open(
                name,
                flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC,
                dir_fd=self.fd,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UntrustedPath(f"{path} is a symbolic link; not followed") from None
            raise
        st = os.fstat(fd)
        allowed = set(trusted_uids()) | ({owner.uid} if owner else set())
        why = None
        if not stat.S_ISREG(st.st_mode):
            why = f"{path} is not a regular file"
        elif st.st_nlink != 1:
            why = f"{path} has {st.st_nlink} links (a hard link to another file?)"
        elif st.st_uid not in allowed:
            why = f"{path} is owned by uid {st.st_uid}"
        if why is not None:
            os.close(fd)
            raise UntrustedPath(why)
        return fd

    def append(self, name: str, data: bytes | str, owner: Owner | None = None) -> None:
        """Add to a file that is there (see ``open_existing``)."""
        fd = self.open_existing(name, os.O_WRONLY | os.O_APPEND, owner)
        try:
            _write_all(fd, data.encode() if isinstance(data, str) else data)
        finally:
            os.close(fd)

    def read(self, name: str, limit: int, owner: Owner | None = None) -> bytes:
        """A file's content, at most ``limit`` bytes (UntrustedPath past it)."""
        fd = self.open_existing(name, os.O_RDONLY, owner)
        try:
            return _read_bounded(fd, limit, self.path / name)
        finally:
            os.close(fd)

    def symlink(self, name: str, target: Path, owner: Owner | None = None) -> None:
        """A new symbolic link (as initdb --waldir makes pg_wal), owned by ``owner``."""
        os.symlink(target, _one_name(name), dir_fd=self.fd)
        if owner is not None:
            os.chown(name, owner.uid, owner.gid, dir_fd=self.fd, follow_symlinks=False)

    def remove(self, name: str) -> None:
        """Remove an entry, a tree with what is in it, never following a link."""
        try:
            st = self.lstat(name)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, dir_fd=self.fd)
        else:
            os.unlink(name, dir_fd=self.fd)

    # ---- trees
    def copy_from(
        self,
        source: Held,
        owner: Owner | None,
        skip: tuple[str, ...] = (),
        accept: Callable[[tuple[str, ...], bool], bool] | None = None,
        _at: tuple[str, ...] = (),
    ) -> list[str]:
        """Copy what is in ``source`` (names in ``skip`` left out) into this directory:
        directories and regular files only, each created here anew (``O_EXCL``), every
        block of data written and every hole kept a hole (a WAL segment initdb zero-filled
        stays allocated; a sparse file planted in the source is not filled in), modes kept,
        handed to ``owner``. Anything else in the source (a link, a FIFO, a file with
        another link) is refused. With ``accept``, a path (names from the copy's top) it
        says no to is left out; the paths left out are returned."""
        left: list[str] = []
        for name in source.names():
            if name in skip:
                continue
            st = source.lstat(name)
            is_dir = stat.S_ISDIR(st.st_mode)
            if accept is not None and not accept((*_at, name), is_dir):
                left.append("/".join((*_at, name)) + ("/" if is_dir else ""))
                continue
            if is_dir:
                with source.descend(name) as below, self.make_dir(name, 0o700) as made:
                    left += made.copy_from(below, owner, accept=accept, _at=(*_at, name))
                    os.utime(made.fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                    made.hand_to(owner, st.st_mode)
            elif stat.S_ISREG(st.st_mode):
                self._copy_file(source, name, owner)
            else:
                raise UntrustedPath(
                    f"{source.path / name} is not a regular file or a directory; not copied"
                )
        return left

    def _copy_file(self, source: Held, name: str, owner: Owner | None) -> None:
        src = source.open_existing(name, os.O_RDONLY, owner)
        try:
            st = os.fstat(src)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            dst = os.open(name, flags, 0o600, dir_fd=self.fd)
            try:
                _copy_data(src, dst, st.st_size)
                os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
                os.fchmod(dst, st.st_mode & MODE_BITS)
                if owner is not None:
                    os.fchown(dst, owner.uid, owner.gid)
            finally:
                os.close(dst)
        finally:
            os.close(src)


def _copy_data(src: int, dst: int, size: int) -> None:
    """The data of ``src`` into ``dst`` at the same offsets, holes kept (SEEK_DATA and
    SEEK_HOLE: every block the source has allocated is written, none it has not)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here to the end
                break
            raise
        end = os.lseek(src, start, os.SEEK_HOLE)
        os.lseek(src, start, os.SEEK_SET)
        os.lseek(dst, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = os.read(src, min(_CHUNK, left))
            if not chunk:
                break
            _write_all(dst, chunk)
            left -= len(chunk)
        pos = end
    os.ftruncate(dst, size)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_bounded(fd: int, limit: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, min(_CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise UntrustedPath(f"{path} is larger than {limit} bytes")
    return b"".join(chunks)


def write_file(
    path: Path, data: bytes | str, mode: int = 0o600, owner: Owner | None = None
) -> None:
    """``path`` written anew through its held directory (see ``Held.write``)."""
    with Held.open(path.parent) as parent:
        parent.write(path.name, data, mode, owner)


def open_new_file(path: Path, mode: int = 0o600, owner: Owner | None = None) -> int:
    """``path`` made anew for writing through its held directory (``Held.open_new``)."""
    with Held.open(path.parent) as parent:
        return parent.open_new(path.name, mode, owner)


def open_log_file(path: Path, mode: int = 0o600) -> int:
    """``path`` to append to through its held directory (``Held.open_log``)."""
    with Held.open(path.parent) as parent:
        return parent.open_log(path.name, mode)


def append_file(path: Path, data: bytes | str, owner: Owner | None = None) -> None:
    """Add to an existing regular file through its held directory (``Held.append``)."""
    with Held.open(path.parent) as parent:
        parent.append(path.name, data, owner)


def make_dirs(path: Path, mode: int = 0o755) -> None:
    """``path`` and its missing parents, root's, each made beneath its held parent; what
    is already there is left as it is."""
    absolute = Path(os.path.normpath(Path(path).absolute()))
    missing: list[str] = []
    probe = absolute
    while not os.path.lexists(probe):
        missing.insert(0, probe.name)
        probe = probe.parent
    current = Held.open(probe)
    try:
        for name in missing:
            below = current.ensure_dir(name, mode)
            current.close()
            current = below
    finally:
        current.close()


def new_dir(path: Path, mode: int = 0o700, owner: Owner | None = None) -> None:
    """A directory made anew (FileExistsError if the name is taken: never adopted), its
    missing parents root's, handed to ``owner`` on its descriptor."""
    make_dirs(path.parent)
    with Held.open(path.parent) as parent, parent.make_dir(path.name, mode, owner):
        pass
