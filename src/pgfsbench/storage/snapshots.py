"""Snapshots taken during the measured phase: btrfs subvolume snapshots of the data
directory (a subvolume when snapshots are asked for), ZFS snapshots of the data and WAL
datasets, LVM snapshots of the logical volume under ext4 or xfs (`lvm = {}`). Each is
journaled before it is taken (undo deletes it, and does nothing if it is already gone),
timed, and kept as an event on the run's timeline; the oldest beyond `keep` are deleted as
new ones come, and the rest right after the measured phase.

Other filesystems have no native snapshots: ext4 and xfs get theirs from LVM, where the
kernel has device-mapper (refused with the reason where it has not).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.system.bounds import POOL_PREFIX, in_workdir
from pgfsbench.system.errors import CommandError
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import Runner

PREFIX = "pgfsb-snap-"


# --- one mechanism per kind of snapshot (btrfs subvolumes, ZFS datasets, LVM volumes) ---


def _btrfs_take(target: str, name: str, snapdir: Path | None, size: int | None) -> list[str]:
    assert snapdir is not None
    return ["btrfs", "subvolume", "snapshot", "-r", target, str(snapdir / name)]


def _btrfs_delete(target: str, name: str, snapdir: Path | None) -> list[str]:
    assert snapdir is not None
    return ["btrfs", "subvolume", "delete", str(snapdir / name)]


def _btrfs_exists(runner: Runner, target: str, name: str, snapdir: Path | None) -> bool:
    return snapdir is not None and (snapdir / name).exists()


def _btrfs_problem(target: str, args: dict[str, object]) -> str | None:
    return None if args.get("snapdir") else "a btrfs snapshot without its directory"


def _lvm_take(target: str, name: str, snapdir: Path | None, size: int | None) -> list[str]:
    # a classic (thick) snapshot: its copy-on-write area is reserved
    assert size is not None
    return ["lvcreate", "-y", "-s", "-n", name, "-L", f"{size}b", target]


def _lvm_delete(target: str, name: str, snapdir: Path | None) -> list[str]:
    return ["lvremove", "-f", "-y", f"{target.split('/')[0]}/{name}"]


def _lvm_exists(runner: Runner, target: str, name: str, snapdir: Path | None) -> bool:
    lv = f"{target.split('/')[0]}/{name}"
    return runner.run(["lvs", lv], timeout=60, check=False).returncode == 0


def _lvm_problem(target: str, args: dict[str, object]) -> str | None:
    return None if target.startswith("pgfsb-") else f"{target} is not a volume pgfsbench creates"


def _zfs_take(target: str, name: str, snapdir: Path | None, size: int | None) -> list[str]:
    return ["zfs", "snapshot", f"{target}@{name}"]


def _zfs_delete(target: str, name: str, snapdir: Path | None) -> list[str]:
    return ["zfs", "destroy", f"{target}@{name}"]


def _zfs_exists(runner: Runner, target: str, name: str, snapdir: Path | None) -> bool:
    argv = ["zfs", "list", "-H", "-t", "snapshot", "-o", "name", f"{target}@{name}"]
    return runner.run(argv, timeout=60, check=False).returncode == 0


def _zfs_problem(target: str, args: dict[str, object]) -> str | None:
    if target.startswith(POOL_PREFIX):
        return None
    return f"{target} is not a dataset of a pool pgfsbench creates"


@dataclass(frozen=True)
class Mechanism:
    """How one kind of snapshot is taken, deleted and found, and which targets are ours."""

    take: Callable[[str, str, Path | None, int | None], list[str]]
    delete: Callable[[str, str, Path | None], list[str]]
    exists: Callable[[Runner, str, str, Path | None], bool]
    target_problem: Callable[[str, dict[str, object]], str | None]


MECHANISMS: dict[str, Mechanism] = {
    "btrfs": Mechanism(_btrfs_take, _btrfs_delete, _btrfs_exists, _btrfs_problem),
    "lvm": Mechanism(_lvm_take, _lvm_delete, _lvm_exists, _lvm_problem),
    "zfs": Mechanism(_zfs_take, _zfs_delete, _zfs_exists, _zfs_problem),
}


def take_argv(
    kind: str, target: str, name: str, snapdir: Path | None, size_bytes: int | None = None
) -> list[str]:
    return MECHANISMS[kind].take(target, name, snapdir, size_bytes)


def delete_argv(kind: str, target: str, name: str, snapdir: Path | None) -> list[str]:
    return MECHANISMS[kind].delete(target, name, snapdir)


@dataclass
class Snapshotter:
    """Takes a snapshot of every target each ``every`` seconds from ``start()``."""

    kind: str  # "btrfs", "zfs" or "lvm"
    targets: list[str]  # subvolume paths, dataset names, or group/volume
    snapdir: Path | None  # btrfs: where the snapshots go
    every: float
    keep: int
    journal: Journal
    runner: Runner
    size_bytes: int | None = None  # lvm: each snapshot's copy-on-write area
    taken: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _live: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _t0: float = 0.0

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="snapshots", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        n = 0
        while not self._stop.wait(max(0.0, self._t0 + (n + 1) * self.every - time.monotonic())):
            n += 1
            self.take(f"{PREFIX}{n}")
            while len(self._live) > self.keep:
                self._delete(self._live.pop(0))

    def take(self, name: str) -> None:
        started = time.monotonic()
        at = started - self._t0
        for target in self.targets:
            self.journal.record(
                f"snapshot {target} {name}",
                Undo(
                    "delete_snapshot",
                    {
                        "kind": self.kind,
                        "target": target,
                        "name": name,
                        "snapdir": str(self.snapdir) if self.snapdir else None,
                    },
                ),
            )
            try:
                self.runner.run(
                    take_argv(self.kind, target, name, self.snapdir, self.size_bytes), timeout=120
                )
            except CommandError as exc:
                self.errors.append(f"snapshot {name} of {target}: {exc}")
        took = time.monotonic() - started
        self._live.append(name)
        self.taken.append(
            {
                "name": name,
                "at_s": round(at, 3),
                "took_s": round(took, 3),
                "targets": list(self.targets),
            }
        )

    def _delete(self, name: str) -> None:
        for target in self.targets:
            try:
                _delete_one(self.runner, self.kind, target, name, self.snapdir)
            except CommandError as exc:
                self.errors.append(f"delete {name} of {target}: {exc}")

    def stop(self) -> list[dict[str, Any]]:
        """Stop taking, delete what is left, and return the events for the timeline."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=300)
        while self._live:
            self._delete(self._live.pop(0))
        return [
            {
                "kind": "snapshot",
                "start_s": t["at_s"],
                "end_s": t["at_s"] + t["took_s"],
                "label": f"{self.kind} snapshot {t['name']}",
            }
            for t in self.taken
        ]


def _exists(runner: Runner, kind: str, target: str, name: str, snapdir: Path | None) -> bool:
    return MECHANISMS[kind].exists(runner, target, name, snapdir)


def _delete_one(runner: Runner, kind: str, target: str, name: str, snapdir: Path | None) -> None:
    if not name.startswith(PREFIX):  # only ever what pgfsbench took
        return
    if _exists(runner, kind, target, name, snapdir):
        runner.run(delete_argv(kind, target, name, snapdir), timeout=300)


def _snapshot_bound(args: dict[str, object], scope: Scope) -> str | None:
    kind, target, name = str(args["kind"]), str(args["target"]), str(args["name"])
    mechanism = MECHANISMS.get(kind)
    if mechanism is None:
        return f"{kind} is not a kind of snapshot pgfsbench takes"
    if not re.fullmatch(rf"{re.escape(PREFIX)}[0-9]+", name):
        return f"{name} is not the name of a snapshot pgfsbench takes"
    return mechanism.target_problem(target, args) or in_workdir("snapdir")(args, scope)


@undo_action("delete_snapshot", bound=_snapshot_bound)
def _undo_snapshot(runner: Runner, args: dict[str, Any]) -> None:
    snapdir = Path(args["snapdir"]) if args.get("snapdir") else None
    _delete_one(runner, str(args["kind"]), str(args["target"]), str(args["name"]), snapdir)
