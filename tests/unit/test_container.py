"""A container's own cgroup, v1 (as runc mounts it on this kind of host) and v2: the
figures a pod can see of itself and a host's /proc cannot tell it."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.collect.container import cgroup_files, io_bytes, limits, rates

V1_STAT_A = "nr_periods 100\nnr_throttled 10\nthrottled_time 200000000\nnr_bursts 0\nburst_time 0\n"
V1_STAT_B = "nr_periods 110\nnr_throttled 18\nthrottled_time 650000000\nnr_bursts 0\nburst_time 0\n"
V1_IO_A = (
    "7:1 Read 1000000\n"
    "7:1 Write 5000000\n"
    "7:1 Sync 0\n"
    "7:1 Total 6000000\n"
    "8:0 Read 0\n"
    "Total 6000000\n"
)
V1_IO_B = (
    "7:1 Read 3000000\n"
    "7:1 Write 9000000\n"
    "7:1 Sync 0\n"
    "7:1 Total 12000000\n"
    "8:0 Read 0\n"
    "Total 12000000\n"
)
V2_STAT_A = (
    "usage_usec 1000000\n"
    "user_usec 700000\n"
    "system_usec 300000\n"
    "nr_periods 10\n"
    "nr_throttled 1\n"
    "throttled_usec 100000\n"
)
V2_STAT_B = (
    "usage_usec 1900000\n"
    "user_usec 1300000\n"
    "system_usec 600000\n"
    "nr_periods 20\n"
    "nr_throttled 5\n"
    "throttled_usec 400000\n"
)
PSI_A = (
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=1000000\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)
PSI_B = (
    "some avg10=5.00 avg60=0.00 avg300=0.00 total=1250000\n"
    "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
)


def test_v1_cpu_throttling_and_io() -> None:
    a = {"cg_cpu_stat": V1_STAT_A, "cg_cpu_usage": "10000000000\n", "cg_io": V1_IO_A}
    b = {
        "cg_cpu_stat": V1_STAT_B,
        "cg_cpu_usage": "10950000000\n",
        "cg_io": V1_IO_B,
        "cg_memory_usage": "734003200\n",
    }
    got = rates(a, b, 1.0)
    assert got["cg_cpu_pct"] == 95.0  # 0.95 s of CPU in a second
    assert got["cg_throttled_pct"] == 45.0  # 0.45 s waiting for the quota
    assert (
        got["cg_read_mbps"] == 2.0 and got["cg_write_mbps"] == 4.0
    )  # Total lines not counted twice
    assert got["cg_memory_mb"] == 734.0


def test_v2_cpu_io_and_pressure() -> None:
    a = {
        "cg_cpu_stat": V2_STAT_A,
        "cg_io": "8:16 rbytes=1000 wbytes=2000 rios=1 wios=2\n",
        "cg_pressure_io": PSI_A,
    }
    b = {
        "cg_cpu_stat": V2_STAT_B,
        "cg_io": "8:16 rbytes=2001000 wbytes=6002000 rios=9 wios=20\n",
        "cg_pressure_io": PSI_B,
    }
    got = rates(a, b, 2.0)
    assert got["cg_cpu_pct"] == 45.0
    assert got["cg_throttled_pct"] == 15.0
    assert (got["cg_read_mbps"], got["cg_write_mbps"]) == (1.0, 3.0)
    assert got["cg_psi_io_some_pct"] == 12.5  # 0.25 s of stall in 2 s
    assert io_bytes("") == (0, 0)


def test_the_files_of_each_version_and_the_limit(tmp_path: Path) -> None:
    v1 = tmp_path / "v1"
    for rel in (
        "cpu/cpu.stat",
        "cpuacct/cpuacct.usage",
        "memory/memory.usage_in_bytes",
        "memory/memory.limit_in_bytes",
    ):
        (v1 / rel).parent.mkdir(parents=True, exist_ok=True)
        (v1 / rel).write_text("0\n")
    assert set(cgroup_files(v1)) == {
        "cg_cpu_stat",
        "cg_cpu_usage",
        "cg_memory_usage",
        "cg_memory_limit",
    }
    v2 = tmp_path / "v2"
    v2.mkdir()
    for name in (
        "cgroup.controllers",
        "cpu.stat",
        "memory.current",
        "memory.max",
        "io.stat",
        "cpu.pressure",
    ):
        (v2 / name).write_text("0\n")
    assert set(cgroup_files(v2)) == {
        "cg_cpu_stat",
        "cg_memory_usage",
        "cg_memory_limit",
        "cg_io",
        "cg_pressure_cpu",
    }
    assert limits({"cg_memory_limit": "9223372036854771712\n"}) == {"memory_limit_bytes": None}
    assert limits({"cg_memory_limit": "1073741824\n"}) == {"memory_limit_bytes": 1 << 30}
    assert limits({"cg_memory_limit": "max\n"}) == {"memory_limit_bytes": None}
