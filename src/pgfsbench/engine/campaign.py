"""A campaign: the plan's runs, one after the other, on a host held for the whole time.

Failure policy: any error inside a run (ours, PostgreSQL's, the OS's, a library's) makes
that run `failed` with a one-line root cause and its evidence kept; the run's journal
scope is undone and the matrix goes on. Only an interrupt (Ctrl-C, SIGTERM) stops the
campaign: the current run becomes `aborted`, everything is undone, and it is raised.
Whatever a run could not undo (a filesystem frozen under it) is tried again at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench import __version__, kernel
from pgfsbench.cleanup import children_dir, cleanup
from pgfsbench.collect.environment import read_environment
from pgfsbench.collect.host import host_environment, meminfo
from pgfsbench.engine.cell import CellState, Engine, new_state, prepare
from pgfsbench.engine.diagnosis import Evidence, Volume, root_cause
from pgfsbench.engine.events import Events, QuietEvents
from pgfsbench.engine.measure import measure_run
from pgfsbench.engine.preflight import preflight
from pgfsbench.engine.rounds import adaptive_rounds
from pgfsbench.engine.warm import WarmImports
from pgfsbench.plan import Plan, PlannedRun
from pgfsbench.results.metrics import checked_metrics
from pgfsbench.results.records import (
    CampaignStatus,
    RunOutcome,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store
from pgfsbench.spec import WORKLOAD_TOOLS, LoadedSpec
from pgfsbench.storage.devices import DevicePolicy
from pgfsbench.storage.pvc import in_pod
from pgfsbench.system.cpus import this_thread_on
from pgfsbench.system.errors import Interrupted, PgfsbenchError, UsageError
from pgfsbench.system.held import open_new_file, write_file
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import ChildRegistry, Runner
from pgfsbench.system.signals import signals_held, stop_on_signals
from pgfsbench.system.trust import open_written_by_others

if TYPE_CHECKING:
    pass

# file names in a run's artifacts directory -> the kind they are stored as
# what every run leaves, and what each tool's runs leave (spec/kinds.py)
ARTIFACT_KINDS = {
    "postgresql.log": "server_log",
    "commands.sh": "commands",
    **{name: kind for tool in WORKLOAD_TOOLS for name, kind in tool.artifacts.items()},
}


@dataclass
class CampaignResult:
    campaign_id: int
    run_ids: list[int] = field(default_factory=list)
    status: CampaignStatus = CampaignStatus.DONE
    counts: dict[str, int] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)  # cell id -> why not run

    @property
    def not_ok(self) -> int:
        return sum(n for s, n in self.counts.items() if s != RunStatus.OK)


class CampaignLoop:
    """The one campaign loop, whatever the place its runs go to (this host, in-process:
    `Campaign`; a Kubernetes cluster, a Job a group: cluster/campaign.py): what killed
    runs left undone first, the runs to do (all, or with --resume those without an ok
    result), the journal, the campaign in the store, the cells the place cannot run said
    and skipped, the groups one after the other, `repetitions = "auto"` rounds, and
    everything undone at the end. One failure policy for every place: whatever goes wrong
    with a group fails its runs with the reason and the matrix goes on; an interrupt
    aborts them and stops the campaign; no run is ever left `running`.

    A place says how to check before anything is created (`_open`), the campaign's
    environment, what it makes once the journal exists (`_begin`), the cells it cannot
    run, and how one group runs (`_run_group`, which starts each run with `_start_run`
    and finishes it with `_finish`)."""

    def __init__(
        self,
        loaded: LoadedSpec,
        plan: Plan,
        store: Store,
        *,
        workdir: Path,
        events: Events | None = None,
        runner: Runner | None = None,
        resume: int | None = None,
        host: str = "",
    ):
        self.loaded = loaded
        self.plan = plan
        self.store = store
        self.workdir = workdir.resolve()
        self.events: Events = events or QuietEvents()
        self.runner = runner or Runner()
        self.resume = resume
        self.host = host
        self.started = time.monotonic()
        self.uuid = str(uuid.uuid4())  # the campaign's (a cluster labels its objects with it)

    # ------------------------------------------------------------ what a place says

    def _open(self) -> None:
        """Checks before anything is created (a refusal raises)."""

    def _environment(self) -> dict[str, Any]:
        """The campaign's environment, stored with it."""
        return {}

    def _journal_meta(self) -> dict[str, Any]:
        return {"results": self.store.target}

    def _begin(self, journal: Journal, campaign_id: int) -> None:
        """What the place makes once the journal and the campaign exist."""

    def _unsupported(self) -> dict[str, str]:
        """Cell id -> why this place cannot run it ("not supported here": an answer)."""
        return {}

    def _run_group(
        self, journal: Journal, group: list[PlannedRun], result: CampaignResult, started: list[int]
    ) -> None:
        """Run one group, each run started with `_start_run` (its id appended to
        ``started``) and finished with `_finish`."""
        raise NotImplementedError

    def _end(self) -> None:
        """After everything was undone and the campaign closed (also after a refusal)."""

    def _new_run(self, planned: PlannedRun, campaign_id: int) -> StoredRun:
        d = self.loaded.spec.defaults
        return new_run(
            planned,
            campaign_id,
            self.host,
            write_out=d.write_out,
            margin=d.equivalence_margin,
        )

    # ------------------------------------------------------------ the whole matrix

    def execute(self) -> CampaignResult:
        """Run the campaign (the caller holds what must be held: the host lock)."""
        self.started = time.monotonic()  # what the budget counts from
        # one place turns SIGINT, SIGTERM and SIGHUP into the campaign's stop, whatever
        # thread waits (system/signals.py)
        with stop_on_signals():
            try:
                self._open()
            except BaseException:
                self._end()
                raise
            try:
                return self._execute()
            finally:
                self._end()

    def _execute(self) -> CampaignResult:
        left = cleanup(self.workdir, self.runner)
        for line in left.refused:
            self.events.warning(f"journal refused, left as it is: {line}")
        if left.journals:
            self.events.warning(
                f"undid what {left.journals} killed run(s) left in "
                f"{self.workdir} ({left.steps_undone} step(s))"
            )
        runs = self._runs_to_do()
        journal = Journal.create(self.workdir, self.runner, meta=self._journal_meta())
        self.journal = journal
        campaign_id = self._campaign_id()
        journal.note(campaign_id=campaign_id)
        result = CampaignResult(campaign_id)
        try:
            self._begin(journal, campaign_id)
            unsupported = self._unsupported()
            if unsupported:  # "not supported here" is an answer, not a failed run
                result.unsupported = dict(unsupported)
                self.store.note_campaign(campaign_id, "not_supported_here", result.unsupported)
                for cell_id, why in unsupported.items():
                    self.events.warning(f"{cell_id}: {why}; not run")
                runs = [r for r in runs if r.cell.id not in unsupported]
            self.events.campaign_started(campaign_id, len(runs))
            self._execute_groups(journal, self._groups(runs), result)
            if self.loaded.spec.defaults.auto_repetitions:
                self._adaptive(journal, result)
        except (Interrupted, KeyboardInterrupt):
            result.status = CampaignStatus.INTERRUPTED
            raise
        finally:
            # a signal meanwhile waits until the campaign is closed and recorded as such
            with signals_held():
                journal.undo_since(0)  # tries again whatever a run could not undo
                pending = {s.seq for s in journal.pending()}
                last = {f.step.seq: f for f in journal.failures if f.step.seq in pending}
                for failure in last.values():
                    self.events.warning(
                        f"could not undo '{failure.step.what}': {failure.error} (run "
                        f"`pgfsbench cleanup --workdir {self.workdir}` once it can be)"
                    )
                journal.close()
                self.store.finish_campaign(campaign_id, str(result.status))
        return result

    def _campaign_id(self) -> int:
        if self.resume is not None:
            # the same campaign goes on: its uuid (a cluster's objects are labelled with
            # it) and, below, its `auto` seed and notes are the first part's
            camp = self.store.campaign(self.resume)
            if camp is not None and camp.uuid:
                self.uuid = camp.uuid
            self.store.reopen_campaign(self.resume)
            return self.resume
        return self.store.start_campaign(
            StoredCampaign(
                name=self.loaded.spec.name or self.loaded.path.stem,
                spec_path=str(self.loaded.path),
                spec_text=self.loaded.text,
                overrides=list(self.loaded.overrides),
                host=self.host,
                pgfsbench_version=__version__,
                workdir=str(self.workdir),
                uuid=self.uuid,
                environment=self._environment(),
            )
        )

    def _runs_to_do(self) -> list[PlannedRun]:
        """The plan's runs; when resuming, those without an ok result in the campaign."""
        if self.resume is None:
            return list(self.plan.runs)
        camp = self.store.campaign(self.resume)
        if camp is None:
            raise UsageError(f"--resume {self.resume}: no such campaign in {self.store.target}")
        if camp.spec_text != self.loaded.text:
            raise UsageError(
                f"--resume {self.resume}: the spec differs from the one campaign "
                f"{self.resume} ran ({camp.spec_path}); resume needs the "
                "same spec"
            )
        if camp.overrides != list(self.loaded.overrides):
            raise UsageError(
                f"--resume {self.resume}: the campaign ran with --set "
                f"{' '.join(camp.overrides) or '(none)'}; give the "
                "same --set options"
            )
        done = {
            (r.cell, r.repetition)
            for r in self.store.list_runs(self.resume)
            if r.ok and not r.superseded_by
        }
        return [r for r in self.plan.runs if (r.cell.id, r.repetition) not in done]

    def _adaptive(self, journal: Journal, result: CampaignResult) -> None:
        """repetitions = "auto": round after round, each comparison of a cell with its
        group's baseline decided by its anytime-valid confidence sequence
        (analysis/sequential.py): a cell leaves the rotation once its comparison is
        settled, the baseline runs about √k times a round while k are open, each round in a
        random order (its seed in the campaign's notes); until every comparison is settled,
        repetitions_max, or the budget. A cell compared with nothing (alone in its group)
        stops when its own interval is within ci_target_pct. Why each stopped, and each
        verdict, go into the campaign's notes (the summary's verdicts for this campaign)."""

        def run_round(more: list[PlannedRun]) -> None:
            self._execute_groups(journal, self._groups(more), result)

        adaptive_rounds(
            self.store,
            self.plan,
            self.loaded.spec.defaults,
            result,
            self.started,
            self.events,
            run_round,
        )

    def _groups(self, runs: list[PlannedRun]) -> list[list[PlannedRun]]:
        return groups_of(runs, self.loaded.spec.defaults.load_per)

    def _execute_groups(
        self, journal: Journal, groups: list[list[PlannedRun]], result: CampaignResult
    ) -> None:
        """The groups at their place, one after the other (a place of several clusters
        runs theirs side by side)."""
        for group in groups:
            self._execute_group(journal, group, result)

    def _execute_group(
        self, journal: Journal, group: list[PlannedRun], result: CampaignResult
    ) -> None:
        """One group at its place, under the one failure policy (see the class)."""
        started: list[int] = []
        try:
            self._run_group(journal, group, result, started)
        except (Interrupted, KeyboardInterrupt):
            self._settle(group, started, result, RunStatus.ABORTED, "interrupted")
            raise
        except Exception as exc:  # the place's own failure: its runs fail, the matrix goes on
            why = (
                f"{exc.__class__.__name__}: {exc}"
                if not isinstance(exc, PgfsbenchError)
                else str(exc)
            )
            self._settle(group, started, result, RunStatus.FAILED, why[:500])
        else:
            self._settle(group, started, result, RunStatus.FAILED, "ended without a result")

    def _settle(
        self,
        group: list[PlannedRun],
        started: list[int],
        result: CampaignResult,
        status: RunStatus,
        why: str,
    ) -> None:
        """No run is left `running`: those of the group started and not finished get
        ``status`` with ``why``; those not started are recorded not run (resume runs them)."""
        for i, planned in enumerate(group):
            if i < len(started):
                run_id = started[i]
                if self.store.get_run(run_id).status != "running":
                    continue
                self._finish(planned, run_id, RunOutcome(status, error=why), result)
            elif status == RunStatus.FAILED:
                run_id = self._start_run(planned, result)
                self._finish(planned, run_id, RunOutcome(status, error=f"not run: {why}"), result)

    def _start_run(
        self, planned: PlannedRun, result: CampaignResult, started: list[int] | None = None
    ) -> int:
        run_id = self.store.start_run(self._new_run(planned, result.campaign_id))
        if self.resume is not None:
            self.store.supersede(result.campaign_id, planned.cell.id, planned.repetition, run_id)
        self.journal.note(run_id=run_id)
        result.run_ids.append(run_id)
        if started is not None:
            started.append(run_id)
        self.events.run_started(planned, run_id)
        return run_id

    def _finish(
        self, planned: PlannedRun, run_id: int, record: RunOutcome, result: CampaignResult
    ) -> None:
        self.store.finish_run(run_id, record)
        result.counts[record.status] = result.counts.get(record.status, 0) + 1
        self.events.run_finished(planned, run_id, record)


class Campaign(CampaignLoop):
    """The campaign on this host, in-process: preflight (root, binaries, devices), one
    Engine, each group provisioned once and its runs measured (see the module)."""

    def __init__(
        self,
        loaded: LoadedSpec,
        plan: Plan,
        store: Store,
        *,
        workdir: Path,
        policy: DevicePolicy | None = None,
        events: Events | None = None,
        runner: Runner | None = None,
        resume: int | None = None,
        host: str | None = None,
    ):
        super().__init__(
            loaded,
            plan,
            store,
            workdir=workdir,
            events=events,
            runner=runner,
            resume=resume,
            host=host or str(host_environment()["hostname"]),
        )
        self.policy = policy or DevicePolicy()
        if self.runner.registry is None:
            self.runner.registry = ChildRegistry(children_dir(self.workdir))
        self._fresh = False

    def _open(self) -> None:
        self._fresh = not self.workdir.exists()
        try:
            self.ready = preflight(self.loaded, self.plan, self.workdir, self.policy, self.runner)
        except BaseException:
            # refused: what the checks' commands registered goes, then a workdir they made
            self._end()
            if self._fresh:
                with contextlib.suppress(OSError):
                    self.workdir.rmdir()
            raise

    def _end(self) -> None:
        # what the checks' and the runs' commands registered goes
        if self.runner.registry is not None:
            self.runner.registry.close()

    def _environment(self) -> dict[str, Any]:
        return read_environment(vm=False, postgresql=self.ready.binaries.version_line)

    def _journal_meta(self) -> dict[str, Any]:
        # the real devices the guard passed: the only ones its undo may wipe or stop
        return {"results": self.store.target, "devices": list(self.plan.real_devices)}

    def _begin(self, journal: Journal, campaign_id: int) -> None:
        ready = self.ready
        self.eng = Engine(
            self.loaded,
            self.plan,
            self.store,
            self.workdir,
            self.runner,
            journal,
            self.policy,
            ready.binaries,
            ready.os_user,
            self.events.phase,
            campaign_id,
            ready.by_bindir,
            WarmImports(),
        )
        self.eng.cpu_split = ready.cpu_split
        if not in_pod():  # a container's cgroup is its own already
            self.eng.cpu_group = kernel.join_cpu_group(journal, f"pgfsbench-cpu-{os.getpid()}")

    def _unsupported(self) -> dict[str, str]:
        return dict(self.ready.unsupported)

    def _new_run(self, planned: PlannedRun, campaign_id: int) -> StoredRun:
        return new_run(
            planned,
            campaign_id,
            self.host,
            write_out=self.loaded.spec.defaults.write_out,
            pg_version=self.eng.binaries_for(planned.cell).version,
            margin=self.loaded.spec.defaults.equivalence_margin,
        )

    # ------------------------------------------------------------ one group of runs

    def _run_group(
        self, journal: Journal, group: list[PlannedRun], result: CampaignResult, started: list[int]
    ) -> None:
        """Provision once, measure each run. After a failure the cell is not trusted:
        its remaining runs are recorded failed without running (resume runs them)."""
        eng = self.eng
        split = eng.cpu_split
        try:
            # with server_cpus, all the cell starts (mkfs, the load's and the workload's
            # clients, the samplers) on the clients' CPUs; the server is moved to its own
            with this_thread_on(split.clients if split else None), eng.journal.scope():
                self._run_cell(eng, group, result, started)
        finally:
            # the commands of the cell's last run, its teardown included (the scope's undo)
            if started:
                with contextlib.suppress(OSError):  # never masks what is on its way up
                    self._commands(eng, started[-1])

    def _run_cell(
        self, eng: Engine, group: list[PlannedRun], result: CampaignResult, started: list[int]
    ) -> None:
        """The runs of a group inside its journal scope (each id added to ``started``)."""
        state: CellState | None = None
        prepared = False
        earlier: str | None = None
        failed = False
        last_run_id: int | None = None
        try:
            for planned in group:
                run_id = last_run_id = self._start_run(planned, result, started)
                if earlier is not None:
                    self._finish(
                        planned,
                        run_id,
                        RunOutcome(RunStatus.FAILED, error=f"not run: {earlier}"),
                        result,
                    )
                    continue
                if state is None:
                    state = new_state(eng, planned.cell, run_id)
                try:
                    if not prepared:
                        prepare(eng, state)
                        prepared = True
                    record = measure_run(eng, planned, run_id, state, self.events)
                    self._finish(planned, run_id, record, result)
                except (Interrupted, KeyboardInterrupt):
                    failed = True
                    self._finish(
                        planned,
                        run_id,
                        self._failure(eng, state, "interrupted", RunStatus.ABORTED),
                        result,
                    )
                    raise
                except Exception as exc:
                    failed = True
                    cause = root_cause(exc, self._evidence(state))
                    self._finish(
                        planned, run_id, self._failure(eng, state, cause, RunStatus.FAILED), result
                    )
                    earlier = (
                        f"run {run_id} of this cell failed: {cause}"
                        if prepared
                        else f"preparing the cell failed: {cause}"
                    )
        finally:
            if last_run_id is not None:
                self._collect(eng, state, last_run_id, immediate=failed)

    def _finish(
        self, planned: PlannedRun, run_id: int, record: RunOutcome, result: CampaignResult
    ) -> None:
        self.store.finish_run(run_id, record)
        if record.status == RunStatus.OK:
            self._judge_disturbance(planned, run_id, record)
        result.counts[record.status] = result.counts.get(record.status, 0) + 1
        self.events.run_finished(planned, run_id, record)

    def _judge_disturbance(self, planned: PlannedRun, run_id: int, record: RunOutcome) -> None:
        """What else used the host during the measured phase, read from what the run
        recorded (analysis/disturbance): kept with the run, and a disturbed run says so
        (repetitions = "auto" runs it again; --without-disturbed leaves it out)."""
        from pgfsbench.analysis.disturbance import disturbance_of

        # a replay whose work was not its capture's is marked too (disturbance_of)
        found = disturbance_of(self.store.get_run(run_id))
        metrics: dict[str, object] = {"disturbance": found.as_dict()}
        warning = found.warning()
        if warning is None:
            self.store.add_to_run(run_id, metrics)
            return
        record.warnings.append(warning)
        self.store.add_to_run(run_id, metrics, list(record.warnings))
        self.events.warning(f"{planned.cell.id} #{planned.repetition}: {warning}")

    # ------------------------------------------------------------ failures

    def _failure(
        self, eng: Engine, state: CellState | None, cause: str, status: RunStatus
    ) -> RunOutcome:
        """A failed (or aborted) run with what was known: the kernel settings in effect now
        (before they are undone), the host, the server log's last lines."""
        env: dict[str, object] = {}
        with contextlib.suppress(Exception):
            env = read_environment(
                postgresql=(
                    eng.binaries_for(state.cell) if state is not None else eng.binaries
                ).version_line,
                volumes=state.storage.volumes if state is not None and state.storage else (),
            )
        evidence: dict[str, object] = {}
        if state is not None and state.instance is not None:
            evidence["server_log_tail"] = _tail(state.instance.log_path, 30)
        return RunOutcome(
            status,
            error=cause,
            environment=env,
            metrics=checked_metrics({"evidence": evidence} if evidence else {}),
        )

    def _evidence(self, state: CellState | None) -> Evidence:
        if state is None:
            return Evidence()
        lines: tuple[str, ...] = ()
        alive = None
        if state.instance is not None:
            lines = tuple(_tail(state.instance.log_path, 300))
            alive = state.instance.alive()
        volumes: list[Volume] = []
        if state.storage is not None:
            for v in state.storage.volumes:
                size = None
                with contextlib.suppress(OSError):
                    st = shutil.disk_usage(v.mountpoint)
                    size = st.total
                volumes.append(Volume(v.role, str(v.mountpoint), v.fs, v.source, size))
        mem = meminfo()
        needed = None
        with contextlib.suppress(Exception):
            needed = state.workload.estimated_bytes(state.cell)
        return Evidence(
            log_lines=lines,
            server_alive=alive,
            volumes=tuple(volumes),
            needed_bytes=needed,
            huge_page_kb=mem.get("Hugepagesize"),
            huge_pages_total=mem.get("HugePages_Total"),
            huge_pages_free=mem.get("HugePages_Free"),
            huge_pages_setting=str(state.cell.postgres.settings.get("huge_pages", "try")).lower(),
        )

    # ------------------------------------------------------------ after a group

    def _collect(self, eng: Engine, state: CellState | None, run_id: int, immediate: bool) -> None:
        """Stop the server (immediately after a failure: a stalled server cannot shut down
        cleanly) and keep its log, the commands run and every raw output with the run."""
        art = eng.artifacts_dir(run_id)
        if state is not None and state.instance is not None:
            with contextlib.suppress(Exception):
                state.instance.stop(
                    eng.runner, timeout=10 if immediate else 60, immediate=immediate
                )
            if state.instance.log_path.exists():
                with (
                    contextlib.suppress(OSError),
                    open_written_by_others(state.instance.log_path) as src,
                    os.fdopen(open_new_file(art / "postgresql.log"), "wb") as dst,
                ):
                    shutil.copyfileobj(src, dst, 1 << 20)
        for path in sorted(art.iterdir()):
            kind = ARTIFACT_KINDS.get(path.name)
            if kind is not None:
                self.store.put_artifact(run_id, kind, path)

    def _commands(self, eng: Engine, run_id: int) -> None:
        """The commands run since the last run's, in order: this run's preparation,
        measurement and teardown (a run's commands.sh starts with its own set-up)."""
        path = eng.artifacts_dir(run_id) / "commands.sh"
        text = "# commands pgfsbench ran for this run, in order\n"
        write_file(path, text + "\n".join(eng.runner.transcript) + "\n")
        eng.runner.transcript.clear()
        self.store.put_artifact(run_id, ARTIFACT_KINDS["commands.sh"], path)


def groups_of(runs: list[PlannedRun], load_per: str) -> list[list[PlannedRun]]:
    """Runs that share one provisioning and load (one Job in a cluster): each run alone
    (load_per=repetition), or all repetitions of a cell (load_per=cell)."""
    if load_per != "cell":
        return [[r] for r in runs]
    by_cell: dict[str, list[PlannedRun]] = {}
    for r in runs:
        by_cell.setdefault(r.cell.id, []).append(r)
    return list(by_cell.values())


def new_run(
    planned: PlannedRun,
    campaign_id: int,
    host: str,
    *,
    write_out: bool,
    pg_version: str | None = None,
    margin: float | None = None,
) -> StoredRun:
    """The row a run starts as: its cell, repetition and configuration, its uuid (the
    planner's, when the run was planned elsewhere, else a new one)."""
    cell = planned.cell
    w = cell.workload
    return StoredRun(
        campaign_id=campaign_id,
        cell=cell.id,
        storage=cell.storage_name,
        fs=cell.fs,
        postgres=cell.postgres_name,
        kernel=cell.kernel_name,
        workload=w.name,
        repetition=planned.repetition,
        scale=cell.scale,
        clients=w.clients,
        threads=w.threads,
        duration_s=w.duration_s,
        warmup_s=w.warmup_s,
        params=cell_params(cell, write_out=write_out, margin=margin),
        pg_version=pg_version,
        host=host,
        uuid=planned.uuid or str(uuid.uuid4()),
    )


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with open_written_by_others(path) as fh:  # the postgres user's log
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            text = fh.read().decode(errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def cell_params(
    cell: Any, *, write_out: bool = True, margin: float | None = None
) -> dict[str, object]:
    """The cell's whole configuration, as stored with each run (JSON), whether the load
    was written out before the warm-up (`write_out`), and the practical margin of
    "equivalent" the spec stated (equivalence_margin)."""
    workload = {k: v for k, v in vars(cell.workload).items() if k != "config"}
    if cell.workload.config is not None:
        workload["config"] = cell.workload.config.model_dump()
    return {
        "storage": cell.storage.model_dump(),
        "postgres": cell.postgres.model_dump(),
        "kernel": cell.kernel.model_dump(),
        "workload": workload,
        "scale": cell.scale,
        "scale_basis": cell.scale_basis,
        "write_out": write_out,
        **({"equivalence_margin": margin} if margin is not None else {}),
    }


__all__ = ["Campaign", "CampaignResult", "PgfsbenchError"]
