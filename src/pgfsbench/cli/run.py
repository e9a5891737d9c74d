"""pgfsbench plan | run | demo."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pgfsbench.cli import app
from pgfsbench.cli.program import program
from pgfsbench.report.inert import plain_console
from pgfsbench.results.target import shown
from pgfsbench.system.errors import (
    CapabilityError,
    GuardError,
    Interrupted,
    PgfsbenchError,
    RunsFailed,
    UsageError,
)
from pgfsbench.system.held import write_file
from pgfsbench.system.paths import DEFAULT_WORKDIR
from pgfsbench.units import human_bytes, human_seconds

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pgfsbench.analysis.summary import CellSummary
    from pgfsbench.engine.campaign import CampaignResult
    from pgfsbench.engine.events import Events, LiveSource
    from pgfsbench.engine.live import LiveMetrics
    from pgfsbench.plan import Plan, PlannedRun
    from pgfsbench.results.records import RunOutcome
    from pgfsbench.results.store import Store
    from pgfsbench.spec import Cell, LoadedSpec


SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a default (KEY=VALUE, e.g. scale=2, duration=5s) or any key by "
        "its dotted path (storage.ext4.device=loop:1G).",
    ),
]
WorkdirOpt = Annotated[
    Path | None,
    typer.Option(
        help="Where loop files, mount points, data directories and the journal live "
        f"(default: the spec's workdir, else {DEFAULT_WORKDIR})."
    ),
]


def chosen_workdir(option: Path | None, loaded: LoadedSpec) -> Path:
    """--workdir, else the spec's ``workdir``, else the default; absolute."""
    if option is not None:
        return option if option.is_absolute() else Path.cwd() / option
    return Path(loaded.spec.workdir) if loaded.spec.workdir else DEFAULT_WORKDIR


MemoryLimitOpt = Annotated[
    str | None,
    typer.Option(
        "--memory-limit",
        help="A cgroup memory limit for PostgreSQL and the page cache it "
        "fills (e.g. 2G): scales relative to RAM use it as the RAM "
        "(same as --set memory_limit=2G).",
    ),
]
KubeconfigOpt = Annotated[
    str | None,
    typer.Option(
        "--kubeconfig",
        help="With \\[kubernetes]: the kubeconfig file (as kubectl's; the same as --set "
        "kubernetes.kubeconfig=FILE; default: the spec's, else $KUBECONFIG, merged as kubectl "
        "merges a list, else ~/.kube/config).",
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option("--context", help="With \\[kubernetes]: the kubeconfig context to use."),
]
NamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="With \\[kubernetes]: the namespace to run in."),
]
OnlyOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--only",
        help="Run only the cells whose id (storage/postgres/kernel/workload) matches "
        "this glob, e.g. 'zfs*' (repeatable).",
    ),
]


@app.command("plan")
def plan_cmd(
    spec: Annotated[Path, typer.Argument(help="The spec file (TOML).")],
    sets: SetOpt = None,
    workdir: WorkdirOpt = None,
    only: OnlyOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="The plan as JSON.")] = False,
    memory_limit: MemoryLimitOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    manifests: Annotated[
        bool,
        typer.Option(
            "--manifests",
            help="With \\[kubernetes]: print the first Job the campaign would create, with "
            "its ConfigMap and claims, "
            "as YAML (what `kubectl apply -f -` reads), and nothing else.",
        ),
    ] = False,
) -> None:
    """Show the expanded matrix with disk and time estimates; touches nothing."""
    from pgfsbench.plan import make_plan
    from pgfsbench.spec import load_spec
    from pgfsbench.system.trust import check_workdir_trusted

    loaded = load_spec(
        spec,
        [*(sets or []), *_memory_set(memory_limit), *_kube_sets(kubeconfig, context, namespace)],
    )
    workdir = chosen_workdir(workdir, loaded)
    check_workdir_trusted(workdir)  # `run` would refuse it: so does its plan
    plan = make_plan(loaded, workdir, only or [])
    if manifests:
        from pgfsbench.cluster.campaign import planned_manifests

        print(planned_manifests(loaded, plan), end="")
        return
    _refuse_devices_in_use(plan.real_devices)
    # (whether the host is busy is each run's to say, when it runs: a plan has no figures)
    if loaded.spec.kubernetes is None:  # in a cluster, the image's PostgreSQL
        _check_versions(loaded, plan)
    if as_json:
        print(json.dumps(plan.as_dict(), indent=1))
        return
    print_plan(plain_console(), plan)


def _refuse_devices_in_use(devices: list[str]) -> None:
    """What `run` refuses whatever the confirmation (a device mounted, swapped on, held by
    md, LVM or a pool, or absent), `plan` refuses too, reading only; a signature that
    --force may override is left to `run`'s confirmation."""
    from pgfsbench.storage.devices import device_problems
    from pgfsbench.system.runner import Runner

    for dev in devices:
        if not Path(dev).exists():
            raise GuardError(f"{dev} does not exist")
        hard, _signatures = device_problems(Runner(), dev)
        if hard:
            raise GuardError(f"refusing {dev}: " + "; ".join(hard))


def _check_versions(loaded: LoadedSpec, plan: Plan) -> None:
    """Each configuration's PostgreSQL, asked (read only) which settings it knows: an
    unknown one is refused now; what this machine cannot run is said (run skips it)."""
    from pgfsbench.engine.preflight import check_postgres_versions, emulated_disks_unsupported
    from pgfsbench.postgres.binaries import find_binaries
    from pgfsbench.system.errors import InstanceError

    try:
        default = find_binaries(loaded.spec.defaults.pg_bindir)
        by_bindir, unsupported, problems = check_postgres_versions(plan.cells, default)
    except InstanceError as exc:  # what plan accepts must run: no PostgreSQL, no plan
        raise CapabilityError(
            f"PostgreSQL cannot be checked, so the spec cannot run: {exc}"
        ) from None
    if problems:
        raise UsageError("; ".join(dict.fromkeys(problems)))
    unsupported |= emulated_disks_unsupported(plan.cells)
    plan.warnings.extend(
        f"not supported here (run skips it): {c}: {why}" for c, why in unsupported.items()
    )
    plan.warnings.extend(
        f"bindir {asked} is not there: PostgreSQL {found.version} from {found.bindir} instead"
        for asked, found in by_bindir.items()
        if Path(asked) != found.bindir
    )


def print_plan(console: Console, plan: Plan) -> None:
    from pgfsbench.spec.models import EmulatedDevice

    reps = (
        f"{plan.auto[0]} to {plan.auto[1]} repetitions (until each comparison with its "
        "baseline is settled: faster, slower or equivalent, anytime-valid at 95% family-wise)"
        if plan.auto
        else f"{plan.repetitions} repetitions"
    )
    runs = (
        f"{len(plan.runs)} runs, more as the verdicts need"
        if plan.auto
        else f"{len(plan.runs)} runs"
    )
    title = f"{len(plan.cells)} cells x {reps} = {runs}"

    def figures(cell: Cell) -> list[str]:
        wl = cell.workload
        loop = plan.loop_bytes_per_cell[cell.id]
        emulated = sorted(
            {d.model for _, d in cell.storage.devices() if isinstance(d, EmulatedDevice)}
        )
        stack = cell.storage.layers() + ([f"emulated {', '.join(emulated)}"] if emulated else [])
        # a replay's data and sessions are its capture's; its threads, the replayer's processes
        replay = wl.tool == "replay"
        return [
            " on ".join([cell.fs, *stack]),
            "capture's" if replay else str(cell.scale),
            f"{'capture' if replay else wl.clients}/{wl.threads}",
            f"{wl.warmup_s:g} s + {wl.duration_s:g} s",
            human_bytes(loop) if loop else "-",
            f"{human_bytes(plan.data_bytes_per_cell.get(cell.id))} "
            f"(room {human_bytes(plan.needed_bytes_per_cell[cell.id])})",
        ]

    if console.width < 120:  # a narrow terminal: one line per cell, the whole id on it
        console.print(title, markup=False)
        for cell in plan.cells:
            fs, scale, ct, time_, loop, data = figures(cell)
            console.print(
                f"  {cell.id}: {fs}, scale {scale}, {ct} clients/threads, "
                f"{time_}, loop files {loop}, data {data}",
                markup=False,
                highlight=False,
            )
    else:
        table = Table(title=title, title_justify="left")
        for col in (
            "cell",
            "fs",
            "scale",
            "clients/threads",
            "warm-up + measure",
            "loop files",
            "data (room with the load's WAL)",
        ):
            table.add_column(col, overflow="fold")
        for cell in plan.cells:
            table.add_row(cell.id, *figures(cell))
        console.print(table)
    # what each run measures (its estimand), once per kind
    windows: dict[str, list[str]] = {}
    for cell in plan.cells:
        wl = cell.workload
        if wl.tool == "replay":
            continue
        said = wl.estimand()
        if wl.cycles:
            said += (
                f": the warm-up's last {wl.cycle_s:g} s start with a CHECKPOINT, the window "
                "with the timed checkpoint that follows"
            )
        windows.setdefault(said, []).append(cell.storage_name)
    for said, names in windows.items():
        who = "" if len(windows) == 1 else f" ({', '.join(dict.fromkeys(names))})"
        console.print(f"each run measures {said}{who}", markup=False, highlight=False)
    upto = f" to {human_seconds(plan.estimated_seconds_max)}" if plan.estimated_seconds_max else ""
    loops = max(plan.loop_bytes_per_cell.values(), default=0)
    console.print(
        f"load per {plan.load_per}; estimated time "
        f"{human_seconds(plan.estimated_seconds)}{upto}"
        + (f"; loop files up to {human_bytes(loops)} at once (sparse)" if loops else ""),
        markup=False,
        highlight=False,
    )
    if plan.workdir_place and any(plan.loop_bytes_per_cell.values()):
        console.print(
            f"loop files, mount points and data directories under {plan.workdir_place}",
            markup=False,
            highlight=False,
        )
    for line in storage_commands(plan.cells):
        console.print(line, markup=False, highlight=False)
    for line in plan.aging:
        console.print(f"aged: {line}", markup=False, highlight=False)
    if plan.host_changes:
        console.print(
            "[bold]host-wide[/] (every process on this host, not only the benchmark's):",
            markup=True,
        )
        for line in plan.host_changes:
            console.print(f"  {escape(line)}", markup=True, highlight=False)
    _print_scale_bases(console, plan)
    for storage, lines in plan.limits.items():
        console.print(
            f"emulated devices of {storage}: " + "; ".join(lines), markup=False, highlight=False
        )
    if plan.real_devices:
        console.print(
            f"[bold red]real devices that would be ERASED[/]: "
            f"{escape(', '.join(plan.real_devices))} (needs --destroy-data-on for each)",
            markup=True,
        )
    for w in plan.warnings:
        console.print(f"[yellow]warning[/]: {escape(w)}", markup=True, highlight=False)


def storage_commands(cells: Sequence[Cell]) -> list[str]:
    """How each filesystem made on a device would be made and mounted (once a storage):
    the commands `run` gives mkfs and mount, the device shown as DEVICE."""
    from pgfsbench.storage import driver_for
    from pgfsbench.storage.blockfs import MkfsDriver

    out: list[str] = []
    seen: set[str] = set()
    for cell in cells:
        storage = cell.storage
        if cell.storage_name in seen:
            continue
        seen.add(cell.storage_name)
        driver = driver_for(cell.fs)
        if not isinstance(driver, MkfsDriver):
            continue
        mkfs = driver.mkfs_argv("DEVICE", list(getattr(storage, "mkfs_options", [])))
        options = ",".join(driver.mount_options(list(getattr(storage, "mount_options", []))))
        mount = ["mount", "-t", cell.fs, *(["-o", options] if options else []), "DEVICE", "DIR"]
        out.append(f"{cell.storage_name}: {shlex.join(mkfs)}; {shlex.join(mount)}")
    return out


def _print_scale_bases(console: Console, plan: Plan) -> None:
    """How each scale given relative to memory became a number."""
    for cell in plan.cells:
        b = cell.scale_basis
        if b:
            ram = (
                f"{human_bytes(b['ram_bytes'])} "
                f"{'memory limit (emulated RAM)' if b['memory_limited'] else 'of RAM'}"
            )
            console.print(
                f"{cell.id}: scale {cell.scale} = {b['spec']}: about "
                f"{human_bytes(b['estimated_bytes'])} of data, {b['ratio_to_ram']:g}x "
                f"the {ram}, {b['ratio_to_shared_buffers']:g}x shared_buffers",
                markup=False,
                highlight=False,
            )


class RichEvents:
    """Progress over the whole matrix with ETA, and the current cell's live throughput."""

    def __init__(self, console: Console, plan: Plan, progress_file: Path | None = None):
        self.console = console
        self.file = (
            ProgressFile(progress_file, len(plan.runs), plan.estimated_seconds)
            if progress_file
            else None
        )
        self.interactive = console.is_terminal
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
            disable=not self.interactive,
        )
        self.task: TaskID = self.progress.add_task("starting", total=len(plan.runs))
        self.current = ""
        self.phase_text = ""
        # for the lines a pipe gets: run N of TOTAL, and the time left (the plan's estimate
        # a run until one has finished, then what the finished ones took)
        self.total = len(plan.runs)
        self.started = 0
        self.finished = 0
        self.per_run_s = plan.estimated_seconds / max(1, len(plan.runs))
        self.t0 = time.monotonic()

    def __enter__(self) -> RichEvents:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
        if self.file:
            self.file.write(finished=True)

    def _describe(self, extra: str = "") -> None:
        self.progress.update(self.task, description=f"{self.current} {self.phase_text}{extra}")

    def run_started(self, run: PlannedRun, run_id: int) -> None:
        self.current = f"[bold]{escape(run.cell.id)}[/] #{run.repetition}"
        self.phase_text = ""
        self._describe()
        if self.file:
            self.file.cell = f"{run.cell.id} #{run.repetition}"
            self.file.write(phase="")
        self.started += 1
        if not self.interactive:
            left = max(0, self.total - self.started + 1) * self.per_run_s
            self.console.print(
                f"run {self.started} of {self.total} (run id {run_id}): {run.cell.id} "
                f"repetition {run.repetition}; about {human_seconds(left)} left",
                markup=False,
            )

    def phase(self, text: str) -> None:
        self.phase_text = f"· {escape(text)}"
        self._describe()
        if self.file:
            self.file.write(phase=text)

    def live(
        self, second: float, throughput: float, unit: str, latency_ms: float | None = None
    ) -> None:
        self._describe(f" · {throughput:,.0f} {unit} at {second:.0f} s")

    def campaign_started(self, campaign_id: int, runs: int) -> None:
        pass

    def observing(self, source: LiveSource | None) -> None:
        pass

    def run_finished(self, run: PlannedRun, run_id: int, record: RunOutcome) -> None:
        self.progress.advance(self.task)
        self.finished += 1
        self.per_run_s = (time.monotonic() - self.t0) / self.finished
        if self.file:
            self.file.finished_run(record.status)
        if record.status == "ok":
            line = (
                f"  {run.cell.id} #{run.repetition}: {record.throughput or 0:,.1f} "
                f"{record.throughput_unit}, latency {record.latency_avg_ms or 0:.3f} ms"
            )
            self.console.print(line, markup=False, highlight=False)
        else:
            self.console.print(
                f"  {run.cell.id} #{run.repetition}: {record.status}: {record.error}",
                style="red",
                markup=False,
                highlight=False,
            )

    def warning(self, text: str) -> None:
        self.console.print(f"warning: {text}", style="yellow", markup=False, highlight=False)

    def extend(self, runs: int) -> None:
        total = self.progress.tasks[0].total or 0
        self.progress.update(self.task, total=total + runs)
        self.total += runs
        if self.file:
            self.file.total += runs
            self.file.write()
        if not self.interactive:
            self.console.print(
                f"{runs} more run(s): their confidence intervals are still wider than the target",
                markup=False,
            )


class ProgressFile:
    """The campaign's progress as one JSON object, rewritten atomically at every step, for
    whoever watches the run from elsewhere (the fleet playbook polls it over SSH):
    runs done of total, ok/failed, the current cell and phase, and an ETA from the
    seconds the finished runs took (the plan's estimate until one has)."""

    def __init__(self, path: Path, total: int, estimated_s: float):
        self.path = path
        self.total = total
        self.per_run_s = estimated_s / total if total else 0.0
        self.started = time.monotonic()
        self.done = 0
        self.counts: dict[str, int] = {}
        self.cell = ""
        self.phase = ""
        self.write()

    def finished_run(self, status: str) -> None:
        self.done += 1
        self.counts[status] = self.counts.get(status, 0) + 1
        self.per_run_s = (time.monotonic() - self.started) / self.done
        self.write()

    def write(self, phase: str | None = None, finished: bool = False) -> None:
        if phase is not None:
            self.phase = phase
        left = max(0, self.total - self.done)
        data = {
            "pid": os.getpid(),
            "done": self.done,
            "total": self.total,
            "counts": self.counts,
            "cell": self.cell,
            "phase": self.phase,
            "elapsed_s": round(time.monotonic() - self.started),
            "eta_s": 0 if finished else round(left * self.per_run_s),
            "finished": finished,
            "updated": round(time.time()),
        }
        with contextlib.suppress(OSError, PgfsbenchError):  # watching must never stop the run
            write_file(self.path, json.dumps(data) + "\n", 0o644)


def live_metrics(
    inner: Events,
    port: int,
    store: Store,
    loaded: LoadedSpec,
    host: str,
    runs: int,
    address: str = "127.0.0.1",
) -> LiveMetrics:
    """The campaign's events, also served to Prometheus on address:port (started)."""
    from pgfsbench.analysis.series import align
    from pgfsbench.analysis.stalls import StallEpisode, find_stalls
    from pgfsbench.engine.live import LiveMetrics

    def episodes(run_id: int) -> list[StallEpisode]:
        return find_stalls(align(store.get_run(run_id)))

    live = LiveMetrics(
        inner,
        port,
        host=host,
        spec=loaded.spec.name or loaded.path.stem,
        total=runs,
        stall_fraction=loaded.spec.defaults.stall_fraction,
        episodes=episodes,
        address=address,
    )
    try:
        live.start()
    except OSError as exc:
        raise UsageError(f"--metrics-port {port}: cannot listen on {address}: {exc}") from exc
    return live


def run_spec(
    loaded: LoadedSpec,
    results: str,
    workdir: Path | None,
    destroy_data_on: list[str],
    force: bool,
    console: Console,
    only: list[str] | None = None,
    resume: int | None = None,
    host: str | None = None,
    progress_file: Path | None = None,
    metrics_port: int | None = None,
    metrics_address: str = "127.0.0.1",
    plan: Plan | None = None,
) -> tuple[Store, CampaignResult]:
    from pgfsbench.collect.host import host_name
    from pgfsbench.engine.campaign import Campaign
    from pgfsbench.engine.preflight import require_root
    from pgfsbench.plan import make_plan
    from pgfsbench.results.store import Store, check_writable
    from pgfsbench.storage.devices import DevicePolicy
    from pgfsbench.system.hostlock import host_lock
    from pgfsbench.system.signals import stop_on_signals
    from pgfsbench.system.trust import check_workdir_trusted

    workdir = chosen_workdir(workdir, loaded)
    check_workdir_trusted(workdir)  # before anything is made, the store included
    # what only a host's campaign takes is refused with [kubernetes], never ignored
    ignored = [
        name
        for name, given in (
            ("--metrics-port", metrics_port is not None),
            ("--host-name", host is not None),
            ("--destroy-data-on", bool(destroy_data_on)),
            ("--force", force),
        )
        if given
    ]
    if loaded.spec.kubernetes is not None and ignored:
        raise UsageError(
            f"{', '.join(ignored)}: not with [kubernetes] (the runs are the cluster's "
            "pods: their host is their node, their storage a claim; give them in a host's "
            "campaign)"
        )
    # a plan made elsewhere (a cluster's controller, for its pod) is run as it is
    plan = plan or make_plan(loaded, workdir, only or [])
    print_plan(console, plan)
    if loaded.spec.kubernetes is not None:
        return _run_in_cluster(loaded, plan, results, workdir, console, progress_file, resume)
    require_root(plan)
    check_writable(results)
    unconfirmed = [d for d in destroy_data_on if d not in plan.real_devices]
    if unconfirmed:
        raise UsageError(f"--destroy-data-on {unconfirmed[0]}: the spec does not name it")
    policy = DevicePolicy(frozenset(destroy_data_on), force)
    port = metrics_port if metrics_port is not None else loaded.spec.defaults.metrics_port
    # one campaign per host: held before anything is opened or created
    with (
        host_lock("pgfsbench run", workdir.resolve()),
        RichEvents(console, plan, progress_file) as rich_events,
        stop_on_signals(),
    ):
        store = Store(results)
        the_host = host or host_name()
        events: Events = rich_events
        live = None
        if port is not None:
            live = live_metrics(rich_events, port, store, loaded, the_host, len(plan.runs))
            events = live
            console.print(
                f"Prometheus metrics: http://127.0.0.1:{live.port}/metrics while the campaign runs",
                markup=False,
                highlight=False,
            )
        campaign = Campaign(
            loaded,
            plan,
            store,
            workdir=workdir,
            policy=policy,
            events=events,
            resume=resume,
            host=the_host,
        )
        try:
            result = campaign.execute()
        except KeyboardInterrupt:
            raise Interrupted("interrupted by Ctrl-C; everything it created was undone") from None
        finally:
            if live is not None:
                live.close()
    _print_outcome(console, store, result, f"{loaded.spec.name or loaded.path.stem}", results)
    return store, result


def _run_in_cluster(
    loaded: LoadedSpec,
    plan: Plan,
    results: str,
    workdir: Path,
    console: Console,
    progress_file: Path | None,
    resume: int | None = None,
) -> tuple[Store, CampaignResult]:
    """Every run a Job of the cluster of [kubernetes] (cluster/campaign.py): the same
    campaign loop as on a host, --resume included."""
    from pgfsbench.cluster.campaign import ClusterCampaign
    from pgfsbench.results.store import Store, check_writable
    from pgfsbench.system.signals import stop_on_signals

    check_writable(results)
    with RichEvents(console, plan, progress_file) as events, stop_on_signals():
        store = Store(results)
        campaign = ClusterCampaign(
            loaded, plan, store, workdir=workdir, events=events, resume=resume
        )
        try:
            result = campaign.execute()
        except KeyboardInterrupt:
            raise Interrupted("interrupted by Ctrl-C; its Job and claims were deleted") from None
    _print_outcome(console, store, result, f"{loaded.spec.name or loaded.path.stem}", results)
    return store, result


def _print_outcome(
    console: Console, store: Store, result: CampaignResult, name: str, results: str
) -> None:
    """The campaign's summary, its runs' statuses and the cells this host cannot run."""
    # imported during the first run's preparation (engine/warm.py), not before it
    from pgfsbench.cli.results import print_summary
    from pgfsbench.report.loading import analyse

    console.print()
    print_summary(
        console,
        analyse(store, [result.campaign_id]),
        f"{name}: campaign {result.campaign_id}, results in {store.target}",
    )
    counts = ", ".join(f"{n} {s}" for s, n in sorted(result.counts.items()))
    console.print(
        f"{len(result.run_ids)} run(s) this time: {counts or 'none'}", markup=False, highlight=False
    )
    for cell_id, why in result.unsupported.items():
        console.print(f"not supported here: {cell_id}: {why}", markup=False, highlight=False)


def _exit_status(result: CampaignResult) -> None:
    if result.not_ok:
        raise RunsFailed(
            f"{result.not_ok} of {len(result.run_ids)} run(s) did not complete "
            f"(see the summary above); `{program()} run --resume "
            f"{result.campaign_id}` runs them again"
        )


@app.command("run")
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="The spec file (TOML).")],
    results: Annotated[
        str,
        typer.Option(
            "--results",
            "-r",
            envvar="PGFSBENCH_RESULTS",
            help="SQLite file or postgresql:// URL (default: $PGFSBENCH_RESULTS, else "
            "pgfsbench.sqlite).",
        ),
    ] = "pgfsbench.sqlite",
    sets: SetOpt = None,
    workdir: WorkdirOpt = None,
    destroy_data_on: Annotated[
        list[str] | None,
        typer.Option(
            "--destroy-data-on",
            help="Confirm that a real block device named in the spec may be "
            "erased (repeat for each).",
        ),
    ] = None,
    force: Annotated[
        bool,
        # one flag, no --no-force twin: a destructive switch is only ever turned on
        typer.Option(
            "--force", help="Also erase devices that carry a filesystem or partition signature."
        ),
    ] = False,
    only: OnlyOpt = None,
    resume: Annotated[
        int | None,
        typer.Option(help="Run what is missing or failed in this campaign (same spec), into it."),
    ] = None,
    host_name: Annotated[
        str | None,
        typer.Option(help="The host's name in the results (default: this machine's hostname)."),
    ] = None,
    memory_limit: MemoryLimitOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    namespace: NamespaceOpt = None,
    progress_file: Annotated[
        Path | None,
        typer.Option(
            help="Keep the progress in this JSON file (runs done of total, current cell and "
            "phase, ETA), rewritten at every step: for watching from elsewhere."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=65535,
            help="Serve Prometheus metrics on 127.0.0.1:PORT while the campaign runs "
            "(current cell and phase, runs done, per-second TPS and latency, the samplers' "
            "last second, stall episodes); default: [defaults] metrics_port.",
        ),
    ] = None,
    metrics_address: Annotated[
        str,
        typer.Option(
            help="The address the metrics are served on: 127.0.0.1 unless a Prometheus "
            "elsewhere must scrape this host (a fleet): then one of its private addresses."
        ),
    ] = "127.0.0.1",
) -> None:
    """Run the matrix: provision, configure, load, measure, store; undo everything after.

    Exits 0 when every run is ok, 6 when some failed or were aborted."""
    from pgfsbench.spec import load_spec

    loaded = load_spec(
        spec,
        [*(sets or []), *_memory_set(memory_limit), *_kube_sets(kubeconfig, context, namespace)],
    )
    _, result = run_spec(
        loaded,
        results,
        workdir,
        destroy_data_on or [],
        force,
        plain_console(),
        only,
        resume,
        host_name,
        progress_file,
        metrics_port,
        metrics_address,
    )
    _exit_status(result)


def _memory_set(limit: str | None) -> list[str]:
    return [f"memory_limit={limit}"] if limit else []


def _kube_sets(kubeconfig: str | None, context: str | None, namespace: str | None) -> list[str]:
    """kubectl's flags as the spec's [kubernetes] keys (a spec without the table keeps
    refusing them: they say where a cluster is, not to use one)."""
    return [
        f"kubernetes.{key}={value}"
        for key, value in (
            ("kubeconfig", kubeconfig),
            ("context", context),
            ("namespace", namespace),
        )
        if value
    ]


def demo_spec() -> Path:
    from pgfsbench.spec.loading import examples_dir

    shipped = examples_dir()
    if shipped is None or not (shipped / "quick.toml").is_file():
        raise UsageError("examples/quick.toml is not installed with pgfsbench (a broken install)")
    return shipped / "quick.toml"


@app.command("demo")
def demo_cmd(
    results: Annotated[
        str, typer.Option("--results", "-r", help="The results store the demo writes.")
    ] = "pgfsbench-demo.sqlite",
    report: Annotated[Path, typer.Option(help="Where to write the HTML report.")] = Path(
        "pgfsbench-demo.html"
    ),
    sets: SetOpt = None,
    workdir: WorkdirOpt = None,
) -> None:
    """The quick matrix (ext4, ext4 noatime, xfs, btrfs, tmpfs), then an HTML report."""
    from pgfsbench.report.loading import analyse
    from pgfsbench.spec import load_spec

    console = plain_console()
    loaded = load_spec(demo_spec(), sets or [])
    store, result = run_spec(loaded, results, workdir, [], False, console)
    from pgfsbench.report.html import render_report

    a = analyse(store, [result.campaign_id])
    text = render_report(
        a.campaigns, a.runs, a.cells, a.highlights, history=a.history, headline=a.headline
    )
    write_file(report, text, 0o644)
    console.print(f"HTML report: {report.resolve()}")
    console.print("Next:", markup=False)
    for line in next_commands(results, a.cells, [r.run_id for r in a.runs]):
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    _exit_status(result)


def next_commands(
    results: str, cells: Sequence[CellSummary], run_ids: Sequence[int], me: str | None = None
) -> list[str]:
    """What to type after the demo, with its own file names and the program as it can be
    typed here (cli/program.py): each command works as shown."""
    store = shlex.quote(shown(results))
    me = me or program()
    lines = [f"{me} results summary --results {store}    # the table again"]
    if run_ids:
        lines.append(
            f"{me} results show {run_ids[0]} --results {store}    # one run: its "
            "environment, settings, series and stalls"
        )
    candidates = [c for c in cells if not c.reference]
    if len(candidates) >= 2:
        a, b = candidates[0], candidates[-1]
        lines.append(
            f"{me} compare {shlex.quote(a.label)} {shlex.quote(b.label)} --results {store}"
            "    # is one faster? ratio, interval, verdict"
        )
    lines.append(f"{me} report --results {store} -o report.html    # charts, self-contained")
    lines.append(f"{me} plan examples/yohgaki-2017.toml    # a seed's matrix: what it would run")
    return lines
