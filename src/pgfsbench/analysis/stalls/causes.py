"""The causes: one hypothesis each, with its clues for and against from the evidence."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pgfsbench.analysis.outside import top_outside
from pgfsbench.analysis.series import median_finite
from pgfsbench.analysis.stalls.evidence import Context, _mb, top
from pgfsbench.analysis.stalls.model import IO_LOAD, IO_WAITS, Clue, Finding, _blocked_key
from pgfsbench.analysis.stalls.thresholds import GOOD, STRONG, WEAK
from pgfsbench.collect.processes import UNSEEN_FLOOR_PCT

# ---------------------------------------------------------------- the causes


def _fs_frozen(c: Context) -> Finding | None:
    f = Finding("fs_frozen")
    sampled, blocked = c.blocked_in()
    frozen = c.seconds_blocked("freeze")
    if frozen:
        who = {
            (k[1].split(":", 1)[1], k[2]): n
            for k, n in blocked.items()
            if k[0] and k[1].startswith("freeze:") and k[2] not in ("elsewhere", "unknown")
        }
        where = ", ".join(f"{n:.1f} in {w} on the {v} volume" for (w, v), n in who.items())
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel waiting for the "
                f"filesystem to thaw in {frozen} of {sampled} sampled "
                f"second(s) ({where})",
                STRONG if frozen * 2 >= sampled else GOOD,
            )
        )
    writes, usual = c.mean_in("disk_write_mbps"), c.usual("disk_write_mbps")
    # an episode's first and last seconds are often partly before or after the freeze:
    # nothing written in most of its seconds is what a freeze looks like
    quiet = (
        c.seconds_below("disk_write_mbps", max(0.05, 0.05 * usual))
        if math.isfinite(usual) and usual >= 0.2
        else 0
    )
    nothing = quiet * 2 >= c.n and quiet > 0
    if frozen and nothing:
        f.support.append(
            Clue(
                f"nothing written to the devices under test in {quiet} of "
                f"{c.n} second(s) ({usual:.1f} MB/s the rest of the run)",
                GOOD,
            )
        )
    if frozen:
        io, names = c.io_waits()
        if io >= 0.5:
            f.support.append(Clue(f"backends waiting on I/O or WAL: {names}", GOOD))
    if sampled and not frozen and c.min_tps_share() <= 0.1:
        f.against.append(
            Clue(
                "no benchmark process was asleep in the kernel on a frozen "
                "filesystem (a freeze puts every writer there)",
                STRONG,
            )
        )
    elif not sampled and nothing:
        io, names = c.io_waits()
        if io >= 0.5:
            f.support.append(
                Clue(
                    f"nothing written to the devices under test "
                    f"({writes:.2f} MB/s, {usual:.1f} the rest of the run) "
                    f"while backends waited on I/O ({names}); the process "
                    "table, which tells a freeze apart, was not recorded",
                    WEAK,
                )
            )
    if math.isfinite(writes) and math.isfinite(usual) and usual > 0.2 and writes >= 0.5 * usual:
        f.against.append(
            Clue(
                f"the devices under test kept writing ({writes:.1f} MB/s, "
                f"{usual:.1f} the rest of the run)",
                GOOD,
            )
        )
    holder = _lock_holders(c)
    if holder:
        f.against.append(
            Clue(
                f"backends waited on a lock held by a session that was not "
                f"stuck in the kernel (pid {holder[0].get('pid')})",
                STRONG,
            )
        )
    return f if f.support or f.against else None


def _device_stalled(c: Context) -> Finding | None:
    """The device stopped completing I/O (dead, or holding requests): requests in flight,
    none completed, the benchmark asleep on I/O."""
    f = Finding("device_stalled")
    devices = c.al.under_test
    in_flight = sum(
        c.mean_in(f"disk.{d}.in_flight") for d in devices if c.al.has(f"disk.{d}.in_flight")
    )
    ios = c.mean_in("disk_write_iops") + (
        c.mean_in("disk_read_iops") if c.al.has("disk_read_iops") else 0.0
    )
    if not (math.isfinite(in_flight) and in_flight >= 1 and math.isfinite(ios) and ios < 1):
        return None
    f.support.append(
        Clue(
            f"{in_flight:.1f} request(s) in flight on the devices under test and none completed",
            GOOD,
        )
    )
    io_secs = c.seconds_blocked("io")
    if io_secs:
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel waiting for I/O in {io_secs} second(s)",
                GOOD,
            )
        )
    if c.cap():
        f.against.append(
            Clue("the devices wrote at their emulated limit around it: throttled, not dead", STRONG)
        )
    return f


def _lock_holders(c: Context) -> list[dict[str, object]]:
    """The sessions at the root of the lock waits of the episode that were not slowed by
    I/O themselves: idle in a transaction, outside the workload, or busy with something
    else than I/O for a while. Aggregated over the episode's seconds, by pid."""
    roots: dict[Any, dict[str, Any]] = {}
    for sec in c.structured_in("blockers"):
        for b in sec or []:
            wait = str(b.get("wait") or "")
            if wait.startswith("Lock/"):
                continue  # in the middle of a chain: waits itself
            pid = b.get("pid")
            seen = roots.setdefault(pid, {**b, "seconds": 0})
            seen["seconds"] += 1
            seen["waiters"] = max(int(seen.get("waiters") or 0), int(b.get("waiters") or 0))
            for k in ("xact_s", "state_s"):
                if (b.get(k) or 0) > (seen.get(k) or 0):
                    seen[k] = b[k]
    held = []
    for r in roots.values():
        state, wait = str(r.get("state") or ""), str(r.get("wait") or "")
        idle = state.startswith("idle in transaction") and (r.get("state_s") or 0) >= 0.5
        busy_elsewhere = (
            state == "active"
            and not wait.startswith(IO_WAITS)
            and not wait.startswith("CPU/")
            and (r.get("state_s") or 0) >= 0.5
        )
        long_tx = (r.get("xact_s") or 0) >= max(1.0, 0.5 * c.n)
        if (
            r.get("origin") in ("outside", "prepared transaction")
            or idle
            or busy_elsewhere
            or (long_tx and not wait.startswith(IO_WAITS))
        ):
            held.append(r)
    return sorted(held, key=lambda r: (-int(r.get("waiters") or 0), -(r.get("xact_s") or 0)))


def describe_blocker(r: dict[str, Any]) -> str:
    origin = {
        "outside": "a session from outside the workload",
        "workload": "a workload session",
        "pgfsbench": "pgfsbench's own session",
    }.get(str(r.get("origin")), str(r.get("origin")))
    parts = [
        f"pid {r.get('pid')} ({origin}"
        + (f", application {r['app']!r}" if r.get("app") else "")
        + ")"
    ]
    state = r.get("state") or "?"
    parts.append(f"{state}" + (f" for {r['state_s']:g} s" if r.get("state_s") else ""))
    if state == "active":
        parts.append(f"waiting on {r.get('wait')}")
    if r.get("xact_s") is not None:
        parts.append(f"its transaction open {r['xact_s']:g} s")
    text = ", ".join(parts) + f", blocked {r.get('waiters')} backend(s)"
    if r.get("query"):
        text += f" (last statement: {r['query']})"
    return text


def _locks(c: Context) -> Finding | None:
    waits, usual = c.waits_in(), c.waits_usual()
    locks_in = sum(n for e, n in waits.items() if e.startswith("Lock/"))
    if locks_in < 0.5:
        return None
    locks_usual = sum(n for e, n in usual.items() if e.startswith("Lock/"))
    f = Finding("locks")
    excess = locks_in - locks_usual
    lock_events = top({e: n for e, n in waits.items() if e.startswith("Lock/")})
    if excess < max(0.5, 0.5 * locks_usual):
        f.against.append(
            Clue(
                f"lock waits as usual ({locks_in:.1f} backends, "
                f"{locks_usual:.1f} the rest of the run): they explain "
                "nothing",
                STRONG,
            )
        )
        return f
    # more lock waits follow any stall (transactions stuck in their commit keep their row
    # locks): only who holds them says whether the lock is the cause
    f.support.append(
        Clue(
            f"{locks_in:.1f} backends waiting on locks ({lock_events}), "
            f"{locks_usual:.1f} the rest of the run",
            WEAK,
        )
    )
    if not c.al.sampled("blockers"):
        return f
    held = _lock_holders(c)
    if held:
        f.blockers = tuple(held[:3])
        f.support.append(Clue("held by " + describe_blocker(held[0]), STRONG))
        return f
    io_roots = {
        str(b.get("wait"))
        for sec in c.structured_in("blockers")
        for b in sec or []
        if str(b.get("wait") or "").startswith(IO_WAITS)
    }
    if io_roots:
        f.against.append(
            Clue(
                "the sessions holding the locks were themselves waiting on "
                f"I/O ({', '.join(sorted(io_roots)[:3])}): the lock waits "
                "follow from a slower holder",
                GOOD,
            )
        )
    return f


def _checkpoint(c: Context) -> Finding | None:
    lo, hi = c.span()
    found = [cp for cp in c.al.checkpoints if not (cp.ended_s < lo - 1 or cp.start > hi + 1)]
    if not found:
        return None
    cp = max(found, key=lambda x: x.buffers)
    in_sync = not cp.running and cp.sync_start <= hi + 1 and cp.ended_s >= lo - 0.5
    f = Finding("checkpoint")
    f.support.append(
        Clue(
            f"checkpoint ({cp.reason or 'unknown reason'}) from {cp.start:+.1f} s, still "
            "running when the run ended"
            if cp.running
            else f"checkpoint ({cp.reason or 'unknown reason'}) from "
            f"{cp.start:+.1f} s to {cp.ended_s:+.1f} s: write {cp.write_s:g} s,"
            f" sync {cp.sync_s:g} s, {cp.buffers} buffers",
            WEAK,
        )
    )
    always = c.calm_share(cp.sync_start, cp.ended_s)
    # in its sync phase, and the rest of the run mostly not (NaN: no rest to compare)
    telling = in_sync and not always >= 0.5
    if in_sync and not telling:  # what is always there explains nothing
        f.against.append(
            Clue(
                f"its sync phase also covers {always:.0%} of the run's seconds without "
                "an episode: being in it does not set these seconds apart",
                WEAK,
            )
        )
    if telling:
        f.support.append(Clue("the episode falls in its sync phase", GOOD))
    surge = write_surge(c)
    if surge and in_sync:
        # what sets these seconds apart in a sync phase that lasts: one of its fsyncs
        # sending a file's dirty pages to the device at once
        f.support.append(Clue(f"{surge} while it was syncing: the burst of an fsync", GOOD))
    elif surge and cp.running:
        # its phase is not known before it ends, and a burst has other writers (the
        # kernel's writeback, a filesystem's own commit): it only fits
        f.support.append(
            Clue(f"{surge} while it was running (its phase is not known before it ends)", WEAK)
        )
    if -1 <= lo - cp.start <= 3 and not telling:
        f.support.append(
            Clue(f"the episode began {lo - cp.start:+.1f} s after the checkpoint started", GOOD)
        )
    _rose_clue(
        c,
        f,
        ("wal_fpi_per_s", 2.0, 50.0),
        "full-page images in WAL {:,.0f}/s ({:,.0f} the rest of the run): every page's "
        "first change after the checkpoint began",
    )
    _rose_clue(
        c,
        f,
        ("checkpoint_buffers_per_s", 2.0, 10.0),
        "checkpointer writing {:,.0f} buffers/s ({:,.0f} the rest of the run)",
    )
    _io_clues(c, f)
    writes = c.mean_in("disk_write_mbps", pad=1)
    if (
        math.isfinite(writes)
        and writes < 0.05
        and not c.cap()
        and not c.mean_in("writeback_kb") > 1024
    ):
        f.against.append(
            Clue(
                "the devices under test wrote nothing around it: the "
                "checkpoint cannot be what held them",
                GOOD,
            )
        )
    return f


def write_surge(c: Context) -> str | None:
    """The devices under test writing at least three times their usual rate (in MB/s or
    in writes a second) during the episode, in words; None when they did not."""
    mb = c.rose("disk_write_mbps", 3.0, 5.0)
    ops = c.rose("disk_write_iops", 3.0, 200.0)
    if not (mb or ops):
        return None
    during = [f"{c.mean_in('disk_write_mbps'):,.1f} MB/s"] if c.al.has("disk_write_mbps") else []
    usual = [f"{c.usual('disk_write_mbps'):,.1f}"] if c.al.has("disk_write_mbps") else []
    if c.al.has("disk_write_iops"):
        during.append(f"{c.mean_in('disk_write_iops'):,.0f} writes/s")
        usual.append(f"{c.usual('disk_write_iops'):,.0f}")
    return (
        f"the devices under test wrote {', '.join(during)} in it "
        f"({', '.join(usual)} the rest of the run)"
    )


def _io_clues(c: Context, f: Finding) -> None:
    """What any cause of more I/O than the device takes shares: the device at its cap or
    busy, backends waiting on I/O."""
    cap = c.cap_clue()
    if cap:
        f.support.append(cap)
    else:
        util = c.mean_in("disk_util_pct")
        aw = c.rose("disk_await_ms", 3.0, 0.5)
        if math.isfinite(util) and util >= 90 and aw:
            f.support.append(
                Clue(
                    f"devices under test {util:.0f}% busy, {aw[0]:.1f} ms a "
                    f"request ({aw[1]:.2f} the rest of the run)",
                    GOOD,
                )
            )
    io, names = c.io_waits()
    if io >= 0.5:
        f.support.append(
            Clue(f"backends waiting on I/O or WAL above the rest of the run: {names}", GOOD)
        )


def _wal_segment_creation(c: Context) -> Finding | None:
    ex = c.excess_waits()
    init = {e: n for e, n in ex.items() if e.startswith("IO/WALInit")}
    total_init = sum(init.values())
    if total_init < 0.05:
        return None
    share = total_init / max(sum(ex.values()), 1e-9)
    f = Finding("wal_segment_creation")
    f.support.append(
        Clue(
            f"backends waiting on WAL segment creation: {top(init)} "
            f"({share * 100:.0f}% of the waiting the episode added)",
            STRONG if total_init >= 0.3 or share >= 0.2 else GOOD if total_init >= 0.1 else WEAK,
        )
    )
    added = [cp.wal_added for cp in c.al.checkpoints if cp.wal_added]
    if added:
        f.support.append(Clue(f"checkpoints report {sum(added)} WAL file(s) added", WEAK))
    cap = c.cap_clue()
    if cap:
        f.support.append(cap)
    return f


def _writeback(c: Context) -> Finding | None:
    """The storage's own dirty pages written back in a surge."""
    if not (c.al.has("dirty_kb") and c.al.has("writeback_kb")):
        return None
    before, low = c.at("dirty_kb", c.a - 1), c.min_in("dirty_kb")
    throttled = c.seconds_blocked("dirty", on_test=False)
    f = Finding("writeback")
    if throttled:
        f.support.append(
            Clue(
                f"writers throttled by the kernel for dirty memory "
                f"(balance_dirty_pages) in {throttled} second(s)",
                STRONG,
            )
        )
    if (
        math.isfinite(before)
        and math.isfinite(low)
        and before >= 20 * 1024
        and (before - low) / before >= 0.3
    ):
        ours = c.rose("disk_write_mbps", 2.0, 1.0)
        wb = c.rose("writeback_kb", 2.0, 1024)
        if ours or wb:
            f.support.append(
                Clue(
                    f"Dirty fell from {_mb(before)} to {_mb(low)} while "
                    + (
                        f"the devices under test wrote {ours[0]:,.1f} MB/s ({ours[1]:,.1f} the "
                        "rest of the run)"
                        if ours
                        else f"Writeback rose to {_mb(c.max_in('writeback_kb'))}"
                    ),
                    GOOD,
                )
            )
    if not f.support:
        return None
    _io_clues(c, f)
    return f


def _beneath(c: Context, figure: str) -> tuple[float, float, float, float] | None:
    """(the disks beneath: during, usual; the part the storage under test does not
    explain: during, usual) for write_mbps or read_mbps."""
    if not c.al.beneath or not all(c.al.has(f"disk.{d}.{figure}") for d in c.al.beneath):
        return None
    total = sum((c.al.device(d, figure) for d in c.al.beneath), np.zeros(c.al.seconds))
    ours = c.al.get(f"disk_{figure}")
    other = np.clip(total - np.nan_to_num(ours), 0, None)
    sl = slice(c.a, c.b + 1)

    def med(v: np.ndarray) -> float:
        return median_finite(v[c.base]) if c.base.any() else 0.0

    return (float(np.nanmean(total[sl])), med(total), float(np.nanmean(other[sl])), med(other))


def _host_io(c: Context) -> Finding | None:
    """Another workload on the disk that holds the storage under test (or on its own
    devices): the disk beneath busier than the storage explains, outside processes doing
    I/O."""
    f = Finding("host_io")
    disks = ", ".join(c.al.beneath)
    io = c.rose("outside_write_mbps", 3.0, 10.0) or c.rose("outside_read_mbps", 3.0, 10.0)
    before, low = c.at("dirty_kb", c.a - 1), c.min_in("dirty_kb")
    host_writeback = math.isfinite(before) and before >= 100 * 1024 and low <= 0.7 * before
    # traffic on the disk beneath that neither a process outside the benchmark nor the
    # host's writeback explains is the kernel's, for the storage under test (a sparse
    # loop file's allocation): it counts only when one of them does
    explained = bool(io) or host_writeback
    extra = []
    for figure, verb in (("write_mbps", "wrote"), ("read_mbps", "read")):
        b = _beneath(c, figure)
        if b is None:
            continue
        total, _usual_total, other, usual_other = b
        if other >= max(20.0, 3 * usual_other):
            extra.append(
                Clue(
                    f"the disk beneath ({disks}) {verb} {total:,.1f} MB/s, "
                    f"{other:,.1f} of it not from the storage under test "
                    f"({usual_other:,.1f} the rest of the run)",
                    GOOD if explained else WEAK,
                )
            )
    f.support += extra
    aw = [
        (d, c.mean_in(f"disk.{d}.await_ms"), c.usual(f"disk.{d}.await_ms"))
        for d in c.al.beneath
        if c.al.has(f"disk.{d}.await_ms")
    ]
    slow = [(d, x, u) for d, x, u in aw if math.isfinite(x) and x >= max(1.0, 3 * u)]
    if slow and extra and explained:
        d, x, u = slow[0]
        f.support.append(Clue(f"{d} took {x:.2f} ms a request ({u:.2f} the rest of the run)", GOOD))
    if io:
        names = _top_outside(c, "io")
        f.support.append(
            Clue(
                f"processes outside the benchmark did {io[0]:,.1f} MB/s of I/O "
                f"({io[1]:,.1f} the rest of the run): {names}",
                STRONG if extra else GOOD,
            )
        )
    if host_writeback and extra:
        f.support.append(Clue(f"host writeback: Dirty fell from {_mb(before)} to {_mb(low)}", WEAK))
    if extra and not explained and c.al.sampled("outside_top"):
        f.against.append(
            Clue(
                "no process outside the benchmark did I/O and the host's dirty "
                "memory did not fall: the extra traffic is the kernel's, for "
                "the storage under test",
                GOOD,
            )
        )
    return f if f.support else None


def _top_outside(c: Context, by: str) -> str:
    """The outside processes that used the most CPU or I/O during the episode, those of one
    command line together."""
    named = top_outside(c.structured_in("outside_top"), c.n, by)
    return named or "not named (the process table was not recorded)"


def _rose_clue(
    c: Context,
    f: Finding,
    rule: tuple[str, float, float],
    text: str,
    weight: float = GOOD,
) -> None:
    """A clue for ``f`` when series ``rule[0]`` rose at least ``rule[1]`` times its usual
    value, above ``rule[2]``: ``text`` formatted with (during, usual)."""
    rose = c.rose(*rule)
    if rose:
        f.support.append(Clue(text.format(*rose), weight))


def _host_cpu(c: Context) -> Finding | None:
    used = c.rose("outside_cpu_pct", 2.0, 40.0)
    if not used or used[0] - used[1] < 40:
        return None
    f = Finding("host_cpu")
    idle = c.mean_in("cpu_idle_pct")
    unseen = c.mean_in("unseen_cpu_pct")
    short_lived = (
        f" ({unseen:.0f}% of a CPU by processes too short-lived for the once-a-second "
        "process table: the host's CPU time minus the benchmark's cgroup and every process "
        "seen)"
        if math.isfinite(unseen) and unseen >= UNSEEN_FLOOR_PCT
        else ""
    )
    squeezed = (math.isfinite(idle) and idle <= 10) or (
        c.rose("psi_cpu_some_pct", 2.0, 20.0) is not None
    )
    f.support.append(
        Clue(
            f"processes outside the benchmark used {used[0]:.0f}% of a CPU "
            f"({used[1]:.0f}% the rest of the run){short_lived}: "
            f"{_top_outside(c, 'cpu')}",
            STRONG if squeezed else GOOD,
        )
    )
    own = c.rose("own_cpu_pct", 0.0, 0.0)
    if own is not None:
        mine, usual = c.mean_in("own_cpu_pct"), c.usual("own_cpu_pct")
        if math.isfinite(usual) and mine <= 0.8 * usual:
            f.support.append(
                Clue(
                    f"the benchmark's processes got {mine:.0f}% of a CPU "
                    f"({usual:.0f}% the rest of the run)",
                    WEAK,
                )
            )
    if math.isfinite(idle) and idle >= 30:
        f.against.append(Clue(f"the CPUs were {idle:.0f}% idle", GOOD))
    return f


def _steal(c: Context) -> Finding | None:
    st = c.rose("cpu_steal_pct", 2.0, 10.0)
    if not st or st[0] - st[1] < 10:
        return None
    return Finding(
        "steal",
        [
            Clue(
                f"the hypervisor took {st[0]:.0f}% of the CPUs (steal; "
                f"{st[1]:.0f}% the rest of the run)",
                STRONG if st[0] - st[1] >= 20 else GOOD,
            )
        ],
    )


def _reclaim(c: Context) -> Finding | None:
    f = Finding("reclaim")
    names = [
        n
        for n in ("vm_allocstall_normal", "vm_allocstall_movable", "vm_pgscan_direct")
        if c.al.has(n)
    ]
    if names:
        inside = sum(float(np.nansum(c.al.get(n)[c.a : c.b + 1])) for n in names)
        outside = sum(float(np.nansum(c.al.get(n)[c.base])) for n in names)
        per_in, per_out = inside / c.n, outside / max(1, int(c.base.sum()))
        if inside > 0 and per_in >= 5 * per_out + 1:
            f.support.append(
                Clue(
                    f"direct reclaim during the episode: {per_in:,.0f} pages "
                    f"or stalls/s (allocstall, pgscan_direct; {per_out:,.1f}/s "
                    "the rest of the run)",
                    GOOD,
                )
            )
    _rose_clue(
        c,
        f,
        ("memcg_limit_hits_per_s", 5.0, 10.0),
        "PostgreSQL's memory cgroup hit its limit {:,.0f} times a second ({:,.0f} the rest "
        "of the run)",
    )
    for name, what in (
        ("memcg_refaults_per_s", "refaults of evicted pages"),
        ("memcg_majfaults_per_s", "major faults"),
    ):
        _rose_clue(
            c,
            f,
            (name, 5.0, 50.0),
            what + " in its memory cgroup {:,.0f}/s ({:,.0f} the rest of the run)",
            WEAK,
        )
    _rose_clue(
        c,
        f,
        ("psi_memory_some_pct", 4.0, 10.0),
        "tasks stalled on memory {:.0f}% of the time (pressure; {:.0f}% the rest of the run)",
        STRONG,
    )
    stuck = c.seconds_blocked("reclaim", on_test=False)
    if stuck:
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel reclaiming memory in {stuck} second(s)",
                STRONG,
            )
        )
    return f if f.support else None


def _pooler(c: Context) -> Finding | None:
    """The pool full: clients queue in the pooler for a server connection."""
    waiting = c.rose("pooler_clients_waiting", 2.0, 0.5)
    if not waiting or waiting[0] - waiting[1] < 0.5:
        return None
    f = Finding("pooler")
    f.support.append(
        Clue(
            f"{waiting[0]:.1f} clients waited in the pooler for a server "
            f"connection ({waiting[1]:.1f} the rest of the run)",
            GOOD,
        )
    )
    active, usual = c.mean_in("pooler_servers_active"), c.usual("pooler_servers_active")
    if math.isfinite(active) and math.isfinite(usual) and active >= max(1.0, 0.9 * usual):
        f.support.append(
            Clue(
                f"every server connection of the pool busy ({active:.1f}, "
                f"{usual:.1f} the rest of the run)",
                GOOD,
            )
        )
    _rose_clue(
        c,
        f,
        ("pooler_wait_ms", 3.0, 1.0),
        "a client's wait for a connection {:,.1f} ms ({:,.2f} the rest of the run)",
    )
    return f


def _device_saturated(c: Context) -> Finding | None:
    f = Finding("device_saturated")
    _io_clues(c, f)
    throttled = [(cap, unit) for _, cap, _, unit, new, _ in c.caps() if new]
    if throttled:
        f.support.append(
            Clue(
                "an I/O limit was put on the devices under test during the "
                "episode (blkio: "
                + ", ".join(f"{cap:,.4g} {unit}" for cap, unit in throttled)
                + "; none as low the rest of the run)",
                STRONG,
            )
        )
    if not any("device's limit" in s.text or "busy" in s.text for s in f.support):
        return None
    b = _beneath(c, "write_mbps")
    if b is not None and b[2] >= max(20.0, 3 * b[3]):
        f.against.append(
            Clue(
                f"the disk beneath was busy with I/O not from the storage "
                f"under test ({b[2]:,.1f} MB/s of writes)",
                GOOD,
            )
        )
    return f


def _stopped(c: Context) -> Finding | None:
    """A process of the benchmark stopped (state T: SIGSTOP, a debugger): pgbench itself,
    a backend holding locks, the WAL writer..."""
    seconds = c.seconds_blocked("stopped", on_test=False)
    if not seconds:
        return None
    names: dict[str, float] = {}
    for sec in c.structured_in("blocked"):
        for key, n in (sec or {}).items():
            who, wchan, _, comm = _blocked_key(key)
            if who == "benchmark" and wchan == "stopped":
                names[comm or "?"] = max(names.get(comm or "?", 0), n)
    what = ", ".join(f"{n:g} {comm}" for comm, n in names.items())
    f = Finding(
        "stopped",
        [
            Clue(
                f"benchmark processes stopped (state T) in {seconds} of {c.n} second(s): {what}",
                STRONG if seconds * 2 >= c.n else GOOD,
            )
        ],
    )
    # a stopped client sends nothing more: its sessions stay idle in their transactions,
    # and the backends whose statements were already sent wait on their row locks. Those
    # lock waits are the stop's, not a cause of their own
    idle = [
        r
        for r in (_lock_holders(c) if c.al.sampled("blockers") else [])
        if r.get("origin") == "workload"
        and str(r.get("state") or "").startswith("idle in transaction")
    ]
    if idle:
        f.support.append(
            Clue(
                f"the locks others waited on were held by {len(idle)} workload "
                "session(s) idle in their transactions: their client sent "
                "nothing while it was stopped",
                GOOD,
            )
        )
        f.explains = frozenset({"locks"})
    return f


def _outside_session(c: Context) -> Finding | None:
    """Sessions from outside the workload at work in the server (a report, a bulk update,
    a VACUUM by hand): they take the server's CPU, I/O and WAL from the workload."""
    if not c.al.sampled("outside_sessions"):
        return None
    every = c.al.structured["outside_sessions"]
    during = [v for v in c.structured_in("outside_sessions") if v is not None]
    before = [v for i, v in enumerate(every) if c.base[i] and v is not None]
    busy_in = sum(len(v) for v in during) / max(1, len(during))
    busy_usual = sum(len(v) for v in before) / max(1, len(before))
    if not during or busy_in - busy_usual < 0.5:
        return None
    seen: dict[Any, dict[str, Any]] = {}
    for sec in during:
        for sess in sec:
            seen[sess.get("pid")] = {**seen.get(sess.get("pid"), {}), **sess}
    first = max(seen.values(), key=lambda x: x.get("state_s") or 0)
    f = Finding("outside_session")
    f.support.append(
        Clue(
            f"{busy_in:.1f} session(s) from outside the workload at work "
            f"({busy_usual:.1f} the rest of the run): " + describe_session(first),
            GOOD,
        )
    )
    cpu = _cpu_of(c, set(seen))
    if cpu >= 30:
        f.support.append(
            Clue(
                f"{'its backend' if len(seen) == 1 else 'their backends'} used {cpu:.0f}% of a CPU",
                GOOD,
            )
        )
    wal, commits = c.mean_in("wal_mbps"), c.mean_in("commits_per_s")
    wal_u, commits_u = c.usual("wal_mbps"), c.usual("commits_per_s")
    if (
        all(math.isfinite(x) for x in (wal, commits, wal_u, commits_u))
        and wal_u > 0
        and commits_u > 0
        and wal / max(commits, 1.0) >= 3 * wal_u / commits_u
        and wal >= 0.5 * wal_u
    ):
        f.support.append(
            Clue(
                f"WAL written at {wal:,.1f} MB/s while commits fell to "
                f"{commits:,.0f}/s ({wal_u:,.1f} MB/s for {commits_u:,.0f}/s "
                "the rest of the run): not the workload's",
                GOOD,
            )
        )
        f.explains = IO_LOAD  # its WAL and writes are what filled the device
    elif any(str(x.get("wait") or "").startswith(IO_WAITS) for x in seen.values()):
        f.explains = IO_LOAD
    return f


def _cpu_of(c: Context, pids: set[Any]) -> float:
    """The average CPU (% of one) the benchmark's processes ``pids`` used over the
    episode, from the top CPU users recorded each second."""
    total = 0.0
    for sec in c.structured_in("own_top"):
        total += sum(row[3] for row in sec or [] if row[0] in pids)
    return total / max(1, c.n)


def describe_session(r: dict[str, Any]) -> str:
    """A session of pg_stat_activity in words."""
    text = f"pid {r.get('pid')}" + (f" (application {r['app']!r})" if r.get("app") else "")
    text += f", {r.get('state') or '?'}"
    if r.get("state_s") is not None:
        text += f" for {r['state_s']:g} s"
    if r.get("state") == "active":
        text += f", waiting on {r.get('wait')}"
    if r.get("query"):
        text += f" (statement: {r['query']})"
    return text


def _snapshot(c: Context) -> Finding | None:
    lo, hi = c.span()
    hits = [
        e for e in c.al.events if e.kind == "snapshot" and e.start_s <= hi + 1 and e.end_s >= lo - 1
    ]
    if not hits:
        return None
    return Finding(
        "snapshot",
        [
            Clue(f"{e.label} at {e.start_s:+.1f} s (took {e.end_s - e.start_s:.1f} s)", STRONG)
            for e in hits
        ],
    )


def _start_up(c: Context) -> Finding | None:
    """The measured phase's first second: the tool connected its clients (pgbench's first
    progress interval includes that), then every client sent its first transaction at once,
    each in a new backend whose caches are cold. What makes that second slow is the start,
    not the storage, when it is the only second: each client's second transaction already
    runs warm."""
    start = c.al.start
    if start is None or c.a != 0:
        return None
    f = Finding("start_up")
    nxt = c.at(c.throughput_name, c.b + 1)
    usual = c.usual(c.throughput_name)
    f.support.append(
        Clue(
            f"the measured phase's first second{'s' if c.n > 1 else ''}: the tool "
            f"connected its {start.clients} clients in {start.connect_ms:,.0f} ms, then "
            "each sent its first transaction, in a new backend",
            WEAK,
        )
    )
    surge = write_surge(c)
    if surge:
        f.against.append(Clue(f"{surge}: clients connecting write nothing of the kind", GOOD))
    if start.connect_ms / 1000 >= 0.9 * c.n:
        f.support.append(
            Clue(f"connecting took {start.connect_ms:,.0f} ms of the episode's {c.n} s", STRONG)
        )
    elif c.n > 1:
        f.against.append(
            Clue(
                f"it lasted {c.n} s: longer than connecting ({start.connect_ms:,.0f} ms) "
                "and one transaction of each client",
                GOOD,
            )
        )
    elif math.isfinite(nxt) and math.isfinite(usual) and usual > 0:
        if nxt >= 0.5 * usual:
            f.support.append(
                Clue(
                    f"the first second only: the next ran at {nxt:,.0f} "
                    f"({usual:,.0f} the rest of the run)",
                    GOOD,
                )
            )
        else:
            f.against.append(
                Clue(f"the second after it was slow too ({nxt:,.0f}, usually {usual:,.0f})", WEAK)
            )
    return f


HYPOTHESES: tuple[Callable[[Context], Finding | None], ...] = (
    _fs_frozen,
    _device_stalled,
    _locks,
    _checkpoint,
    _wal_segment_creation,
    _writeback,
    _device_saturated,
    _host_io,
    _host_cpu,
    _steal,
    _reclaim,
    _pooler,
    _snapshot,
    _stopped,
    _outside_session,
    _start_up,
)
