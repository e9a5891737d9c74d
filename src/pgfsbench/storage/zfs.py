"""ZFS: pools, datasets, properties and module parameters, on OpenZFS or zfs-fuse.

Which ZFS is present is detected (kernel module and its version, or the zfs-fuse daemon
and its pool version), and so are the properties and values it accepts, from `zfs get`'s
own property table. A spec asking for something the installed ZFS cannot do is refused
before anything is created. Results from a FUSE pool are marked as such everywhere.

pgfsbench only ever destroys pools it created: names are unique (`pgfsb_...`), the
destroy is journaled, and an existing pool with the same name is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.spec import ZfsDataset, ZfsStorage, ZfsValue
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    Volume,
    prepare_dir,
    space_figures,
)
from pgfsbench.storage.mounts import mount_at
from pgfsbench.system.actions import write_value
from pgfsbench.system.errors import CapabilityError, CommandError, ProvisionError
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.runner import Runner, process_alive, process_start_time
from pgfsbench.system.wait import wait_until
from pgfsbench.units import parse_size

MODULE_DIR = Path("/sys/module/zfs")
FUSE_SOCKET = Path("/var/run/zfs/zfs_socket")
POOL_PREFIX = "pgfsb_"
SPACE_PROPS = ("used", "logicalused", "referenced", "logicalreferenced", "compressratio",
               "recordsize", "compression")

# zfs-fuse has no /sys/module/zfs/parameters: the tunables it has are daemon options.
FUSE_PARAMETERS = {
    "zfs_arc_max": "--max-arc-size",  # MB
    "zfs_prefetch_disable": "--zfs-prefetch-disable",  # flag
    "zfs_vdev_cache_size": "--vdev-cache-size",  # MB
}


@dataclass(frozen=True)
class PropertySupport:
    """One row of `zfs get`'s property table: is it editable, which values it takes."""

    name: str
    editable: bool
    values: str  # e.g. "on | off | lzjb | gzip | gzip-[1-9] | zle"

    def accepts(self, value: str) -> bool:
        choices = [c.strip() for c in self.values.split("|")]
        for choice in choices:
            if choice.startswith("<") and choice.endswith(">"):
                kind = choice[1:-1]
                if kind == "size":
                    return _is_size(value) or value == "none"
                return True  # <path>, <date>, <count>...: free-form
            if " to " in choice:  # "512 to 128k, power of 2" / "512 to 1M, power of 2"
                return _in_size_range(value, choice)
            if _token_matches(choice, value):
                return True
        return False


def _token_matches(choice: str, value: str) -> bool:
    """'gzip-[1-9]', 'zstd-fast-[20-100,by 10]' style tokens, or a literal value."""
    m = re.fullmatch(r"(.*?)\[(\d+)-(\d+)(?:,\s*by (\d+))?\](.*)", choice)
    if not m:
        return choice == value
    prefix, low, high, step, suffix = m.groups()
    n = re.fullmatch(re.escape(prefix) + r"(\d+)" + re.escape(suffix), value)
    if not n:
        return False
    k = int(n.group(1))
    return int(low) <= k <= int(high) and (not step or (k - int(low)) % int(step) == 0)


def _is_size(value: str) -> bool:
    try:
        parse_size(value)
    except ValueError:
        return False
    return True


def _in_size_range(value: str, choice: str) -> bool:
    m = re.match(r"(\S+) to (\S+?),?\s*(power of 2)?$", choice.strip())
    if not m or not _is_size(value):
        return False
    n = parse_size(value)
    low, high = parse_size(m.group(1)), parse_size(m.group(2))
    return low <= n <= high and (not m.group(3) or n & (n - 1) == 0)


def parse_property_table(usage: str) -> dict[str, PropertySupport]:
    """Rows of 'PROPERTY EDIT INHERIT VALUES' from `zfs get` with no arguments."""
    table: dict[str, PropertySupport] = {}
    started = False
    for line in usage.splitlines():
        if re.match(r"^\s*PROPERTY\s+EDIT\s+INHERIT\s+VALUES", line):
            started = True
            continue
        if not started:
            continue
        m = re.match(r"^\s+(\S+)\s+(YES|NO)\s+(YES|NO)\s+(.*)$", line)
        if m:
            table[m.group(1)] = PropertySupport(m.group(1), m.group(2) == "YES",
                                                m.group(4).strip())
        elif table and not line.strip():
            break
    return table


@dataclass(frozen=True)
class ZfsImplementation:
    kind: str  # "kernel" or "fuse"
    version: str  # OpenZFS module version, or zfs-fuse's package version
    pool_version: str | None  # zfs-fuse: 23; OpenZFS: feature flags (None)
    properties: dict[str, PropertySupport] = field(default_factory=dict)
    module_parameters: tuple[str, ...] = ()

    @property
    def fuse(self) -> bool:
        return self.kind == "fuse"

    def label(self) -> str:
        if self.fuse:
            return f"zfs-fuse {self.version} (FUSE, pool version {self.pool_version})"
        return f"OpenZFS {self.version} (kernel module)"

    def supported_values(self, prop: str) -> str:
        support = self.properties.get(prop)
        return support.values if support else "(not supported)"


def kernel_zfs_present() -> bool:
    return (MODULE_DIR / "parameters").is_dir()


def fuse_daemon_running() -> bool:
    return FUSE_SOCKET.exists() and any(_fuse_pids())


def _fuse_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "exe")).name == "zfs-fuse":
                    pids.append(int(entry.name))
    return pids


_STARTED_PIDFILES: set[Path] = set()  # zfs-fuse daemons this process started


def _started_by_us() -> bool:
    for pidfile in _STARTED_PIDFILES:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pidfile.read_text().split()[0])
            if pid in _fuse_pids():
                return True
    return False


def _fuse_package_version(runner: Runner) -> str:
    with contextlib.suppress(CommandError):
        done = runner.run(["dpkg-query", "-W", "-f", "${Version}", "zfs-fuse"], timeout=30,
                          check=False)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return "unknown"


def detect(runner: Runner) -> ZfsImplementation | None:
    """What ZFS this machine has: the kernel module first, else zfs-fuse; None if neither.

    For zfs-fuse the daemon must be running (see FuseDaemon) to ask it anything."""
    if kernel_zfs_present():
        version = (MODULE_DIR / "version").read_text().strip() if (
            MODULE_DIR / "version").exists() else "unknown"
        params = tuple(sorted(p.name for p in (MODULE_DIR / "parameters").iterdir()))
        usage = runner.run(["zfs", "get"], timeout=30, check=False)
        return ZfsImplementation("kernel", version.split("-")[0], None,
                                 parse_property_table(usage.stdout + usage.stderr), params)
    if shutil.which("zfs-fuse") is None:
        return None
    if not fuse_daemon_running():
        return ZfsImplementation("fuse", _fuse_package_version(runner), None)
    upgrade = runner.run(["zpool", "upgrade", "-v"], timeout=30, check=False)
    m = re.search(r"pool version (\d+)", upgrade.stdout)
    usage = runner.run(["zfs", "get"], timeout=30, check=False)
    return ZfsImplementation("fuse", _fuse_package_version(runner), m.group(1) if m else None,
                             parse_property_table(usage.stdout + usage.stderr),
                             tuple(sorted(FUSE_PARAMETERS)))


# ---------------------------------------------------------------- the zfs-fuse daemon


@dataclass
class FuseDaemon:
    """zfs-fuse started by pgfsbench (journaled); a daemon already running is left alone."""

    pidfile: Path
    started_by_us: bool = False
    argv: tuple[str, ...] = ()

    @classmethod
    def ensure(cls, journal: Journal, runner: Runner, pidfile: Path,
               options: list[str]) -> FuseDaemon:
        if fuse_daemon_running():
            if options:
                raise CapabilityError("zfs-fuse is already running (not started by pgfsbench): "
                                      "its options (zfs_arc_max, zfs_prefetch_disable) cannot "
                                      "be set per configuration; stop it first")
            return cls(pidfile, False)
        argv = ["zfs-fuse", "--pidfile", str(pidfile), "--no-kstat-mount", *options]
        journal.record("start zfs-fuse", Undo("stop_zfs_fuse", {"pidfile": str(pidfile)}))
        _STARTED_PIDFILES.add(pidfile)
        runner.run(argv, timeout=60)
        wait_until(lambda: FUSE_SOCKET.exists() and pidfile.exists(), timeout=30,
                   what="zfs-fuse to listen")
        wait_until(lambda: runner.run(["zpool", "list"], timeout=30,
                                      check=False).returncode == 0,
                   timeout=30, what="zfs-fuse to answer")
        return cls(pidfile, True, tuple(argv))


@undo_action("stop_zfs_fuse")
def _stop_zfs_fuse(runner: Runner, args: dict[str, Any]) -> None:
    pidfile = Path(args["pidfile"])
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        if Path(os.readlink(f"/proc/{pid}/exe")).name != "zfs-fuse":
            return  # not (or no longer) the daemon we started
    except OSError:
        return
    start = process_start_time(pid)
    os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: not process_alive(pid, start), timeout=60, interval=0.5,
                   what="zfs-fuse to exit")
    except Exception:
        if process_alive(pid, start):
            os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


# ---------------------------------------------------------------- pools and datasets


def resolve_value(value: ZfsValue, impl: ZfsImplementation, where: str) -> str | None:
    """A property value for this implementation; None when the spec leaves it unset here."""
    if isinstance(value, dict):
        chosen = value.get("fuse" if impl.fuse else "kernel")
        if chosen is None:
            return None
        value = chosen
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def resolved_properties(props: dict[str, ZfsValue], impl: ZfsImplementation,
                        where: str) -> dict[str, str]:
    out = {}
    for name, value in props.items():
        v = resolve_value(value, impl, f"{where}.{name}")
        if v is not None:
            out[name] = v
    return out


def check_properties(props: dict[str, str], impl: ZfsImplementation, where: str) -> list[str]:
    problems = []
    for name, value in props.items():
        if ":" in name:
            continue  # user property
        support = impl.properties.get(name)
        if support is None:
            problems.append(f"{where}.{name}: property not supported by {impl.label()}")
        elif not support.editable:
            problems.append(f"{where}.{name}: read-only property")
        elif not support.accepts(value):
            problems.append(f"{where}.{name}={value}: not supported by {impl.label()} "
                            f"(supported: {support.values})")
    return problems


def zpool_create_argv(name: str, layout: str, devices: list[str], log: list[str],
                      log_layout: str, cache: list[str], ashift: int | None,
                      properties: dict[str, str]) -> list[str]:
    argv = ["zpool", "create", "-o", "cachefile=none", "-m", "none"]
    if ashift is not None:
        argv += ["-o", f"ashift={ashift}"]
    for k, v in properties.items():
        argv += ["-o", f"{k}={v}"]
    argv.append(name)
    if layout in ("mirror", "raidz1", "raidz2", "raidz3"):
        argv.append("raidz" if layout == "raidz1" else layout)
    argv += devices
    if log:
        argv.append("log")
        if log_layout == "mirror":
            argv.append("mirror")
        argv += log
    if cache:
        argv += ["cache", *cache]
    return argv


def zfs_create_argv(dataset: str, mountpoint: Path, properties: dict[str, str]) -> list[str]:
    argv = ["zfs", "create", "-o", f"mountpoint={mountpoint}"]
    for k, v in properties.items():
        argv += ["-o", f"{k}={v}"]
    return [*argv, dataset]


def existing_pools(runner: Runner) -> set[str]:
    done = runner.run(["zpool", "list", "-H", "-o", "name"], timeout=30, check=False)
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


@undo_action("zpool_destroy")
def _zpool_destroy(runner: Runner, args: dict[str, Any]) -> None:
    name = str(args["name"])
    if not name.startswith(POOL_PREFIX):
        raise ProvisionError(f"refusing to destroy {name}: not a pgfsbench pool")
    if shutil.which("zpool") is None or name not in existing_pools(runner):
        return  # never created, already gone, or its zfs-fuse daemon died with it

    def destroyed() -> bool:
        # "pool is busy" while a process is still leaving one of its mounts
        runner.run(["zpool", "destroy", "-f", name], timeout=300, check=False)
        return name not in existing_pools(runner)

    wait_until(destroyed, timeout=60, interval=1.0, what=f"zpool destroy {name}")


@undo_action("umount_dangling_fuse")
def _umount_dangling_fuse(runner: Runner, args: dict[str, Any]) -> None:
    """A FUSE mount whose daemon died answers ENOTCONN; only then is it unmounted here
    (a live one goes away with `zpool destroy`)."""
    target = Path(args["target"])
    if mount_at(target) is None:
        return
    try:
        os.statvfs(target)
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            runner.run(["umount", "--lazy", str(target)], timeout=60, check=False)


def dataset_properties(runner: Runner, dataset: str, impl: ZfsImplementation,
                       names: tuple[str, ...] = ()) -> dict[str, str]:
    """`zfs get -Hp` of the given (or all) properties, keeping only what the ZFS knows."""
    wanted = [n for n in names if n in impl.properties] if names else ["all"]
    if not wanted:
        return {}
    done = runner.run(["zfs", "get", "-Hp", "-o", "property,value,source", ",".join(wanted),
                       dataset], timeout=60)
    result = {}
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            result[parts[0]] = parts[1]
    return result


_PROBED_FUSE: ZfsImplementation | None = None


@dataclass(frozen=True)
class ZfsDriver:
    def implementation(self, runner: Runner) -> ZfsImplementation:
        impl = detect(runner)
        if impl is None:
            raise CapabilityError("no ZFS here: neither the OpenZFS kernel module "
                                  "(/sys/module/zfs) nor zfs-fuse is installed")
        return impl

    def check(self, config: Any, runner: Runner, workdir: Path) -> None:
        """Refuse what the installed ZFS cannot do, before anything is created."""
        assert isinstance(config, ZfsStorage)
        impl = self.implementation(runner)
        if config.implementation != "any" and config.implementation != impl.kind:
            raise CapabilityError(f"the spec asks for {config.implementation} ZFS; this machine "
                                  f"has {impl.label()}")
        if impl.fuse and not impl.properties:
            impl = self._probe_fuse(runner, workdir)
        if impl.fuse and fuse_daemon_running() and not _started_by_us():
            options = fuse_daemon_options(config.module_parameters)
            if options:
                raise CapabilityError(
                    "zfs-fuse is already running and was not started by pgfsbench: its "
                    f"options cannot be changed for this storage ({' '.join(options)}); "
                    "stop that daemon, or remove module_parameters")
        self.validate(config, impl)

    def _probe_fuse(self, runner: Runner, workdir: Path) -> ZfsImplementation:
        """Start zfs-fuse briefly to ask it what it supports, then stop it (once a process).
        Its pidfile and journal live in the work directory."""
        global _PROBED_FUSE
        if _PROBED_FUSE is None:
            _PROBED_FUSE = self._start_and_ask(runner, workdir / "zfs-probe")
        return _PROBED_FUSE

    def _start_and_ask(self, runner: Runner, directory: Path) -> ZfsImplementation:
        from pgfsbench.system.journal import Journal

        directory.mkdir(parents=True, exist_ok=True)
        try:
            journal = Journal(directory / "probe.jsonl", runner)
            with journal.scope():
                FuseDaemon.ensure(journal, runner, directory / "zfs-fuse.pid", [])
                impl = detect(runner)
            journal.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        assert impl is not None
        return impl

    def validate(self, config: ZfsStorage, impl: ZfsImplementation) -> None:
        problems: list[str] = []
        problems += check_properties(resolved_properties(config.data.properties, impl,
                                                         "data.properties"), impl,
                                     "data.properties")
        if config.wal is not None:
            problems += check_properties(resolved_properties(config.wal.properties, impl,
                                                             "wal.properties"), impl,
                                         "wal.properties")
        for name, value in config.module_parameters.items():
            v = resolve_value(value, impl, name)
            if v is None:
                continue
            if impl.fuse and name not in FUSE_PARAMETERS:
                problems.append(f"module_parameters.{name}: zfs-fuse has no such tunable "
                                f"(it has: {', '.join(sorted(FUSE_PARAMETERS))})")
            elif not impl.fuse and name not in impl.module_parameters:
                problems.append(f"module_parameters.{name}: no /sys/module/zfs/parameters/{name}"
                                f" in OpenZFS {impl.version}")
        if problems:
            raise CapabilityError("; ".join(problems))

    def provision(self, name: str, config: Any, ctx: ProvisionContext) -> ProvisionedStorage:
        assert isinstance(config, ZfsStorage)
        runner, journal = ctx.runner, ctx.journal
        impl = detect(runner)
        if impl is None:
            raise CapabilityError("ZFS disappeared since the preflight check")
        fuse_options: list[str] = []
        if impl.fuse or (not kernel_zfs_present()):
            fuse_options = fuse_daemon_options(config.module_parameters)
            daemon = FuseDaemon.ensure(journal, runner, ctx.directory / "zfs-fuse.pid",
                                       fuse_options)
            impl = detect(runner)
            assert impl is not None
        else:
            daemon = None
            apply_module_parameters(journal, config.module_parameters, impl)
        self.validate(config, impl)

        pool = f"{POOL_PREFIX}{ctx.directory.name.replace('-', '_')}_{secrets.token_hex(3)}"
        if pool in existing_pools(runner):
            raise ProvisionError(f"a pool named {pool} already exists; refusing to touch it")
        devices = [ctx.devices.get(d, "pool").path for d in config.pool.devices]
        log = [ctx.devices.get(d, "log").path for d in config.pool.log]
        cache = [ctx.devices.get(d, "cache").path for d in config.pool.cache]
        pool_props = resolved_properties(config.pool.properties, impl, "pool.properties")
        argv = zpool_create_argv(pool, config.pool.layout, devices, log, config.pool.log_layout,
                                 cache, config.pool.ashift, pool_props)
        journal.record(f"zpool create {pool}", Undo("zpool_destroy", {"name": pool}))
        try:
            runner.run(argv, timeout=300)
        except CommandError as exc:
            raise ProvisionError(f"zpool create failed: {exc}") from None
        status = runner.run(["zpool", "status", pool], timeout=60, check=False).stdout

        data = self._dataset(ctx, impl, f"{pool}/data", ctx.directory / "mnt" / "data",
                             config.data, "data", daemon)
        wal, waldir = None, None
        if config.wal is not None:
            wal = self._dataset(ctx, impl, f"{pool}/wal", ctx.directory / "mnt" / "wal",
                                config.wal, "wal", daemon)
            waldir = prepare_dir(wal.mountpoint / "pg_wal", ctx.postgres_user)
        prepare_dir(data.mountpoint, ctx.postgres_user)
        details: dict[str, Any] = {
            "implementation": impl.label(), "fuse": impl.fuse, "zfs_kind": impl.kind,
            "zfs_version": impl.version, "pool_version": impl.pool_version,
            # the processes that serve this storage: its work is the benchmark's own
            "service_processes": ["zfs-fuse"] if impl.fuse else [],
            "pool": {"name": pool, "layout": config.pool.layout, "devices": devices,
                     "log": log, "cache": cache, "ashift": config.pool.ashift,
                     "create_argv": argv, "status": status},
        }
        if daemon is not None:
            details["zfs_fuse_daemon"] = {"argv": list(daemon.argv),
                                          "started_by_pgfsbench": daemon.started_by_us,
                                          "zfsrc": _zfsrc()}
        else:
            details["module_parameters"] = {
                p: (MODULE_DIR / "parameters" / p).read_text().strip()
                for p in config.module_parameters if (MODULE_DIR / "parameters" / p).exists()}
        roles = {"pool": tuple(devices), "log": tuple(log), "cache": tuple(cache)}
        return ProvisionedStorage(name, "zfs", data, data.mountpoint / "pgdata", wal, waldir,
                                  details, {k: v for k, v in roles.items() if v})

    def _dataset(self, ctx: ProvisionContext, impl: ZfsImplementation, dataset: str,
                 mountpoint: Path, spec: ZfsDataset, role: str,
                 daemon: FuseDaemon | None) -> Volume:
        props = resolved_properties(spec.properties, impl, f"{role}.properties")
        mountpoint.mkdir(parents=True, exist_ok=True)
        if daemon is not None:
            # should the daemon die with us, its mount would be left dangling
            ctx.journal.record(f"zfs-fuse mount {mountpoint}",
                               Undo("umount_dangling_fuse", {"target": str(mountpoint)}))
        ctx.runner.run(zfs_create_argv(dataset, mountpoint, props), timeout=120)
        info = mount_at(mountpoint)
        effective = dataset_properties(ctx.runner, dataset, impl)
        return Volume(role, "zfs", mountpoint, dataset, (), info.options if info else "",
                      details={"dataset": dataset, "requested_properties": props,
                               "properties": effective})

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, Any]:
        impl = detect(runner)
        if impl is None:
            return dict(space_figures(storage))
        sync_txg(runner, impl, storage.details["pool"]["name"],
                 [v.source for v in storage.volumes])
        figures: dict[str, Any] = dict(space_figures(storage))
        zfs: dict[str, Any] = {}
        for vol in storage.volumes:
            props = dataset_properties(runner, vol.source, impl, SPACE_PROPS)
            zfs[vol.role] = props
        figures["zfs"] = zfs
        used = {role: int(v["used"]) for role, v in zfs.items()
                if v.get("used", "").isdigit()}
        if used:
            figures["zfs_used_bytes"] = sum(used.values())
            # ZFS's own accounting, not du's (which counts what compression saved, and
            # disagreed with `zfs get used` by a fifth on the dbi example)
            figures["du_bytes"] = figures["space_bytes"]
            figures["space_source"] = "zfs get used"
            figures["space_bytes"] = sum(used.values())
            if "wal" in used:
                figures["pg_wal_bytes"] = used["wal"]
                figures["data_bytes"] = used.get("data", 0)
            else:
                figures["data_bytes"] = max(0, used.get("data", 0) - figures["pg_wal_bytes"])
        data_ratio = zfs.get("data", {}).get("compressratio")
        if data_ratio:
            figures["compressratio"] = data_ratio
        return figures


def sync_txg(runner: Runner, impl: ZfsImplementation, pool: str, datasets: list[str]) -> None:
    """Commit the open transaction group, so that space figures are not those of minutes ago.

    sync(2) does not do it (zfs-fuse keeps data in its ARC and ZIL, up to the txg timeout):
    `zpool sync` does on OpenZFS, and taking a snapshot does on any ZFS."""
    if not impl.fuse:
        done = runner.run(["zpool", "sync", pool], timeout=300, check=False)
        if done.returncode == 0:
            return
    for dataset in datasets:
        snap = f"{dataset}@pgfsb_sync_{secrets.token_hex(3)}"
        if runner.run(["zfs", "snapshot", snap], timeout=300, check=False).returncode == 0:
            runner.run(["zfs", "destroy", snap], timeout=300, check=False)


def fuse_daemon_options(params: dict[str, ZfsValue]) -> list[str]:
    """Module parameters that zfs-fuse takes as daemon options."""
    options: list[str] = []
    for name, value in params.items():
        if isinstance(value, dict):
            chosen = value.get("fuse")
            if chosen is None:
                continue
            value = chosen
        if name == "zfs_arc_max":
            mb = max(16, min(16384, parse_size(str(value)) // (1 << 20)))
            options += ["--max-arc-size", str(mb)]
        elif name == "zfs_vdev_cache_size":
            options += ["--vdev-cache-size", str(parse_size(str(value)) // (1 << 20))]
        elif name == "zfs_prefetch_disable" and str(value) not in ("0", "False", "false", "off"):
            options.append("--zfs-prefetch-disable")
    return options


def apply_module_parameters(journal: Journal, params: dict[str, ZfsValue],
                            impl: ZfsImplementation) -> None:
    for name, value in params.items():
        v = resolve_value(value, impl, name)
        if v is None:
            continue
        path = MODULE_DIR / "parameters" / name
        try:
            write_value(journal, path, v, what=f"zfs module parameter {name}")
        except OSError as exc:
            raise ProvisionError(f"zfs module parameter {name}={v}: {exc.strerror}") from None


def _zfsrc() -> str:
    try:
        return "\n".join(line for line in Path("/etc/zfs/zfsrc").read_text().splitlines()
                         if line.strip() and not line.startswith("#"))
    except OSError:
        return ""


ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")


def arc_bytes() -> int | None:
    """The ARC's size now (kernel OpenZFS; zfs-fuse publishes no arcstats)."""
    try:
        for line in ARCSTATS.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "size":
                return int(parts[2])
    except (OSError, ValueError):
        return None
    return None


def evict_pool_cache(journal: Journal, runner: Runner, storage: ProvisionedStorage,
                     workdir: Path) -> dict[str, Any]:
    """Empty what the ARC holds of a pool's data the one way ZFS offers for a single pool:
    export it (every dataset unmounted, its buffers evicted) and import it again from the
    very devices it was created on (a private directory of links to them, so no other
    device is scanned). Journaled first: a run killed in between gets its pool imported
    back by cleanup, then destroyed. PostgreSQL must be stopped."""
    pool = str(storage.details["pool"]["name"])
    members = [*storage.device_roles.get("pool", ()), *storage.device_roles.get("log", ()),
               *storage.device_roles.get("cache", ())]
    links = workdir / "zpool-import"
    links.mkdir(exist_ok=True)
    for i, dev in enumerate(members):
        link = links / f"{i}-{Path(dev).name}"
        if not link.is_symlink():
            link.symlink_to(dev)
    before = arc_bytes()
    journal.record(f"zpool export {pool} (cold cache)",
                   Undo("zpool_import", {"name": pool, "dir": str(links)}))

    def exported() -> bool:
        # "pool is busy" while the stopped server's last files are being released
        runner.run(["zpool", "export", pool], timeout=300, check=False)
        return pool not in existing_pools(runner)

    wait_until(exported, timeout=60, interval=1.0, what=f"zpool export {pool}")
    _import(runner, pool, links)
    missing = [str(v.mountpoint) for v in storage.volumes if mount_at(v.mountpoint) is None]
    if missing:
        raise ProvisionError(f"zpool import {pool} did not mount {', '.join(missing)}")
    after = arc_bytes()
    done: dict[str, Any] = {"zfs_arc": f"pool {pool} exported and imported (its ARC "
                                       "buffers evicted)"}
    if before is not None and after is not None:
        done["arc_bytes_before"], done["arc_bytes_after"] = before, after
    return done


def _import(runner: Runner, pool: str, links: Path) -> None:
    done = runner.run(["zpool", "import", "-d", str(links), pool], timeout=300, check=False)
    if pool not in existing_pools(runner):
        raise ProvisionError(f"zpool import {pool} failed: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")


@undo_action("zpool_import")
def _zpool_import(runner: Runner, args: dict[str, Any]) -> None:
    """Bring an exported pool back, so that the older step can destroy it."""
    name = str(args["name"])
    if not name.startswith(POOL_PREFIX):
        raise ProvisionError(f"refusing to import {name}: not a pgfsbench pool")
    links = Path(args["dir"])
    if shutil.which("zpool") is None or name in existing_pools(runner) or not links.is_dir():
        return
    _import(runner, name, links)
