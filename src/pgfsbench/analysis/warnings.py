"""Warnings that change the reading of a result (pure: stored runs in, sentences out).

Shown in the summary, the report and the Markdown: ZFS through FUSE; the substitutions made
for this machine's ZFS; zfs-fuse's own defaults, which apply to "untuned" cells; loop files
that all live on one physical disk (a separate "log device" is then the same disk); cells
with too few repetitions for a verdict; runs without pgbench's log or without sysbench's
prepared statements; cells on a busy host where the storage's own daemons (zfs-fuse, the
emulated disks') took a good part of the CPU; busy hosts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pgfsbench.analysis.compare import MIN_N_VERDICT
from pgfsbench.results.records import JsonObject, StoredRun


def _fuse_substitutions(runs: Sequence[StoredRun]) -> list[str]:
    """Per-implementation values ({kernel = "lz4", fuse = "lzjb"}) and module parameters a
    FUSE run could not take."""
    found: dict[str, set[str]] = {}
    for r in runs:
        if not r.fuse:
            continue
        storage = r.param("storage")
        for where in ("pool", "data", "wal"):
            props = (storage.get(where) or {}).get("properties") or {}
            for name, value in props.items():
                if isinstance(value, dict) and "kernel" in value:
                    fuse = value.get("fuse")
                    text = (
                        f"{where}.{name}: {value['kernel']} on OpenZFS ran as {fuse}"
                        if fuse is not None
                        else f"{where}.{name}={value['kernel']} (OpenZFS only) was not set"
                    )
                    found.setdefault(r.storage, set()).add(text)
        for name, value in (storage.get("module_parameters") or {}).items():
            if isinstance(value, dict) and value.get("fuse") is None:
                found.setdefault(r.storage, set()).add(
                    f"module parameter {name} (OpenZFS only) was skipped"
                )
    return [
        f"{storage} on zfs-fuse: {'; '.join(sorted(texts))}"
        for storage, texts in sorted(found.items())
    ]


def _zfsrc(runs: Sequence[StoredRun]) -> list[str]:
    """zfs-fuse reads /etc/zfs/zfsrc: which of its settings each ZFS cell ran with (an
    option the cell's daemon was started with overrides the file's)."""
    daemons: dict[str, JsonObject] = {}
    for r in runs:
        details = r.storage_details.get("zfs_fuse_daemon")
        if details:
            daemons[r.storage] = details
    zfsrc = next((d.get("zfsrc") for d in daemons.values() if d.get("zfsrc")), "")
    if not daemons or not zfsrc:
        return []
    settings = [
        line.strip()
        for line in zfsrc.splitlines()
        if line.strip() and not line.lstrip().startswith(("fuse", "#"))
    ]

    def name(setting: str) -> str:
        return setting.split("=", 1)[0].strip()

    applied: dict[str, list[str]] = {}
    for storage, d in sorted(daemons.items()):
        options = {a.split("=", 1)[0] for a in d.get("argv") or [] if a.startswith("--")}
        applied[storage] = [s for s in settings if f"--{name(s)}" not in options]
    everything = [s for s, kept in applied.items() if kept == settings]
    parts = []
    if everything:
        parts.append(f"{', '.join(everything)} ran with all of them")
    for storage, kept in applied.items():
        if kept != settings:
            overridden = [name(x) for x in settings if x not in kept]
            parts.append(
                f"{storage} with {', '.join(kept) or 'none of them'} (it set "
                f"{', '.join(overridden)} itself)"
            )
    text = (
        f"zfs-fuse applies /etc/zfs/zfsrc to every ZFS cell ({', '.join(settings)}), not "
        f"OpenZFS's defaults (ARC up to half of RAM, prefetch on): {'; '.join(parts)}"
    )
    if len({tuple(k) for k in applied.values()}) > 1:
        text += ": a difference between these cells may come from these daemon options"
    return [text]


def _one_disk(runs: Sequence[StoredRun]) -> list[str]:
    disks: set[str] = set()
    loops = False
    separate = []
    for r in runs:
        devices = r.environment.get("devices") or {}
        names = [n for n in devices if ":" not in n]  # N:M: no block device (FUSE)
        if any(n.startswith("loop") for n in names):
            loops = True
            disks |= {n for n in names if not n.startswith("loop")}
        details = r.storage_details
        pool = details.get("pool") or {}
        if details.get("wal") or pool.get("log") or pool.get("cache"):
            separate.append(r.storage)
    if not loops or len(disks) != 1:
        return []
    (disk,) = disks
    text = f"every loop device is a file on one physical disk ({disk})"
    if separate:
        text += (
            f": the separate WAL volumes and ZFS log or cache devices of "
            f"{', '.join(sorted(set(separate)))} share that disk, so they show the "
            "software path, not another device"
        )
    return [text]


def _emulated(runs: Sequence[StoredRun]) -> list[str]:
    """Devices whose IOPS and bandwidth were capped to stand for another kind of device."""
    by_storage: dict[str, dict[str, str]] = {}
    mechanism = ""
    for r in runs:
        for entry in r.storage_details.get("device_limits") or []:
            by_storage.setdefault(r.storage, {})[str(entry.get("role"))] = str(entry.get("text"))
            mechanism = str(entry.get("mechanism") or mechanism)
    if not by_storage:
        return []
    parts = [
        f"{s} ({'; '.join(f'{role}: {text}' for role, text in roles.items())})"
        for s, roles in sorted(by_storage.items())
    ]
    return [
        f"emulated devices, capped by {mechanism or 'throttling'}: {', '.join(parts)}; "
        "IOPS and bandwidth only: latency (an HDD's seek, a cloud volume's network round "
        "trip) is not emulated"
    ]


def _modelled(runs: Sequence[StoredRun]) -> list[str]:
    """Devices answered by a device model: the figures are the model's, made by its
    parameters (spec/device_models.py), not a measured drive's."""
    models: dict[str, set[str]] = {}
    for r in runs:
        for d in (r.storage_details.get("emulated_devices") or {}).values():
            models.setdefault(r.storage, set()).add(str(d.get("device_model_text")))
    if not models:
        return []
    parts = [f"{s}: {'; '.join(sorted(m))}" for s, m in sorted(models.items())]
    out = [
        f"emulated disks, answered by a device model ({'; '.join(parts)}): what they show "
        "is how these filesystems and settings behave on such a device as modelled (seek, "
        "rotation, write cache, per-operation latency), not a measurement of one"
    ]
    # per storage: late, modelled, and what the lateness went to (daemons of 2026-11-27 on)
    late: dict[str, list[float]] = {}
    for r in runs:
        for d in r.recorded.emulated_devices.values():
            sums = late.setdefault(r.storage, [0.0] * 5)
            for i, v in enumerate((d.late_s, d.model_wait_s, d.io_s, d.model_s, d.oversleep_s)):
                sums[i] += float(v or 0)
    slow = {s: lw for s, lw in late.items() if lw[0] > 0.1 * max(lw[1], 1.0)}
    if slow:
        out.append(
            "the host answered some emulated disks' requests later than their model said "
            "(this machine's own CPU or I/O, by more than 10% of the modelled wait): "
            + ", ".join(
                f"{s} {lw[0]:.1f} s late for {lw[1]:.1f} s modelled{_late_cause(lw[2:])}"
                for s, lw in sorted(slow.items())
            )
        )
    return out


# the CPU was the limit: busy (not idle, not waiting for I/O) this much of the measured phase
CPU_BOUND_PCT = 90.0
# said when the storage's own daemons took at least this share of all the host's CPU
# time, on a host at least this busy (a FUSE daemon's hand-offs leave a CPU-bound host
# some idle time: 84% busy on a zfs-fuse pool on a plain file, 2026-11-27)
DAEMONS_SHARE = 0.2
BUSY_PCT = 70.0
_DAEMON_WHAT = {
    "zfs-fuse": "ZFS through FUSE, which kernel ZFS does not pay for",
    "pgfsbench-disk": "the emulated disks' daemon, which a real disk does not take from the host",
}


def _daemons_cpu(runs: Sequence[StoredRun]) -> list[str]:
    """Cells on a busy host where the storage's own daemons (zfs-fuse, the emulated disks')
    took a good part of the CPU: PostgreSQL had that much less, so their figures are a
    lower bound of what the storage does without those daemons."""
    seen: dict[str, list[tuple[float, float, dict[str, float]]]] = {}
    for r in runs:
        cpu = r.recorded.cpu
        if not (r.ok and not r.superseded_by and cpu and cpu.get("cpus")):
            continue
        daemons = cpu.get("daemons_cpus")
        seen.setdefault(r.storage, []).append(
            (
                float(cpu.get("busy_pct") or 0),
                float(cpu["cpus"]),
                {str(k): float(v) for k, v in daemons.items()} if isinstance(daemons, dict) else {},
            )
        )
    said: list[str] = []
    names: set[str] = set()
    for storage, cpus in sorted(seen.items()):
        n = len(cpus)
        busy = sum(c[0] for c in cpus) / n
        total = sum(c[1] for c in cpus) / n
        per: dict[str, float] = {}
        for c in cpus:
            for name, v in c[2].items():
                per[name] = per.get(name, 0.0) + v / n
        if busy < BUSY_PCT or sum(per.values()) < DAEMONS_SHARE * total:
            continue
        names |= {name for name, v in per.items() if v >= 0.05}
        took = " and ".join(
            f"{name} {v:.2f}" for name, v in sorted(per.items(), key=lambda x: -x[1]) if v >= 0.05
        )
        limit = " (the CPU was the limit)" if busy >= CPU_BOUND_PCT else ""
        said.append(f"{storage}: {took} of {total:g} CPUs, the host {busy:.0f}% busy{limit}")
    if not said:
        return []
    what = "; ".join(
        f"{name}: {_DAEMON_WHAT.get(name, 'a daemon of the storage')}" for name in sorted(names)
    )
    return [
        "the storage's own daemons took a good part of a busy host's CPU ("
        + what
        + "): "
        + "; ".join(said)
        + " (measured phase, mean of the runs); PostgreSQL had that much less CPU, so "
        "these figures are a lower bound of what the same storage does without them"
    ]


def _late_cause(parts: Sequence[float]) -> str:
    """Where most of an emulated disk's lateness was spent, when its daemon split it: the
    parts are the lateness itself (they add up to it), not the time each phase took."""
    names = (
        "writing or reading its image on the host disk",
        "waiting for its model",
        "waking up after the model's time (the host's CPU)",
    )
    if sum(parts) <= 0:
        return ""
    top = max(range(len(parts)), key=lambda i: parts[i])
    return f" ({parts[top]:.1f} s of it {names[top]})"


def _few_repetitions(runs: Sequence[StoredRun]) -> list[str]:
    ok: dict[str, int] = {}
    for r in runs:
        if not r.superseded_by:
            ok.setdefault(r.cell, 0)
            if r.ok:
                ok[r.cell] += 1
    few = sorted(c for c, n in ok.items() if n < MIN_N_VERDICT)
    if not few:
        return []
    return [
        f"{len(few)} cell(s) have fewer than {MIN_N_VERDICT} ok repetitions: no verdict is "
        f"possible for them ({', '.join(few)})"
    ]


def _txlog_left_out(runs: Sequence[StoredRun]) -> list[str]:
    """Runs that went without pgbench's transaction log under txlog = "auto"."""
    cells = sorted({r.cell for r in runs if r.recorded.observer.txlog_left_out})
    if not cells:
        return []
    return [
        f'no latency percentiles for {len(cells)} cell(s) (txlog = "auto": expected above '
        "txlog_max_tps_per_cpu transactions a second a CPU, where pgbench's -l costs "
        "every transaction CPU; txlog = true keeps it): "
        f"{', '.join(cells)}"
    ]


def _prepared_disabled(runs: Sequence[StoredRun]) -> list[str]:
    """sysbench cells that went without prepared statements through a transaction pooler,
    next to sysbench cells that prepared theirs: their difference includes that."""

    sysbench = [r for r in runs if r.recorded.tool.name == "sysbench"]
    without = sorted({r.cell for r in sysbench if r.recorded.tool.prepared_statements_disabled})
    if not without:
        return []
    text = (
        f"sysbench ran without server-side prepared statements in {len(without)} "
        "cell(s), whose pooler would have lost them (--db-ps-mode=disable): "
        f"{', '.join(without)}"
    )
    prepared = sorted(
        {r.cell for r in sysbench if r.ok and r.recorded.tool.prepared_statements is True}
    )
    if prepared:
        text += (
            f"; {len(prepared)} other sysbench cell(s) prepared theirs, so a difference "
            'between them includes that (options = { "db-ps-mode" = "disable" } on '
            "the workload runs them alike)"
        )
    return [text]


def reading_warnings(runs: Sequence[StoredRun]) -> list[str]:
    out: list[str] = []
    if any(r.fuse for r in runs):
        out.append(
            "ZFS cells ran on zfs-fuse (ZFS through FUSE, pool version 23): their "
            "numbers are not kernel OpenZFS numbers"
        )
    out += _fuse_substitutions(runs)
    out += _zfsrc(runs)
    out += _emulated(runs)
    out += _modelled(runs)
    out += _daemons_cpu(runs)
    out += _one_disk(runs)
    out += _few_repetitions(runs)
    out += _txlog_left_out(runs)
    out += _prepared_disabled(runs)
    busy_line = busy_host_line(runs)
    if busy_line:
        out.insert(0, busy_line)  # when most runs were disturbed, the first thing to read
    return out


# "busy host before the run: CPU 44% busy over 0.5 s ..." -> 44
_BUSY_PCT = re.compile(r"busy host [^:]*: CPU (\d+)% busy")


def busy_host_line(runs: Sequence[StoredRun]) -> str | None:
    """One line for every run that began on a busy host (each was said once while it ran):
    how many of how many, the range of the CPU taken, which, and one remedy; said as too
    busy for any verdict when it was most of them."""
    ok = [r for r in runs if r.ok]
    busy = [r for r in ok if any("busy host" in w for w in r.warnings)]
    if not busy:
        return None
    pcts = [int(m.group(1)) for r in busy for w in r.warnings if (m := _BUSY_PCT.search(w))]
    spread = f" (CPU {min(pcts)}-{max(pcts)}% busy)" if pcts else ""
    which = ", ".join(f"{r.cell} #{r.repetition}" for r in busy)
    lead = "this host was too busy for a verdict: " if len(busy) * 2 > len(ok) else ""
    return (
        f"{lead}{len(busy)} of {len(ok)} runs began on a busy host{spread}: {which}; "
        "run again when the host is quiet (what else runs: `top`, or the runs' disturbance "
        "lines), or give the spec busy_cpu_pct if this load is the host's normal"
    )
