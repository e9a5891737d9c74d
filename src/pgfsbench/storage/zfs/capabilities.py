"""Which ZFS this machine has (the OpenZFS kernel module, or zfs-fuse) and what it accepts:
the properties and values from `zfs get`'s own table, the module parameters; a spec's
values resolved for the implementation found and checked against it.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.spec import ZfsValue
from pgfsbench.storage.zfs.fuse import (
    FUSE_PARAMETERS,
    fuse_daemon_running,
    fuse_package_version,
)
from pgfsbench.system.runner import Runner
from pgfsbench.units import parse_size

MODULE_DIR = Path("/sys/module/zfs")


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
            table[m.group(1)] = PropertySupport(m.group(1), m.group(2) == "YES", m.group(4).strip())
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


def kernel_zfs_present() -> bool:
    return (MODULE_DIR / "parameters").is_dir()


# what detect found, by what it could see (the kernel module; zfs-fuse idle or answering):
# asked once per process, that is once per campaign, however many cells run on ZFS
_DETECTED: dict[str, ZfsImplementation] = {}


def detect(runner: Runner) -> ZfsImplementation | None:
    """What ZFS this machine has: the kernel module first, else zfs-fuse; None if neither.

    For zfs-fuse the daemon must be running (see FuseDaemon) to ask it anything."""
    state = "kernel" if kernel_zfs_present() else "fuse" if fuse_daemon_running() else "fuse-idle"
    if state not in _DETECTED:
        impl = _detect(runner)
        if impl is None:
            return None
        if state != "fuse-idle":
            _DETECTED[state] = impl
        return impl
    return _DETECTED[state]


def _detect(runner: Runner) -> ZfsImplementation | None:
    if kernel_zfs_present():
        version = (
            (MODULE_DIR / "version").read_text().strip()
            if (MODULE_DIR / "version").exists()
            else "unknown"
        )
        params = tuple(sorted(p.name for p in (MODULE_DIR / "parameters").iterdir()))
        usage = runner.run(["zfs", "get"], timeout=30, check=False)
        return ZfsImplementation(
            "kernel",
            version.split("-")[0],
            None,
            parse_property_table(usage.stdout + usage.stderr),
            params,
        )
    if shutil.which("zfs-fuse") is None:
        return None
    if not fuse_daemon_running():
        return ZfsImplementation("fuse", fuse_package_version(runner), None)
    upgrade = runner.run(["zpool", "upgrade", "-v"], timeout=30, check=False)
    m = re.search(r"pool version (\d+)", upgrade.stdout)
    usage = runner.run(["zfs", "get"], timeout=30, check=False)
    return ZfsImplementation(
        "fuse",
        fuse_package_version(runner),
        m.group(1) if m else None,
        parse_property_table(usage.stdout + usage.stderr),
        tuple(sorted(FUSE_PARAMETERS)),
    )


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


def resolved_properties(
    props: dict[str, ZfsValue], impl: ZfsImplementation, where: str
) -> dict[str, str]:
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
            problems.append(
                f"{where}.{name}={value}: not supported by {impl.label()} "
                f"(supported: {support.values})"
            )
    return problems
