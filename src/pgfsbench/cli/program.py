"""How to type pgfsbench here, for the commands it prints: every command it suggests runs
as printed (a newcomer copies them; `pgfsbench` alone is "command not found" when the
program is `.venv/bin/pgfsbench` and not on PATH)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def program(argv0: str | None = None, cwd: Path | None = None) -> str:
    """``pgfsbench`` when that name on PATH is this very program; otherwise the path it
    was started by (relative to the current directory when beneath it), or ``python -m
    pgfsbench`` with this interpreter."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    here = Path.cwd() if cwd is None else cwd
    started = Path(argv0)
    if started.name == "__main__.py" or argv0 in ("-m", "-c", ""):
        return f"{_relative(Path(sys.executable), here)} -m pgfsbench"
    on_path = shutil.which("pgfsbench")
    try:
        if on_path and Path(on_path).resolve() == (here / started).resolve():
            return "pgfsbench"
    except OSError:
        pass
    if os.sep not in argv0:  # found on PATH by the shell: typed as it is
        return "pgfsbench" if on_path else shlex.quote(argv0)
    return _relative(here / started, here)


def _relative(path: Path, here: Path) -> str:
    absolute = Path(os.path.normpath(path))
    try:
        rel = absolute.relative_to(here)
        shown = str(rel) if str(rel).startswith(".") else f"./{rel}"
    except ValueError:
        shown = str(absolute)
    return shlex.quote(shown)
