"""The process table sampler and the new evidence parsers: /proc/PID/stat and io,
syscall, pressure, the memory cgroup, the lock blockers' JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from pgfsbench.collect.processes import (
    ProcessSampler,
    descendants,
    parse_proc_io,
    parse_proc_stat,
    parse_syscall,
    process_series,
    where_is,
)
from pgfsbench.collect.samplers import (
    blocker_origin,
    device_caps,
    extra_rates,
    parse_blockers,
    parse_memcg_stat,
    parse_pressure,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "proc" / "pid"


def test_stat_lines_with_odd_names_and_kernel_threads() -> None:
    s = parse_proc_stat((DATA / "stat_parens").read_bytes())
    assert (s.pid, s.comm, s.state, s.ppid) == (9491, "odd) (x y", "R", 9489)
    assert s.cpu_ticks == 4 and s.starttime == 147565 and not s.kernel_thread
    k = parse_proc_stat((DATA / "stat_kthread").read_bytes())
    assert k.comm == "kthreadd" and k.kernel_thread


def test_io_syscall_and_where_a_file_is() -> None:
    assert parse_proc_io((DATA / "io").read_bytes()) == (0, 0)
    assert parse_proc_io(b"rchar: 1\nread_bytes: 4096\nwrite_bytes: 8192\n") == (4096, 8192)
    assert parse_syscall("1 0x3 0x561165ad7ed0 0x2000 0x0 0x0 0x0 0x7ffc 0x7f6a", "x86_64") == (
        "write",
        3,
    )
    assert parse_syscall("74 0x5 0x0 0x0 0x0 0x0 0x0 0x0 0x0", "x86_64") == ("fsync", 5)
    assert parse_syscall("running") == ("running", None)
    assert parse_syscall("257 0xffffff9c 0x55 0x0 0x0 0x0 0x0 0x0 0x0", "x86_64") == (
        "syscall 257",
        None,
    )
    mounts = {"/w/mnt/data": "data", "/w/mnt/data/pg_wal_vol": "wal"}
    assert where_is("/w/mnt/data/pgdata/base/1/2", mounts) == "data"
    assert where_is("/w/mnt/data/pg_wal_vol/0001", mounts) == "wal"
    assert where_is("/w/mnt/database", mounts) == "elsewhere"
    assert where_is(None, mounts) == "unknown"


def test_descendants() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 20: 1, 21: 20}
    assert descendants(parents, [10]) == {10, 11, 12}
    assert descendants(parents, [99]) == set()


def test_pressure_memcg_and_their_rates() -> None:
    assert parse_pressure((DATA / "pressure_memory").read_text()) == {
        "some": 607256,
        "full": 321863,
    }
    stat = parse_memcg_stat((DATA / "memcg_memory.stat").read_text())
    assert "total_pgmajfault" in stat and stat["pgpgin"] > 0
    a = {
        "pressure_memory": "some avg10=0 avg60=0 avg300=0 total=1000000\n"
        "full avg10=0 avg60=0 avg300=0 total=500000\n",
        "memcg_failcnt": "10\n",
        "memcg_usage_in_bytes": "100000000\n",
        "memcg_stat": "total_workingset_refault_file 100\ntotal_pgmajfault 5\n",
    }
    b = {
        "pressure_memory": "some avg10=0 avg60=0 avg300=0 total=1150000\n"
        "full avg10=0 avg60=0 avg300=0 total=520000\n",
        "memcg_failcnt": "2010\n",
        "memcg_usage_in_bytes": "120000000\n",
        "memcg_stat": "total_workingset_refault_file 600\ntotal_pgmajfault 55\n",
    }
    r = extra_rates(a, b, 1.0)
    assert r["psi_memory_some_pct"] == 15.0 and r["psi_memory_full_pct"] == 2.0
    assert r["memcg_limit_hits_per_s"] == 2000.0 and r["memcg_usage_mb"] == 120.0
    assert r["memcg_refaults_per_s"] == 500.0 and r["memcg_majfaults_per_s"] == 50.0
    assert extra_rates({}, {}, 1.0) == {}


def test_io_limits_in_effect_by_device() -> None:
    extra = {
        "blkio_write_bps": "7:0 13500000\n7:1 1000000\n",
        "blkio_write_iops": "7:0 840\n",
        "blkio_read_bps": "",
        "blkio_read_iops": "8:0 0\n",
    }
    caps = device_caps(extra, {"7:0": "loop0", "8:0": "vda"})
    assert caps == {"disk.loop0.cap_write_mbps": 13.5, "disk.loop0.cap_write_iops": 840.0}
    assert device_caps({}, {"7:0": "loop0"}) == {}


def test_blockers_say_who_they_are() -> None:
    raw = json.dumps(
        [
            {
                "pid": 10,
                "state": "idle in transaction",
                "type": "client backend",
                "wait": "Client/ClientRead",
                "app": "psql",
                "xact_s": 4.1,
                "state_s": 4.0,
                "query": "UPDATE pgbench_branches\n   SET bbalance = 0",
                "waiters": 3,
            },
            {
                "pid": 11,
                "state": "active",
                "type": "client backend",
                "wait": "IO/WALSync",
                "app": "pgfsbench workload",
                "xact_s": 0.0,
                "state_s": 0.0,
                "query": "END;",
                "waiters": 1,
            },
            {
                "pid": 12,
                "state": "active",
                "type": "autovacuum worker",
                "wait": "CPU/running",
                "app": "",
                "waiters": 1,
            },
            {"pid": 0, "state": "prepared transaction", "waiters": 2},
        ]
    )
    rows = parse_blockers(raw)
    assert [r["origin"] for r in rows] == [
        "outside",
        "workload",
        "autovacuum worker",
        "prepared transaction",
    ]
    assert rows[0]["query"] == "UPDATE pgbench_branches SET bbalance = $1"  # no literal kept
    assert parse_blockers(None) == [] and parse_blockers("") == []
    assert blocker_origin({"pid": 5, "app": "pgfsbench sampler"}) == "pgfsbench"


def _fake_proc(root: Path, procs: dict[int, tuple[str, str, int, int, tuple[int, int]]]) -> None:
    """A /proc of our own: pid -> (comm, state, ppid, cpu ticks, (read, write))."""
    for d in root.iterdir():
        if d.name.isdigit() and int(d.name) not in procs:
            shutil.rmtree(d)
    for pid, (comm, state, ppid, ticks, (r, w)) in procs.items():
        d = root / str(pid)
        d.mkdir(exist_ok=True)
        fields = (
            [state, str(ppid)]
            + ["0"] * 4
            + ["4194304"]
            + ["0"] * 4
            + [str(ticks), "0"]
            + ["0"] * 6
            + ["100"]
            + ["0"] * 20
        )
        (d / "stat").write_text(f"{pid} ({comm}) {' '.join(fields)}\n")
        (d / "io").write_text(f"rchar: 0\nread_bytes: {r}\nwrite_bytes: {w}\n")
        (d / "cmdline").write_bytes(comm.encode() + b"\0--flag\0")
        (d / "wchan").write_text("percpu_rwsem_wait" if state == "D" else "do_wait")
        (d / "syscall").write_text("1 0x3 0x0 0x0 0x0 0x0 0x0 0x0 0x0")
        fd = d / "fd"
        fd.mkdir(exist_ok=True)
        link = fd / "3"
        if not link.is_symlink():
            link.symlink_to("/w/mnt/data/pgdata/pg_wal/000001")
        cwd = d / "cwd"
        if not cwd.is_symlink():
            cwd.symlink_to("/")


def test_the_sampler_tells_the_benchmark_from_the_rest_and_who_is_stuck(tmp_path: Path) -> None:
    """pgfsbench (100) started pgbench (101); the postmaster (200) has a backend (201);
    an outside shell (300) runs a writer (301) that ends and is reaped."""
    tree = {
        100: ("pgfsbench", "S", 1, 0, (0, 0)),
        101: ("pgbench", "S", 100, 0, (0, 0)),
        200: ("postgres", "S", 1, 0, (0, 0)),
        201: ("postgres", "S", 200, 0, (0, 0)),
        300: ("bash", "S", 1, 0, (0, 0)),
        301: ("dd", "R", 300, 0, (0, 0)),
    }
    _fake_proc(tmp_path, tree)
    s = ProcessSampler((100, 200), {"/w/mnt/data": "data"}, proc=tmp_path)
    s._machine = "x86_64"
    s._ticks_per_s = 100
    s.tick(1000.0)
    tree.update(
        {
            101: ("pgbench", "S", 100, 50, (0, 0)),
            201: ("postgres", "D", 200, 30, (0, 4096)),
            301: ("dd", "R", 300, 80, (0, 200_000_000)),
        }
    )
    _fake_proc(tmp_path, tree)
    s.tick(1001.0)
    # dd ends: bash reaps it and the kernel adds dd's whole I/O to bash's
    del tree[301]
    tree[300] = ("bash", "S", 1, 0, (0, 250_000_000))
    _fake_proc(tmp_path, tree)
    s.tick(1002.0)
    first, second = s.close()
    assert first.own_cpu_pct == 80.0 and first.outside_cpu_pct == 80.0
    assert first.outside_write_mbps == 200.0
    assert [(p.comm, p.write_mbps) for p in first.top] == [("dd", 200.0)]
    assert first.top[0].cmdline == "dd --flag"
    (stuck,) = first.blocked
    assert (stuck.pid, stuck.own, stuck.wchan, stuck.syscall, stuck.where) == (
        201,
        True,
        "percpu_rwsem_wait",
        "write",
        "data",
    )
    # what bash got from dd beyond dd's last reading is dd's last second, said as dd's
    assert second.outside_write_mbps == 50.0
    assert [(p.pid, p.comm) for p in second.top] == [(301, "dd")]
    series = process_series([first, second], 999.0)
    assert series["outside_write_mbps"] == (2.0, [200.0, 50.0])
    blocked: Any = series["blocked"][1]
    top: Any = series["outside_top"][1]
    assert blocked[0] == {"benchmark|percpu_rwsem_wait|data|postgres": 1}
    assert top[0][0][:2] == [301, "dd"]


def test_cpu_of_processes_too_short_lived_for_the_table_counts_as_outside(tmp_path: Path) -> None:
    """A build's compilers, born and gone between two ticks: the table never sees them, the
    host's CPU time does. What the benchmark's cgroup used beyond what the table saw of it
    (its own short-lived processes, a backend forked per connection) stays its own; the
    rest is outside, counted above a noise floor; without the cgroup nothing is guessed."""
    tree = {
        100: ("pgfsbench", "S", 1, 0, (0, 0)),
        200: ("postgres", "S", 1, 0, (0, 0)),
        300: ("make", "S", 1, 0, (0, 0)),
    }
    host = [1000]
    group = [10.0]

    def write_stat() -> None:
        (tmp_path / "stat").write_text(f"cpu  {host[0]} 0 0 5000 0 0 0 0\n")

    def sampler(with_group: bool) -> ProcessSampler:
        s = ProcessSampler(
            (100, 200), {}, proc=tmp_path, own_group=(lambda: group[0]) if with_group else None
        )
        s._machine, s._ticks_per_s = "x86_64", 100
        return s

    _fake_proc(tmp_path, tree)
    write_stat()
    samplers = [sampler(True), sampler(False)]
    for s in samplers:
        s.tick(1000.0)
    # one second: the postmaster's tree 40 ticks seen, make 5; the host 165 ticks; the
    # cgroup 0.6 s: 20 ticks of the benchmark's own not seen; 100 ticks nobody saw
    tree[200] = ("postgres", "S", 1, 40, (0, 0))
    tree[300] = ("make", "S", 1, 5, (0, 0))
    _fake_proc(tmp_path, tree)
    host[0] += 165
    group[0] += 0.6
    write_stat()
    for s in samplers:
        s.tick(1001.0)
    (with_group,), (without,) = (s.close() for s in samplers)
    assert with_group.unseen_cpu_pct == 100.0 and with_group.outside_cpu_pct == 105.0
    assert without.unseen_cpu_pct is None and without.outside_cpu_pct == 5.0
    assert with_group.own_cpu_pct == 40.0
    series = process_series([with_group], 999.0)
    assert series["unseen_cpu_pct"] == (2.0, [100.0])


def test_a_short_interval_gives_no_unseen_cpu(tmp_path: Path) -> None:
    """The ticker's first beat can come a few ms after the start: a few of the host's
    whole ticks over 10 ms would read as several CPUs of outside work (a demo's warm-up
    was called busy, 315% of a CPU). Under half a second nothing unseen is counted."""
    tree = {100: ("pgfsbench", "S", 1, 0, (0, 0))}
    host = [1000]
    _fake_proc(tmp_path, tree)
    (tmp_path / "stat").write_text(f"cpu  {host[0]} 0 0 5000 0 0 0 0\n")
    s = ProcessSampler((100,), {}, proc=tmp_path, own_group=lambda: 1.0)
    s._machine, s._ticks_per_s = "x86_64", 100
    s.tick(1000.0)
    (tmp_path / "stat").write_text(f"cpu  {host[0] + 3} 0 0 5000 0 0 0 0\n")
    s.tick(1000.01)
    (first,) = s.close()
    assert first.unseen_cpu_pct is None and first.outside_cpu_pct == 0.0
