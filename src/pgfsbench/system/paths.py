"""Where pgfsbench works when not told: one definition, light to import (the CLI's options
need it before any engine module is loaded)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_WORKDIR = Path("/var/tmp/pgfsbench")
