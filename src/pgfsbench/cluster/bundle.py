"""The way back from a pod: its results store and artifacts as one checked bundle.

The pod packs its results file and its runs' artifacts into a tar.gz, writes it on its
data claim (which outlives the pod until the controller deletes it) and prints it on its
log as framed lines: a header with the bundle's size, line count and SHA-256, numbered
base64 lines of 8 KiB (containerd splits log lines over 16 KiB), and a trailer. The
controller reads the log; if a line is missing (the log rotated, the pod was evicted while
printing) or the digest differs, the bundle is read again from the claim by a second pod,
and only if that fails too is the run failed, saying which. Nothing is taken half.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

HEADER = "PGFSBENCH-BUNDLE-BEGIN"
LINE = "PGFSBENCH-BUNDLE"
TRAILER = "PGFSBENCH-BUNDLE-END"
CHUNK = 8192  # bytes of base64 a line, well under containerd's 16 KiB
# where the pod leaves the bundle on its data claim
BUNDLE_NAME = ".pgfsbench-bundle.tar.gz"
# the result store's name inside a bundle
RESULTS_NAME = "results.db"
ARTIFACTS_DIR = "artifacts"


@dataclass(frozen=True)
class Framed:
    """A bundle read back from framed lines, or why it could not be."""

    data: bytes | None
    problem: str = ""


def pack(results: Path, artifacts: Path | None) -> bytes:
    """The results file and the artifacts directory as a tar.gz (paths relative)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        tar.add(results, arcname=RESULTS_NAME, recursive=False)
        if artifacts is not None and artifacts.is_dir():
            for path in sorted(artifacts.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    tar.add(path, arcname=f"{ARTIFACTS_DIR}/{path.relative_to(artifacts)}")
    return buf.getvalue()


def unpack(data: bytes, into: Path) -> Path:
    """Extract a bundle into ``into`` (made here); regular files and directories only, no
    path leaving it. Returns the results file's path."""
    into.mkdir(mode=0o700, parents=True, exist_ok=False)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = []
        for m in tar.getmembers():
            if not (m.isfile() or m.isdir()):
                raise ValueError(f"bundle member {m.name!r} is neither a file nor a directory")
            target = (into / m.name).resolve()
            if not target.is_relative_to(into.resolve()) or m.name.startswith("/"):
                raise ValueError(f"bundle member {m.name!r} leaves its directory")
            members.append(m)
        tar.extractall(into, members=members, filter="data")
    results = into / RESULTS_NAME
    if not results.is_file():
        raise ValueError(f"the bundle has no {RESULTS_NAME}")
    return results


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
    """The last complete bundle on a log; otherwise what is wrong with what is there."""
    header: tuple[int, int, str] | None = None
    parts: dict[int, str] = {}
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
            found = Framed(None, "the bundle's trailer is missing (the log was cut)")
        elif line.startswith(LINE + " ") and header is not None:
            _, index, *chunk = line.split(" ", 2)
            if index.isdigit():
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
                found = Framed(data)
            header = None
    return found
