"""Device profiles against their published formulas, and the throttling files' formats."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.spec.profiles import GIB, PROFILES, Figures, azure_tier, resolve
from pgfsbench.storage.limits import (
    Mechanism,
    byte_rates,
    detect,
    io_max_line,
    parse_io_max,
    parse_v1,
)
from pgfsbench.system.mountinfo import MountInfo


def figures(profile: str, gib: float) -> Figures:
    return resolve(profile, int(gib * GIB)).figures


def test_essd_is_the_formula_of_the_second_seed() -> None:
    # "For a 300GB disk, the corresponding bandwidth is 270MB" (min{120+0.5*capacity, 350})
    assert figures("essd-pl1", 300) == Figures(16_800, 16_800, 270.0, 270.0)
    assert figures("essd-pl1", 500).write_mbps == 350.0  # "a 500GB disk is 350MB"
    assert figures("essd-pl2", 1000).write_mbps == 620.0  # "PL2 1TB ... 620MB"
    assert figures("essd-pl1", 10_000).write_iops == 50_000  # capped
    assert figures("essd-pl0", 100) == Figures(3_000, 3_000, 125.0, 125.0)
    assert figures("essd-pl3", 2000).write_iops == 101_800


def test_aws_gp2_gp3_io2() -> None:
    assert figures("gp2", 10).write_iops == 100  # at least 100
    assert figures("gp2", 100) == Figures(
        300, 300, round(128 * 1.048576, 1), round(128 * 1.048576, 1)
    )
    assert figures("gp2", 1000).write_mbps == round(250 * 1.048576, 1)
    assert figures("gp2", 6000).write_iops == 16_000
    assert figures("gp3", 20) == Figures(3000, 3000, 131.1, 131.1)
    assert figures("io2", 100).write_iops == 50_000 and figures("io2", 1000).write_iops == 64_000
    assert figures("io2", 1000).write_mbps == round(1000 * 1.048576, 1)


def test_gcp_and_azure() -> None:
    assert figures("pd-balanced", 100) == Figures(
        3000, 3000, round(140 * 1.048576, 1), round(140 * 1.048576, 1)
    )
    assert figures("pd-balanced", 1000).write_iops == 6000
    assert figures("pd-ssd", 1000) == Figures(
        30_000, 30_000, round(480 * 1.048576, 1), round(480 * 1.048576, 1)
    )
    assert azure_tier(128) == ("P10", 500, 100) and azure_tier(129) == ("P15", 1100, 125)
    assert azure_tier(1024) == ("P30", 5000, 200) and azure_tier(40_000)[0] == "P80"
    assert figures("azure-premium", 500) == Figures(2300, 2300, 150.0, 150.0)


def test_hdds_from_seek_and_rotation_and_nvme_unlimited() -> None:
    assert figures("hdd-7200", 1000).write_iops == int(1000 / (8.5 + 30_000 / 7200)) == 78
    assert figures("hdd-5400", 1000) == Figures(56, 56, 110.0, 110.0)
    assert figures("nvme", 1000).is_unlimited()
    assert all(p.source and p.formula for p in PROFILES.values())


def test_overrides_and_descriptions() -> None:
    r = resolve("gp3", None, Figures(write_iops=6000, write_mbps=250.0))
    assert r.figures == Figures(3000, 6000, 131.1, 250.0)
    assert (
        r.text == "gp3 (with overrides): 3,000 read / 6,000 write IOPS, 131 read / 250 write MB/s"
    )
    assert resolve("essd-pl1", 300 * GIB).text == "essd-pl1 at 300 GiB: 16,800 IOPS, 270 MB/s"
    assert resolve(None, None, Figures(write_iops=100)).text == "- read / 100 write IOPS"
    with pytest.raises(ValueError, match="give capacity"):
        resolve("essd-pl1", None)


def test_kernel_formats() -> None:
    assert parse_v1("7:0 10485760\n7:1 100\n") == {"7:0": 10485760, "7:1": 100}
    rates = byte_rates(Figures(write_iops=100, read_mbps=12.5))
    assert rates == {"write_iops": 100, "read_bps": 12_500_000}
    line = io_max_line("7:3", rates)
    assert line == "7:3 riops=max wiops=100 rbps=12500000 wbps=max"
    assert parse_io_max(line + "\n8:0 rbps=1 wbps=max riops=max wiops=max\n") == {
        "7:3": {"riops": "max", "wiops": "100", "rbps": "12500000", "wbps": "max"},
        "8:0": {"rbps": "1", "wbps": "max", "riops": "max", "wiops": "max"},
    }


def test_detection(tmp_path: Path) -> None:
    (tmp_path / "blkio.throttle.write_iops_device").write_text("")
    v1 = [MountInfo(str(tmp_path), "cgroup", "cgroup", "rw,relatime,blkio")]
    assert detect(v1) == Mechanism("cgroup-v1-blkio", tmp_path)
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    v2 = [MountInfo(str(tmp_path), "cgroup2", "cgroup2", "rw,nsdelegate")]
    assert detect(v2) == Mechanism("cgroup-v2-io", tmp_path)
    assert detect([MountInfo("/", "/dev/vda", "ext4", "rw")]) is None
