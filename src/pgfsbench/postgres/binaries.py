"""Finding the PostgreSQL binaries and their version."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.system.errors import InstanceError
from pgfsbench.system.io_uring import IO_URING_DISABLED, io_uring_refused
from pgfsbench.system.runner import query

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
    done = query([str(bindir / "postgres"), "--version"], timeout=30)
    out = done.stdout.strip() if done else ""
    return Binaries(bindir, parse_version(out), out)


def _usable(bindir: Path) -> bool:
    return all((bindir / t).is_file() for t in ("postgres", "initdb", "pg_ctl", "pgbench"))


# Where the packagers users run put PostgreSQL N: PGDG's Debian and Ubuntu packages (and
# Debian's own), PGDG's RPMs, Homebrew on both architectures. A spec written on one of them
# runs on the others: a configured bindir that is not there is looked for there, by major.
INSTALLED_AT = (
    "/usr/lib/postgresql/{major}/bin",
    "/usr/pgsql-{major}/bin",
    "/opt/homebrew/opt/postgresql@{major}/bin",
    "/usr/local/opt/postgresql@{major}/bin",
)
# more places to look, ':'-separated (a build of one's own, a test copy)
BINDIRS_ENV = "PGFSBENCH_PG_BINDIRS"
_MAJOR_IN_PATH = re.compile(r"(?:postgresql[-/@]?|pgsql-)(\d{2,})(?:\.\d+)*(?:/|$)")


def major_in_path(path: str) -> int | None:
    """The major version a bindir's path names (/usr/lib/postgresql/18/bin, /usr/pgsql-18/bin,
    postgresql@18, postgresql-18.6.0), or None."""
    found = _MAJOR_IN_PATH.search(path)
    return int(found.group(1)) if found else None


def installed(major: int) -> list[Path]:
    """The usable bindirs of PostgreSQL ``major`` on this machine, in the order looked at."""
    extra = [p for p in os.environ.get(BINDIRS_ENV, "").split(":") if p]
    places = [Path(p) for p in extra] + [Path(t.format(major=major)) for t in INSTALLED_AT]
    out = []
    for bindir in dict.fromkeys(places):
        if _usable(bindir):
            with contextlib.suppress(InstanceError):
                if _version_of(bindir).major == major:
                    out.append(bindir)
    return out


def find_binaries(configured: str | None = None) -> Binaries:
    """The configured bindir (or, when it is not there, the same major where packagers put
    it), else pg_config's, else the newest Debian /usr/lib/postgresql/N."""
    if configured:
        bindir = Path(configured)
        if _usable(bindir):
            return _version_of(bindir)
        major = major_in_path(configured)
        if major is None:
            raise InstanceError(f"{bindir}: no postgres, initdb, pg_ctl and pgbench there")
        found = installed(major)
        if found:
            return _version_of(found[0])
        raise InstanceError(
            f"PostgreSQL {major} is not installed here: not in {bindir}, nor where its "
            "packages put it ("
            + ", ".join(t.format(major=major) for t in INSTALLED_AT[:2])
            + f"). Install it (PGDG: postgresql-{major}), list its bindir in {BINDIRS_ENV}, or "
            "give it in the spec (bindir, or --set postgres.NAME.bindir=DIR)"
        )
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        done = query([pg_config, "--bindir"], timeout=30)
        out = done.stdout.strip() if done else ""
        if out:
            candidates.append(Path(out))
    debian = sorted(
        Path("/").glob(DEBIAN_GLOB.lstrip("/")),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates.extend(debian)
    for bindir in candidates:
        if _usable(bindir):
            return _version_of(bindir)
    raise InstanceError(
        "no PostgreSQL binaries found (tried pg_config and "
        f"{DEBIAN_GLOB}); set defaults.pg_bindir in the spec"
    )


@dataclass(frozen=True)
class SettingSpec:
    """What `postgres --describe-config` says of a setting: its type and, for numbers,
    the smallest and largest values in its base unit."""

    type: str  # BOOLEAN, INTEGER, REAL, STRING, ENUM
    min: float | None = None
    max: float | None = None


def parse_describe_config(text: str) -> dict[str, SettingSpec]:
    """`postgres --describe-config`: name, context, group, type, reset value, min, max..."""
    out: dict[str, SettingSpec] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 4 and parts[0]:
            lo = _number(parts[5]) if len(parts) > 5 else None
            hi = _number(parts[6]) if len(parts) > 6 else None
            out[parts[0].lower()] = SettingSpec(parts[3], lo, hi)
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


_DESCRIBED: dict[Path, dict[str, SettingSpec]] = {}


def known_settings(binaries: Binaries) -> dict[str, SettingSpec]:
    """The settings this server knows (``postgres --describe-config``, which reads nothing
    and may run as root); cached per bindir."""
    if binaries.bindir not in _DESCRIBED:
        done = query([binaries.tool("postgres"), "--describe-config"], timeout=60)
        if done is None or done.returncode != 0:
            raise InstanceError(
                f"{binaries.tool('postgres')} --describe-config failed: "
                f"{done.stderr.strip()[:200] if done else 'no answer'}"
            )
        _DESCRIBED[binaries.bindir] = parse_describe_config(done.stdout)
    return _DESCRIBED[binaries.bindir]


# PostgreSQL's own spellings (guc.c): booleans, and the units an integer or real may carry
_BOOLEANS = {"on", "off", "true", "false", "yes", "no", "1", "0", "t", "f", "y", "n"}
_UNITS = {"b", "kb", "mb", "gb", "tb", "us", "ms", "s", "min", "h", "d"}
_NUMBER_WITH_UNIT = re.compile(r"^\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*$")


def value_problem(name: str, value: object, spec: SettingSpec) -> str | None:
    """Why ``value`` cannot be a value of the setting (None: it can), as far as
    `--describe-config` tells: its type, and its range when given in the base unit."""
    kind = spec.type.upper()
    if kind == "BOOLEAN":
        if isinstance(value, bool) or str(value).strip().lower() in _BOOLEANS:
            return None
        return f"{name} = {value!r}: a boolean (on/off, true/false)"
    if kind in ("INTEGER", "REAL"):
        if isinstance(value, bool):
            return f"{name} = {value!r}: a number, not a boolean"
        m = _NUMBER_WITH_UNIT.match(str(value))
        if not m or (m.group(2) and m.group(2).lower() not in _UNITS):
            return f"{name} = {value!r}: a number" + (
                ", with a unit (kB, MB, GB, ms, s, min...)" if kind == "INTEGER" else ""
            )
        number = float(m.group(1))
        if kind == "INTEGER" and not m.group(2) and number != int(number):
            return f"{name} = {value!r}: a whole number"
        if not m.group(2):  # in the base unit: the range applies as it is
            if (spec.min is not None and number < spec.min) or (
                spec.max is not None and number > spec.max
            ):
                return (
                    f"{name} = {value!r}: outside {spec.min:g} to {spec.max:g}"
                    if spec.min is not None and spec.max is not None
                    else f"{name} = {value!r}: out of range"
                )
        elif number < 0 and spec.min is not None and spec.min >= 0:
            return f"{name} = {value!r}: not negative"
        return None
    if kind == "ENUM" and (not str(value).strip() or any(c.isspace() for c in str(value).strip())):
        return f"{name} = {value!r}: one word (one of the setting's choices)"
    return None


def setting_problems(binaries: Binaries, settings: dict[str, object]) -> list[str]:
    """Values this server would refuse at start (names it does not know are said
    separately)."""
    known = known_settings(binaries)
    return [
        p
        for n, v in settings.items()
        if (spec := known.get(n.lower())) is not None
        and (p := value_problem(n, v, spec)) is not None
    ]


def unknown_settings(binaries: Binaries, names: list[str]) -> list[str]:
    """Names this server does not know (custom extension settings, with a dot, pass)."""
    known = known_settings(binaries)
    return [n for n in names if "." not in n and n.lower() not in known]


def configure_flags(binaries: Binaries) -> str:
    """How the server was built (`pg_config --configure`), "" when pg_config is absent."""
    pg_config = binaries.bindir / "pg_config"
    if not pg_config.is_file():
        return ""
    done = query([str(pg_config), "--configure"], timeout=30)
    return done.stdout if done is not None and done.returncode == 0 else ""


def io_uring_unsupported(binaries: Binaries, disabled_path: Path = IO_URING_DISABLED) -> str | None:
    """Why io_method = io_uring cannot work with these binaries on this kernel (None: it
    can): before 18, not built with liburing, or io_uring disabled by the kernel."""
    if binaries.major < 18:
        return f"PostgreSQL {binaries.version} has no io_method (18+)"
    flags = configure_flags(binaries)
    meson_or_unknown = flags.strip() == ""
    if not meson_or_unknown and "--with-liburing" not in flags:
        return f"PostgreSQL {binaries.version} in {binaries.bindir} was built without liburing"
    if meson_or_unknown and not _links_liburing(binaries):
        return f"PostgreSQL {binaries.version} in {binaries.bindir} was built without liburing"
    return io_uring_refused(disabled_path)


def _links_liburing(binaries: Binaries) -> bool:
    try:
        return b"liburing" in Path(binaries.tool("postgres")).read_bytes()
    except OSError:
        return False
