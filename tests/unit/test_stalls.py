"""Episodes (stalls and slowdowns) and their causes, on constructed runs.

Each cause is checked against the evidence that tells it apart from its competitors, and
against the look-alikes that fooled the first version: a lock holder is not a frozen
filesystem, lock waits that are always there explain nothing, a throttle that releases
writes in bursts is not a filesystem refusing them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pgfsbench.analysis.series import Aligned, CheckpointSpan, Event, StartUp
from pgfsbench.analysis.stalls import (
    CAUSES,
    episodes_of,
    find_stalls,
    wchan_kind,
)

N = 30


def run_of(
    n: int = N, tps: float = 1000.0, *, processes: bool = True, blockers: bool = True
) -> Aligned:
    """A steady run: 1,000 TPS, a loop device writing 20 MB/s on a disk (vda) that does
    nothing else, two backends on the CPU and a little lock and WAL waiting every second
    (as tpcb-like has); the process table and the lock blockers sampled, nothing stuck."""
    al = Aligned(n)
    full = {
        "tps": tps,
        "lat_p99_ms": 5.0,
        "lat_max_ms": 9.0,
        "disk_write_mbps": 20.0,
        "disk_write_iops": 2000.0,
        "disk_util_pct": 40.0,
        "disk_await_ms": 0.5,
        "dirty_kb": 60_000.0,
        "writeback_kb": 500.0,
        "cpu_idle_pct": 30.0,
        "cpu_iowait_pct": 10.0,
        "cpu_steal_pct": 0.0,
        "checkpoint_buffers_per_s": 0.0,
        "wal_fpi_per_s": 20.0,
        "vm_allocstall_normal": 0.0,
        "disk.loop0.write_mbps": 20.0,
        "disk.vda.write_mbps": 21.0,
        "disk.vda.await_ms": 0.1,
        "outside_cpu_pct": 3.0,
        "own_cpu_pct": 150.0,
        "outside_write_mbps": 0.0,
        "psi_memory_some_pct": 0.0,
    }
    for name, v in full.items():
        al.values[name] = np.full(n, v)
    al.under_test, al.beneath = ["loop0"], ["vda"]
    al.waits = [
        {"CPU/running": 2.0, "IO/WALSync": 0.5, "Lock/transactionid": 1.5} for _ in range(n)
    ]
    if processes:
        al.structured["blocked"] = [{} for _ in range(n)]
        al.structured["outside_top"] = [[] for _ in range(n)]
    if blockers:
        busy = {
            "pid": 101,
            "state": "active",
            "wait": "IO/WALSync",
            "origin": "workload",
            "xact_s": 0.0,
            "state_s": 0.0,
            "waiters": 1,
        }
        al.structured["blockers"] = [[dict(busy)] for _ in range(n)]
    return al


def dip(al: Aligned, a: int, b: int, tps: float = 0.0) -> None:
    al.values["tps"][a:b] = tps


def seconds(al: Aligned, name: str, a: int, b: int, value: object) -> None:
    for k in range(a, b):
        al.structured[name][k] = value() if callable(value) else value


# ---------------------------------------------------------------- episodes


def test_a_clean_run_has_no_episode() -> None:
    al = run_of()
    al.values["tps"] = 1000 + 120 * np.sin(np.arange(N))  # ordinary noise
    assert find_stalls(al) == []


def test_stalls_slowdowns_and_what_is_too_short_to_count() -> None:
    al = run_of()
    dip(al, 3, 4, 0.0)  # one second at 0: a stall
    dip(al, 10, 13, 400.0)  # three seconds at 40%: a slowdown
    dip(al, 20, 21, 300.0)  # one second at 30%: not a slowdown (2 s at least)
    eps = find_stalls(al)
    assert [(e.kind, e.start_s, e.end_s) for e in eps] == [("stall", 3, 4), ("slowdown", 10, 13)]
    slow = eps[1]
    assert slow.depth_pct == 60.0 and slow.length_s == 3
    assert slow.delayed_tx == 1800 and slow.median_tps == 1000.0
    d = slow.as_dict()
    assert d["kind"] == "slowdown" and d["depth_pct"] == 60.0


def test_the_thresholds_are_the_runs_own() -> None:
    al = run_of()
    dip(al, 10, 13, 700.0)  # 70%: no slowdown at the default 50%
    assert find_stalls(al) == []
    al.thresholds = {"slowdown_fraction": 0.8, "slowdown_min_seconds": 3}
    (ep,) = find_stalls(al)
    assert ep.kind == "slowdown" and (ep.start_s, ep.end_s) == (10, 13)
    al.thresholds = {"slowdown_fraction": 0.8, "slowdown_min_seconds": 4}
    assert find_stalls(al) == []


def test_dips_a_second_apart_are_one_episode() -> None:
    flags = np.array([0, 1, 1, 0, 1, 0, 0, 0, 1, 0], dtype=bool)
    assert episodes_of(flags, 1) == [(1, 4), (8, 8)]


def test_a_partial_last_second_of_the_transaction_log_is_not_a_dip() -> None:
    """Without the tool's own progress, throughput comes from the transaction log, whose
    first and last seconds may be partly outside the measured phase."""
    al = run_of()
    al.values["tps_log"] = al.values.pop("tps")
    al.values["tps_log"][-1] = 300.0  # the run ended 0.3 s into that second
    al.values["tps_log"][0] = 0.0
    assert find_stalls(al) == []
    al.values["tps_log"][12:15] = 0.0  # inside the run: a stall
    (ep,) = find_stalls(al)
    assert (ep.start_s, ep.end_s) == (12, 15)


# ---------------------------------------------------------------- causes


def test_a_frozen_filesystem_is_named_from_writers_asleep_until_it_thaws() -> None:
    al = run_of()
    dip(al, 10, 13)
    al.values["disk_write_mbps"][10:13] = 0.0
    al.values["lat_max_ms"][13] = 3100.0
    seconds(al, "blocked", 10, 13, {"benchmark|percpu_rwsem_wait|data|postgres": 2})
    for k in range(10, 13):
        al.waits[k] = {"IO/WALWrite": 1.0, "LWLock/WALWrite": 2.0, "Lock/transactionid": 1.0}
    (ep,) = find_stalls(al)
    assert (ep.start_s, ep.end_s, ep.min_tps, ep.delayed_tx) == (10, 13, 0, 3000)
    assert ep.cause == "fs_frozen" and ep.confidence == "high", ep
    assert "thaw" in ep.evidence[0] and "percpu_rwsem_wait on the data volume" in ep.evidence[0]
    assert ep.max_latency_ms == 3100.0
    # the lock waits it caused are beaten with a reason
    assert any(k == "locks" and "as usual" in why for k, _, why in ep.alternatives)


def test_a_lock_holder_is_never_a_frozen_filesystem() -> None:
    """The adversarial case that was diagnosed 'frozen, high': a session outside the
    workload holds the branch row, idle in its transaction; nothing is written because
    nothing commits."""
    al = run_of()
    dip(al, 10, 14)
    al.values["disk_write_mbps"][10:14] = 0.0
    al.values["disk_write_iops"][10:14] = 0.0
    holder = {
        "pid": 4242,
        "state": "idle in transaction",
        "wait": "Client/ClientRead",
        "origin": "outside",
        "app": "psql",
        "xact_s": 3.5,
        "state_s": 3.4,
        "waiters": 4,
        "query": "UPDATE pgbench_branches SET bbalance = bbalance",
    }
    seconds(al, "blockers", 10, 14, lambda: [dict(holder)])
    for k in range(10, 14):
        al.waits[k] = {"Lock/transactionid": 4.0, "Client/ClientRead": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "locks" and ep.confidence == "high", ep
    assert "pid 4242" in ep.evidence[0] and "outside the workload" in ep.evidence[0]
    assert "idle in transaction" in ep.evidence[0] and "UPDATE pgbench_branches" in ep.evidence[0]
    assert ep.blockers and ep.blockers[0]["pid"] == 4242
    frozen = [a for a in ep.alternatives if a[0] == "fs_frozen"]
    assert frozen and "no benchmark process was asleep" in frozen[0][2]
    evidence: Any = ep.as_dict()["evidence"]
    assert "pid 4242" in evidence[0]


def test_an_active_lock_holder_outside_the_workload_is_named_too() -> None:
    al = run_of()
    dip(al, 8, 12)
    holder = {
        "pid": 77,
        "state": "active",
        "wait": "Timeout/PgSleep",
        "origin": "outside",
        "xact_s": 4.0,
        "state_s": 4.0,
        "waiters": 3,
        "query": "SELECT pg_sleep(4)",
    }
    seconds(al, "blockers", 8, 12, lambda: [dict(holder)])
    for k in range(8, 12):
        al.waits[k] = {"Lock/transactionid": 3.0, "Timeout/PgSleep": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "locks" and ep.confidence == "high"
    assert "waiting on Timeout/PgSleep" in ep.evidence[0]


def test_lock_waits_behind_holders_slowed_by_io_are_not_the_cause() -> None:
    al = run_of()
    dip(al, 8, 11, 50.0)
    for k in range(8, 11):
        al.waits[k] = {"Lock/transactionid": 3.0, "IO/WALSync": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause != "locks"
    assert any(k == "locks" and "waiting on I/O" in why for k, _, why in ep.alternatives)


def test_without_blockers_lock_waits_are_not_enough_for_a_verdict() -> None:
    al = run_of(blockers=False)
    dip(al, 8, 10, 20.0)
    for k in range(8, 10):
        al.waits[k] = {"Lock/transactionid": 6.0, "Lock/tuple": 2.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "unknown" and ep.confidence == "low"
    assert "lock blockers" in ep.missing


def test_a_throttled_device_that_releases_writes_in_bursts_is_not_frozen() -> None:
    """The KubeBlocks xfs cell: a checkpoint at a 13.5 MB/s cap; in the stalled seconds the
    device completed nothing, then wrote 29.6 and 27.4 MB/s: the throttle held a burst.
    Writers waited on I/O (not on a freeze), Writeback was in flight."""
    al = run_of()
    al.limits = {"write_mbps": 13.5, "write_iops": 840.0}
    al.values["disk_write_mbps"][:] = 12.0
    al.values["disk_write_iops"][:] = 800.0  # at its 840 IOPS cap before the checkpoint
    al.values["disk_write_mbps"][14:21] = [13.6, 14.0, 0.0, 0.0, 29.6, 27.4, 13.4]
    al.values["writeback_kb"][16:18] = 18_500.0
    al.values["cpu_iowait_pct"][16:18] = 48.0
    dip(al, 16, 18)
    seconds(
        al,
        "blocked",
        16,
        18,
        {
            "benchmark|jbd2_log_wait_commit|data|postgres": 3,
            "benchmark|folio_wait_bit|wal|postgres": 1,
        },
    )
    for k in range(16, 18):
        al.waits[k] = {"LWLock/WALWrite": 15.0, "IO/WALInitSync": 1.0, "IO/WALSync": 1.0}
    al.values["checkpoint_buffers_per_s"][12:20] = 900.0
    al.checkpoints = [CheckpointSpan(12.0, 21.0, 6.0, 3.0, "time", 8_000)]
    (ep,) = find_stalls(al)
    assert ep.cause == "checkpoint" and ep.confidence == "high", ep
    assert "wal_segment_creation" in ep.contributing
    cap = next(e for e in ep.evidence if "device's limit" in e)
    assert "cap 13.5 MB/s" in cap and "cap 840 IOPS; at the cap the rest of the run" in cap
    assert ep.cause != "fs_frozen" and all(
        a[0] != "fs_frozen" or a[1] <= 0 for a in ep.alternatives
    )


def test_a_limit_put_on_the_device_during_the_run() -> None:
    """Someone throttles the loop device for 4 s (blkio): the limit in effect is recorded
    each second, so the episode is the device at its (new) limit, not a mystery."""
    al = run_of()
    al.values["cap_write_mbps"] = np.full(N, np.nan)
    al.values["cap_write_mbps"][10:14] = 2.0
    al.values["disk_write_mbps"][10:14] = 2.0
    al.values["disk_util_pct"][10:14] = 100.0
    dip(al, 10, 14, 30.0)
    for k in range(10, 14):
        al.waits[k] = {"IO/WALSync": 3.0, "LWLock/WALWrite": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "device_saturated" and ep.confidence == "high", ep
    assert any("put on the devices under test during the episode" in e for e in ep.evidence)


def test_wal_segment_creation_is_named_whatever_its_size() -> None:
    """0.5 backends on WALInitSync or 1.0: the same signature, the same answer."""
    for backends in (0.5, 1.0, 3.0):
        al = run_of()
        dip(al, 3, 5, 40.0)
        for k in range(3, 5):
            al.waits[k] = {"IO/WALInitSync": backends, "LWLock/WALWrite": 2.0}
        (ep,) = find_stalls(al)
        assert ep.cause == "wal_segment_creation", (backends, ep)
        assert ep.confidence in ("high", "medium")


def test_writeback_of_the_host_on_the_disk_beneath_is_not_lock_waits() -> None:
    """The demo's stall: lock waits as every second; the disk beneath the loop files
    wrote 280 MB/s (11-20 before), its wait rose from 0.09 to 3.97 ms, Dirty fell from 440
    to 180 MB: the host's writeback, not the storage under test."""
    al = run_of()
    al.values["dirty_kb"][:] = 450_000.0
    dip(al, 4, 6, 50.0)
    al.values["disk.vda.write_mbps"][4:6] = 280.0
    al.values["disk.vda.await_ms"][4:6] = 3.97
    al.values["dirty_kb"][4:6] = [300_000.0, 180_000.0]
    (ep,) = find_stalls(al)
    assert ep.cause == "host_io", ep
    assert any("vda" in e and "not from the storage under test" in e for e in ep.evidence)
    assert any(k == "locks" and "as usual" in why for k, _, why in ep.alternatives)


def test_an_outside_writer_is_named_with_its_command() -> None:
    al = run_of()
    dip(al, 10, 14)
    al.values["disk.vda.write_mbps"][10:14] = 2500.0
    al.values["disk.vda.await_ms"][10:14] = 20.0
    al.values["outside_write_mbps"][10:14] = 2400.0
    seconds(
        al,
        "outside_top",
        10,
        14,
        lambda: [
            [900, "fio", "fio --name=hog --rw=write --bs=1M", 30.0, 0.0, 1200.0],
            [901, "fio", "fio --name=hog --rw=write --bs=1M", 30.0, 0.0, 1200.0],
        ],
    )
    (ep,) = find_stalls(al)
    assert ep.cause == "host_io" and ep.confidence == "high", ep
    assert any("fio (2 processes, pids 900, 901: fio --name=hog" in e for e in ep.evidence)


def test_cpu_taken_by_other_processes() -> None:
    al = run_of()
    dip(al, 6, 10, 250.0)
    al.values["outside_cpu_pct"][6:10] = 180.0
    al.values["own_cpu_pct"][6:10] = 20.0
    al.values["cpu_idle_pct"][6:10] = 0.0
    seconds(al, "outside_top", 6, 10, lambda: [[555, "stress", "stress --cpu 6", 180.0, 0, 0]])
    (ep,) = find_stalls(al)
    assert ep.kind == "slowdown" and ep.cause == "host_cpu" and ep.confidence == "high"
    assert "stress (pid 555: stress --cpu 6) 180% of a CPU" in ep.evidence[0]


def test_steal_time_is_the_hypervisors() -> None:
    al = run_of()
    dip(al, 6, 9, 300.0)
    al.values["cpu_steal_pct"][6:9] = 45.0
    (ep,) = find_stalls(al)
    assert ep.cause == "steal" and "hypervisor" in ep.cause_text


def test_page_reclaim_from_pressure_and_the_memory_cgroup() -> None:
    al = run_of()
    dip(al, 8, 12, 200.0)
    al.values["psi_memory_some_pct"][8:12] = 15.0
    al.values["memcg_limit_hits_per_s"] = np.zeros(N)
    al.values["memcg_limit_hits_per_s"][8:12] = 29_000.0
    (ep,) = find_stalls(al)
    assert ep.cause == "reclaim" and ep.confidence == "high"
    assert any("hit its limit" in e for e in ep.evidence)


def test_a_full_pool() -> None:
    al = run_of()
    dip(al, 5, 9, 400.0)
    for name, usual, during in (
        ("pooler_clients_waiting", 0.0, 3.0),
        ("pooler_servers_active", 4.0, 4.0),
        ("pooler_wait_ms", 0.0, 3.2),
    ):
        al.values[name] = np.full(N, usual)
        al.values[name][5:9] = during
    (ep,) = find_stalls(al)
    assert ep.cause == "pooler" and ep.confidence == "high"


def test_a_stopped_benchmark_process() -> None:
    """pgbench stopped with SIGSTOP for 4 s: nothing is stuck in PostgreSQL, its client is."""
    al = run_of()
    dip(al, 10, 14)
    seconds(al, "blocked", 10, 14, {"benchmark|stopped|unknown|pgbench": 1})
    for k in range(10, 14):
        al.waits[k] = {}
    (ep,) = find_stalls(al)
    assert ep.cause == "stopped" and ep.confidence == "high", ep
    assert "1 pgbench" in ep.evidence[0]


def test_a_stopped_client_whose_sessions_hold_locks_is_the_stop_not_the_locks() -> None:
    """pgbench stopped between two statements of a transaction: its session sits idle in
    it holding the branch row, and statements already sent wait on that lock (seen in the
    corpus: 'locks, high'). The stop is the cause; the lock waits follow from it."""
    al = run_of()
    dip(al, 10, 14)
    seconds(al, "blocked", 10, 14, {"benchmark|stopped|unknown|pgbench": 1})
    holder = {
        "pid": 31127,
        "state": "idle in transaction",
        "wait": "Client/ClientRead",
        "origin": "workload",
        "app": "pgfsbench workload",
        "xact_s": 4.0,
        "state_s": 4.0,
        "waiters": 2,
        "query": "UPDATE pgbench_branches SET bbalance",
    }
    seconds(al, "blockers", 10, 14, lambda: [dict(holder)])
    for k in range(10, 14):
        al.waits[k] = {"Lock/transactionid": 3.0, "Client/ClientRead": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "stopped" and ep.confidence == "high", ep
    assert any("idle in their transactions" in e for e in ep.evidence)
    assert "locks" not in [a[0] for a in ep.alternatives]  # explained, not beaten
    # the same lock held by a session from outside, with nothing stopped: the lock
    al = run_of()
    dip(al, 10, 14)
    seconds(al, "blockers", 10, 14, lambda: [{**holder, "origin": "outside", "app": "psql"}])
    for k in range(10, 14):
        al.waits[k] = {"Lock/transactionid": 3.0, "Client/ClientRead": 1.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "locks" and ep.confidence == "high", ep


def test_work_by_a_session_from_outside_the_workload() -> None:
    """A bulk INSERT from psql takes the server's WAL and I/O: commits fall while WAL
    rises; no lock is involved."""
    al = run_of()
    al.values["wal_mbps"] = np.full(N, 5.0)
    al.values["commits_per_s"] = np.full(N, 1000.0)
    al.values["wal_mbps"][10:14] = 40.0
    al.values["commits_per_s"][10:14] = 200.0
    al.structured["outside_sessions"] = [[] for _ in range(N)]
    sess = {
        "pid": 999,
        "state": "active",
        "wait": "LWLock/WALWrite",
        "app": "psql",
        "state_s": 3.0,
        "query": "CREATE TABLE big AS SELECT g FROM generate_series(1, 3e6) g",
    }
    seconds(al, "outside_sessions", 10, 14, lambda: [dict(sess)])
    dip(al, 10, 14, 200.0)
    (ep,) = find_stalls(al)
    assert ep.cause == "outside_session", ep
    assert "pid 999 (application 'psql')" in ep.evidence[0] and "CREATE TABLE big" in ep.evidence[0]
    assert any("not the workload's" in e for e in ep.evidence)
    # the new WAL segments its WAL needed are part of the same story, not a rival
    for k in range(10, 14):
        al.waits[k] = {"IO/WALInitWrite": 0.7, "LWLock/WALWrite": 2.0}
    (ep,) = find_stalls(al)
    assert ep.cause == "outside_session" and "wal_segment_creation" in ep.contributing


def test_snapshot_during_the_run() -> None:
    al = run_of()
    dip(al, 9, 11, 10.0)
    al.events = [Event("snapshot", 9.2, 9.9, "zfs snapshot pool/data@s1")]
    (ep,) = find_stalls(al)
    assert ep.cause == "snapshot" and "pool/data@s1" in ep.evidence[0]


def test_the_first_second_is_the_start_not_a_checkpoint_running_all_along() -> None:
    """The seed's HDD runs: 100 clients connect (190 ms) and send their first transactions
    at once, in new backends, and none completes in the first second; the warm-up's
    checkpoint is in its sync phase through the whole measured phase. The sync phase that
    is always there explains nothing; the start does, with what only fits (medium)."""
    al = run_of()
    al.start = StartUp(100, 190.0)
    dip(al, 0, 1)
    al.checkpoints = [CheckpointSpan(-40.0, 45.0, 20.0, 50.0, "wal", 40_000)]
    (ep,) = find_stalls(al)
    assert (ep.start_s, ep.end_s) == (0, 1)
    assert ep.cause == "start_up" and ep.confidence == "medium", ep
    assert "100 clients in 190 ms" in ep.evidence[0] or "100 clients in 190 ms" in ep.evidence[1]
    cp = next(why for k, _, why in ep.alternatives if k == "checkpoint")
    assert "does not set these seconds apart" in cp
    # the same dip in the middle of the run: no start to blame, and the checkpoint still
    # explains nothing
    al = run_of()
    al.start = StartUp(100, 190.0)
    dip(al, 12, 13)
    al.checkpoints = [CheckpointSpan(-40.0, 45.0, 20.0, 50.0, "wal", 40_000)]
    (ep,) = find_stalls(al)
    assert ep.cause not in ("start_up", "checkpoint"), ep


def test_a_checkpoint_still_running_at_the_end_is_weighed_without_a_sync_phase() -> None:
    """A checkpoint that began 1 s before a dip and had not completed when the run ended
    (an HDD's checkpoint can outlast the run): named from its start, never "in its sync
    phase", which nobody saw."""
    al = run_of()
    dip(al, 26, 30, 50.0)  # to the end of the run, where a running one "ends"
    al.values["checkpoint_buffers_per_s"][25:30] = 900.0
    al.values["disk_util_pct"][25:30] = 99.0
    al.values["disk_await_ms"][25:30] = 30.0
    al.checkpoints = [CheckpointSpan(25.0, float(N), 0.0, 0.0, "wal", 0, 0, True)]
    (ep,) = find_stalls(al)
    assert ep.cause == "checkpoint", ep
    assert "still running when the run ended" in " ".join(ep.evidence)
    assert not any("sync phase" in e for e in ep.evidence)


def test_a_first_second_with_an_fsync_burst_of_the_checkpoint_is_the_checkpoint() -> None:
    """The seed's xfs run: the measured phase began inside a checkpoint's sync phase that
    lasted the whole run, and in its first second the device took 81 MB/s in 3,979 writes
    (11 MB/s, 368 the rest of the run): an fsync of the checkpointer, not the start."""
    for running in (False, True):
        al = run_of()
        al.start = StartUp(100, 228.0)
        dip(al, 0, 1)
        al.values["disk_write_mbps"][:] = 11.0
        al.values["disk_write_iops"][:] = 368.0
        al.values["disk_write_mbps"][0] = 81.0
        al.values["disk_write_iops"][0] = 3979.0
        al.checkpoints = [
            CheckpointSpan(-78.0, float(N), 0.0, 0.0, "wal", 0, 0, True)
            if running
            else CheckpointSpan(-78.0, 45.0, 52.0, 59.6, "wal", 935)
        ]
        (ep,) = find_stalls(al)
        assert ep.cause == "checkpoint", (running, ep)
        # in its known sync phase, an fsync's burst; running, its phase unknown, a burst
        # that only fits (others write in bursts too): never more than low
        said = "the burst of an fsync" if not running else "its phase is not known"
        assert any(said in e for e in ep.evidence)
        assert not running or ep.confidence == "low", ep
        why = next(why for k, _, why in ep.alternatives if k == "start_up")
        assert "81.0 MB/s" in why and "3,979 writes/s" in why


def test_a_start_that_lasts_is_not_the_start_unless_connecting_took_it() -> None:
    al = run_of()
    al.start = StartUp(100, 190.0)
    dip(al, 0, 4)
    (ep,) = find_stalls(al)
    assert ep.cause != "start_up", ep
    assert any(k == "start_up" and "lasted 4 s" in why for k, _, why in ep.alternatives)
    al = run_of()
    al.start = StartUp(2000, 1950.0)  # 2,000 connections took the first two seconds
    dip(al, 0, 2)
    (ep,) = find_stalls(al)
    assert ep.cause == "start_up" and ep.confidence == "high", ep


def test_a_freeze_in_the_first_second_is_still_the_freeze_with_high_confidence() -> None:
    al = run_of()
    al.start = StartUp(4, 3.0)
    dip(al, 0, 1)
    al.values["disk_write_mbps"][0:1] = 0.0
    seconds(al, "blocked", 0, 1, {"benchmark|percpu_rwsem_wait|data|postgres": 2})
    (ep,) = find_stalls(al)
    assert ep.cause == "fs_frozen" and ep.confidence == "high", ep
    assert any(k == "start_up" for k, _, _ in ep.alternatives)


def test_unknown_says_what_was_not_recorded() -> None:
    al = run_of(processes=False, blockers=False)
    al.waits = []
    dip(al, 8, 10, 20.0)
    (ep,) = find_stalls(al)
    assert ep.cause == "unknown" and ep.confidence == "low"
    assert "wait events (samplers off)" in ep.missing
    assert any("process table" in m for m in ep.missing)
    assert "not recorded" in ep.evidence[0]


def test_a_freeze_without_the_process_table_is_never_a_confident_answer() -> None:
    """What a freeze looks like to the old evidence (nothing written, backends waiting on
    I/O, lock waits up) is what any full stop looks like: no high confidence."""
    al = run_of(processes=False, blockers=False)
    dip(al, 10, 13)
    al.values["disk_write_mbps"][10:13] = 0.0
    for k in range(10, 13):
        al.waits[k] = {"IO/WALSync": 1.0, "LWLock/WALWrite": 1.0, "Lock/transactionid": 3.0}
    (ep,) = find_stalls(al)
    assert ep.confidence != "high"


def test_every_cause_has_words_and_wait_channels_have_kinds() -> None:
    assert all(isinstance(v, str) and v for v in CAUSES.values())
    assert wchan_kind("percpu_rwsem_wait") == "freeze"
    assert wchan_kind("jbd2_log_wait_commit") == "io"
    assert wchan_kind("balance_dirty_pages") == "dirty"
    assert wchan_kind("try_to_free_mem_cgroup_pages") == "reclaim"
    assert wchan_kind("do_epoll_wait") == "other"
    assert wchan_kind("stopped") == "stopped"
