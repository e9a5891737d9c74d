"""The plan: the expanded matrix in execution order, with disk and time estimates.

Making a plan touches nothing (it reads the spec, the device paths and the free space);
`pgfsbench plan` prints it and `run` executes it. What would fail later for a reason
known now (a device named twice, a device that does not exist, a scale that cannot fit
its storage) is refused here.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.advisor.safety import unsafe_of_params
from pgfsbench.postgres import sessions
from pgfsbench.spec import Cell, Defaults, LoadedSpec, Spec, expand, workload_tool
from pgfsbench.spec.kinds import storage_kind
from pgfsbench.spec.models import loop_bytes as created_bytes
from pgfsbench.spec.sizes import BASE_BYTES, MIN_HEADROOM, room_needed
from pgfsbench.storage import needs_root
from pgfsbench.system.cpus import format_cpu_list, split_cpus
from pgfsbench.system.errors import (
    CapabilityError,
    PgfsbenchError,
    SpecError,
    UsageError,
    did_you_mean,
)
from pgfsbench.units import human_bytes, human_seconds, parse_duration, parse_size
from pgfsbench.workloads import workload_for

# What a run costs besides its warm-up and measured phase, measured on the 2-core test VM
# (bench/own_time.py, bench/results/own-time-*-2026-11-27.json): at scale 2 a run took
# 1.67 s more than its 7 s (1.26 s pgfsbench's own, 0.26 s the load, 0.15 s writing it
# out), at scale 50 7-8 s more than its 70 s (the load 4.2 s, its write-out 0.4 s). Set-up:
# losetup, mkfs, mount, the data directory from the cached template, start. Checked again
# on 2026-11-28: the quick example at 1 repetition of 2 s + 1 s took 20.3-20.6 s (this
# code and the previous alike) where these constants said 27 s; set-up and the campaign's
# own time lowered to match (plan said 24.5 s after).
SETUP_SECONDS = 0.6
RUN_OVERHEAD_SECONDS = 0.5  # stop, space figures, series and artifacts stored
# once a campaign: the checks before it, the template's initdb the first time, the summary
CAMPAIGN_SECONDS = 2.5
# What preparing a cell writes, for a device with limits: on the yohgaki example's HDD
# (78 write IOPS) mkfs, initdb and settling took about 70 s a run, some 5,000 write
# operations; a load writes its data and as much WAL, in requests of about 256 KiB
SETUP_WRITE_OPS = 5000
SETUP_WRITE_BYTES = 64 << 20
LOAD_WRITE_REQUEST = 256 << 10


@dataclass(frozen=True)
class PlannedRun:
    index: int
    cell: Cell
    repetition: int  # 1-based
    # given when the run was planned elsewhere (a cluster's controller, for its pod): the
    # run row's uuid, kept by the place that runs it; None: a new one
    uuid: str | None = None


@dataclass(frozen=True)
class Plan:
    cells: list[Cell]
    runs: list[PlannedRun]
    repetitions: int  # every cell's first repetitions (repetitions_min with "auto")
    load_per: str
    estimated_seconds: float
    loop_bytes_per_cell: dict[str, int]
    needed_bytes_per_cell: dict[str, int]
    real_devices: list[str]
    needs_root: bool
    warnings: list[str] = field(default_factory=list)
    limits: dict[str, list[str]] = field(default_factory=dict)  # storage -> role: caps
    auto: tuple[int, int, float] | None = None  # (min, max, CI target %) with "auto"
    estimated_seconds_max: float | None = None  # with "auto": if every cell needs the max
    # a rate "N%" of a cell: the maximum it is a share of, when the campaign that planned
    # the run had measured it (cell id -> (tps, where from)); else the run measures it
    rate_max: dict[str, tuple[float, str]] = field(default_factory=dict)
    # where the loop files go: "/var/tmp/pgfsbench: ext4 on /dev/vda (74.0 GiB free)"
    workdir_place: str | None = None
    # what the campaign changes for every process on the host, and for how long
    host_changes: list[str] = field(default_factory=list)
    # each cell's data, as its workload estimates it (the room needed is on top of it)
    data_bytes_per_cell: dict[str, int] = field(default_factory=dict)
    # each aged storage: its image cached, or made once at the campaign's start, and how long
    aging: list[str] = field(default_factory=list)

    @property
    def scales(self) -> list[int]:
        return sorted({c.scale for c in self.cells})

    def as_dict(self) -> dict[str, object]:
        return {
            "cells": [c.id for c in self.cells],
            "runs": len(self.runs),
            "scales": self.scales,
            "repetitions": self.repetitions,
            "auto_repetitions": None
            if self.auto is None
            else {"min": self.auto[0], "max": self.auto[1], "ci_target_pct": self.auto[2]},
            "estimated_seconds_max": None
            if self.estimated_seconds_max is None
            else round(self.estimated_seconds_max),
            "load_per": self.load_per,
            "estimated_seconds": round(self.estimated_seconds),
            "peak_loop_bytes": max(self.loop_bytes_per_cell.values(), default=0),
            "needed_bytes": self.needed_bytes_per_cell,
            "real_devices": self.real_devices,
            "needs_root": self.needs_root,
            "warnings": self.warnings,
            "device_limits": self.limits,
            "workdir": self.workdir_place,
            "host_changes": self.host_changes,
            "aging": self.aging,
        }


def check_devices(cell: Cell) -> None:
    """A device named twice in one cell (data and WAL, two pool members), or one that does
    not exist, is refused before anything is touched."""
    seen: dict[str, str] = {}
    for role, dev in cell.storage.devices():
        if not isinstance(dev, str) or not dev.startswith("/dev/"):
            continue
        if not Path(dev).exists():
            raise UsageError(f"storage {cell.storage_name}: {role} device {dev} does not exist")
        real = os.path.realpath(dev)
        if real in seen:
            raise UsageError(
                f"storage {cell.storage_name}: {dev} is named twice ({seen[real]} "
                f"and {role}{' as ' + real if real != dev else ''})"
            )
        seen[real] = role


def order_runs(cells: list[Cell], repetitions: int, order: str, load_per: str) -> list[PlannedRun]:
    if order == "interleaved" and load_per == "repetition":
        # repetition-major: every cell once, then again, so drift hits all cells alike
        pairs = [(c, r) for r in range(1, repetitions + 1) for c in cells]
    else:
        pairs = [(c, r) for c in cells for r in range(1, repetitions + 1)]
    return [PlannedRun(i, c, r) for i, (c, r) in enumerate(pairs)]


# the data size each scale relative to memory aims at, as a share of RAM or shared_buffers
SCALE_TARGETS = {
    "fits_shared_buffers": ("shared_buffers", 0.5),
    "fits_ram": ("ram", 0.5),
    "exceeds_ram": ("ram", 2.0),
}


def machine_ram_bytes() -> int:
    from pgfsbench.collect.host import meminfo

    return int(meminfo().get("MemTotal", 0)) * 1024


def checkpoint_timeout_s(settings: Mapping[str, object]) -> float:
    """checkpoint_timeout of a configuration (a bare number is seconds); 5 min default."""
    value = next((v for k, v in settings.items() if k.lower() == "checkpoint_timeout"), 300)
    text = str(value).strip().lower().replace("min", "m")
    return parse_duration(text if not text.isdigit() else f"{text}s")


def dirty_cannot_matter(cells: Sequence[Cell], d: Defaults) -> list[str]:
    """Kernel configurations that differ in vm.dirty_* compared where they cannot differ:
    PostgreSQL writes its data files into the page cache only at a checkpoint or when a
    buffer is evicted, so with the data inside shared_buffers and no checkpoint due in the
    run, the dirty thresholds see little more than the WAL (the Vondra example at scale 10
    never dirtied more than about 9 MB, below both of its 32 MB and 1 GB)."""
    dirty = {c.kernel_name for c in cells if any(k.startswith("vm.dirty") for k in c.kernel.sysctl)}
    if len(dirty) < 2 and not (dirty and len({c.kernel_name for c in cells}) > 1):
        return []
    out = []
    for c in cells:
        if (
            c.kernel_name not in dirty
            or c.workload.config is None
            or c.workload.tool not in ("pgbench", "sysbench")
        ):
            continue
        settings = dict(c.postgres.settings)
        data = workload_for(c, d).estimated_bytes(c)
        try:
            sb = shared_buffers_bytes(settings)
            timeout = checkpoint_timeout_s(settings)
        except ValueError:
            continue  # not a size or a duration: PostgreSQL refuses it, and says why
        run_s = c.workload.warmup_s + c.workload.duration_s
        if data <= sb and run_s < timeout:
            out.append(
                f"{c.id}: its kernel configurations differ in vm.dirty_* but cannot "
                f"differ here: about {human_bytes(data)} of data fits in shared_buffers "
                f"({human_bytes(sb)}) and no checkpoint is due in its {run_s:g} s "
                f"(checkpoint_timeout {timeout:g} s), so PostgreSQL hardly writes its "
                "data files; give a larger scale, a smaller shared_buffers or a longer "
                "run"
            )
    return out[:1] + ([f"... and {len(out) - 1} more cell(s) like it"] if len(out) > 1 else [])


def shared_buffers_bytes(settings: Mapping[str, object]) -> int:
    """shared_buffers of a configuration (a bare number counts 8 kB pages); 128MB default."""
    value = next((v for k, v in settings.items() if k.lower() == "shared_buffers"), "128MB")
    text = str(value).strip()
    if text.isdigit():
        return int(text) * 8192
    return parse_size(text.replace("kB", "K"))


def pod_memory_bytes(spec: Spec) -> int | None:
    """In a cluster, the memory a scale relative to RAM is relative to: the pod's memory
    limit ([kubernetes] resources.memory), the same for the controller that plans and the
    pod that runs (a pod's /proc/meminfo is the node's, not its own). None on a host."""
    k8s = spec.kubernetes
    if k8s is None or k8s.resources.memory is None:
        return None
    from pgfsbench.spec.cluster import parse_quantity

    return parse_quantity(str(k8s.resources.memory))


def scale_resolver(
    loaded: LoadedSpec, ram_bytes: int | None = None
) -> Callable[[Cell, str], tuple[int, dict[str, object]]]:
    """Makes "fits_ram", "exceeds_ram", "0.5x_ram", "2x_shared_buffers"... a scale for a
    cell: the data size it aims at (from the machine's memory, or defaults.memory_limit
    when set, and the cell's shared_buffers) over what one scale unit of its workload
    takes on disk."""
    d = loaded.spec.defaults
    limit = parse_size(d.memory_limit) if d.memory_limit else None
    in_cluster = loaded.spec.kubernetes is not None

    def resolve(cell: Cell, text: str) -> tuple[int, dict[str, object]]:
        if in_cluster and ram_bytes is None and not text.endswith("shared_buffers"):
            raise SpecError(
                f"{cell.id}: scale = {text!r} is relative to the pod's memory: give "
                "[kubernetes] resources.memory (a pod's /proc/meminfo is its node's)"
            )
        ram = limit or ram_bytes or machine_ram_bytes()
        try:
            sb = shared_buffers_bytes(dict(cell.postgres.settings))
        except ValueError as e:
            raise SpecError(f"{cell.id}: scale = {text!r} needs shared_buffers: {e}") from e
        if text in SCALE_TARGETS:
            basis, share = SCALE_TARGETS[text]
        else:
            number, _, basis = text.partition("x_")
            share = float(number)
        target = share * (ram if basis == "ram" else sb)
        per_unit = max(1, workload_for(cell, d).estimated_bytes(cell) // max(1, cell.scale))
        n = max(1, min(1_000_000, round(target / per_unit)))
        data = n * per_unit
        return n, {
            "spec": text,
            "target_bytes": int(target),
            "estimated_bytes": data,
            "bytes_per_scale": per_unit,
            "ram_bytes": ram,
            "memory_limited": limit is not None,
            "shared_buffers_bytes": sb,
            "ratio_to_ram": round(data / ram, 3) if ram else None,
            "ratio_to_shared_buffers": round(data / sb, 3) if sb else None,
        }

    return resolve


def _only(cells: list[Cell], only: Sequence[str]) -> list[Cell]:
    """The cells whose id matches one of the globs (all of them without any)."""
    if not only:
        return cells
    for pattern in only:  # each must name something: a typo is not a smaller matrix
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cells):
            raise UsageError(
                f"--only {pattern}: no cell matches (cells are named "
                "storage/postgres/kernel/workload)"
                + did_you_mean(pattern, [c.id for c in cells] + [c.storage_name for c in cells])
            )
    return [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) for p in only)]


def _pinned(
    cells: list[Cell], pinned: Mapping[str, tuple[int, dict[str, object] | None]]
) -> list[Cell]:
    """The cells ``pinned`` names, at its scales; a name no cell has is refused (the spec
    that came with the pins is not the one that made them)."""
    by_id = {c.id: c for c in cells}
    missing = [cell_id for cell_id in pinned if cell_id not in by_id]
    if missing:
        raise SpecError(
            f"the planned cell {missing[0]} is not a cell of this spec"
            + did_you_mean(missing[0], list(by_id))
        )
    return [
        dataclasses.replace(c, scale=pinned[c.id][0], scale_basis=pinned[c.id][1])
        for c in cells
        if c.id in pinned
    ]


def make_plan(
    loaded: LoadedSpec,
    workdir: Path | None = None,
    only: Sequence[str] = (),
    pinned: Mapping[str, tuple[int, dict[str, object] | None]] | None = None,
) -> Plan:
    """The runs in execution order; ``only`` keeps the cells whose id matches a glob.
    ``pinned`` (cell id -> its scale and how it was made, as another plan resolved them:
    a cluster's controller for its pod) keeps those cells only, at those scales: a scale
    relative to memory is not resolved again on another machine."""
    spec = loaded.spec
    d = spec.defaults
    if pinned is None:
        cells = _only(expand(spec, scale_resolver(loaded, pod_memory_bytes(spec))), only)
    else:
        cells = _pinned(expand(spec, lambda cell, text: (1, {})), pinned)
    # a replay runs as long as its capture: its cells' durations are the captures'
    if any(c.workload.tool == "replay" for c in cells):
        from pgfsbench.workloads.replay import planned_cell

        cells = [planned_cell(c, loaded.base_dir) for c in cells]
    _check_place(spec, cells)
    reps = d.first_repetitions
    runs = order_runs(cells, reps, d.order, d.load_per)

    loop_bytes: dict[str, int] = {}
    needed: dict[str, int] = {}
    data_bytes: dict[str, int] = {}
    real: list[str] = []
    warnings: list[str] = []
    described: dict[str, list[str]] = {}
    for cell in cells:
        check_devices(cell)
        if cell.storage_name not in described:
            described[cell.storage_name] = describe_limits(cell)
        devs = [dev for _, dev in cell.storage.devices()]
        loop_bytes[cell.id] = sum(n for x in devs if (n := created_bytes(x)) is not None)
        real += [x for x in devs if isinstance(x, str) and x.startswith("/dev/") and x not in real]
        data = workload_for(cell, d).estimated_bytes(cell)
        data_bytes[cell.id] = data
        extra = storage_kind(cell.fs).space_headroom  # its own, on top (btrfs)
        needed[cell.id] = room_needed(data, extra)
        cap = cell.storage.data_capacity()
        if cap is not None and cap < BASE_BYTES + data * MIN_HEADROOM * extra:
            room = f", {cell.fs} needing {extra:g}x the room of ext4" if extra > 1 else ""
            raise CapabilityError(
                f"storage {cell.storage_name} ({human_bytes(cap)}) cannot hold workload "
                f"{cell.workload.name} at scale {cell.scale}: its data alone is about "
                f"{human_bytes(data)}{room} ({human_bytes(needed[cell.id])} with the WAL "
                "of the load); give it a larger device or a smaller scale "
                "(--set scale=N, or --only to leave the cell out)"
            )
        if cap is not None and cap < needed[cell.id]:
            warnings.append(
                f"{cell.storage_name}: {human_bytes(cap)} may be too small for workload "
                f"{cell.workload.name} at scale {cell.scale} (about "
                f"{human_bytes(needed[cell.id])} needed"
                + (f", {cell.fs} needs {extra:g}x the room of ext4)" if extra > 1 else ")")
            )
    aging_lines, aging_s = aging_plan(cells, workdir, runs)
    est = runs_seconds(runs, d) + CAMPAIGN_SECONDS + aging_s
    auto = (d.repetitions_min, d.repetitions_max, d.ci_target_pct) if d.auto_repetitions else None
    # the worst case: every comparison unsettled to repetitions_max, the baselines at about
    # √k runs a round; a budget cuts the rounds to what fits in it
    est_max = None
    if auto:
        per_run = (est - CAMPAIGN_SECONDS) / max(1, len(runs))
        baselines = max(1, len({(c.workload.name, c.scale, c.workload.clients) for c in cells}))
        k = max(1, len(cells) // baselines - 1)
        worst_runs = d.repetitions_max * (len(cells) - baselines + baselines * round(k**0.5))
        est_max = CAMPAIGN_SECONDS + per_run * max(len(runs), worst_runs)
        if d.budget is not None:  # rounds are cut to what fits (engine/campaign)
            est_max = min(est_max, max(est, d.budget_s))
    warnings += dirty_cannot_matter(cells, d)
    warnings += sessions.plan_warnings(cells)
    warnings += unsafe_warnings(cells)
    if spec.kubernetes is not None:
        from pgfsbench.kube.rules import pod_warnings

        warnings += pod_warnings(spec, cells)
    warnings = list(dict.fromkeys(warnings))
    place = None
    changes: list[str] = []
    if workdir is not None and spec.kubernetes is None:
        from pgfsbench.hostwide import host_changes

        check_room(workdir, cells, loop_bytes, needed)
        place = workdir_place(workdir)

        def seconds_of(some: Sequence[Cell]) -> float:
            ids = {c.id for c in some}
            return runs_seconds([r for r in runs if r.cell.id in ids], d)

        changes = host_changes(cells, seconds_of)
    if workdir is not None:
        warnings += space_warnings(workdir, loop_bytes, needed)
        if d.server_cpus is not None:
            warnings.append(
                cpu_split_line(d.server_cpus)
                if spec.kubernetes is None
                else f"server_cpus = {d.server_cpus!r}: in each pod, among the CPUs the pod "
                "may use (checked there: a pod with too few fails before it makes anything)"
            )
    if any(described.values()):
        warnings.append(
            "device limits cap IOPS and bandwidth only: latency (an HDD's seek "
            "time, a cloud volume's network round trip) is not emulated"
        )
    return Plan(
        cells,
        runs,
        reps,
        d.load_per,
        est,
        loop_bytes,
        needed,
        real,
        any(needs_root(c.fs) for c in cells),
        warnings,
        {k: v for k, v in described.items() if v},
        auto,
        est_max,
        workdir_place=place,
        host_changes=changes,
        data_bytes_per_cell=data_bytes,
        aging=aging_lines,
    )


# How fast an aging writes its device (bytes a second) and a cached image is copied (its
# allocated bytes), measured on the test VM (bench/results/aged-filesystems-2026-12-01.json:
# 768 MiB ext4, xfs and btrfs images, 1x overwritten: files 385-820 MB/s, postgres 310-340,
# copies 740-870), taken at their slowest and halved: an image the page cache cannot
# absorb goes at its disk's pace
AGING_RATE = {"files": 190e6, "postgres": 150e6}
COPY_RATE = 370e6
# ZFS through FUSE ages slower (bench/results/aged-filesystems-zfs-2026-12-02.json: files
# 177 MB/s, postgres 121), halved the same way
ZFS_AGING_RATE = {"files": 88e6, "postgres": 60e6}


def aging_plan(
    cells: Sequence[Cell], workdir: Path | None, runs: Sequence[PlannedRun] = ()
) -> tuple[list[str], float]:
    """For each aged storage: its image cached in the work directory (then only copied),
    or made once at its first run, with the time that takes. Returns the lines and the
    seconds added to the campaign's estimate (each image once, its copy at each run)."""
    from pgfsbench.storage.aging import CACHE_DIR, ImageCache, aged_key

    lines: list[str] = []
    seconds = 0.0
    seen: set[str] = set()
    for c in cells:
        age = getattr(c.storage, "age", None)
        if age is None or c.storage_name in seen:
            continue
        seen.add(c.storage_name)
        try:
            from pgfsbench.postgres.binaries import find_binaries

            version: str | None = find_binaries(c.postgres.bindir).version
        except PgfsbenchError:
            version = None
        key, size, _ = aged_key(c.fs, c.storage, age, version)  # type: ignore[arg-type]
        found = ImageCache(workdir / CACHE_DIR).find(key) if workdir is not None else None
        copy_s = size * max(age.fullness, 0.1) / COPY_RATE
        seconds += copy_s * sum(1 for r in runs if r.cell.storage_name == c.storage_name)
        if found is not None:
            lines.append(
                f"{c.storage_name}: {age.text()}: the cached image {key} (made "
                f"{found.manifest.get('made')} in {found.manifest.get('seconds')} s), "
                f"copied for each run (about {copy_s:.0f} s)"
            )
            continue
        rate = (ZFS_AGING_RATE if c.fs == "zfs" else AGING_RATE)[age.recipe]
        make_s = size * age.overwritten / rate + 10
        seconds += make_s
        lines.append(
            f"{c.storage_name}: {age.text()}: its image {key} made once, at its first run "
            f"(about {human_seconds(make_s)}: {human_bytes(size * age.overwritten)} written), "
            f"kept in {CACHE_DIR}/ and copied for each run (about {copy_s:.0f} s)"
        )
    return lines, seconds


def cpu_split_line(server_cpus: str) -> str:
    """What server_cpus does on this host, or why it cannot (then the run refuses)."""
    try:
        split = split_cpus(server_cpus)
    except ValueError as exc:
        return f"{exc}: the run will refuse it"
    return (
        f"server_cpus: PostgreSQL and its pooler on CPU {format_cpu_list(split.server)}, "
        f"pgfsbench and the clients it starts on CPU {format_cpu_list(split.clients)}"
    )


def unsafe_warnings(cells: Sequence[Cell]) -> list[str]:
    """Each configuration whose settings can lose or corrupt committed data (the doctor's
    rules, advisor/safety.py): measured as a reference, never the baseline nor the best."""
    out = []
    for cell in cells:
        # the configurations as a run stores them: the same reading as the summary's
        found = unsafe_of_params(cell.storage.model_dump(), cell.postgres.model_dump())
        for u in found:
            out.append(
                f"{cell.storage_name}/{cell.postgres_name} is unsafe ({u.text()}): measured "
                "as a reference (what safety costs), never the baseline nor the best"
            )
    return out


def _check_place(spec: Spec, cells: Sequence[Cell]) -> None:
    """A pvc cell runs in a cluster, the others on this host: refused when the spec asks
    what its place cannot do (kube/rules.py says why for a pod)."""
    from pgfsbench.kube.rules import pod_refusals
    from pgfsbench.spec.cluster import PVC_NEEDS_CLUSTER
    from pgfsbench.storage.pvc import in_pod

    if spec.kubernetes is None:
        pvc = sorted({c.storage_name for c in cells if storage_kind(c.fs).cluster})
        if pvc and not in_pod():  # the pod of a Job runs them
            raise UsageError(f"storage {', '.join(pvc)}: {PVC_NEEDS_CLUSTER}")
        return
    refused = pod_refusals(spec, cells)
    if refused:
        raise UsageError("this spec asks what a pod cannot do:\n  - " + "\n  - ".join(refused))


def _free_under(workdir: Path) -> tuple[Path, int]:
    from pgfsbench.system.paths import nearest_existing

    probe = nearest_existing(workdir)
    return probe, shutil.disk_usage(probe).free


def check_room(
    workdir: Path, cells: Sequence[Cell], loop_bytes: dict[str, int], needed: dict[str, int]
) -> None:
    """A cell whose loop files cannot get the room its data needs in the work directory's
    filesystem is refused before anything starts (loop files are sparse: they take what
    is written, up to their size; one cell's devices exist at a time)."""
    _, free = _free_under(workdir)
    for c in cells:
        loop = loop_bytes.get(c.id, 0)
        if not loop:
            continue
        need = min(loop, needed.get(c.id, loop))
        if need > free:
            raise CapabilityError(
                f"{c.id}: its loop files need about {human_bytes(need)} under {workdir}, "
                f"which has {human_bytes(free)} free; give --workdir (or the spec's "
                "workdir) on a disk with room, a smaller scale (--set scale=N), or --only "
                "to leave the cell out"
            )


def workdir_place(workdir: Path) -> str:
    """The work directory, the filesystem and device it is on, and its free space."""
    from pgfsbench.advisor.facts import mount_of
    from pgfsbench.system.mountinfo import mount_table

    probe, free = _free_under(workdir)
    try:
        here = mount_of(str(probe.resolve()), mount_table())
    except OSError:
        here = None
    where = f"{here.fstype} on {here.source}" if here is not None else "a filesystem not read"
    return f"{workdir}: {where} ({human_bytes(free)} free)"


def space_warnings(workdir: Path, loop_bytes: dict[str, int], needed: dict[str, int]) -> list[str]:
    """Whether the work directory's filesystem has room for the loop files."""
    probe = workdir if workdir.exists() else workdir.parent
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    peak = max(loop_bytes.values(), default=0)
    need = max(needed.values(), default=0)
    # loop files are sparse: they grow with what is written, up to their size
    if peak and free < min(peak, need * 2):
        return [
            f"only {human_bytes(free)} free under {probe} for loop files of up "
            f"to {human_bytes(peak)}"
        ]
    return []


def write_caps(cell: Cell) -> tuple[float | None, float | None]:
    """(MB/s, IOPS) the data device of a cell may write at, from its limits (None: no
    cap, or not known before the device exists)."""
    from pgfsbench.storage import limits

    cfg = limits.configured(cell.storage).get("data") or limits.configured(cell.storage).get("pool")
    if cfg is None:
        return None, None
    by_role = dict(cell.storage.devices())
    device = by_role.get("data") or by_role.get("pool", "")
    try:
        figures = limits.resolve_for(cfg, created_bytes(device)).figures
    except ValueError:
        return None, None
    return figures.write_mbps, figures.write_iops


def runs_seconds(runs: Sequence[PlannedRun], d: Defaults) -> float:
    """How long runs take: each preparation (set-up and load, once a cell with load_per =
    "cell", at the pace of the cell's device limits), then each run's warm-up and
    measured phase. The plan's estimate, and a cluster Job's deadline (of its own runs)."""
    seen: set[str] = set()
    total = 0.0
    for r in runs:
        if d.load_per == "repetition" or r.cell.id not in seen:
            seen.add(r.cell.id)
            total += preparation_seconds(r.cell, workload_for(r.cell, d).estimated_bytes(r.cell))
        total += r.cell.workload.warmup_s + r.cell.workload.duration_s + RUN_OVERHEAD_SECONDS
    return total


def preparation_seconds(cell: Cell, data_bytes: int) -> float:
    """Set-up and load of one cell: the time measured here, or what its device limits
    allow for what they write (data and WAL, mkfs and initdb), whichever is longer."""
    per_scale = workload_tool(cell.workload.tool).load_seconds_per_scale
    base = SETUP_SECONDS + cell.scale * per_scale
    mbps, iops = write_caps(cell)
    written = SETUP_WRITE_BYTES + 2 * data_bytes
    ops = SETUP_WRITE_OPS + 2 * data_bytes / LOAD_WRITE_REQUEST
    capped = max(written / (mbps * 1e6) if mbps else 0.0, ops / iops if iops else 0.0)
    return max(base, SETUP_SECONDS + capped)


def describe_limits(cell: Cell) -> list[str]:
    """'data: hdd-7200: 78 IOPS, 150 MB/s' for each role of a cell's storage with limits."""
    from pgfsbench.storage import limits

    by_role = dict(cell.storage.devices())
    out = []
    for role, cfg in limits.configured(cell.storage).items():
        try:
            text = limits.resolve_for(cfg, created_bytes(by_role.get(role, ""))).text
        except ValueError:
            text = f"{cfg.profile}: capacity from the device at run time"
        out.append(f"{role}: {text}")
    return out


def is_root() -> bool:
    return os.geteuid() == 0
