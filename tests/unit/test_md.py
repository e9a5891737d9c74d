"""md RAID under a filesystem: the spec's checks, the mdadm command, what /proc/mdstat and
`mdadm --detail` say, and the refusal where the kernel has no md (the real arrays are
made in the test VM, tests/vm/test_md.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from pgfsbench.spec.models import BtrfsStorage, Ext4Storage, XfsStorage
from pgfsbench.storage import md
from pgfsbench.system.runner import Runner

MDSTAT = """Personalities : [raid0] [raid1] [linear]
md127 : active raid1 loop1[1] loop0[0]
      1046528 blocks super 1.2 [2/2] [UU]

unused devices: <none>
"""

DETAIL = """/dev/md/pgfsb-1234abcd-data:
           Version : 1.2
        Raid Level : raid1
        Array Size : 1046528 (1022.00 MiB 1071.64 MB)
     Raid Devices : 2
"""


def test_the_spec_takes_members_a_level_and_a_chunk() -> None:
    e = Ext4Storage(fs="ext4", md={"level": "raid1", "devices": ["loop:1G", "loop:1G"]})
    assert e.md is not None and e.md.assume_clean
    assert [r for r, _ in e.devices()] == ["data", "data"]
    assert e.data_capacity() == 1 << 30  # a mirror: one member's size
    assert e.layers() == ["md raid1 of 2"]
    x = XfsStorage(fs="xfs", md={"level": "raid0", "devices": ["loop:1G"] * 3, "chunk": "64K"})
    assert x.md is not None and x.md.chunk_kib() == 64 and x.data_capacity() == 3 << 30
    r10 = BtrfsStorage(fs="btrfs", md={"level": "raid10", "devices": ["loop:1G"] * 4})
    assert r10.data_capacity() == 2 << 30  # two copies of each block
    # md under LVM
    both = Ext4Storage(fs="ext4", lvm={}, md={"level": "raid1", "devices": ["loop:1G"] * 2})
    assert both.layers() == ["LVM", "md raid1 of 2"]
    # a member the size of which is not known before it exists: capacity unknown
    real = Ext4Storage(fs="ext4", md={"level": "raid0", "devices": ["loop:1G", "/dev/sdz"]})
    assert real.data_capacity() is None


@pytest.mark.parametrize(
    ("md_spec", "message"),
    [
        ({"level": "raid1", "devices": ["loop:1G"]}, "raid1 needs at least 2 devices"),
        ({"level": "raid5", "devices": ["loop:1G"] * 3}, "raid0"),
        ({"level": "raid1", "devices": ["loop:1G"] * 2, "chunk": "64K"}, "raid1 has no chunk"),
        ({"level": "raid0", "devices": ["loop:1G"] * 2, "chunk": "3K"}, "power of two"),
        ({"level": "raid0", "devices": ["loop:1G"] * 2, "chunk": "96K"}, "power of two"),
    ],
)
def test_a_bad_array_is_refused_saying_why(md_spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Ext4Storage(fs="ext4", md=md_spec)


def test_members_go_in_md_devices_not_in_device() -> None:
    with pytest.raises(ValidationError, match=r"md.devices, not device"):
        Ext4Storage(fs="ext4", device="loop:1G", md={"level": "raid1", "devices": ["loop:1G"] * 2})


def test_the_mdadm_command_names_only_the_members() -> None:
    argv = md.create_argv("/dev/md/x", "raid0", ["/dev/loop3", "/dev/loop4"], 64, True)
    assert argv[:3] == ["mdadm", "--create", "/dev/md/x"]
    assert "--level=raid0" in argv and "--raid-devices=2" in argv and "--chunk=64" in argv
    assert "--assume-clean" in argv and argv[-2:] == ["/dev/loop3", "/dev/loop4"]
    mirror = md.create_argv("/dev/md/x", "raid1", ["/dev/loop3", "/dev/loop4"], 64, False)
    assert not any(a.startswith("--chunk") for a in mirror) and "--assume-clean" not in mirror


def test_names_fit_md_and_differ_by_cell(tmp_path: Path) -> None:
    a = md.array_name(tmp_path / "run-1", "data")
    b = md.array_name(tmp_path / "run-2", "data")
    assert a != b and a.startswith("pgfsb-") and len(a) <= 32


def test_mdstat_and_detail_are_read() -> None:
    assert md.personalities(MDSTAT) == {"raid0", "raid1", "linear"}
    assert md.personalities("") == set()
    assert md.array_bytes(DETAIL) == 1046528 * 1024
    assert md.array_bytes("") is None


def test_no_md_in_the_kernel_is_said(tmp_path: Path) -> None:
    if shutil.which("mdadm") is None:
        assert "mdadm is not installed" in (md.unavailable(Runner(), "raid1") or "")
        return
    missing = tmp_path / "mdstat"
    assert "no md" in (md.unavailable(Runner(), "raid1", missing) or "")
    missing.write_text("Personalities : [raid1]\n")
    assert md.unavailable(Runner(), "raid1", missing) is None
