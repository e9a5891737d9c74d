"""The conditions a result was measured under, for the reports (pure: stored runs in, rows
out): what is common to every run, and per configuration what differs. A result without
them cannot be shared; BenchBase keeps its configuration with every result the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgfsbench.kube.environment import described
from pgfsbench.results.records import JsonObject, StoredRun
from pgfsbench.units import human_bytes

# the settings that decide how PostgreSQL writes, shown as in effect whatever the spec said
STORAGE_SETTINGS = (
    "shared_buffers",
    "max_wal_size",
    "min_wal_size",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "full_page_writes",
    "wal_compression",
    "wal_init_zero",
    "wal_recycle",
    "wal_segment_size",
    "wal_sync_method",
    "wal_buffers",
    "synchronous_commit",
    "fsync",
    "data_checksums",
    "effective_io_concurrency",
    "io_method",
    "huge_pages",
    "max_connections",
)


@dataclass(frozen=True)
class Conditions:
    common: tuple[tuple[str, str], ...]  # (what, value) the same for every run
    differing: tuple[str, ...]  # what differs between configurations
    per_cell: tuple[tuple[str, tuple[str, ...]], ...]  # (configuration, its values)


def _setting(row: JsonObject) -> str:
    unit, value = row.get("unit"), str(row.get("setting"))
    if unit == "8kB" and value.lstrip("-").isdigit():
        return human_bytes(int(value) * 8192)
    if unit == "B" and value.isdigit():
        return human_bytes(int(value))
    return f"{value} {unit}" if unit and unit not in ("8kB", "B") else value


def run_conditions(run: StoredRun) -> dict[str, str]:
    """What one run was measured under, in words (absent: not recorded)."""
    p = run.params
    env = run.environment
    w = p.get("workload") or {}
    storage = p.get("storage") or {}
    out: dict[str, str] = {}
    if env:
        mem = env.get("memory_bytes")
        out["host"] = (
            f"{env.get('hostname', '?')}: {env.get('cpus', '?')} CPU(s) "
            f"{env.get('cpu_model', '')}".rstrip()
            + (f", {human_bytes(mem)} RAM" if mem else "")
            + f", {env.get('distribution', '?')}, kernel {env.get('kernel', '?')}"
        )
        k8s = env.get("kubernetes")
        if isinstance(k8s, dict) and k8s:
            limits = ((k8s.get("pod") or {}).get("resources") or {}).get("limits") or {}
            out["host"] += (
                " (the node's, as its pod sees them; the pod's limits: "
                + (", ".join(f"{k} {v}" for k, v in sorted(limits.items())) or "none")
                + ")"
            )
            out.update(dict(described(k8s)))
        if env.get("postgresql"):
            out["PostgreSQL"] = str(env["postgresql"])
        if env.get("pgbench"):
            out["pgbench"] = str(env["pgbench"])
    out["CPUs"] = _cpus(run)
    tool = w.get("tool", "pgbench")
    what = (
        w.get("builtin")
        or ", ".join(w.get("scripts") or [])
        or (w.get("config") or {}).get("script")
        or ""
    )
    out["workload"] = f"{tool} {what}".strip() + (
        f", protocol {w['protocol']}" if w.get("protocol") and tool == "pgbench" else ""
    )
    if tool == "replay":
        # its data, sessions and length are the capture's: what it ran, as measured
        out.update(_replayed(run))
    else:
        _sized(out, run, p, w)
    if run.duration_s is not None and tool != "replay":
        out["duration"] = (
            f"{float(run.duration_s):g} s measured after {float(run.warmup_s or 0):g} s of warm-up"
        ) + (
            ", started as soon as the load ended (not written out first: write_out = false)"
            if p.get("write_out") is False
            else ""
        )
    if w.get("rate") or w.get("rate_fraction"):
        out["rate"] = (
            f"{float(w['rate_fraction']) * 100:g}% of the maximum"
            if w.get("rate_fraction")
            else f"{float(w['rate']):g} tps"
        )
    load = _load_mode(run)
    if load:
        out["load"] = load
    out["storage"] = _storage(run, storage)
    beneath = _beneath(run)
    if beneath:
        out["disk beneath"] = beneath
    out.update(aged_rows(run, storage))
    limits = run.storage_details.get("device_limits") or []
    if limits or storage.get("limits"):
        out["device limits"] = _limits(limits, storage.get("limits"))
    settings = (p.get("postgres") or {}).get("settings") or {}
    out["PostgreSQL settings (spec)"] = (
        ", ".join(f"{k} = {v}" for k, v in sorted(settings.items())) or "defaults"
    )
    in_effect = {r.get("name"): r for r in env.get("pg_settings_changed") or []}
    shown = [f"{n} = {_setting(in_effect[n])}" for n in STORAGE_SETTINGS if n in in_effect]
    if shown:
        out["PostgreSQL settings (in effect)"] = ", ".join(shown)
    initdb = (p.get("postgres") or {}).get("initdb") or {}
    flags = [f"wal_segsize {initdb['wal_segsize']} MB"] if initdb.get("wal_segsize") else []
    if initdb.get("data_checksums"):
        flags.append("data checksums")
    if flags:
        out["initdb"] = ", ".join(flags)
    kernel = p.get("kernel") or {}
    ksets = [f"{k} = {v}" for k, v in sorted((kernel.get("sysctl") or {}).items())]
    ksets += [
        f"transparent_hugepage = {kernel[k]}" for k in ("transparent_hugepage",) if kernel.get(k)
    ]
    out["kernel settings"] = ", ".join(ksets) or "as the host had them"
    return out


def _sized(out: dict[str, str], run: StoredRun, p: JsonObject, w: JsonObject) -> None:
    if run.scale is not None:
        out["scale"] = str(run.scale) + (f" ({p['scale_basis']})" if p.get("scale_basis") else "")
    if w.get("clients") is not None:
        out["clients"] = f"{w['clients']} client(s), {w.get('threads', 1)} thread(s)"


def _replayed(run: StoredRun) -> dict[str, str]:
    """A replay's data, sessions and duration as it ran them (its record's), never the
    spec's defaults (a replay has no scale, and its clients are the captured sessions)."""
    r = (run.recorded.tool.model_extra or {}).get("replay")
    if not isinstance(r, dict):
        return {}
    out: dict[str, str] = {}
    if isinstance(r.get("data_bytes"), int):
        out["data"] = f"the capture's copy, {human_bytes(r['data_bytes'])}"
    if r.get("sessions") is not None:
        out["sessions"] = f"{r['sessions']} captured session(s)" + (
            f", replayed by {r['processes']} process(es)" if r.get("processes") else ""
        )
    if isinstance(r.get("wall_s"), int | float):
        pace = (
            f"timed at {float(r.get('speed') or 1):g}x the captured pace"
            if r.get("mode") == "timed"
            else "as fast as it goes"
        )
        captured = r.get("captured_s")
        out["duration"] = f"replayed in {float(r['wall_s']):.1f} s, {pace}" + (
            f" (the capture lasted {float(captured):.1f} s)"
            if isinstance(captured, int | float)
            else ""
        )
    return out


def aged_rows(run: StoredRun, storage: JsonObject) -> dict[str, str]:
    """The filesystem's age (fresh, or the recipe and what its aging did) and its state
    once the data was loaded: free-space fragmentation, fullness, extents per GiB."""
    out: dict[str, str] = {}
    data = run.storage_details.get("data")
    age = data.get("age") if isinstance(data, dict) else None
    spec_age = storage.get("age")
    if isinstance(spec_age, dict):
        churn = (age or {}).get("aging") if isinstance(age, dict) else None
        done = ""
        if isinstance(churn, dict) and isinstance(churn.get("written_bytes"), int):
            done = (
                f": {human_bytes(churn['written_bytes'])} written in "
                f"{float(churn.get('seconds') or 0):.0f} s when its image was made"
            )
        out["age"] = (
            f"aged by {spec_age.get('recipe')} (seed {spec_age.get('seed')}, "
            f"{float(spec_age.get('overwritten', 0)):g}x its size written, "
            f"{float(spec_age.get('fullness', 0)):.0%} full){done}"
            + (
                f"; this run's device a copy of image {age.get('image')}"
                if isinstance(age, dict)
                else ""
            )
        )
    state = run.storage_details.get("state_after_load")
    if isinstance(state, dict):
        out["filesystem state"] = state_text(state)
    return out


def state_text(state: JsonObject) -> str:
    """'free space in extents below 1 MiB 12.5%, average free extent 3,400 KiB; 41%
    full; data files 9.1 extents/GiB' (what was not measured, said)."""
    parts: list[str] = []
    free = state.get("free_space")
    if isinstance(free, dict):
        if free.get("why"):
            parts.append(str(free["why"]))
        if free.get("free_in_extents_below_1mib_pct") is not None:
            parts.append(
                f"free space in extents below 1 MiB {free['free_in_extents_below_1mib_pct']}%"
            )
        if free.get("free_extent_avg_kib") is not None:
            parts.append(f"average free extent {float(free['free_extent_avg_kib']):,.0f} KiB")
        if free.get("pool_frag_pct") is not None:
            parts.append(f"pool fragmentation {free['pool_frag_pct']}%")
    if state.get("fullness") is not None:
        parts.append(f"{float(state['fullness']):.0%} full")
    files = state.get("data_files")
    if isinstance(files, dict):
        if files.get("extents_per_gib") is not None:
            parts.append(f"data files {files['extents_per_gib']} extents/GiB")
        elif files.get("why"):
            parts.append(f"data files' extents not measured ({files['why']})")
    return "; ".join(parts) or "not measured"


def _cpus(run: StoredRun) -> str:
    """Where the server and the clients ran (defaults.server_cpus): apart, or sharing."""
    split = run.metrics.get("cpus")
    if isinstance(split, Mapping) and split.get("server") and split.get("clients"):
        return (
            f"PostgreSQL and its pooler on CPU {split['server']}, pgfsbench and the clients "
            f"on CPU {split['clients']} (server_cpus)"
        )
    return "every CPU shared by the server and the clients"


def _load_mode(run: StoredRun) -> str:
    """How the data was loaded, from the load's phases (pgbench -i -I: client-side rows
    sent by COPY, or server-side generate_series)."""
    phases = run.load_phases or {}
    how = [m for m in ("client-side generate", "server-side generate") if m in phases]
    if not how:
        return ""
    text = f"pgbench -i, {how[0].replace(' generate', ' generation')}"
    if "foreign keys" in phases:
        text += ", foreign keys"
    if run.params.get("write_out") is False:
        text += ", not written out before the run"
    return text


def _beneath(run: StoredRun) -> str:
    """The disks the storage under test stands on (a loop device's file, a pool's disks)
    and what they are: rotational or not, the scheduler, the write cache."""
    names = run.recorded.block_stack.beneath
    if not names:
        return ""
    devices = run.environment.get("devices") or {}
    out = []
    for name in names:
        facts = devices.get(name) if isinstance(devices, Mapping) else None
        if not isinstance(facts, Mapping):
            out.append(str(name))
            continue
        words = [
            "rotational" if str(facts.get("rotational")) == "1" else "non-rotational",
            f"scheduler {_selected(str(facts.get('scheduler', '')))}"
            if facts.get("scheduler")
            else "",
            f"write cache {facts['write_cache']}" if facts.get("write_cache") else "",
            f"model {facts['model']}" if facts.get("model") else "",
        ]
        out.append(f"{name} ({', '.join(w for w in words if w)})")
    return "; ".join(out)


def _selected(choices: str) -> str:
    """'none [mq-deadline] kyber' -> 'mq-deadline'."""
    if "[" in choices and "]" in choices:
        return choices[choices.index("[") + 1 : choices.index("]")]
    return choices


def _storage(run: StoredRun, storage: JsonObject) -> str:
    details = run.storage_details
    parts = []
    for role in ("data", "wal"):
        v = details.get(role)
        if not isinstance(v, Mapping):
            continue
        text = f"{role}: {v.get('fs', run.fs)}"
        spec = storage if role == "data" else (storage.get("wal") or {})
        device = spec.get("device")
        if isinstance(v.get("lvm"), Mapping):
            text += " on LVM"
        raid = spec.get("md") if role == "data" else None
        if isinstance(raid, Mapping):  # the members as the spec named them
            members = raid.get("devices") or []
            names = [
                m if isinstance(m, str) else f"{m.get('size')} {m.get('model')}" for m in members
            ]
            chunk = f", chunk {raid['chunk']}" if raid.get("chunk") else ""
            text += f" on md {raid.get('level')} of {len(members)} ({', '.join(names)}{chunk})"
            device = None
        if isinstance(device, dict):  # an emulated disk
            model = v.get("device_model_text") or device.get("model")
            text += f" on {device.get('size')} emulated ({model})"
        elif device:  # as the spec named it: loop:1G (a loop number is noise)
            text += f" on {device}"
        if v.get("mkfs_argv"):
            text += f", made with `{' '.join(v['mkfs_argv'][:-1])}`"
        if v.get("mount_options"):
            text += f", mounted {v['mount_options']}"
        parts.append(text)
    pool = details.get("pool")
    if isinstance(pool, Mapping):
        parts.append(
            f"zfs pool {pool.get('layout')} of {len(pool.get('devices') or [])} "
            f"device(s)" + (f", log {len(pool['log'])}" if pool.get("log") else "")
        )
    if details.get("implementation"):
        parts.append(str(details["implementation"]))
    return "; ".join(parts) or str(run.fs or storage.get("fs") or "?")


def _limits(applied: Sequence[JsonObject], spec: JsonObject | None) -> str:
    if applied:
        texts = [
            f"{e.get('role', '?')}: {e.get('text') or e.get('profile') or '?'}" for e in applied
        ]
        return "; ".join(dict.fromkeys(texts)) + " (emulated)"
    return ", ".join(f"{k} {v}" for k, v in (spec or {}).items() if v is not None) + " (emulated)"


def conditions(runs: Sequence[StoredRun]) -> Conditions:
    """What every run shares, and for each configuration (cell) what differs."""
    by_cell: dict[str, dict[str, str]] = {}
    reps: dict[str, int] = {}
    for r in runs:
        if r.superseded_by:
            continue
        cell = r.cell
        reps[cell] = reps.get(cell, 0) + 1
        if cell not in by_cell or r.ok:
            by_cell[cell] = run_conditions(r)
    for cell, n in reps.items():
        by_cell[cell]["repetitions"] = str(n)
    keys = list(dict.fromkeys(k for c in by_cell.values() for k in c))
    common, differing = [], []
    for k in keys:
        values = {c.get(k, "-") for c in by_cell.values()}
        if len(values) == 1:
            common.append((k, values.pop()))
        else:
            differing.append(k)
    per_cell = tuple((cell, tuple(v.get(k, "-") for k in differing)) for cell, v in by_cell.items())
    return Conditions(tuple(common), tuple(differing), per_cell)
