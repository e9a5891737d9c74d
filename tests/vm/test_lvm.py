"""ext4 and xfs on LVM, with LVM snapshots during the measured phase (the Vondra talk's
ext4-on-LVM case): each snapshot journaled and on the run's timeline, the group, volume
and physical volume removed afterwards, and after a SIGKILL by cleanup. Runs in the VM
(scripts/test-vm.sh); skipped where the kernel has no device-mapper."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.func.conftest import (
    leftovers,
    pgfsbench,
    runs_of,
    show,
    signal_mid_measurement,
    write_spec,
)
from tests.vm.conftest import SPEC

pytestmark = [
    pytest.mark.skipif(
        not Path("/dev/mapper/control").exists() or shutil.which("lvcreate") is None,
        reason="no device-mapper or no lvm2 here",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]


def groups() -> list[str]:
    out = subprocess.run(
        ["vgs", "--noheadings", "-o", "vg_name"], capture_output=True, text=True, check=False
    ).stdout
    return [g for g in out.split() if g.startswith("pgfsb-")]


def test_ext4_and_xfs_on_lvm_with_snapshots_on_the_timeline(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            duration="8s",
            storage="""
[storage.ext4-lvm]
fs = "ext4"
device = "loop:1G"
lvm = { snapshot_pct = 40 }
snapshots = { every = "2s", keep = 2 }

[storage.xfs-lvm]
fs = "xfs"
device = "loop:1G"
lvm = {}
""",
        ),
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    runs = {r["cell"].split("/")[0]: r for r in runs_of(results)}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    ext4 = show(results, runs["ext4-lvm"]["run_id"])
    made = ext4["storage_details"]["data"]["lvm"]
    assert made["group"].startswith("pgfsb-") and made["path"].startswith("/dev/pgfsb-")
    assert made["snapshot_pct"] == 40 and made["lv_bytes"] and made["free_bytes"]
    assert ext4["storage_details"]["data"]["source"] == made["path"]
    taken = ext4["metrics"]["snapshots"]["taken"]
    assert len(taken) >= 2 and not ext4["metrics"]["snapshots"]["errors"], ext4["metrics"]
    assert all("lvm snapshot" in e["label"] for e in ext4["metrics"]["events"])
    xfs = show(results, runs["xfs-lvm"]["run_id"])
    assert xfs["storage_details"]["data"]["lvm"]["snapshot_pct"] == 30
    assert "snapshots" not in xfs["metrics"]
    assert groups() == [] and leftovers(base) == []


def test_sigkill_with_lvm_snapshots_then_cleanup_leaves_no_group(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            duration="60s",
            storage="""
[storage.e]
fs = "ext4"
device = "loop:1G"
lvm = {}
snapshots = { every = "1s", keep = 2 }
""",
        ),
    )
    rc, _out, _err = signal_mid_measurement(spec, base / "r.sqlite", base / "work", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert groups() != []
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert groups() == []
    pvs = subprocess.run(["pvs", "--noheadings"], capture_output=True, text=True, check=False)
    assert "loop" not in pvs.stdout
    assert leftovers(base) == []
