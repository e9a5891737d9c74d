"""The way back from a pod: its results store and artifacts as one checked bundle.

The pod packs its results file and its runs' artifacts into a tar.gz, writes it on its
data claim (which outlives the pod until the controller deletes it) and prints it on its
log as framed lines: a header with the bundle's size, line count and SHA-256, numbered
base64 lines of 8 KiB (containerd splits log lines over 16 KiB), and a trailer. The
controller reads the log; if a line is missing (the log rotated, the pod was evicted while
printing) or the digest differs, the bundle is read again from the claim by a second pod,
and only if that fails too is the run failed, saying which. Nothing is taken half.

A bundle is what a container image made: hostile input to the root controller. Its size
and line count are bounded before anything is allocated for them, its bytes counted as
they are decompressed (a limit a member and in all), its members regular files and
directories made beneath the directory it is unpacked into, never through a link.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held, new_dir

HEADER = "PGFSBENCH-BUNDLE-BEGIN"
LINE = "PGFSBENCH-BUNDLE"
TRAILER = "PGFSBENCH-BUNDLE-END"
CHUNK = 8192  # bytes of base64 a line, well under containerd's 16 KiB
# where the pod leaves the bundle on its data claim
BUNDLE_NAME = ".pgfsbench-bundle.tar.gz"
# the result store's name inside a bundle
RESULTS_NAME = "results.db"
ARTIFACTS_DIR = "artifacts"
# Bounds of what a pod may send back. A run's artifacts are its logs and raw outputs: the
# per-transaction log of a long run at a high rate is the largest, compressed (txlog.py);
# the results file holds a campaign of a few runs.
MAX_BUNDLE_BYTES = 256 << 20  # as sent (gzip)
MAX_UNPACKED_BYTES = 2 << 30  # all members, decompressed
MAX_MEMBER_BYTES = 1 << 30  # one member
MAX_MEMBERS = 10_000
MAX_LINES = -(-MAX_BUNDLE_BYTES * 4 // 3 // CHUNK) + 1  # base64 lines of the largest bundle


@dataclass(frozen=True)
class Framed:
    """A bundle read back from framed lines, or why it could not be."""

    data: bytes | None
    problem: str = ""


class TooLarge(ValueError):
    """A bundle past the bounds the controller takes: said by the pod that packs it, with
    its largest files, before anything is printed."""


def pack(results: Path, artifacts: Path | None) -> bytes:
    """The results file and the artifacts directory as a tar.gz (paths relative), within
    the bounds the controller takes (TooLarge, naming the largest files, before the
    bundle is kept or printed: the controller would refuse it after the pod's whole log)."""
    files = [(results, RESULTS_NAME)]
    if artifacts is not None and artifacts.is_dir():
        files += [
            (p, f"{ARTIFACTS_DIR}/{p.relative_to(artifacts)}")
            for p in sorted(artifacts.rglob("*"))
            if p.is_file() and not p.is_symlink()
        ]
    sizes = [(p.stat().st_size, name) for p, name in files]
    largest = ", ".join(f"{n} ({b >> 20} MiB)" for b, n in sorted(sizes, reverse=True)[:3])
    if len(files) > MAX_MEMBERS:
        raise TooLarge(f"{len(files)} files, more than the {MAX_MEMBERS} a bundle may hold")
    if any(b > MAX_MEMBER_BYTES for b, _ in sizes) or sum(b for b, _ in sizes) > MAX_UNPACKED_BYTES:
        raise TooLarge(
            f"the results and artifacts are {sum(b for b, _ in sizes) >> 20} MiB, more than a "
            f"bundle may hold ({MAX_UNPACKED_BYTES >> 20} MiB, {MAX_MEMBER_BYTES >> 20} MiB a "
            f"file); the largest: {largest}"
        )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for path, name in files:
            tar.add(path, arcname=name, recursive=False)
            if buf.tell() > MAX_BUNDLE_BYTES:
                raise TooLarge(
                    f"the bundle passes {MAX_BUNDLE_BYTES >> 20} MiB compressed at {name}; the "
                    f"largest files: {largest}"
                )
    return buf.getvalue()


class _Counted(io.RawIOBase):
    """A decompressed stream that refuses to give more than ``limit`` bytes."""

    def __init__(self, raw: gzip.GzipFile, limit: int):
        self.raw, self.limit, self.read_bytes = raw, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)
        self.read_bytes += n
        if self.read_bytes > self.limit:
            raise ValueError(f"the bundle unpacks to more than {self.limit >> 20} MiB")
        return int(n)


def _member_parts(name: str) -> list[str]:
    """A member's path as names beneath the bundle's directory, or ValueError."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or not parts or ".." in parts or "\0" in name:
        raise ValueError(f"bundle member {name!r} leaves its directory")
    return parts


def unpack(data: bytes, into: Path) -> Path:
    """Extract a bundle into ``into`` (made here, root's 0700): regular files and
    directories only, each made beneath it (``system/held.py``), sizes counted while
    decompressing. Returns the results file's path; ValueError says what is wrong."""
    if len(data) > MAX_BUNDLE_BYTES:
        raise ValueError(f"the bundle is larger than {MAX_BUNDLE_BYTES >> 20} MiB")
    new_dir(into, 0o700)
    stream = _Counted(gzip.GzipFile(fileobj=io.BytesIO(data)), MAX_UNPACKED_BYTES + (64 << 20))
    written = members = 0
    try:
        with Held.open(into) as root, tarfile.open(fileobj=stream, mode="r|") as tar:
            for m in tar:
                members += 1
                if members > MAX_MEMBERS:
                    raise ValueError(f"the bundle has more than {MAX_MEMBERS} members")
                parts = _member_parts(m.name)
                if not (m.isfile() or m.isdir()):
                    raise ValueError(f"bundle member {m.name!r} is neither a file nor a directory")
                if m.size > MAX_MEMBER_BYTES or written + m.size > MAX_UNPACKED_BYTES:
                    raise ValueError(f"bundle member {m.name!r} is too large ({m.size} bytes)")
                written += m.size
                with _directory_of(root, parts[:-1]) as parent:
                    if m.isdir():
                        parent.ensure_dir(parts[-1], 0o700).close()
                        continue
                    source = tar.extractfile(m)
                    assert source is not None  # a regular file's
                    parent.create(parts[-1], _read_exactly(source, m.size, m.name))
    except (tarfile.TarError, EOFError, zlib.error, OSError, PgfsbenchError) as exc:
        raise ValueError(f"the bundle cannot be unpacked: {exc}") from None
    results = into / RESULTS_NAME
    if not results.is_file() or results.is_symlink():
        raise ValueError(f"the bundle has no {RESULTS_NAME}")
    return results


def _directory_of(root: Held, parts: list[str]) -> Held:
    """The directory ``parts`` beneath ``root``, made (root's, 0700) where missing."""
    current = root.descend()
    for name in parts:
        below = current.ensure_dir(name, 0o700)
        current.close()
        current = below
    return current


def _read_exactly(source: IO[bytes], size: int, name: str) -> bytes:
    data = source.read(size + 1)
    if len(data) != size:
        raise ValueError(f"bundle member {name!r} is not the size it says")
    return data


def frame(data: bytes) -> Iterator[str]:
    """The lines that carry ``data`` on a log."""
    text = base64.b64encode(data).decode()
    lines = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
    digest = hashlib.sha256(data).hexdigest()
    yield f"{HEADER} {len(data)} {len(lines)} {digest}"
    for i, chunk in enumerate(lines):
        yield f"{LINE} {i} {chunk}"
    yield f"{TRAILER} {digest}"


def unframe(lines: Iterable[str]) -> Framed:
    """The last complete bundle on a log; otherwise what is wrong with what is there. The
    header's size and line count are bounded before anything is kept for them."""
    header: tuple[int, int, str] | None = None
    parts: dict[int, str] = {}
    complete: Framed | None = None
    found: Framed = Framed(None, "no bundle on the log (the pod ended before printing it)")
    for raw in lines:
        line = raw.rstrip("\r\n")
        if line.startswith(HEADER + " "):
            fields = line.split()
            try:
                header = (int(fields[1]), int(fields[2]), fields[3])
            except (IndexError, ValueError):
                header = None
                continue
            parts = {}
            size, count, _ = header
            if not (0 <= size <= MAX_BUNDLE_BYTES and 0 < count <= MAX_LINES):
                found = Framed(None, f"the bundle's header claims {size} bytes in {count} lines")
                header = None
                continue
            found = Framed(None, "the bundle's trailer is missing (the log was cut)")
        elif line.startswith(LINE + " ") and header is not None:
            _, index, *chunk = line.split(" ", 2)
            if index.isdigit() and int(index) < header[1] and len(line) <= CHUNK + 64:
                parts[int(index)] = chunk[0] if chunk else ""
        elif line.startswith(TRAILER + " ") and header is not None:
            size, count, digest = header
            missing = [i for i in range(count) if i not in parts]
            if missing:
                found = Framed(
                    None,
                    f"{len(missing)} of the bundle's {count} lines are missing from the log "
                    f"(first: {missing[0]}; a log rotated or cut)",
                )
                header = None
                continue
            try:
                data = base64.b64decode("".join(parts[i] for i in range(count)), validate=True)
            except ValueError:
                found = Framed(None, "the bundle's lines on the log are not base64")
                header = None
                continue
            trailer = line.split()[-1]
            actual = hashlib.sha256(data).hexdigest()
            if len(data) != size or actual != digest or trailer != digest:
                found = Framed(None, "the bundle on the log does not match its SHA-256")
            else:
                found = complete = Framed(data)
            header = None
    # a complete bundle stands, whatever a later, cut one (a pod printing it again) lacks
    return complete if complete is not None and found.data is None else found
