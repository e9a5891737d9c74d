"""Where pgfsbench works when not told: one definition, light to import (the CLI's options
need it before any engine module is loaded)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_WORKDIR = Path("/var/tmp/pgfsbench")


def nearest_existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (where a directory to be made lives)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe
