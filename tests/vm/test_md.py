"""ext4 and xfs on Linux software RAID (md): raid1, and raid10 under LVM, made from loop
files, recorded with their level, members and size, stopped and their superblocks zeroed
afterwards, and after a SIGKILL by cleanup. Runs in the VM (scripts/test-vm.sh); skipped
where the kernel has no md."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from pgfsbench.storage import md
from pgfsbench.system.runner import Runner
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
        shutil.which("mdadm") is None or md.unavailable(Runner(), "raid1") is not None,
        reason="no md or no mdadm here",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]


def arrays() -> list[str]:
    """The md arrays the kernel has now."""
    text = Path("/proc/mdstat").read_text()
    return [line.split()[0] for line in text.splitlines() if line.startswith("md")]


def test_raid1_and_raid10_under_lvm_are_made_recorded_and_removed(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            duration="6s",
            storage="""
[storage.ext4-raid1]
fs = "ext4"
md = { level = "raid1", devices = ["loop:512M", "loop:512M"] }

[storage.xfs-raid10-lvm]
fs = "xfs"
lvm = {}

[storage.xfs-raid10-lvm.md]
level = "raid10"
devices = ["loop:512M", "loop:512M", "loop:512M", "loop:512M"]
chunk = "64K"
""",
        ),
    )
    before = arrays()
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    runs = {r["cell"].split("/")[0]: r for r in runs_of(results)}
    assert all(r["status"] == "ok" for r in runs.values()), runs
    mirror = show(results, runs["ext4-raid1"]["run_id"])["storage_details"]["data"]
    made = mirror["md"]
    assert made["level"] == "raid1" and len(made["members"]) == 2
    assert all(m.startswith("/dev/loop") for m in made["members"])
    assert "Raid Level : raid1" in made["detail"] and made["assume_clean"] is True
    # a mirror of two 512 MiB members holds 512 MiB less md's superblock area
    assert 500 << 20 <= made["array_bytes"] <= 512 << 20
    assert mirror["source"] == made["path"]
    r10 = show(results, runs["xfs-raid10-lvm"]["run_id"])["storage_details"]["data"]
    assert r10["md"]["level"] == "raid10" and r10["md"]["chunk_kib"] == 64
    assert 1000 << 20 <= r10["md"]["array_bytes"] <= 1024 << 20  # 4 x 512 MiB, two copies
    assert r10["lvm"]["physical_volume"] == r10["md"]["path"]  # LVM on the array
    summary = pgfsbench("results", "summary", "--results", str(results)).stdout
    assert "ext4-raid1" in summary
    assert arrays() == before and leftovers(base) == []


def test_sigkill_with_an_array_then_cleanup_stops_it(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SPEC.format(
            duration="60s",
            storage="""
[storage.e]
fs = "ext4"
md = { level = "raid0", devices = ["loop:512M", "loop:512M"] }
""",
        ),
    )
    before = arrays()
    rc, _out, _err = signal_mid_measurement(spec, base / "r.sqlite", base / "work", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert len(arrays()) == len(before) + 1
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert arrays() == before and leftovers(base) == []
