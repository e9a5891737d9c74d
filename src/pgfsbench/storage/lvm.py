"""LVM under a filesystem: a physical volume on the storage's device, a volume group of its
own, one logical volume for the filesystem, and the rest of the group kept for snapshots
taken during the run (classic copy-on-write snapshots: after each, the first write to a
block copies the old block into the snapshot, the cost the Vondra talk measured for ext4 on
LVM against btrfs and ZFS).

Every step is journaled before it is done and undone in reverse (snapshots, the logical
volume, the group, the physical volume's label); undo does nothing for what is already
gone. Needs device-mapper with its snapshot target and the lvm2 tools: refused, with the
reason, where the kernel has none (this project's CI machine: no device-mapper).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from pgfsbench.system.bounds import device_of_run
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import Runner

LV = "data"
_NAME = re.compile(r"[^A-Za-z0-9_.+-]")


def unavailable(runner: Runner) -> str | None:
    """Why LVM cannot be used here (None: it can)."""
    for tool in ("pvcreate", "vgcreate", "lvcreate", "lvremove", "dmsetup"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: lvm2)"
    if not Path("/dev/mapper/control").exists():
        return "the kernel has no device-mapper (/dev/mapper/control is missing)"
    targets = runner.run(["dmsetup", "targets"], timeout=30, check=False).stdout
    if not re.search(r"^snapshot\s", targets, re.MULTILINE):
        # the snapshot target loads on first use where it is a module
        runner.run(["modprobe", "dm_snapshot"], timeout=30, check=False)
        targets = runner.run(["dmsetup", "targets"], timeout=30, check=False).stdout
        if not re.search(r"^snapshot\s", targets, re.MULTILINE):
            return "device-mapper has no snapshot target (dm_snapshot)"
    return None


def group_name(directory: Path, role: str) -> str:
    """A volume group name of this cell's own ('pgfsb-run-3-data')."""
    return _NAME.sub("-", f"pgfsb-{directory.name}-{role}")


def make_volume(
    journal: Journal, runner: Runner, device: str, group: str, snapshot_pct: int
) -> tuple[str, dict[str, object]]:
    """PV on ``device``, VG ``group``, LV 'data' on (100 - snapshot_pct)% of it: the LV's
    path and what was made."""
    journal.record(f"pvcreate {device}", Undo("lvm_pvremove", {"device": device}))
    runner.run(["pvcreate", "-ff", "-y", device], timeout=120)
    journal.record(f"vgcreate {group}", Undo("lvm_vgremove", {"group": group}))
    runner.run(["vgcreate", group, device], timeout=120)
    lv = f"{group}/{LV}"
    journal.record(f"lvcreate {lv}", Undo("lvm_lvremove", {"lv": lv}))
    runner.run(
        ["lvcreate", "-y", "-W", "y", "-Z", "y", "-n", LV, "-l", f"{100 - snapshot_pct}%VG", group],
        timeout=300,
    )
    runner.run(["udevadm", "settle"], timeout=60, check=False)
    path = f"/dev/{group}/{LV}"
    return path, {
        "group": group,
        "lv": lv,
        "path": path,
        "physical_volume": device,
        "snapshot_pct": snapshot_pct,
        "lv_bytes": lv_bytes(runner, lv),
        "free_bytes": free_bytes(runner, group),
    }


def _bytes(runner: Runner, argv: list[str]) -> int | None:
    done = runner.run(argv, timeout=60, check=False)
    try:
        return int(done.stdout.strip().rstrip("B"))
    except ValueError:
        return None


def lv_bytes(runner: Runner, lv: str) -> int | None:
    return _bytes(
        runner, ["lvs", "--noheadings", "--nosuffix", "--units", "b", "-o", "lv_size", lv]
    )


def free_bytes(runner: Runner, group: str) -> int | None:
    return _bytes(
        runner, ["vgs", "--noheadings", "--nosuffix", "--units", "b", "-o", "vg_free", group]
    )


def _exists(runner: Runner, argv: list[str]) -> bool:
    return runner.run(argv, timeout=60, check=False).returncode == 0


_OURS = re.compile(r"pgfsb-[A-Za-z0-9+_.-]+")


def _lv_bound(args: dict[str, object], scope: Scope) -> str | None:
    group, _, lv = str(args["lv"]).partition("/")
    if not _OURS.fullmatch(group) or lv != LV:
        return f"{args['lv']} is not a logical volume pgfsbench creates"
    return None


def _vg_bound(args: dict[str, object], scope: Scope) -> str | None:
    if not _OURS.fullmatch(str(args["group"])):
        return f"{args['group']} is not a volume group pgfsbench creates"
    return None


def _pv_bound(args: dict[str, object], scope: Scope) -> str | None:
    return device_of_run(str(args["device"]), scope)


@undo_action("lvm_lvremove", bound=_lv_bound)
def _undo_lv(runner: Runner, args: dict[str, object]) -> None:
    lv = str(args["lv"])
    if _exists(runner, ["lvs", lv]):
        runner.run(["lvremove", "-f", "-y", lv], timeout=300)


@undo_action("lvm_vgremove", bound=_vg_bound)
def _undo_vg(runner: Runner, args: dict[str, object]) -> None:
    group = str(args["group"])
    if _exists(runner, ["vgs", group]):
        runner.run(["vgremove", "-f", "-y", group], timeout=300)


@undo_action("lvm_pvremove", bound=_pv_bound)
def _undo_pv(runner: Runner, args: dict[str, object]) -> None:
    device = str(args["device"])
    if Path(device).exists() and _exists(runner, ["pvs", device]):
        runner.run(["pvremove", "-ff", "-y", device], timeout=300)
