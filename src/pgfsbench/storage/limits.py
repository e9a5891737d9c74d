"""Capping a device's IOPS and bandwidth, so that a loop file can stand for an HDD, a SATA
SSD or a cloud volume (see spec/profiles.py for the figures).

Two kernel mechanisms, detected at run time:

- cgroup v1 `blkio.throttle.{read,write}_{iops,bps}_device` in the root blkio cgroup: it
  applies to every process and to the kernel's writeback, so buffered-then-synced writes
  are capped like direct ones (checked on this machine: 10 MB/s held for both).
- cgroup v2 `io.max`, which applies to the processes of one cgroup (and to the writeback of
  the pages they dirtied, on ext4, xfs and btrfs): pgfsbench creates a cgroup, moves itself
  into it for the cell (so PostgreSQL, the benchmark and their writeback are in it), and
  moves back after. (Not exercised on the development machine, which has cgroup v1.)

Every value is journaled before it is written and put back after the cell, after Ctrl-C,
and by `pgfsbench cleanup` after a SIGKILL. Only devices under test are ever limited.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.spec.models import DeviceLimits, StorageCommon
from pgfsbench.spec.profiles import PROFILES, Figures, Resolved, resolve
from pgfsbench.system.bounds import CGROUP_ROOT, DEV_NUMBERS, cgroup_directory, cgroup_file
from pgfsbench.system.errors import CapabilityError, ProvisionError
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.mountinfo import MountInfo, mount_table
from pgfsbench.system.runner import Runner

V1_FILES = {
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
}
V2_KEYS = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}
CGROUP_V2_NAME = "pgfsbench"


@dataclass(frozen=True)
class Mechanism:
    kind: str  # "cgroup-v1-blkio" or "cgroup-v2-io"
    root: Path  # the blkio hierarchy (v1) or the unified hierarchy (v2)

    def label(self) -> str:
        return {
            "cgroup-v1-blkio": "cgroup v1 blkio throttling (root cgroup)",
            "cgroup-v2-io": "cgroup v2 io.max",
        }[self.kind]


def detect(mounts: Sequence[MountInfo] | None = None) -> Mechanism | None:
    """The throttling this kernel offers (v1 blkio with throttle files, else v2 with io)."""
    table = mounts if mounts is not None else mount_table()
    for m in table:
        if m.fstype == "cgroup" and "blkio" in m.options.split(","):
            root = Path(m.target)
            if (root / V1_FILES["write_iops"]).exists():
                return Mechanism("cgroup-v1-blkio", root)
    for m in table:
        if m.fstype == "cgroup2":
            root = Path(m.target)
            try:
                controllers = (root / "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if "io" in controllers:
                return Mechanism("cgroup-v2-io", root)
    return None


def require() -> Mechanism:
    mech = detect()
    if mech is None:
        raise CapabilityError(
            "device limits need blkio throttling: cgroup v1 with the blkio "
            "controller, or cgroup v2 with the io controller; neither is "
            "available here"
        )
    return mech


def configured(storage: StorageCommon) -> dict[str, DeviceLimits]:
    """The limits a storage configuration asks for, by device role."""
    return storage.device_limits()


def resolve_for(cfg: DeviceLimits, device_bytes: int | None) -> Resolved:
    """A role's limits for one device: the profile at the given capacity (or the device's
    own size), with the explicit figures over it."""
    capacity = None
    if cfg.capacity is not None:
        from pgfsbench.units import parse_size

        capacity = parse_size(cfg.capacity)
    return resolve(
        cfg.profile,
        capacity or device_bytes,
        Figures(cfg.read_iops, cfg.write_iops, cfg.read_mbps, cfg.write_mbps),
    )


def source_of(profile: str | None) -> str | None:
    return PROFILES[profile].source if profile else None


def byte_rates(f: Figures) -> dict[str, int]:
    """Caps as the kernel takes them (bytes/s and IOPS); absent caps are left out."""
    out: dict[str, int] = {}
    if f.read_iops:
        out["read_iops"] = int(f.read_iops)
    if f.write_iops:
        out["write_iops"] = int(f.write_iops)
    if f.read_mbps:
        out["read_bps"] = int(f.read_mbps * 1_000_000)
    if f.write_mbps:
        out["write_bps"] = int(f.write_mbps * 1_000_000)
    return out


def parse_v1(text: str) -> dict[str, int]:
    """'7:0 10485760' lines of a blkio.throttle file -> {'7:0': 10485760}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and ":" in parts[0]:
            out[parts[0]] = int(parts[1])
    return out


def io_max_line(dev: str, rates: dict[str, int]) -> str:
    """The io.max line for a device ('max' for no cap)."""
    return dev + " " + " ".join(f"{V2_KEYS[k]}={rates.get(k, 'max')}" for k in V2_KEYS)


def parse_io_max(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        parts = line.split()
        if parts:
            out[parts[0]] = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    return out


def dev_numbers(device: str) -> str:
    st = Path(device).stat()
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def apply(journal: Journal, mech: Mechanism, device: str, figures: Figures) -> dict[str, object]:
    """Cap one device under test; journaled, undone after the cell."""
    dev = dev_numbers(device)
    rates = byte_rates(figures)
    if mech.kind == "cgroup-v1-blkio":
        for key, value in rates.items():
            path = mech.root / V1_FILES[key]
            old = parse_v1(path.read_text()).get(dev, 0)
            journal.record(
                f"{V1_FILES[key]} {dev}: {old} -> {value} ({device})",
                Undo("restore_blkio_v1", {"path": str(path), "dev": dev, "value": old}),
            )
            try:
                path.write_text(f"{dev} {value}\n")
            except OSError as exc:
                raise ProvisionError(
                    f"cannot limit {device} ({path.name}): {exc.strerror}"
                ) from None
    else:
        group = cgroup_v2(journal, mech)
        path = group / "io.max"
        journal.record(
            f"io.max {dev}: {rates} ({device})",
            Undo("restore_io_max", {"path": str(path), "dev": dev}),
        )
        try:
            path.write_text(io_max_line(dev, rates) + "\n")
        except OSError as exc:
            raise ProvisionError(f"cannot limit {device} (io.max): {exc.strerror}") from None
    return {"device": device, "dev": dev, "mechanism": mech.label(), **rates}


def read_back(mech: Mechanism, device: str) -> dict[str, int]:
    """What the kernel holds for a device now (for the record and the tests)."""
    dev = dev_numbers(device)
    if mech.kind == "cgroup-v1-blkio":
        return {
            k: v
            for k, name in V1_FILES.items()
            if (v := parse_v1((mech.root / name).read_text()).get(dev, 0))
        }
    path = mech.root / CGROUP_V2_NAME / "io.max"
    if not path.exists():
        return {}
    entry = parse_io_max(path.read_text()).get(dev, {})
    return {k: int(entry[v]) for k, v in V2_KEYS.items() if entry.get(v, "max") != "max"}


_V2_GROUP: dict[str, Path] = {}


def cgroup_v2(journal: Journal, mech: Mechanism) -> Path:
    """A cgroup with the io controller that holds pgfsbench (and so all it starts) for the
    cell; created, entered and left through the journal."""
    key = str(journal.path)
    if key in _V2_GROUP:
        return _V2_GROUP[key]
    root = mech.root
    control = root / "cgroup.subtree_control"
    if "io" not in control.read_text().split():
        journal.record(
            "enable the io controller for child cgroups",
            Undo("disable_io_controller", {"path": str(control)}),
        )
        control.write_text("+io\n")
    group = root / CGROUP_V2_NAME
    journal.record(f"mkdir {group}", Undo("remove_cgroup", {"path": str(group)}))
    group.mkdir(exist_ok=True)
    origin = own_cgroup_v2(root)
    journal.record(
        f"move pgfsbench (pid {os.getpid()}) into {group}",
        Undo("leave_cgroup", {"pid": os.getpid(), "back": str(origin)}),
    )
    (group / "cgroup.procs").write_text(f"{os.getpid()}\n")
    _V2_GROUP[key] = group
    return group


def own_cgroup_v2(root: Path) -> Path:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return root / line[3:].lstrip("/")
    return root


# ---------------------------------------------------------------- undo actions


def _blkio_bound(args: dict[str, object], scope: Scope) -> str | None:
    if not DEV_NUMBERS.fullmatch(str(args["dev"])) or not str(args["value"]).isdigit():
        return f"{args['dev']} {args['value']} is not a device's limit"
    return cgroup_file(*V1_FILES.values())(str(args["path"]))


def _io_max_bound(args: dict[str, object], scope: Scope) -> str | None:
    if not DEV_NUMBERS.fullmatch(str(args["dev"])):
        return f"{args['dev']} is not a device's numbers"
    return cgroup_file("io.max")(str(args["path"]))


def _leave_bound(args: dict[str, object], scope: Scope) -> str | None:
    back = str(args["back"])
    if back != str(CGROUP_ROOT) and cgroup_directory(r"[^/]+")(back) is not None:
        return f"{back} is not a cgroup"
    return None


def _group_bound(args: dict[str, object], scope: Scope) -> str | None:
    return cgroup_directory(re.escape(CGROUP_V2_NAME))(str(args["path"]))


def _controller_bound(args: dict[str, object], scope: Scope) -> str | None:
    return cgroup_file("cgroup.subtree_control")(str(args["path"]))


@undo_action("restore_blkio_v1", bound=_blkio_bound)
def _restore_blkio_v1(runner: Runner, args: dict[str, Any]) -> None:
    path, dev, value = Path(args["path"]), str(args["dev"]), int(args["value"])
    if parse_v1(path.read_text()).get(dev, 0) != value:
        path.write_text(f"{dev} {value}\n")  # 0 removes the rule


@undo_action("restore_io_max", bound=_io_max_bound)
def _restore_io_max(runner: Runner, args: dict[str, Any]) -> None:
    path = Path(args["path"])
    if path.exists():
        path.write_text(io_max_line(str(args["dev"]), {}) + "\n")


@undo_action("leave_cgroup", bound=_leave_bound)
def _leave_cgroup(runner: Runner, args: dict[str, Any]) -> None:
    back = Path(args["back"]) / "cgroup.procs"
    pid = int(args["pid"])
    if pid == os.getpid() and back.exists():
        back.write_text(f"{pid}\n")
    _V2_GROUP.clear()


@undo_action("remove_cgroup", bound=_group_bound)
def _remove_cgroup(runner: Runner, args: dict[str, Any]) -> None:
    group = Path(args["path"])
    if not group.exists():
        return
    procs = (group / "cgroup.procs").read_text().split()
    if procs:
        raise ProvisionError(f"{group} still holds processes {' '.join(procs[:8])}")
    group.rmdir()


@undo_action("disable_io_controller", bound=_controller_bound)
def _disable_io_controller(runner: Runner, args: dict[str, Any]) -> None:
    path = Path(args["path"])
    if "io" in path.read_text().split():
        path.write_text("-io\n")
