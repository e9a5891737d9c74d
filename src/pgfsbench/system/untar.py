"""A tar archive another principal wrote, unpacked by root: only what is asked for.

``pg_basebackup`` (run as an unprivileged uid, tar format) writes what the server sends;
here root takes it in. Each member is checked before anything is made: a relative name
without ``..``, a regular file or a directory the caller's layout accepts; a link is never
made (the names of the links ``accept_link`` wants are returned, their targets too: they are
data); anything else is left out and counted by its first names. Files and directories
are created beneath a held directory (``O_EXCL | O_NOFOLLOW``), with the modes PostgreSQL
gives its own (0600 and 0700: no set-id bit, no other's access, whatever the archive said),
holes kept as holes (a block of zeros is skipped, the size set at the end), and the total
bounded: an archive past ``max_bytes`` is refused part-way, what was made removed by the
caller.
"""

from __future__ import annotations

import functools
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import IO

from pgfsbench.system.errors import CapabilityError
from pgfsbench.system.held import Held
from pgfsbench.system.trust import UntrustedPath

FILE_MODE = 0o600
DIR_MODE = 0o700
_BLOCK = 64 << 10  # the granularity of holes kept
_CHUNK = 1 << 20
LEFT_OUT_NAMES = 50  # distinct names a report keeps of what was left out

Accept = Callable[[tuple[str, ...], bool], bool]


@dataclass
class Unpacked:
    """What an archive gave: files, bytes (as sized), what was left out, and links."""

    files: int = 0
    directories: int = 0
    bytes: int = 0
    left_out: dict[str, int] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # name -> its target, as data

    def leave_out(self, parts: tuple[str, ...], kind: str) -> None:
        key = "/".join(parts[:2]) + ("/..." if len(parts) > 2 else "") + f" ({kind})"
        if key in self.left_out or len(self.left_out) < LEFT_OUT_NAMES:
            self.left_out[key] = self.left_out.get(key, 0) + 1
        else:
            self.left_out["(more)"] = self.left_out.get("(more)", 0) + 1


def member_parts(name: str) -> tuple[str, ...]:
    """A member's name as names beneath the target; UntrustedPath when it is absolute,
    climbs (``..``), or holds a NUL."""
    if "\0" in name or name.startswith("/"):
        raise UntrustedPath(f"archive member {name!r}: not a relative name")
    parts = tuple(p for p in PurePosixPath(name).parts if p not in (".", ""))
    if any(p == ".." for p in parts):
        raise UntrustedPath(f"archive member {name!r}: '..' is not followed")
    return parts


class _Dirs:
    """The directory files are written into, held; made as needed beneath the target."""

    def __init__(self, target: Held) -> None:
        self.target = target
        self.parts: tuple[str, ...] | None = None
        self.held: Held | None = None

    def get(self, parts: tuple[str, ...], out: Unpacked) -> Held:
        if self.parts == parts and self.held is not None:
            return self.held
        self.close()
        current = self.target.descend()
        try:
            for name in parts:
                try:
                    below = current.make_dir(name, DIR_MODE)
                    out.directories += 1
                except FileExistsError:
                    below = current.descend(name)
                current.close()
                current = below
        except BaseException:
            current.close()
            raise
        self.parts, self.held = parts, current
        return current

    def close(self) -> None:
        if self.held is not None:
            self.held.close()
        self.parts = self.held = None


def _write_member(fh: IO[bytes], fd: int, size: int) -> None:
    """The member's bytes into ``fd``, blocks of zeros skipped (holes), sized at the end."""
    zero = bytes(_BLOCK)
    done = 0
    while done < size:
        chunk = fh.read(min(_CHUNK, size - done))
        if not chunk:
            raise CapabilityError(f"archive member ends after {done} of {size} bytes")
        view = memoryview(chunk)
        for off in range(0, len(chunk), _BLOCK):
            block = view[off : off + _BLOCK]
            if block == zero[: len(block)]:
                os.lseek(fd, len(block), os.SEEK_CUR)
                continue
            while block:
                block = block[os.write(fd, block) :]
        done += len(chunk)
    os.ftruncate(fd, size)


def _fill(fh: IO[bytes], size: int, fd: int) -> None:
    _write_member(fh, fd, size)


def unpack(
    archive_fd: int,
    target: Held,
    accept: Accept,
    *,
    max_bytes: int,
    accept_link: Callable[[tuple[str, ...]], bool] = lambda parts: False,
) -> Unpacked:
    """Unpack the tar read from ``archive_fd`` into ``target`` (see the module)."""
    out = Unpacked()
    dirs = _Dirs(target)
    stream = os.fdopen(os.dup(archive_fd), "rb")
    try:
        with tarfile.open(fileobj=stream, mode="r|") as archive:
            for member in archive:
                parts = member_parts(member.name)
                if not parts:
                    continue
                if member.isdir():
                    if accept(parts, True):
                        dirs.get(parts, out)
                    else:
                        out.leave_out(parts, "directory")
                    continue
                if member.issym():
                    if accept_link(parts):
                        out.links["/".join(parts)] = member.linkname[:4096]
                    else:
                        out.leave_out(parts, "link")
                    continue
                if not member.isreg():
                    out.leave_out(parts, "not a regular file")
                    continue
                if not accept(parts, False):
                    out.leave_out(parts, "file")
                    continue
                out.bytes += member.size
                if out.bytes > max_bytes:
                    raise CapabilityError(
                        f"the archive holds more than {max_bytes} bytes (at {member.name!r}): "
                        "refused"
                    )
                fh = archive.extractfile(member)
                assert fh is not None
                parent = dirs.get(parts[:-1], out)
                try:
                    parent.create_from(
                        parts[-1],
                        functools.partial(_fill, fh, member.size),
                        FILE_MODE,
                        float(member.mtime),
                    )
                except FileExistsError:
                    raise UntrustedPath(f"archive member {member.name!r} comes twice") from None
                out.files += 1
    except tarfile.TarError as exc:
        raise CapabilityError(f"not a tar archive pgfsbench can read ({exc})") from None
    finally:
        dirs.close()
        stream.close()
    return out
