"""Whether the kernel refuses io_uring: asked by what needs it (PostgreSQL's io_method,
the emulated disks' FUSE over io_uring)."""

from __future__ import annotations

from pathlib import Path

IO_URING_DISABLED = Path("/proc/sys/kernel/io_uring_disabled")


def io_uring_refused(path: Path = IO_URING_DISABLED) -> str | None:
    """Why the kernel refuses io_uring to every process (None: it does not, or does not
    say): kernel.io_uring_disabled = 2."""
    try:
        if path.read_text().strip() == "2":
            return "the kernel disables io_uring (kernel.io_uring_disabled = 2)"
    except OSError:
        pass
    return None
