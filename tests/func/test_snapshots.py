"""Snapshots during the measured phase: btrfs (the data directory a subvolume) on the
run's timeline, none left afterwards (ZFS's: test_zfs.py, where ZFS's tests take turns);
refused on ext4."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import pytest

from tests.func.conftest import (
    leftovers,
    pgfsbench,
    refused,
    runs_of,
    show,
    signal_mid_measurement,
    write_spec,
)

SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "7s"
warmup = "0s"
repetitions = 1
{storage}
[workload.rw]
builtin = "tpcb-like"
"""


def check_snapshots(results: Path, kind: str) -> dict[str, object]:
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    full = show(results, run["run_id"])
    taken = full["metrics"]["snapshots"]["taken"]
    assert len(taken) >= 2, taken  # every 2 s during 7 s
    assert not full["metrics"]["snapshots"]["errors"]
    events = full["metrics"]["events"]
    assert len(events) == len(taken) and all(e["kind"] == "snapshot" for e in events)
    assert all(kind in e["label"] for e in events)
    assert [t["name"] for t in taken] == [f"pgfsb-snap-{i}" for i in range(1, len(taken) + 1)]
    return full


def test_btrfs_snapshots_on_the_timeline(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            storage="""
[storage.b]
fs = "btrfs"
device = "loop:512M"
snapshots = { every = "2s", keep = 2 }
"""
        ),
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    check_snapshots(results, "btrfs")


def test_snapshots_on_ext4_are_refused_saying_why(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            storage="""
[storage.e]
fs = "ext4"
snapshots = { every = "10s" }
"""
        ),
    )
    proc = pgfsbench("plan", str(spec), check=False)
    assert proc.returncode == 2
    assert "no native snapshots" in proc.stderr and "device-mapper" in proc.stderr


def test_sigkill_with_snapshots_taken_then_cleanup_leaves_nothing(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            storage="""
[storage.b]
fs = "btrfs"
device = "loop:512M"
snapshots = { every = "1s", keep = 3 }
"""
        ).replace('duration = "7s"', 'duration = "60s"'),
    )
    work = base / "work"

    def snapshots_taken() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snaps = list(work.glob("cells/run-*/mnt/data/snapshots/pgfsb-snap-*"))
            if len(snaps) >= 2:
                return
            time.sleep(0.2)
        raise AssertionError("no snapshot was taken")

    code, _, _ = signal_mid_measurement(
        spec, base / "r.sqlite", work, signal.SIGKILL, before=snapshots_taken
    )
    assert code == -signal.SIGKILL
    journals = "".join(p.read_text() for p in (work / "journal").glob("*.jsonl"))
    assert "delete_snapshot" in journals  # each snapshot was journaled before it was taken
    out = pgfsbench("cleanup", "--workdir", str(work))
    assert "undone" in out.stdout and "pgfsb-snap-" in out.stdout
    assert leftovers(base) == []


def test_lvm_where_the_kernel_has_no_device_mapper_is_refused_saying_why(base: Path) -> None:
    if Path("/dev/mapper/control").exists() and shutil.which("lvcreate"):
        pytest.skip("this kernel has device-mapper: tests/vm/test_lvm.py runs LVM")
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            storage="""
[storage.e]
fs = "ext4"
device = "loop:512M"
lvm = { snapshot_pct = 30 }
snapshots = { every = "2s" }
"""
        ),
    )
    assert "lvm: not possible here" in refused(base, spec)
