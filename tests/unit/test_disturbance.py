"""What else used the host during the measured phase (analysis/disturbance.py)."""

from __future__ import annotations

import numpy as np

from pgfsbench.analysis.disturbance import CpuFigures, Disturbance, assess
from pgfsbench.analysis.series import Aligned

HOG = (4242, "stress", "stress --cpu 2", 1.6, 2)


def series(n: int, **values: list[float] | np.ndarray) -> Aligned:
    return Aligned(n, {k: np.asarray(v, dtype=float) for k, v in values.items()})


def test_outside_cpu_on_a_busy_host_marks_the_run_and_names_who() -> None:
    found = assess(CpuFigures(2, 97.0, 0.0, 1.6, (HOG,)), None)
    assert found.disturbed
    (cause,) = found.causes
    assert cause.kind == "host_cpu"
    assert "1.60 CPU (80% of the machine's 2) on a host 97% busy" in cause.text
    assert "stress (2 processes from pid 4242: stress --cpu 2) 1.60 CPU" in cause.text
    assert found.warning() is not None and "disturbed during the measured phase" in (
        found.warning() or ""
    )


def test_outside_cpu_on_a_host_with_cpu_to_spare_is_said_not_held() -> None:
    found = assess(CpuFigures(2, 35.0, 0.0, 0.6, (HOG,)), None)
    (cause,) = found.causes
    assert not cause.disturbs and not found.disturbed and found.warning() is None
    assert "CPU to spare" in cause.text


def test_a_quiet_host_is_not_disturbed() -> None:
    found = assess(CpuFigures(2, 99.0, 0.2, 0.03, ()), None)
    assert found.causes == () and not found.disturbed


def test_a_burst_is_an_episode_not_a_disturbed_run() -> None:
    n = 16
    outside = np.zeros(n)
    outside[5:9] = 180.0  # 4 s of hogs: 45% of a CPU over the phase
    al = series(n, outside_cpu_pct=outside)
    assert not assess(CpuFigures(2, 90.0, 0.0, 0.45, (HOG,)), al).disturbed
    outside[2:14] = 180.0  # 12 of 16 s: most of the phase
    found = assess(CpuFigures(2, 95.0, 0.0, 1.35, (HOG,)), series(n, outside_cpu_pct=outside))
    assert found.disturbed and "in 12 of 16 seconds" in found.causes[0].text


def test_steal_marks_the_run() -> None:
    found = assess(CpuFigures(2, 60.0, 15.0, 0.0, ()), None)
    assert found.disturbed and found.causes[0].kind == "steal"


def test_outside_io_on_the_disk_beneath_over_most_of_the_phase_marks_the_run() -> None:
    n = 16
    write = np.full(n, 80.0)
    write[:2] = 0.0
    al = series(
        n,
        outside_write_mbps=write,
        outside_read_mbps=np.zeros(n),
        disk_write_mbps=np.full(n, 5.0),
        disk_read_mbps=np.zeros(n),
        **{"disk.vda.write_mbps": write + 5.0, "disk.vda.read_mbps": np.zeros(n)},
    )
    al.beneath = ["vda"]
    al.structured["outside_top"] = [[[99, "fio", "fio --name=hog", 3.0, 0.0, 80.0]]] * n
    found = assess(CpuFigures(2, 50.0, 0.0, 0.05, ()), al)
    (io,) = [c for c in found.causes if c.kind == "host_io"]
    assert io.disturbs and "80.0 MB/s of I/O in 14 of 16 seconds" in io.text
    assert "fio (pid 99: fio --name=hog) 80.0 MB/s" in io.text and "vda" in io.text
    # the same writer for 4 s only: an episode's matter
    write[6:] = 0.0
    al.values["outside_write_mbps"] = write
    assert assess(CpuFigures(2, 50.0, 0.0, 0.05, ()), al).causes == ()


def test_outside_io_that_reaches_neither_the_storage_nor_the_disk_beneath_is_not_held() -> None:
    n = 10
    al = series(n, outside_write_mbps=np.full(n, 50.0), outside_read_mbps=np.zeros(n))
    al.structured["blocked"] = [{"outside|io_schedule|elsewhere|dd": 1}] * n
    assert assess(CpuFigures(2, 50.0, 0.0, 0.0, ()), al).causes == ()
    al.structured["blocked"] = [{"outside|io_schedule|data|dd": 1}] * n
    (io,) = assess(CpuFigures(2, 50.0, 0.0, 0.0, ()), al).causes
    assert io.disturbs and "waited on I/O in a volume under test in 10 of 10" in io.text


def test_without_the_samplers_what_was_not_measured_is_said() -> None:
    found = assess(CpuFigures(2, 50.0, 0.0, None, ()), None)
    assert any("I/O by processes outside" in m for m in found.not_measured)
    assert any("CPU of processes outside" in m for m in found.not_measured)


def test_a_disturbance_reads_back_as_it_was_stored() -> None:
    found = assess(CpuFigures(2, 97.0, 12.0, 1.6, (HOG,)), None)
    again = Disturbance.from_dict(found.as_dict())
    assert again == found and again.disturbed
