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


def _proc_tree(root: Path, procs: dict[int, tuple[str, int, int, str]]) -> Path:
    """A /proc of processes: name, parent, CPU ticks, command line."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text("cpu  100 0 100 700 100 0 0 0\n")
    for pid, (name, ppid, ticks, cmd) in procs.items():
        d = root / str(pid)
        d.mkdir()
        rest = ["R", str(ppid)] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 30
        (d / "stat").write_text(f"{pid} ({name}) " + " ".join(rest) + "\n")
        (d / "cmdline").write_bytes(cmd.replace(" ", "\0").encode() + b"\0")
    return root


def test_the_cpu_of_processes_outside_the_benchmark_and_who_took_it(tmp_path: Path) -> None:
    import os

    hz = os.sysconf("SC_CLK_TCK")
    before = {
        100: ("pgfsbench", 1, 0, "pgfsbench run"),
        101: ("pgbench", 100, 0, "pgbench -c 4"),
        300: ("postgres", 1, 0, "postgres -D x"),
        301: ("postgres", 300, 0, "postgres: backend"),
        7: ("zfs-fuse", 1, 0, "zfs-fuse"),
        200: ("stress", 1, 0, "stress --cpu 1"),
        201: ("sshd", 1, 0, "sshd"),
    }
    after = {
        **before,
        101: ("pgbench", 100, 3 * hz, "pgbench -c 4"),
        301: ("postgres", 300, 4 * hz, "postgres: backend"),
        7: ("zfs-fuse", 1, hz, "zfs-fuse"),
        200: ("stress", 1, 4 * hz, "stress --cpu 1"),
        201: ("sshd", 1, 1, "sshd"),  # a tick: not worth naming
        202: ("dd", 1, hz, "dd if=/dev/zero of=/x"),  # started in between
    }
    a = read_cpu(["zfs-fuse"], _proc_tree(tmp_path / "a", before))
    b = read_cpu(["zfs-fuse"], _proc_tree(tmp_path / "b", after))
    b = CpuReading(a.t + 4.0, b.host, b.daemons, b.processes)
    use = cpu_use(a, b, 2, roots=(100, 300), proc=tmp_path / "b")
    # stress 4 s + dd 1 s + sshd one tick, over 4 s; the benchmark and zfs-fuse are not counted
    assert use["outside_cpus"] == pytest.approx(1.25 + 1 / hz / 4, abs=1e-3)
    assert use["outside_top"] == [
        [200, "stress", "stress --cpu 1", 1.0, 1],
        [202, "dd", "dd if=/dev/zero of=/x", 0.25, 1],
    ]


def test_cpu_nobody_saw_between_the_readings_is_outside_with_the_cgroup(tmp_path: Path) -> None:
    """Two readings cannot see the processes that lived between them; the host's CPU time
    minus every process seen and the benchmark's cgroup is theirs."""
    import os

    hz = os.sysconf("SC_CLK_TCK")
    procs = {100: ("pgfsbench", 1, 0, "pgfsbench run"), 300: ("postgres", 1, 0, "postgres")}
    a = read_cpu([], _proc_tree(tmp_path / "a", procs), group=lambda: 5.0)
    later = {**procs, 300: ("postgres", 1, 2 * hz, "postgres")}
    root = _proc_tree(tmp_path / "b", later)
    # the host: 200 user ticks at a; 2 s of postgres + 3 s of short-lived compilers later
    (root / "stat").write_text(f"cpu  {100 + 5 * hz} 0 100 700 100 0 0 0\n")
    b = read_cpu([], root, group=lambda: 7.0)  # the cgroup: postgres's 2 s
    b = CpuReading(a.t + 4.0, b.host, b.daemons, b.processes, b.group)
    use = cpu_use(a, b, 2, roots=(100, 300), proc=root)
    assert use["unseen_cpus"] == pytest.approx(0.75, abs=0.01)
    assert use["outside_cpus"] == pytest.approx(0.75, abs=0.01)
    # without the cgroup: not known, nothing added
    a0 = CpuReading(a.t, a.host, a.daemons, a.processes)
    b0 = CpuReading(b.t, b.host, b.daemons, b.processes)
    use0 = cpu_use(a0, b0, 2, roots=(100, 300), proc=root)
    assert "unseen_cpus" not in use0 and use0["outside_cpus"] == 0
