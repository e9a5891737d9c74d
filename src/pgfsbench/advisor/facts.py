"""What the doctor looks at, gathered once and only by reading.

Nothing here starts, stops, loads or writes anything: no zfs-fuse daemon is started (ZFS is
asked only when it already answers), no module is loaded, the server is only queried.
Whatever cannot be read (not root, server down, no ZFS tools) is listed in
``Facts.unread`` with the reason, and the rules that need it say "not checked".
The host, memory, vm.* and block-device facts come from the same readers that record a
run's environment (collect/host.py, collect/procfs.py, kernel.py).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import resource
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.collect.environment import read_environment
from pgfsbench.collect.host import meminfo
from pgfsbench.collect.procfs import device_facts, underlying_devices
from pgfsbench.kernel import huge_page_facts
from pgfsbench.system.errors import UsageError
from pgfsbench.system.mountinfo import MountInfo, mount_table
from pgfsbench.system.runner import Completed, query
from pgfsbench.units import parse_size

ZFS_MODULE = Path("/sys/module/zfs")
ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")
# settings the rules read, with PostgreSQL's defaults for when only files could be read
PG_DEFAULTS: dict[str, str] = {
    "fsync": "on",
    "full_page_writes": "on",
    "wal_init_zero": "on",
    "wal_recycle": "on",
    "synchronous_commit": "on",
    "data_sync_retry": "off",
    "huge_pages": "try",
    "shared_buffers": "128MB",
    "max_wal_size": "1GB",
    "checkpoint_timeout": "5min",
    "wal_sync_method": "fdatasync",
    "io_method": "worker",
    "wal_segment_size": "16MB",
    "checkpoint_completion_target": "0.9",
}
# the unit of a bare number in postgresql.conf for the size settings the rules read
BARE_UNITS = {"shared_buffers": 8192, "max_wal_size": 1 << 20, "wal_segment_size": 1}
ZFS_PROPERTIES = (
    "recordsize",
    "compression",
    "primarycache",
    "secondarycache",
    "atime",
    "relatime",
    "sync",
    "logbias",
    "redundant_metadata",
    "xattr",
    "checksum",
    "copies",
    "used",
    "available",
)


@dataclass
class PathFacts:
    """A directory PostgreSQL writes to and the storage stack beneath it."""

    role: str  # "data directory", "pg_wal", "tablespace NAME"
    path: str
    mount: MountInfo | None = None
    devices: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> sysfs facts
    zfs_dataset: str | None = None
    zfs: dict[str, str] = field(default_factory=dict)  # dataset properties
    zfs_pool: dict[str, Any] = field(default_factory=dict)  # layout: log/cache/special
    nocow: bool = False  # chattr +C (btrfs)
    free_bytes: int | None = None

    @property
    def fstype(self) -> str:
        """The filesystem as a DBA names it: zfs also for zfs-fuse's "fuse" mounts."""
        if self.mount is None:
            return "unknown"
        if self.zfs_dataset is not None:
            return "zfs"
        return self.mount.fstype

    @property
    def options(self) -> list[str]:
        return self.mount.options.split(",") if self.mount else []

    def option(self, name: str) -> str | None:
        """The value of ``name=value`` (or "" for a bare flag), None when absent."""
        for opt in self.options:
            key, _, value = opt.partition("=")
            if key == name:
                return value
        return None

    @property
    def copy_on_write(self) -> bool:
        if self.fstype == "zfs":
            return True
        return self.fstype == "btrfs" and self.option("nodatacow") is None and not self.nocow

    def describe(self) -> str:
        where = self.mount.target if self.mount else "?"
        src = self.zfs_dataset or (self.mount.source if self.mount else "?")
        return f"{self.role} {self.path} ({self.fstype} {src} on {where})"

    def as_dict(self) -> dict[str, object]:
        return {
            "role": self.role,
            "path": self.path,
            "fstype": self.fstype,
            "mount": None
            if self.mount is None
            else {
                "target": self.mount.target,
                "source": self.mount.source,
                "fstype": self.mount.fstype,
                "options": self.options,
            },
            "devices": self.devices,
            "zfs_dataset": self.zfs_dataset,
            "zfs": self.zfs,
            "zfs_pool": self.zfs_pool,
            "nocow": self.nocow,
            "free_bytes": self.free_bytes,
        }


@dataclass
class PgFacts:
    source: str  # "server" (queried) or "files" (postgresql.conf read, server down)
    version_num: int | None = None  # 150018
    settings: dict[str, str] = field(default_factory=dict)  # name -> value with unit
    evidence: dict[str, Any] = field(default_factory=dict)
    data_directory: str | None = None
    # files: PostgreSQL's defaults stand for what the files do not set, but only when a
    # configuration file was read at all (an unreadable one tells nothing)
    defaults_apply: bool = False
    # the settings not at PostgreSQL's built-in value, as the server says (or as the files
    # set them, server down), and where each was set ("configuration file", "database")
    non_default: dict[str, str] = field(default_factory=dict)
    non_default_source: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        value = self.settings.get(name)
        if value is None and self.source == "files" and self.defaults_apply:
            return PG_DEFAULTS.get(name)
        return value

    def on(self, name: str) -> bool | None:
        value = self.get(name)
        if value is None:
            return None
        return value.strip().strip("'").lower() in ("on", "true", "yes", "1")

    def bytes(self, name: str) -> int | None:
        value = self.get(name)
        if value is None:
            return None
        text = value.strip().strip("'")
        if text.isdigit():  # a bare number is in the setting's own unit
            return int(text) * BARE_UNITS.get(name, 1)
        with contextlib.suppress(ValueError):
            return parse_size(text.replace("kB", "K"))
        return None

    @property
    def major(self) -> int | None:
        return None if self.version_num is None else self.version_num // 10000


@dataclass
class Facts:
    host: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, int] = field(default_factory=dict)  # /proc/meminfo, kB
    vm: dict[str, str] = field(default_factory=dict)  # vm.* and transparent_hugepage.*
    sysctl: dict[str, str] = field(default_factory=dict)  # a few kernel.* ones
    huge_pages: dict[str, int] = field(default_factory=dict)
    paths: list[PathFacts] = field(default_factory=list)
    zfs: dict[str, Any] = field(default_factory=dict)  # implementation, parameters, ARC
    pg: PgFacts | None = None
    unread: list[str] = field(default_factory=list)  # what could not be read, and why
    root: bool = False

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "memory_kb": self.memory,
            "vm": self.vm,
            "sysctl": self.sysctl,
            "huge_pages": self.huge_pages,
            "paths": [p.as_dict() for p in self.paths],
            "zfs": self.zfs,
            "postgresql": None
            if self.pg is None
            else {
                "source": self.pg.source,
                "version_num": self.pg.version_num,
                "settings": self.pg.settings,
                "evidence": self.pg.evidence,
                "data_directory": self.pg.data_directory,
                "non_default": self.pg.non_default,
                "non_default_source": self.pg.non_default_source,
            },
            "unread": self.unread,
            "root": self.root,
        }


# ---------------------------------------------------------------- readers


def _run(argv: list[str], timeout: float = 20.0) -> Completed | None:
    """A read-only query of a tool; None when the tool is absent or does not answer."""
    if shutil.which(argv[0]) is None:
        return None
    return query(argv, timeout=timeout, env={"LC_ALL": "C.UTF-8"})


def mount_of(path: str, table: list[MountInfo]) -> MountInfo | None:
    """The mount holding ``path``: the longest target that is a prefix of it."""
    real = os.path.realpath(path)
    best: MountInfo | None = None
    for m in table:
        prefix = m.target.rstrip("/") + "/"
        if (real == m.target or real.startswith(prefix) or m.target == "/") and (
            best is None or len(m.target) >= len(best.target)
        ):
            best = m
    return best


def block_stack(mount: MountInfo) -> list[str]:
    """The block devices beneath a mount: partition, loop, dm/md, down to the disks."""
    names: list[str] = []
    if mount.source.startswith("/dev/"):
        names = underlying_devices(mount.source)
    elif mount.dev and not mount.dev.startswith("0:"):
        with contextlib.suppress(OSError):
            name = Path(f"/sys/dev/block/{mount.dev}").resolve().name
            names = underlying_devices(f"/dev/{name}")
    full: list[str] = []
    for name in names:
        full.append(name)
        sys_dir = Path("/sys/class/block") / name
        if (sys_dir / "partition").exists():  # its disk carries the queue and the cache
            full.append(sys_dir.resolve().parent.name)
    return list(dict.fromkeys(full))


def zfs_pool_layout(pool: str) -> dict[str, object]:
    """Vdev classes of a pool from `zpool status`: data members, log, cache, special."""
    done = _run(["zpool", "status", "-P", pool])
    if done is None or done.returncode != 0:
        return {}
    layout: dict[str, list[str]] = {"data": [], "log": [], "cache": [], "special": []}
    section = "data"
    in_config = False
    for line in done.stdout.splitlines():
        if line.strip().startswith("NAME") and "STATE" in line:
            in_config = True
            continue
        if not in_config or not line.strip():
            if in_config and not line.strip():
                in_config = False
            continue
        word = line.split()[0]
        if word in ("logs", "cache", "special", "spares"):
            section = {"logs": "log", "spares": "data"}.get(word, word)
            continue
        if word == pool or re.match(r"(mirror|raidz\d?|draid)", word):
            continue
        layout.setdefault(section, []).append(word)
    return {k: v for k, v in layout.items() if v}


def read_zfs_dataset(path: PathFacts, facts: Facts) -> None:
    assert path.zfs_dataset is not None
    # "all", then kept: an older ZFS (zfs-fuse) refuses a list naming what it lacks
    done = _run(["zfs", "get", "-Hp", "-o", "property,value", "all", path.zfs_dataset])
    if done is None or done.returncode != 0:
        why = "no zfs command" if done is None else (done.stderr.strip() or "it failed")
        facts.unread.append(f"ZFS properties of {path.zfs_dataset}: {why}")
        return
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1] != "-" and parts[0] in ZFS_PROPERTIES:
            path.zfs[parts[0]] = parts[1]
    if path.option("nodatacow") is None:
        path.zfs_pool = zfs_pool_layout(path.zfs_dataset.split("/")[0])
    avail = path.zfs.get("available")
    if avail and avail.isdigit():
        path.free_bytes = int(avail)


def _is_zfs(mount: MountInfo) -> bool:
    """OpenZFS mounts say "zfs"; zfs-fuse's say "fuse" with the dataset as their source."""
    if mount.fstype == "zfs":
        return True
    return (
        mount.fstype in ("fuse", "fuse.zfs-fuse", "fuse.zfs")
        and not mount.source.startswith("/")
        and ":" not in mount.source
        and mount.source not in ("fuse", "gvfsd-fuse", "portal", "sshfs", "lxcfs")
    )


def describe_path(role: str, path: str, table: list[MountInfo], facts: Facts) -> PathFacts:
    pf = PathFacts(role, path, mount_of(path, table))
    if pf.mount is None:
        facts.unread.append(f"{role} {path}: no mount holds it")
        return pf
    if _is_zfs(pf.mount):
        pf.zfs_dataset = pf.mount.source
        read_zfs_dataset(pf, facts)
    else:
        for name in block_stack(pf.mount):
            pf.devices[name] = device_facts(name)
        with contextlib.suppress(OSError):
            st = os.statvfs(path)
            pf.free_bytes = st.f_bavail * st.f_frsize
    if pf.fstype == "btrfs":
        done = _run(["lsattr", "-d", path])
        if done is not None and done.returncode == 0 and done.stdout:
            pf.nocow = "C" in done.stdout.split()[0]
    return pf


def read_zfs_host(facts: Facts) -> None:
    """Which ZFS answers here, its module parameters and ARC size (kernel module only)."""
    if (ZFS_MODULE / "parameters").is_dir():
        version = build = ""
        with contextlib.suppress(OSError):
            # "2.1.11-1+deb12u1": the upstream release, then the distribution's revision
            build = (ZFS_MODULE / "version").read_text().strip()
            version = build.split("-")[0]
        params: dict[str, str] = {}
        for p in sorted((ZFS_MODULE / "parameters").iterdir()):
            with contextlib.suppress(OSError):
                params[p.name] = p.read_text().strip()
        arc: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in ARCSTATS.read_text().splitlines()[2:]:
                parts = line.split()
                if len(parts) == 3 and parts[0] in ("size", "c_max", "c_min", "c"):
                    arc[parts[0]] = int(parts[2])
        facts.zfs = {
            "kind": "kernel",
            "version": version,
            "build": build,
            "parameters": params,
            "arc": arc,
        }
    elif any(p.fstype == "zfs" for p in facts.paths):
        facts.zfs = {"kind": "fuse", "version": "", "parameters": {}, "arc": {}}


# ---------------------------------------------------------------- PostgreSQL

_SETTINGS_SQL = """
SELECT name, CASE WHEN unit IS NULL THEN setting
                  WHEN unit = '8kB' THEN (setting::bigint * 8)::text || 'kB'
                  WHEN unit IN ('kB', 'MB', 'B') THEN setting || unit
                  WHEN unit = 's' THEN setting || 's'
                  WHEN unit = 'ms' THEN setting || 'ms'
                  WHEN unit = 'min' THEN setting || 'min'
                  ELSE setting END
FROM pg_settings
"""
# settings the server was told (its files, its command line, ALTER DATABASE/ROLE) whose
# value is not the built-in one (a session's own, client and session, are this
# connection's), valued as _SETTINGS_SQL values them
_NON_DEFAULT_SQL = """
SELECT name, CASE WHEN unit IS NULL THEN setting
                  WHEN unit = '8kB' THEN (setting::bigint * 8)::text || 'kB'
                  WHEN unit IN ('kB', 'MB', 'B') THEN setting || unit
                  WHEN unit = 's' THEN setting || 's'
                  WHEN unit = 'ms' THEN setting || 'ms'
                  WHEN unit = 'min' THEN setting || 'min'
                  ELSE setting END,
       source
FROM pg_settings
WHERE source NOT IN ('default', 'override', 'client', 'session')
  AND setting IS DISTINCT FROM boot_val
"""
# each database's size where this role may connect (pg_database_size needs CONNECT)
_DATABASES_SQL = """
SELECT datname, pg_database_size(oid) FROM pg_database
WHERE datallowconn AND NOT datistemplate AND has_database_privilege(oid, 'CONNECT')
ORDER BY 2 DESC
"""


def query_server(dsn: str) -> PgFacts:
    """Settings and the evidence views of a live server (read-only queries)."""
    import psycopg

    from pgfsbench.postgres.conninfo import peer_aware

    opened, as_user = peer_aware(
        lambda: psycopg.connect(dsn, connect_timeout=10, autocommit=True), dsn
    )
    with opened as conn:
        conn.execute("SET statement_timeout = '10s'")
        conn.execute("SET default_transaction_read_only = on")
        pg = PgFacts("server")
        if as_user is not None:
            pg.evidence["connected_as"] = as_user.name
        pg.settings = {str(n): str(v) for n, v in conn.execute(_SETTINGS_SQL).fetchall()}
        pg.version_num = int(pg.settings.get("server_version_num", "0")) or None
        pg.data_directory = pg.settings.get("data_directory")
        for n, v, src in conn.execute(_NON_DEFAULT_SQL).fetchall():
            pg.non_default[str(n)] = str(v)
            pg.non_default_source[str(n)] = str(src)
        with contextlib.suppress(psycopg.Error):
            pg.evidence["databases"] = [
                (str(n), int(b)) for n, b in conn.execute(_DATABASES_SQL).fetchall()
            ]
        pg.evidence["tablespaces"] = [
            (str(n), str(loc))
            for n, loc in conn.execute(
                "SELECT spcname, pg_tablespace_location(oid) FROM pg_tablespace "
                "WHERE pg_tablespace_location(oid) <> ''"
            ).fetchall()
        ]
        major = (pg.version_num or 0) // 10000
        if major >= 17:
            row = conn.execute(
                "SELECT num_timed, num_requested FROM pg_stat_checkpointer"
            ).fetchone()
        else:
            row = conn.execute(
                "SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter"
            ).fetchone()
        if row is not None:
            pg.evidence["checkpoints_timed"], pg.evidence["checkpoints_requested"] = (
                int(row[0]),
                int(row[1]),
            )
        if major >= 16:
            row = conn.execute(
                "SELECT coalesce(sum(fsyncs), 0), coalesce(sum(writebacks), 0) FROM pg_stat_io "
                "WHERE backend_type = 'client backend'"
            ).fetchone()
            if row is not None:
                pg.evidence["backend_fsyncs"], pg.evidence["backend_writebacks"] = (
                    int(row[0]),
                    int(row[1]),
                )
        if major >= 14:
            row = conn.execute("SELECT wal_buffers_full, wal_bytes FROM pg_stat_wal").fetchone()
            if row is not None:
                pg.evidence["wal_buffers_full"] = int(row[0])
                pg.evidence["wal_bytes"] = int(row[1])
        return pg


_CONF_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*('(?:[^']|'')*'|[^#\s]+)")


def parse_conf(text: str) -> dict[str, str]:
    """name = value lines of a postgresql.conf (later lines win; comments dropped)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = _CONF_LINE.match(line)
        if m and m.group(1).lower() not in ("include", "include_if_exists", "include_dir"):
            value = m.group(2)
            if value.startswith("'"):
                value = value[1:-1].replace("''", "'")
            out[m.group(1).lower()] = value
    return out


def read_data_directory(pgdata: Path, config: Path | None, facts: Facts) -> PgFacts:
    """A server that is down: PG_VERSION and the configuration files, defaults for the rest."""
    pg = PgFacts("files", data_directory=str(pgdata))
    try:
        major = int((pgdata / "PG_VERSION").read_text().strip().split(".")[0])
        pg.version_num = major * 10000 if major >= 10 else None
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        facts.unread.append(f"{pgdata}/PG_VERSION: {why}")
    files = [config] if config else []
    files += [pgdata / "postgresql.conf", pgdata / "postgresql.auto.conf"]
    read = 0
    for f in files:
        if f is None:
            continue
        try:
            found = parse_conf(f.read_text())
            pg.settings.update(found)
            pg.non_default.update(found)
            pg.non_default_source.update(dict.fromkeys(found, "configuration file"))
            read += 1
        except FileNotFoundError:
            continue
        except OSError as exc:
            facts.unread.append(f"{f}: {exc.strerror}")
    pg.defaults_apply = read > 0
    if read == 0:
        facts.unread.append(
            f"no postgresql.conf could be read for {pgdata} (give --config); "
            "its settings were not checked"
        )
    return pg


def postmaster_socket(pgdata: Path) -> tuple[str, str] | None:
    """(socket directory, port) of a server running on ``pgdata``, from postmaster.pid."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    if len(lines) < 5:
        return None
    sockdir = lines[4].strip() or "/tmp"
    return sockdir, lines[3].strip()


def _owner(path: Path) -> str | None:
    try:
        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (OSError, KeyError):
        return None


def gather(
    pgdata: Path | None = None,
    dsn: str | None = None,
    config: Path | None = None,
    extra_paths: list[str] | None = None,
) -> Facts:
    """Everything the rules read: the host, then PostgreSQL (server or files), then the
    storage under each of its directories."""
    facts = Facts(root=os.geteuid() == 0)
    facts.host = read_environment()
    vm = facts.host.pop("vm")
    facts.vm = {str(k): str(v) for k, v in vm.items()} if isinstance(vm, dict) else {}
    facts.memory = meminfo()
    facts.huge_pages = huge_page_facts()
    for name in ("kernel.io_uring_disabled", "kernel.numa_balancing"):
        with contextlib.suppress(OSError):
            facts.sysctl[name] = Path("/proc/sys", *name.split(".")).read_text().strip()
    with contextlib.suppress(OSError, ValueError):
        soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        facts.sysctl["memlock_limit"] = str(soft)

    readable = pgdata is not None and os.access(pgdata, os.R_OK | os.X_OK)
    if pgdata is not None and not readable:
        facts.unread.append(
            f"{pgdata}: permission denied (a data directory is readable by "
            "its owner only; run as that user or root)"
        )
    if dsn is None and pgdata is not None and readable:
        found = postmaster_socket(pgdata)
        if found is not None:
            user = _owner(pgdata) or "postgres"
            dsn = f"host={found[0]} port={found[1]} dbname=postgres user={user}"
    if dsn is not None:
        try:
            facts.pg = query_server(dsn)
        except UsageError as exc:  # libpq's reason, as peer_aware said it
            facts.unread.append(f"the server: {exc}")
        except Exception as exc:  # psycopg's errors: the server is asked, not trusted
            from pgfsbench.postgres.conninfo import failure_reason, shown_dsn

            facts.unread.append(
                f"the server ({shown_dsn(dsn)}): cannot connect: {failure_reason(exc, dsn)}"
            )
    if facts.pg is None and pgdata is not None:
        facts.pg = read_data_directory(pgdata, config, facts)

    table = mount_table()
    dirs: list[tuple[str, str]] = []
    data_dir = (
        facts.pg.data_directory
        if facts.pg and facts.pg.data_directory
        else (str(pgdata) if pgdata else None)
    )
    if data_dir:
        dirs.append(("data directory", data_dir))
        wal = Path(data_dir) / "pg_wal"
        try:
            wal_real = os.path.realpath(wal)
            if wal.is_symlink() or mount_of(wal_real, table) != mount_of(data_dir, table):
                dirs.append(("pg_wal", wal_real))
        except OSError as exc:
            facts.unread.append(f"{wal}: {exc.strerror}")
        for name, loc in facts.pg.evidence.get("tablespaces", []) if facts.pg else []:
            dirs.append((f"tablespace {name}", loc))
        if facts.pg and facts.pg.source == "files":
            with contextlib.suppress(OSError):
                for link in sorted((Path(data_dir) / "pg_tblspc").iterdir()):
                    dirs.append((f"tablespace {link.name}", os.path.realpath(link)))
    for p in extra_paths or []:
        dirs.append(("path", p))
    for role, path in dirs:
        facts.paths.append(describe_path(role, path, table, facts))
    read_zfs_host(facts)
    if not facts.root:
        facts.unread.append("not root: device write caches and ZFS pool details may be incomplete")
    return facts
