from pathlib import Path

import pytest

from pgfsbench.collect.cpu_use import CpuReading, cpu_use, read_cpu
from pgfsbench.collect.procfs import CpuTimes


def _proc(root: Path, cpu: str, procs: dict[int, tuple[str, int, int]]) -> Path:
    """A /proc with its aggregate cpu line and processes (name, utime, stime in ticks)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text(f"cpu  {cpu}\ncpu0 1 2 3 4 5 6 7 8\n")
    for pid, (name, ut, st) in procs.items():
        d = root / str(pid)
        d.mkdir()
        (d / "comm").write_text(name + "\n")
        rest = ["S", "1"] + ["0"] * 9 + [str(ut), str(st)] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({name}) " + " ".join(rest) + "\n")
    (root / "self").mkdir()
    return root


def test_the_daemons_cpu_and_the_hosts_busy_share_between_two_readings(tmp_path: Path) -> None:
    import os

    hz = os.sysconf("SC_CLK_TCK")
    a = read_cpu(
        ["zfs-fuse", "pgfsbench-disk"],
        _proc(
            tmp_path / "a", "100 0 100 700 100 0 0 0", {7: ("zfs-fuse", 10, 10), 8: ("bash", 5, 5)}
        ),
    )
    b = read_cpu(
        ["zfs-fuse", "pgfsbench-disk"],
        _proc(
            tmp_path / "b",
            "500 0 400 900 200 0 0 0",
            {7: ("zfs-fuse", 10 + hz, 10 + hz // 2), 9: ("pgfsbench-disk", hz // 2, 0)},
        ),
    )
    assert set(a.daemons) == {7} and set(b.daemons) == {7, 9}
    b = CpuReading(a.t + 2.0, b.host, b.daemons)  # two seconds apart
    use = cpu_use(a, b, 2)
    # 1000 ticks: 700 busy, 200 idle, 100 iowait
    assert use["busy_pct"] == pytest.approx(70.0) and use["iowait_pct"] == pytest.approx(10.0)
    # zfs-fuse 1.5 s of CPU in 2 s; the disk daemon started in between: all its 0.5 s
    assert use["daemons_cpus"] == {
        "pgfsbench-disk": pytest.approx(0.25),
        "zfs-fuse": pytest.approx(0.75),
    }
    assert use["cpus"] == 2 and use["seconds"] == pytest.approx(2.0)


def test_no_time_between_the_readings_is_not_a_busy_host() -> None:
    t = CpuTimes(1, 0, 1, 1, 0, 0, 0, 0)
    use = cpu_use(CpuReading(1.0, t, {}), CpuReading(1.0, t, {}), 2)
    assert use["busy_pct"] == 0.0 and use["daemons_cpus"] == {}
