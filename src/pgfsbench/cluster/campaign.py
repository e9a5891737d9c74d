"""A campaign in a Kubernetes cluster: each group of runs (a run, or a cell's repetitions
with load_per = "cell") is a Job with its claims; its pod runs the same engine as a host
(kube/pod.py) and sends its results back (kube/bundle.py), and they become the
controller's runs, in the same store as a host's, with the cluster's environment.

Failure policy, as on a host: anything that goes wrong with one Job (a pod Pending past
the deadline, a pod that failed, a bundle that did not come back) fails its runs with the
reason, its objects are deleted, and the matrix goes on. An interrupt deletes the running
Job and its claims, and stops the campaign. Every object is journaled before it is
created (kube/undo.py), so `pgfsbench cleanup` deletes what a killed controller left.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench import __version__
from pgfsbench.engine.campaign import CampaignLoop, CampaignResult, groups_of, new_run
from pgfsbench.engine.events import Events
from pgfsbench.engine.measure import campaign_max
from pgfsbench.kube import bundle
from pgfsbench.kube import undo as cluster_undo
from pgfsbench.kube.client import ClusterAddress, KubeClient, KubeError, Manifest
from pgfsbench.kube.environment import cluster_facts, run_facts
from pgfsbench.kube.manifests import (
    CONTAINER,
    RunObjects,
    labels,
    object_names,
    owned_by,
    pod_home,
    pod_uid,
    run_manifests,
)
from pgfsbench.kube.pod import pod_artifacts
from pgfsbench.kube.rules import pod_sysctls
from pgfsbench.kube.status import (
    PodPhase,
    PodState,
    finished_reason,
    job_failed,
    pending_reason,
    pod_state,
)
from pgfsbench.kube.task import Task, TaskRun
from pgfsbench.kube.undo import campaign_undo, check_kubeconfig, object_undo
from pgfsbench.plan import Plan, PlannedRun, runs_seconds
from pgfsbench.results.importer import adopt_runs
from pgfsbench.results.records import RunOutcome, RunStatus, StoredRun
from pgfsbench.results.store import HEAD_REVISION, Store
from pgfsbench.spec import Defaults, LoadedSpec
from pgfsbench.spec.cluster import CAMPAIGN_LABEL, KubernetesConfig, PvcStorage
from pgfsbench.system.errors import Interrupted, PgfsbenchError, UsageError
from pgfsbench.system.journal import Journal, Step
from pgfsbench.system.runner import Runner
from pgfsbench.system.signals import STOP, signals_held
from pgfsbench.system.trust import make_trusted_dir

# the label the Job controller puts on its pods (and batch.kubernetes.io/job-name since 1.27)
JOB_NAME_LABEL = "job-name"
# a pod's start, its image's unpacking and the way back, over what the run itself takes
POD_OVERHEAD_S = 120.0
# how much longer than the plan's estimate a run's Job may take before it is failed
RUN_TIMEOUT_FACTOR = 3.0
# how long the API server may not answer while a Job is followed before its runs fail
API_OUTAGE_S = 300.0


@dataclass
class JobOutcome:
    """How one Job ended: its bundle, or why there is none, and what the pod showed."""

    data: bytes | None = None
    failure: str = ""
    pod: Manifest | None = None
    node: Manifest | None = None
    log_problem: str = ""
    notes: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)  # the pod's last lines, bundle aside


def cluster_address(k8s: KubernetesConfig) -> ClusterAddress:
    return ClusterAddress(k8s.kubeconfig, k8s.context)


def cluster_host(context: str, node_type: str | None = None) -> str:
    """A cluster run's host: the cluster (its kubeconfig context) and the type of node it
    ran on (its instance-type label, when it has one). Repetitions on three nodes of one
    type are one cell's runs, compared together; the node itself is a fact of the run
    (environment.kubernetes.node), not part of what it is compared by."""
    return f"k8s:{context}/{node_type}" if node_type else f"k8s:{context}"


@dataclass
class Place:
    """One cluster a campaign runs in: its table as it sees it, its client, its facts."""

    name: str | None  # [kubernetes.clusters] NAME (None: the spec's one cluster)
    k8s: KubernetesConfig
    address: ClusterAddress
    client: KubeClient | None = None
    facts: dict[str, object] = field(default_factory=dict)
    host: str = ""
    said_away: bool = False
    parallel: int = 1  # its Jobs at once


class ClusterCampaign(CampaignLoop):
    """The engine's campaign loop (engine/campaign.CampaignLoop: resume, "not supported
    here", repetitions, the failure policy, undo) with clusters as its places: each group
    a Job (see the module). With several clusters ([kubernetes.clusters]) each group goes
    to its storage's cluster, and the clusters' Jobs run side by side: a thread a Job at
    a time (`parallel` of a cluster), taking turns (one lock, let go while a Job is
    waited for), so that the store, the journal and the progress see one at a time."""

    def __init__(
        self,
        loaded: LoadedSpec,
        plan: Plan,
        store: Store,
        *,
        workdir: Path,
        client: KubeClient | None = None,
        clients: Mapping[str, KubeClient] | None = None,
        events: Events | None = None,
        runner: Runner | None = None,
        resume: int | None = None,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        k8s = loaded.spec.kubernetes
        if k8s is None:
            raise UsageError("internal: a cluster campaign needs [kubernetes]")
        super().__init__(
            loaded, plan, store, workdir=workdir, events=events, runner=runner, resume=resume
        )
        self.places: dict[str | None, Place] = {}
        if k8s.clusters:
            for name in k8s.clusters:
                theirs = k8s.for_cluster(name)
                self.places[name] = Place(
                    name,
                    theirs,
                    cluster_address(theirs),
                    (clients or {}).get(name),
                    parallel=k8s.clusters[name].parallel,
                )
        else:
            self.places[None] = Place(None, k8s, cluster_address(k8s), client)
        self.poll_s = poll_s
        self.clock = clock
        self.sleep = sleep
        self.campaign_id = 0  # the store's, once the campaign is in it (_begin)
        self._here = threading.local()  # the place the running thread works for
        self._turn = threading.Lock()  # held by the thread whose turn it is (several places)
        self._threaded = False
        self._stopping = False

    # ------------------------------------------------------------ the places

    @property
    def place(self) -> Place:
        here: Place | None = getattr(self._here, "place", None)
        return here or next(iter(self.places.values()))

    @property
    def k8s(self) -> KubernetesConfig:
        return self.place.k8s

    @property
    def address(self) -> ClusterAddress:
        return self.place.address

    @property
    def facts(self) -> dict[str, object]:
        return self.place.facts

    @property
    def client(self) -> KubeClient:
        place = self.place
        if place.client is None:
            check_kubeconfig(place.address)
            place.client = cluster_undo.client_factory(place.address, place.k8s.namespace)
        cluster_undo.use_client(place.address, place.k8s.namespace, place.client)
        return place.client

    def _place_of(self, group: Sequence[PlannedRun]) -> Place:
        storage = group[0].cell.storage
        name = storage.cluster if isinstance(storage, PvcStorage) else None
        return self.places[name if name in self.places else next(iter(self.places))]

    # ------------------------------------------------------------ the place

    def _open(self) -> None:
        make_trusted_dir(self.workdir)
        for place in self.places.values():
            self._here.place = place
            version = self.client.server_version()
            place.facts = cluster_facts(version, self.client.context, place.k8s.namespace)
            if place.name is not None:
                place.facts["name"] = place.name
            place.host = cluster_host(self.client.context)
        self._here.place = None
        self.host = "+".join(p.host for p in self.places.values())

    def _environment(self) -> dict[str, Any]:
        first = next(iter(self.places.values()))
        if len(self.places) == 1:
            return {"kubernetes": first.facts}
        return {
            "kubernetes": first.facts,
            "kubernetes_clusters": {str(p.name): p.facts for p in self.places.values()},
        }

    def _journal_meta(self) -> dict[str, Any]:
        paths = [str(p.address.path()) for p in self.places.values()]
        return {"results": self.store.target, "cluster": paths[0], "clusters": paths}

    def _begin(self, journal: Journal, campaign_id: int) -> None:
        # recorded first, undone last: whatever of this campaign is still there goes
        self.campaign_id = campaign_id
        for place in self.places.values():
            journal.record(
                f"Kubernetes objects of campaign {self.uuid}"
                + (f" in cluster {place.name}" if place.name else ""),
                campaign_undo(place.address, place.k8s.namespace, self.uuid),
            )

    def _new_run(self, planned: PlannedRun, campaign_id: int) -> StoredRun:
        d = self.loaded.spec.defaults
        return new_run(
            planned,
            campaign_id,
            self.place.host,
            write_out=d.write_out,
            margin=d.equivalence_margin,
        )

    def _execute_groups(
        self, journal: Journal, groups: list[list[PlannedRun]], result: CampaignResult
    ) -> None:
        """One cluster: the groups one after the other. Several: each cluster's groups in
        order, the clusters side by side (see the class); an interrupt stops every one."""
        if len(self.places) == 1:
            self._here.place = next(iter(self.places.values()))
            try:
                super()._execute_groups(journal, groups, result)
            finally:
                self._here.place = None
            return
        queues: dict[str | None, collections.deque[list[PlannedRun]]] = {
            name: collections.deque() for name in self.places
        }
        for group in groups:
            queues[self._place_of(group).name].append(group)
        failures: list[BaseException] = []
        ended: list[threading.Event] = []

        def work(place: Place, done: threading.Event) -> None:
            self._here.place = place
            try:
                with self._turn:
                    queue = queues[place.name]
                    while queue and not (self._stopping or STOP.is_set()):
                        self._execute_group(journal, queue.popleft(), result)
            except BaseException as exc:  # said in the main thread, after every one ended
                failures.append(exc)
            finally:
                done.set()

        threads = []
        for place in self.places.values():
            for _ in range(place.parallel if queues[place.name] else 0):
                ended.append(threading.Event())
                threads.append(
                    threading.Thread(
                        target=work, args=(place, ended[-1]), name=f"cluster-{place.name}"
                    )
                )
        self._threaded = True
        try:
            for t in threads:
                t.start()
            # an Event, not Thread.join: a join a Ctrl-C interrupted may say a thread ended
            # that has not
            while not all(e.is_set() for e in ended):
                ended[[e.is_set() for e in ended].index(False)].wait(0.2)
        except (Interrupted, KeyboardInterrupt):
            self._stopping = True  # each thread stops at its next wait, its Job deleted
            with signals_held():
                for e in ended:
                    e.wait()
            raise
        finally:
            self._threaded = False
        for exc in failures:
            if not isinstance(exc, Interrupted):
                raise exc
        if failures:
            raise failures[0]

    def _pause(self, seconds: float) -> None:
        """A wait while a Job runs: another cluster's thread takes its turn meanwhile."""
        if self._stopping or STOP.is_set():
            raise Interrupted("interrupted")
        if not self._threaded:
            self.sleep(seconds)
            return
        self._turn.release()
        try:
            self.sleep(seconds)
        finally:
            self._turn.acquire()
        if self._stopping or STOP.is_set():
            raise Interrupted("interrupted")

    def _run_group(
        self, journal: Journal, group: list[PlannedRun], result: CampaignResult, started: list[int]
    ) -> None:
        for planned in group:
            self._start_run(planned, result, started)
        try:
            with journal.scope(own_thread=True):
                outcome = self._run_job(journal, group, started)
                self._record(group, started, outcome, result, self.facts)
        except (Interrupted, KeyboardInterrupt):
            for planned, run_id in zip(group, started, strict=True):
                if self.store.get_run(run_id).status == "running":
                    self._finish(
                        planned,
                        run_id,
                        RunOutcome(
                            RunStatus.ABORTED, error="interrupted; its Job and claims were deleted"
                        ),
                        result,
                    )
            raise

    # ------------------------------------------------------------ one Job

    def manifests(
        self, group: Sequence[PlannedRun], run_ids: Sequence[int]
    ) -> tuple[RunObjects, list[Manifest]]:
        """The group's objects, its task giving each run its row's uuid and, for a rate
        "N%", this campaign's maximum of the cell so far (a pod's store knows only its
        own runs: one experiment, as on a host)."""
        cell = group[0].cell
        ref = None
        if cell.workload.rate_fraction:
            ref = campaign_max(self.store, self.campaign_id, cell)
        return group_manifests(
            self.loaded,
            self.uuid,
            group,
            run_ids[0],
            self._uuids(run_ids),
            rate_max=ref,
            host=self.place.host,
            k8s=self.k8s,
        )

    def _uuids(self, run_ids: Sequence[int]) -> list[str]:
        return [str(self.store.get_run(r).uuid or "") for r in run_ids]

    def _run_job(self, journal: Journal, group: list[PlannedRun], run_ids: list[int]) -> JobOutcome:
        names, manifests = self.manifests(group, run_ids)
        ns = self.k8s.namespace
        job: Manifest | None = None
        claims: list[tuple[Manifest, Step]] = []
        try:
            for m in manifests:
                kind, name = m["kind"], m["metadata"]["name"]
                step = journal.record(
                    f"create {kind} {name} in namespace {ns}",
                    object_undo(self.address, ns, self.uuid, kind, name),
                )
                self.events.phase(f"creating {kind} {name}")
                created = self.client.create(m)
                if kind == "Job":
                    job = created
                else:
                    claims.append((m, step))
        except KubeError as exc:
            return JobOutcome(failure=f"the cluster refused the run's objects: {exc}")
        assert job is not None
        outcome = self._follow(names)
        if outcome.data is None and outcome.log_problem and outcome.pod is not None:
            self._fetch_again(journal, names, group, run_ids, outcome)
        if self.k8s.keep_finished > 0:
            # the claims go with their Job when its TTL runs out
            for manifest, step in claims:
                with contextlib.suppress(KubeError):
                    self._own_claim(manifest, job)
                    journal.settle(step, f"owned by Job {names.job} (ttlSecondsAfterFinished)")
            for s in journal.pending():
                if s.undo.kind == "delete_kube_object" and s.undo.args.get("name") == names.job:
                    journal.settle(s, "left to the TTL controller (keep_finished)")
        return outcome

    def _own_claim(self, manifest: Manifest, job: Manifest) -> None:
        """Give a claim (or the task's ConfigMap) to its Job: the garbage collector
        deletes it with the Job."""
        owned = owned_by(manifest, job)
        self.client.patch(
            manifest["kind"],
            manifest["metadata"]["name"],
            self.k8s.namespace,
            {"metadata": {"ownerReferences": owned["metadata"]["ownerReferences"]}},
        )

    def _pod(self, names: RunObjects) -> Manifest | None:
        """The Job's pod (the Job controller labels it with the Job's name)."""
        pods = self.client.select(
            "Pod", self.k8s.namespace, {CAMPAIGN_LABEL: self.uuid, JOB_NAME_LABEL: names.job}
        )
        if not pods:
            return None
        return max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp")))

    def _follow(self, names: RunObjects) -> JobOutcome:
        """Poll the Job's pod until it ends, fails to start in time, or runs too long."""
        ns = self.k8s.namespace
        started = self.clock()
        running_since: float | None = None
        last_phase = ""
        deadline = float(self.k8s.pending_timeout)
        unanswered_since: float | None = None
        while True:
            try:
                pod = self._pod(names)
                job = self.client.get("Job", names.job, ns)
            except KubeError as exc:
                # the API server away for a while (a restart, a network blip): the pod runs
                # on; asked again until it has been away API_OUTAGE_S
                unanswered_since = unanswered_since or self.clock()
                if self.clock() - unanswered_since > API_OUTAGE_S:
                    return JobOutcome(
                        failure=f"the cluster did not answer for {API_OUTAGE_S:.0f} s: {exc}"
                    )
                if not self.place.said_away:
                    self.events.warning(f"the cluster does not answer ({exc}); asking again")
                    self.place.said_away = True
                self._pause(max(self.poll_s, 1.0))
                continue
            unanswered_since = None
            state = pod_state(pod)
            if job is None:
                return JobOutcome(failure=f"Job {names.job} was deleted by someone else", pod=pod)
            if state.phase.value != last_phase:
                last_phase = state.phase.value
                where = f" on node {state.node}" if state.node else ""
                self.events.phase(f"pod {state.name or '(none yet)'}{where}: {state.phase.value}")
            if state.finished:
                return self._finished(names, pod, state, job)
            failed = job_failed(job)
            if failed and not state.finished:
                return JobOutcome(failure=f"Job {names.job} failed: {failed}", pod=pod)
            if state.phase == PodPhase.RUNNING:
                running_since = running_since or self.clock()
            elif state.phase in (PodPhase.PENDING, PodPhase.NONE):
                waited = self.clock() - started
                if state.stuck or waited > deadline:
                    why = self._pending_reason(names, pod, state)
                    return JobOutcome(
                        failure=(
                            f"pod did not start: {why}"
                            if state.stuck
                            else f"pod still Pending after {waited:.0f} s (pending_timeout): {why}"
                        ),
                        pod=pod,
                    )
            self._pause(self.poll_s)

    def _pending_reason(self, names: RunObjects, pod: Manifest | None, state: PodState) -> str:
        ns = self.k8s.namespace
        pod_events: list[Manifest] = []
        if state.name:
            with contextlib.suppress(KubeError):
                pod_events = self.client.events(ns, "Pod", state.name)
        claim_events: list[Manifest] = []
        for claim in names.claims:
            with contextlib.suppress(KubeError):
                claim_events += self.client.events(ns, "PersistentVolumeClaim", claim)
        job_events: list[Manifest] = []
        if pod is None:  # no pod: the Job's events say why (admission, a quota)
            with contextlib.suppress(KubeError):
                job_events = self.client.events(ns, "Job", names.job)
        return pending_reason(state, pod_events, claim_events, job_events)

    def _finished(
        self, names: RunObjects, pod: Manifest | None, state: PodState, job: Manifest
    ) -> JobOutcome:
        node = None
        with contextlib.suppress(KubeError):  # a fact of the run, not its result
            node = self.client.get("Node", state.node) if state.node else None
        lines: list[str] = []
        problem = ""
        try:
            lines = list(self.client.log(str(state.name), self.k8s.namespace, CONTAINER))
        except KubeError as exc:
            problem = f"its log could not be read ({exc})"
        framed = bundle.unframe(lines)
        tail = [ln.rstrip() for ln in lines if not ln.startswith(bundle.LINE) and ln.strip()]
        tail = [ln for ln in tail if not ln.startswith((bundle.HEADER, bundle.TRAILER))][-5:]
        if framed.data is not None:
            return JobOutcome(data=framed.data, pod=pod, node=node, tail=tail)
        problem = problem or framed.problem
        failure = finished_reason(state, job) if state.phase == PodPhase.FAILED else ""
        text = "; ".join(x for x in (failure, problem) if x)
        if tail:
            text += " (last lines: " + " | ".join(t[:200] for t in tail) + ")"
        return JobOutcome(failure=text, pod=pod, node=node, log_problem=problem, tail=tail)

    def _fetch_again(
        self,
        journal: Journal,
        names: RunObjects,
        group: list[PlannedRun],
        run_ids: list[int],
        outcome: JobOutcome,
    ) -> None:
        """The bundle did not come back on the log: a second pod on the same claim prints
        again what the first left there."""
        _, manifests = self.manifests(group, run_ids)
        job = next(m for m in manifests if m["kind"] == "Job")
        fetch_name = f"{names.job}-fetch"
        job["metadata"]["name"] = fetch_name
        container = job["spec"]["template"]["spec"]["containers"][0]
        container["command"] = ["pgfsbench", "pod-bundle"]
        job["spec"]["activeDeadlineSeconds"] = int(self.k8s.pending_timeout) + 120
        fetch = RunObjects(fetch_name, names.data_claim, names.wal_claim)
        journal.record(
            f"create Job {fetch_name} (the bundle again)",
            object_undo(self.address, self.k8s.namespace, self.uuid, "Job", fetch_name),
        )
        try:
            self.client.create(job)
        except KubeError as exc:
            outcome.notes.append(f"reading the bundle from the claim failed: {exc}")
            return
        again = self._follow(fetch)
        if again.data is not None:
            outcome.data = again.data
            outcome.notes.append(
                f"the bundle came from the claim ({outcome.log_problem} on the log)"
            )
        else:
            outcome.notes.append(f"the claim had no bundle either: {again.failure}")

    # ------------------------------------------------------------ results

    def _record(
        self,
        group: list[PlannedRun],
        run_ids: list[int],
        outcome: JobOutcome,
        result: CampaignResult,
        facts: dict[str, object],
    ) -> None:
        names, _ = self.manifests(group, run_ids)
        k8s_facts = self._facts(names, outcome, facts)
        env: dict[str, object] = {"kubernetes": k8s_facts}

        def fail_all(why: str) -> None:
            for planned, run_id in zip(group, run_ids, strict=True):
                self._finish(
                    planned,
                    run_id,
                    RunOutcome(RunStatus.FAILED, error=why, environment=env),
                    result,
                )

        if outcome.data is None:
            why = outcome.failure or "the pod sent no results"
            if outcome.notes:
                why += "; " + "; ".join(outcome.notes)
            fail_all(why)
            return
        where = self.workdir / "pods" / names.job
        # the bundle is what a container image made: hostile input. Whatever is wrong with
        # it fails this Job's runs with the reason, and the matrix goes on.
        try:
            results = bundle.unpack(outcome.data, where)
            pod_store = Store.foreign(results, artifacts_root=where / bundle.ARTIFACTS_DIR)
        except (ValueError, OSError, PgfsbenchError) as exc:
            fail_all(f"the pod's bundle cannot be read: {exc}")
            return
        try:
            pairs = paired(self._uuids(run_ids), run_ids, pod_store.list_runs(None))
            adopt_runs(
                pod_store,
                self.store,
                pairs,
                moved=(
                    pod_artifacts(Path(pod_home(pod_uid(self.k8s)))),
                    where / bundle.ARTIFACTS_DIR,
                ),
                environment=env,
                storage_details={"kubernetes": k8s_facts.get("volumes", {})},
            )
        except Interrupted:
            raise
        except Exception as exc:
            fail_all(f"the pod's results cannot be taken: {exc.__class__.__name__}: {exc}"[:500])
            return
        finally:
            pod_store.close()
        adopted = {ours for _, ours in pairs}
        node = k8s_facts.get("node")
        node_type = str(node.get("instance_type") or "") if isinstance(node, dict) else ""
        for planned, run_id in zip(group, run_ids, strict=True):
            if run_id not in adopted:
                said = " | ".join(t[:300] for t in outcome.tail)
                why = f"the pod ran {len(pairs)} of {len(group)} run(s)" + (
                    f"; it said: {said}" if said else ""
                )
                self._finish(
                    planned,
                    run_id,
                    RunOutcome(RunStatus.FAILED, error=why, environment=env),
                    result,
                )
                continue
            # the host is the cluster and the node type: repetitions on three nodes are
            # three runs of one cell (a verdict needs them together); the node stays a fact
            self.store.set_run_host(run_id, cluster_host(self.client.context, node_type))
            stored = self.store.get_run(run_id)
            record = RunOutcome(
                RunStatus(stored.status) if stored.status in set(RunStatus) else RunStatus.FAILED,
                error=stored.error,
                throughput=stored.throughput,
                throughput_unit=stored.throughput_unit,
                latency_avg_ms=stored.latency_avg_ms,
            )
            if outcome.notes:
                self.store.add_to_run(run_id, {"cluster_notes": list(outcome.notes)})
            result.counts[record.status] = result.counts.get(record.status, 0) + 1
            self.events.run_finished(planned, run_id, record)

    def _facts(
        self, names: RunObjects, outcome: JobOutcome, cluster: dict[str, object]
    ) -> dict[str, object]:
        ns = self.k8s.namespace
        volumes: dict[str, tuple[Manifest | None, Manifest | None, Manifest | None]] = {}
        for role, claim_name in (("data", names.data_claim), ("wal", names.wal_claim)):
            if claim_name is None:
                continue
            claim = pv = sc = None
            with contextlib.suppress(KubeError):
                claim = self.client.get("PersistentVolumeClaim", claim_name, ns)
                spec = (claim or {}).get("spec") or {}
                if spec.get("volumeName"):
                    pv = self.client.get("PersistentVolume", spec["volumeName"])
                sc_name = spec.get("storageClassName") or ((pv or {}).get("spec") or {}).get(
                    "storageClassName"
                )
                if sc_name:
                    sc = self.client.get("StorageClass", sc_name)
            volumes[role] = (claim, pv, sc)
        return run_facts(cluster, outcome.node, outcome.pod, volumes)


def paired(
    run_uuids: Sequence[str], run_ids: Sequence[int], pod_runs: Sequence[StoredRun]
) -> list[tuple[int, int]]:
    """(the pod's run id, the controller's) of each run the pod ran: by uuid (the task
    gave each planned run its row's), never by order; a pod run the task did not plan is
    left out, and so is a second one with the same uuid."""
    ours = dict(zip(run_uuids, run_ids, strict=True))
    out = []
    for r in sorted(pod_runs, key=lambda r: r.run_id):
        run_id = ours.pop(r.uuid or "", None)
        if run_id is not None:
            out.append((r.run_id, run_id))
    return out


def deadline_s(k8s: KubernetesConfig, d: Defaults, group: Sequence[PlannedRun]) -> int:
    """A Job's activeDeadlineSeconds: the spec's run_timeout, or the estimate of its own
    runs (plan.runs_seconds: load included) times RUN_TIMEOUT_FACTOR, plus a pod's
    overhead and 10 min; and, either way, the time its pod may wait Pending (the deadline
    counts from the Job's start, Pending included)."""
    pending = int(k8s.pending_timeout)
    if k8s.run_timeout is not None:
        return int(k8s.run_timeout) + pending
    return int(POD_OVERHEAD_S + RUN_TIMEOUT_FACTOR * runs_seconds(group, d) + 600) + pending


def group_manifests(
    loaded: LoadedSpec,
    campaign_uuid: str,
    group: Sequence[PlannedRun],
    first_run_id: int,
    run_uuids: Sequence[str],
    *,
    rate_max: tuple[float, str] | None = None,
    host: str = "",
    k8s: KubernetesConfig | None = None,
) -> tuple[RunObjects, list[Manifest]]:
    """A group's task (its ConfigMap), claims and Job, in the order they are created:
    the runs as planned here (kube/task.py), each with its run row's uuid; ``k8s``: the
    [kubernetes] table as the group's cluster sees it (its namespace)."""
    k8s = k8s or loaded.spec.kubernetes
    cell = group[0].cell
    storage = cell.storage
    if k8s is None or not isinstance(storage, PvcStorage):
        raise UsageError(f"internal: {cell.id} is not a cell of a cluster")
    names = object_names(campaign_uuid, first_run_id, storage.wal is not None)
    task = Task(
        campaign=campaign_uuid,
        spec_name=loaded.path.name,
        spec_text=effective_text(loaded),
        runs=tuple(
            TaskRun(
                uuid=run_uuid,
                cell=p.cell.id,
                repetition=p.repetition,
                scale=p.cell.scale,
                scale_basis=p.cell.scale_basis,
                max_tps=rate_max[0] if rate_max else None,
                max_from=rate_max[1] if rate_max else "",
            )
            for p, run_uuid in zip(group, run_uuids, strict=True)
        ),
        version=__version__,
        schema=HEAD_REVISION,
        host=host,
    )
    return names, run_manifests(
        names,
        k8s,
        storage,
        task.text(),
        object_labels=labels(campaign_uuid, first_run_id, cell.id, k8s.labels),
        sysctls=pod_sysctls([cell]).get(cell.kernel_name, {}),
        deadline_s=deadline_s(k8s, loaded.spec.defaults, group),
    )


def effective_text(loaded: LoadedSpec) -> str:
    """The spec the pod runs: the file as written, or, with --set, the spec as run."""
    if not loaded.overrides:
        return loaded.text
    import tomli_w

    return tomli_w.dumps(loaded.spec.model_dump(mode="json", exclude_none=True))


def planned_manifests(loaded: LoadedSpec, plan: Plan) -> str:
    """What `plan --manifests` prints: the objects of the campaign's first group (its
    task's ConfigMap, claims and Job), as a campaign would create them, with a new
    campaign uuid and run uuids, and, as comments, what the other groups are and how the
    objects go. A campaign creates the groups one at a time and reads each pod's results
    from its log; all of them at once would ask for every claim together."""
    import uuid

    from pgfsbench.kube.manifests import yaml_documents

    if loaded.spec.kubernetes is None:
        raise PgfsbenchError("the spec has no [kubernetes] table: nothing runs in a cluster")
    campaign_uuid = str(uuid.uuid4())
    groups = groups_of(list(plan.runs), loaded.spec.defaults.load_per)
    first = groups[0]
    storage = first[0].cell.storage
    name = storage.cluster if isinstance(storage, PvcStorage) else None
    k8s = loaded.spec.kubernetes.for_cluster(
        name if name in loaded.spec.kubernetes.clusters else None
    )
    _, docs = group_manifests(
        loaded, campaign_uuid, first, 1, [str(uuid.uuid4()) for _ in first], k8s=k8s
    )
    ns = k8s.namespace
    cells = list(dict.fromkeys(g[0].cell.id for g in groups))
    head = [
        f"# pgfsbench plan --manifests: the first of {len(groups)} Job(s) of this campaign "
        f"({len(plan.runs)} run(s) of {len(cells)} cell(s)), for cell {first[0].cell.id}.",
        "# `pgfsbench run` creates each group's ConfigMap, claims and Job in turn, waits for",
        "# its pod and takes its results from the pod's log (framed lines), then deletes them.",
        "# Applied by hand: kubectl apply -f FILE; the results are the framed lines of",
        f"# `kubectl logs -n {ns} job/{docs[-1]['metadata']['name']}`; remove everything with",
        f"# kubectl delete job,pvc,configmap -n {ns} -l {CAMPAIGN_LABEL}={campaign_uuid}",
    ]
    return "\n".join(head) + "\n" + yaml_documents(docs)
