"""LVM under ext4/xfs: the spec's rules, the snapshot commands, the names (pure parts; the
real thing runs in the test VM, tests/vm/test_lvm.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pgfsbench.spec.models import Ext4Storage, XfsStorage
from pgfsbench.storage.lvm import group_name
from pgfsbench.storage.snapshots import delete_argv, take_argv


def test_snapshots_on_ext4_need_lvm_and_lvm_is_for_ext4_and_xfs() -> None:
    with pytest.raises(ValidationError, match=r"no native snapshots.*lvm"):
        Ext4Storage(fs="ext4", snapshots={"every": "5s"})
    ok = Ext4Storage(fs="ext4", lvm={}, snapshots={"every": "5s", "keep": 3})
    assert ok.lvm is not None and ok.lvm.snapshot_pct == 30
    assert XfsStorage(fs="xfs", lvm={"snapshot_pct": 50}).lvm is not None
    with pytest.raises(ValidationError):
        Ext4Storage(fs="ext4", lvm={"snapshot_pct": 95})


def test_lvm_snapshot_commands_name_only_the_cells_group() -> None:
    assert take_argv("lvm", "pgfsb-run-3-data/data", "pgfsb-snap-1", None, 64 << 20) == [
        "lvcreate",
        "-y",
        "-s",
        "-n",
        "pgfsb-snap-1",
        "-L",
        f"{64 << 20}b",
        "pgfsb-run-3-data/data",
    ]
    assert delete_argv("lvm", "pgfsb-run-3-data/data", "pgfsb-snap-1", None) == [
        "lvremove",
        "-f",
        "-y",
        "pgfsb-run-3-data/pgfsb-snap-1",
    ]
    assert group_name(Path("/var/tmp/w/cells/run-3"), "data") == "pgfsb-run-3-data"
    assert group_name(Path("/x/run 4:é"), "data") == "pgfsb-run-4---data"
