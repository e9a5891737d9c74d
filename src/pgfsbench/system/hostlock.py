"""One campaign per host: a flock on a file under /run held for the whole campaign.

Two campaigns on one host would interleave sysctls (each undo restoring the other's
value) and share the zfs-fuse daemon; the second is refused at once, with the holder's
pid, work directory and start time. The lock dies with its process (even after SIGKILL),
so a stale file never blocks anyone.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from pgfsbench.system.errors import HostBusy, UsageError


def lock_path() -> Path:
    """/run/pgfsbench.lock as root; a per-user file otherwise (no host settings changed)."""
    override = os.environ.get("PGFSBENCH_HOST_LOCK")
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/run/pgfsbench.lock")
    runtime = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return Path(runtime) / f"pgfsbench-{os.geteuid()}.lock"


def holder_of(path: Path) -> dict[str, object] | None:
    """Who holds the lock now (None if nobody does)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, object]:
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text() or "{}")
        if isinstance(data, dict):
            return data
    return {}


def describe(holder: dict[str, object]) -> str:
    started = holder.get("started")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(str(started)))) if started else "?"
    )
    return (
        f"pid {holder.get('pid', '?')}, {holder.get('what', 'a campaign')}, workdir "
        f"{holder.get('workdir', '?')}, started {when}"
    )


@contextlib.contextmanager
def host_lock(what: str, workdir: Path, path: Path | None = None) -> Iterator[None]:
    """Hold the host lock for the block; refuse at once if someone else holds it."""
    path = path or lock_path()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot open the host lock {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise HostBusy(
                f"another pgfsbench holds this host ({describe(_read(path))}); "
                "one campaign per host: wait for it to end"
            ) from None
        os.ftruncate(fd, 0)
        os.write(
            fd,
            json.dumps(
                {"pid": os.getpid(), "what": what, "workdir": str(workdir), "started": time.time()}
            ).encode(),
        )
        os.fsync(fd)
        yield
    finally:
        os.close(fd)  # closing releases the flock
