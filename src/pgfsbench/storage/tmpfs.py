"""tmpfs: RAM as the ceiling of what storage can give (the seeds' /tmp baseline)."""

from __future__ import annotations


def mount_options(size_bytes: int, extra: list[str]) -> list[str]:
    opts = [o for o in extra if not o.startswith("size=")]
    return [f"size={size_bytes}", "mode=0755", *opts]
