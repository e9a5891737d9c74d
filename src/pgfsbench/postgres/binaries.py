"""Finding the PostgreSQL binaries and their version."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.system.errors import InstanceError

DEBIAN_GLOB = "/usr/lib/postgresql/*/bin"


@dataclass(frozen=True)
class Binaries:
    bindir: Path
    version: str  # e.g. "15.18"
    version_line: str  # e.g. "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"

    def tool(self, name: str) -> str:
        return str(self.bindir / name)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


def parse_version(line: str) -> str:
    m = re.search(r"\(PostgreSQL\)\s+(\d+(?:\.\d+)?)", line)
    if not m:
        raise InstanceError(f"cannot read a PostgreSQL version from {line!r}")
    return m.group(1)


def _version_of(bindir: Path) -> Binaries:
    out = subprocess.run([str(bindir / "postgres"), "--version"], capture_output=True, text=True,
                         timeout=30, check=False).stdout.strip()
    return Binaries(bindir, parse_version(out), out)


def _usable(bindir: Path) -> bool:
    return all((bindir / t).is_file() for t in ("postgres", "initdb", "pg_ctl", "pgbench"))


def find_binaries(configured: str | None = None) -> Binaries:
    """The configured bindir, else pg_config's, else the newest Debian /usr/lib/postgresql/N."""
    if configured:
        bindir = Path(configured)
        if not _usable(bindir):
            raise InstanceError(f"{bindir}: no postgres, initdb, pg_ctl and pgbench there")
        return _version_of(bindir)
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30,
                             check=False).stdout.strip()
        if out:
            candidates.append(Path(out))
    debian = sorted(Path("/").glob(DEBIAN_GLOB.lstrip("/")),
                    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                    reverse=True)
    candidates.extend(debian)
    for bindir in candidates:
        if _usable(bindir):
            return _version_of(bindir)
    raise InstanceError("no PostgreSQL binaries found (tried pg_config and "
                        f"{DEBIAN_GLOB}); set defaults.pg_bindir in the spec")
