"""The Kubernetes runner against a cluster in memory (fake_kube.FakeCluster): manifests,
refusals, events turned into failure reasons, the way back (a cut log, the claim),
results read back into the store, cleanup by label. The real cluster: tests/k8s/."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from pgfsbench.cluster.campaign import ClusterCampaign, planned_manifests
from pgfsbench.kube import bundle
from pgfsbench.kube import undo as cluster_undo
from pgfsbench.kube.client import KubeError
from pgfsbench.kube.manifests import label_value, pod_home
from pgfsbench.kube.pod import pod_artifacts
from pgfsbench.kube.status import PodPhase, pending_reason, pod_state
from pgfsbench.kube.task import TASK_FILE, Task, TaskRun
from pgfsbench.plan import make_plan
from pgfsbench.results.records import (
    RunOutcome,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store
from pgfsbench.spec import load_spec
from pgfsbench.spec.cluster import CAMPAIGN_LABEL, MANAGED_BY, parse_quantity
from pgfsbench.system.errors import SpecError, UsageError
from tests.unit.fake_kube import FakeCluster, PodScript

# where a pod of the spec below (not privileged: user 999) keeps its artifacts
IN_POD = pod_artifacts(Path(pod_home(999)))

SPEC = """
name = "k8s-unit"
[kubernetes]
kubeconfig = "{kubeconfig}"
namespace = "bench"
image = "registry.example/pgfsbench:1"
pending_timeout = "5s"
resources = {{ cpu = "2", memory = "4Gi" }}
tolerations = [{{ key = "dedicated", operator = "Equal", value = "db", effect = "NoSchedule" }}]
node_selector = {{ "node.kubernetes.io/instance-type" = "ecs.g7.xlarge" }}

[defaults]
scale = 1
clients = 2
duration = "5s"
warmup = "1s"
repetitions = 1

[storage.pl1-100g]
fs = "pvc"
storage_class = "alicloud-disk-essd-pl1"
size = "100Gi"

[storage.pl1-400g]
fs = "pvc"
storage_class = "alicloud-disk-essd-pl1"
size = "400Gi"
wal = {{ storage_class = "alicloud-disk-essd-pl1", size = "50Gi" }}

[kernel.default]
sysctl = {{ "kernel.shmmax" = 68719476736 }}

[workload.tpcb]
tool = "pgbench"
builtin = "tpcb-like"
"""


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    path.chmod(0o600)
    return path


def write_spec(tmp_path: Path, kubeconfig: Path, extra: str = "", name: str = "k8s.toml") -> Path:
    spec = tmp_path / name
    spec.write_text(SPEC.format(kubeconfig=kubeconfig) + extra)
    return spec


def pod_bundle(tmp_path: Path, tps: list[float], task: Task | None = None) -> Any:
    """The log of a pod that ran ``len(tps)`` runs of its task's cell, each with the uuid
    the task gave it: its engine's output, then the bundle. Without a task, the log of
    whichever task the Job gives (a callable the fake kubelet calls with the Job's Task,
    read from its ConfigMap), as a real pod runs its task."""
    if task is None:
        return lambda task: pod_bundle(tmp_path, tps, task)
    cell = task.cell
    home = tmp_path / f"pod-{len(list(tmp_path.glob('pod-*')))}"
    home.mkdir()
    store = Store(str(home / "results.db"))
    cid = store.start_campaign(StoredCampaign(name="pod", host="pod", uuid="u"))
    for i, value in enumerate(tps, start=1):
        rid = store.start_run(
            StoredRun(
                campaign_id=cid,
                cell=cell,
                storage="s",
                fs="ext4",
                postgres="default",
                kernel="default",
                workload="tpcb",
                repetition=task.runs[i - 1].repetition if i <= len(task.runs) else i,
                scale=task.runs[0].scale,
                clients=2,
                host="pod",
                uuid=task.runs[i - 1].uuid if i <= len(task.runs) else f"unplanned-{i}",
            )
        )
        store.finish_run(
            rid,
            RunOutcome(
                RunStatus.OK,
                tps=value,
                throughput=value,
                throughput_unit="tps",
                latency_avg_ms=1.5,
                environment={"hostname": "pgfsbench-x-1-abcde", "cpus": 4},
            ),
        )
        store.put_series(rid, "tps", [value] * 5, unit="tps")
        art = home / "results-artifacts" / f"run-{rid}"
        art.mkdir(parents=True)
        (art / "pgbench.stdout").write_text(f"tps = {value}\n")
        store.put_artifact(rid, "pgbench_stdout", IN_POD / f"run-{rid}" / "pgbench.stdout")
    store.close()
    data = bundle.pack(home / "results.db", home / "results-artifacts")
    return ["progress: 1.0 s, 100.0 tps", *bundle.frame(data)]


def campaign(
    tmp_path: Path, spec: Path, cluster: FakeCluster, only: list[str] | None = None
) -> tuple[ClusterCampaign, Store]:
    loaded = load_spec(spec)
    plan = make_plan(loaded, None, only or [])
    store = Store(str(tmp_path / "results.sqlite"))
    return (
        ClusterCampaign(
            loaded,
            plan,
            store,
            workdir=tmp_path / "work",
            client=cluster,
            poll_s=0,
            sleep=lambda s: None,
        ),
        store,
    )


# ------------------------------------------------------------------ spec and manifests


def test_quantities_are_kubernetes_sizes() -> None:
    assert parse_quantity("100Gi") == 100 << 30
    assert parse_quantity("500G") == 500 * 10**9
    with pytest.raises(ValueError, match="not a Kubernetes size"):
        parse_quantity("100 gigs")


def test_manifests_carry_our_labels_no_retries_and_the_pod_settings(
    tmp_path: Path, kubeconfig: Path
) -> None:
    spec = write_spec(tmp_path, kubeconfig)
    loaded = load_spec(spec)
    plan = make_plan(loaded)
    text = planned_manifests(loaded, plan)
    docs = list(yaml.safe_load_all(text))
    # the first group only (a campaign makes them one at a time): its task, claim, Job
    assert [d["kind"] for d in docs] == ["ConfigMap", "PersistentVolumeClaim", "Job"]
    assert text.startswith("# pgfsbench plan --manifests: the first of 2 Job(s)")
    campaign_uuid = docs[0]["metadata"]["labels"][CAMPAIGN_LABEL]
    assert campaign_uuid != "00000000-0000-4000-8000-000000000000"
    assert f"-l {CAMPAIGN_LABEL}={campaign_uuid}" in text  # the kubectl way to remove them
    for d in docs:
        assert d["metadata"]["labels"][MANAGED_BY] == "pgfsbench"
        assert d["metadata"]["namespace"] == "bench"
    task_map, claim, job = docs
    assert claim["spec"]["storageClassName"] == "alicloud-disk-essd-pl1"
    assert claim["spec"]["resources"]["requests"]["storage"] == "100Gi"
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["sysctls"] == [{"name": "kernel.shmmax", "value": "68719476736"}]
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}
    ]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "ecs.g7.xlarge"}
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"cpu": "2", "memory": "4Gi"}
    assert container["resources"]["requests"] == container["resources"]["limits"]
    # the planned runs come in the ConfigMap, mounted read-only: no spec in the environment
    assert not [e for e in container["env"] if "SPEC" in e["name"] or "TASK" in e["name"]]
    (task_volume,) = [v for v in pod["volumes"] if "configMap" in v]
    assert task_volume["configMap"]["name"] == task_map["metadata"]["name"]
    task = Task.parse(task_map["data"][TASK_FILE])
    assert task.cell.startswith("pl1-100g/") and task.repetitions == 1
    assert "[storage.pl1-100g]" in task.spec_text
    assert task.runs[0].scale == 1 and task.runs[0].repetition == 1
    # restricted: non-root, no escalation, no capabilities, seccomp
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 999
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["readOnlyRootFilesystem"] is False  # its home is the image's (see manifests)
    # and plan says so, and that kernel.shmmax is outside the safe set
    said = " ".join(plan.warnings)
    assert "run as user 999" in said and "kernel.shmmax" in said
    # a WAL claim: the 400Gi cell's Job mounts both
    wal_docs = list(
        yaml.safe_load_all(planned_manifests(loaded, make_plan(loaded, None, ["pl1-400g*"])))
    )
    assert [d["kind"] for d in wal_docs] == [
        "ConfigMap",
        "PersistentVolumeClaim",
        "PersistentVolumeClaim",
        "Job",
    ]
    wal_job = wal_docs[3]["spec"]["template"]["spec"]
    assert [
        v["persistentVolumeClaim"]["claimName"]
        for v in wal_job["volumes"]
        if "persistentVolumeClaim" in v
    ] == [wal_docs[1]["metadata"]["name"], wal_docs[2]["metadata"]["name"]]


def test_a_privileged_pod_is_root_and_plan_says_a_restricted_namespace_refuses_it(
    tmp_path: Path, kubeconfig: Path
) -> None:
    spec = write_spec(tmp_path, kubeconfig).read_text()
    path = tmp_path / "priv.toml"
    path.write_text(
        spec.replace('pending_timeout = "5s"', 'pending_timeout = "5s"\nprivileged = true')
    )
    loaded = load_spec(path)
    plan = make_plan(loaded)
    job = list(yaml.safe_load_all(planned_manifests(loaded, plan)))[-1]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["securityContext"] == {"privileged": True, "runAsUser": 0}
    assert any("refuses them" in w for w in plan.warnings)


def test_a_long_cell_id_is_a_valid_label_value() -> None:
    long = "storage-" + "x" * 80 + "/default/default/tpcb@clients=64"
    value = label_value(long)
    assert len(value) <= 63 and value[-1].isalnum()
    assert value != label_value(long + "2")  # cut, but not confused


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('[kernel.dirty]\nsysctl = { "vm.dirty_ratio" = 10 }\n', "vm.dirty_ratio is the node's"),
        ('[kernel.thp]\ntransparent_hugepage = "never"\n', "transparent huge pages are the node's"),
        ('[postgres.huge]\nsettings = { huge_pages = "on" }\n', "huge_pages = on needs huge pages"),
        ('[workload.cold]\ntool = "pgbench"\ncache = "cold"\n', "only a privileged pod"),
        ('[storage.host]\nfs = "tmpfs"\nsize = "1G"\n', "with [kubernetes] every storage is a pvc"),
    ],
)
def test_plan_refuses_what_a_pod_cannot_do(
    tmp_path: Path, kubeconfig: Path, extra: str, said: str
) -> None:
    with pytest.raises(UsageError, match="a pod cannot do") as err:
        make_plan(load_spec(write_spec(tmp_path, kubeconfig, extra)))
    assert said in str(err.value)


def test_pvc_options_of_a_host_filesystem_are_refused_by_name(
    tmp_path: Path, kubeconfig: Path
) -> None:
    extra = '[storage.bad]\nfs = "pvc"\nstorage_class = "x"\nmkfs_options = ["-E", "nodiscard"]\n'
    with pytest.raises(SpecError, match="mkfs_options"):
        load_spec(write_spec(tmp_path, kubeconfig, extra))


def test_a_pvc_without_a_cluster_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[storage.a]\nfs = "pvc"\nstorage_class = "x"\n')
    with pytest.raises(UsageError, match=r"needs a \[kubernetes\] table"):
        make_plan(load_spec(spec))


# ------------------------------------------------------------------ pod states


def test_pending_reason_prefers_the_container_then_the_newest_event() -> None:
    state = pod_state({"metadata": {"name": "p"}, "status": {"phase": "Pending"}})
    events = [
        {"reason": "FailedScheduling", "message": "old", "lastTimestamp": "2026-01-01T00:00:00Z"},
        {
            "reason": "FailedScheduling",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
            "lastTimestamp": "2026-01-01T00:01:00Z",
        },
    ]
    assert pending_reason(state, events, []) == (
        "FailedScheduling: 0/3 nodes are available: 3 Insufficient cpu."
    )
    stuck = pod_state(
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "state": {
                            "waiting": {
                                "reason": "ErrImageNeverPull",
                                "message": "image not present",
                            }
                        }
                    }
                ],
            }
        }
    )
    assert stuck.stuck and stuck.phase == PodPhase.PENDING
    assert pending_reason(stuck, events, []) == "ErrImageNeverPull: image not present"
    # no pod at all: admission refused it, and the Job's events say so
    none = pod_state(None)
    refused = {
        "reason": "FailedCreate",
        "type": "Warning",
        "message": 'pods "x" is forbidden: violates PodSecurity "restricted:latest"',
        "lastTimestamp": "2026-01-01T00:02:00Z",
    }
    assert "violates PodSecurity" in pending_reason(none, [], [], [refused])


# ------------------------------------------------------------------ the way back


def test_a_bundle_survives_framing_and_a_cut_log_is_named(tmp_path: Path) -> None:
    data = os.urandom(50_000)
    lines = list(bundle.frame(data))
    assert all(len(line) < 16 * 1024 for line in lines)
    assert bundle.unframe(["noise", *lines, "more"]).data == data
    cut = lines[:3] + lines[4:]
    found = bundle.unframe(cut)
    assert found.data is None and "lines are missing" in found.problem
    assert "no bundle" in bundle.unframe(["just text"]).problem
    corrupt = [*lines[:-1], lines[-1].replace(lines[-1].split()[-1], "0" * 64)]
    assert "SHA-256" in bundle.unframe(corrupt).problem
    # a line of other data in place of the first (base64 still)
    other = lines[1].split(" ", 2)
    swapped = [lines[0], f"{other[0]} {other[1]} {'A' * len(other[2])}", *lines[2:]]
    assert "SHA-256" in bundle.unframe(swapped).problem


def test_unpack_refuses_links_and_paths_that_leave(tmp_path: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("results.db")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/shadow"
        tar.addfile(info)
    with pytest.raises(ValueError, match="neither a file"):
        bundle.unpack(buf.getvalue(), tmp_path / "x")


# ------------------------------------------------------------------ campaigns


def test_a_campaign_runs_each_cell_as_a_job_and_keeps_the_cluster(
    tmp_path: Path, kubeconfig: Path
) -> None:
    logs = iter([pod_bundle(tmp_path, [1000.0]), pod_bundle(tmp_path, [2000.0])])
    cluster = FakeCluster(lambda job: PodScript(log=next(logs)))
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster)
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert [(r.storage, r.status, r.tps) for r in runs] == [
        ("pl1-100g", "ok", 1000.0),
        ("pl1-400g", "ok", 2000.0),
    ]
    run = runs[1]
    # the cluster and the node's type; the node itself is a fact, not the host
    assert run.host == "k8s:fake/ecs.g7.xlarge"
    # the campaign's uuid is the one its objects are labelled with (kubectl's fallback)
    stored = store.campaign(result.campaign_id)
    assert stored is not None and stored.uuid == camp.uuid
    assert run.environment["kubernetes"]["node"]["name"] == "node-1"
    k8s = run.environment["kubernetes"]
    assert k8s["node"]["instance_type"] == "ecs.g7.xlarge"
    assert k8s["node"]["zone"] == "cn-hangzhou-h"
    assert k8s["volumes"]["data"]["csi_driver"] == "diskplugin.csi.alibabacloud.com"
    assert k8s["volumes"]["data"]["requested"] == "400Gi"
    assert k8s["volumes"]["wal"]["requested"] == "50Gi"
    assert k8s["pod"]["qos_class"] == "Guaranteed"
    assert run.environment["cpus"] == 4  # the pod's own view, kept
    assert list(run.series) == ["tps"]
    art = {kind: Path(a.path) for kind, a in run.artifacts.items()}
    assert art["pgbench_stdout"].read_text() == "tps = 2000.0\n"
    assert art["pgbench_stdout"].is_relative_to(tmp_path / "work" / "pods")
    # nothing of ours is left in the cluster, and every object was ours
    assert not cluster.of_kind("Job") and not cluster.of_kind("PersistentVolumeClaim")
    assert not cluster.of_kind("ConfigMap")
    assert {k for k, _ in cluster.created} == {"Job", "PersistentVolumeClaim", "ConfigMap"}


def test_an_unschedulable_pod_fails_its_run_with_the_reason_and_the_matrix_goes_on(
    tmp_path: Path, kubeconfig: Path
) -> None:
    reason = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."

    def on_job(job: dict[str, Any]) -> PodScript:
        if "pl1-100g" in job["metadata"]["labels"]["pgfsbench.io/cell"]:
            return PodScript(phase="Pending", events=[("FailedScheduling", reason)])
        return PodScript(log=pod_bundle(tmp_path, [1500.0]))

    clock = iter(range(0, 10_000, 2))
    cluster = FakeCluster(on_job)
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster)
    camp.clock = lambda: float(next(clock))
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert runs[0].status == "failed"
    assert "Pending after" in (runs[0].error or "") and reason in (runs[0].error or "")
    assert runs[1].status == "ok"
    assert not cluster.of_kind("Job") and not cluster.of_kind("PersistentVolumeClaim")


def test_an_image_that_is_not_there_fails_at_once(tmp_path: Path, kubeconfig: Path) -> None:
    cluster = FakeCluster(
        lambda job: PodScript(
            phase="Pending",
            waiting_reason="ErrImageNeverPull",
            waiting_message='Container image "x" is not present',
        )
    )
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster, ["pl1-100g*"])
    camp.clock = lambda: 0.0  # no time passes: only the waiting reason can end it
    result = camp.execute()
    (run,) = store.full_runs([result.campaign_id])
    assert run.status == "failed" and "ErrImageNeverPull" in (run.error or "")


def test_a_crashed_pod_says_how_and_what_it_printed(tmp_path: Path, kubeconfig: Path) -> None:
    cluster = FakeCluster(
        lambda job: PodScript(
            phase="Failed",
            exit_code=137,
            terminated_reason="OOMKilled",
            log=["loading", "server closed the connection unexpectedly"],
        )
    )
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster, ["pl1-100g*"])
    (run,) = store.full_runs([camp.execute().campaign_id])
    assert run.status == "failed"
    assert "OOMKilled" in (run.error or "")
    assert "server closed the connection unexpectedly" in (run.error or "")


def test_a_cut_log_is_read_again_from_the_claim(tmp_path: Path, kubeconfig: Path) -> None:
    made: dict[str, list[str]] = {}

    def full(task: Task) -> list[str]:  # the bundle the pod made, once
        if "log" not in made:
            made["log"] = pod_bundle(tmp_path, [1234.0], task)
        return made["log"]

    def cut(task: Task) -> list[str]:  # one bundle line lost (a rotated log)
        return full(task)[:2] + full(task)[3:]

    def on_job(job: dict[str, Any]) -> PodScript:
        fetch = job["metadata"]["name"].endswith("-fetch")
        assert not fetch or job["spec"]["template"]["spec"]["containers"][0]["command"] == [
            "pgfsbench",
            "pod-bundle",
        ]
        return PodScript(log=full if fetch else cut)

    cluster = FakeCluster(on_job)
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster, ["pl1-100g*"])
    (run,) = store.full_runs([camp.execute().campaign_id])
    assert run.status == "ok" and run.tps == 1234.0
    assert "came from the claim" in json.dumps(run.metrics.get("cluster_notes"))
    assert not cluster.of_kind("Job")


def test_cleanup_deletes_what_a_killed_controller_left_by_label_only(
    tmp_path: Path, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgfsbench.cleanup import cleanup
    from pgfsbench.system.journal import Journal

    cluster = FakeCluster(lambda job: PodScript(phase="Running", polls_before_done=10**9))
    other = cluster.add(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "someone-elses",
                "namespace": "bench",
                "labels": {MANAGED_BY: "helm"},
            },
        }
    )
    camp, _ = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster, ["pl1-100g*"])

    class Killed(BaseException):
        pass

    def killed(*args: object) -> None:
        raise Killed

    # SIGKILL while the pod runs: no undo, no close (the journal stays as it was written)
    camp.sleep = killed
    with monkeypatch.context() as m:
        m.setattr(Journal, "undo_since", lambda self, mark, thread=None: [])
        m.setattr(Journal, "close", lambda self: None)
        with pytest.raises(Killed):
            camp.execute()
    assert cluster.of_kind("Job")
    leftovers = cluster.of_kind("PersistentVolumeClaim")
    assert leftovers and leftovers[0]["metadata"]["labels"][CAMPAIGN_LABEL] == camp.uuid
    # the journal is still there; so is a lock-free process: cleanup undoes it
    journal = next((tmp_path / "work" / "journal").glob("*.jsonl"))
    monkeypatch.setattr(cluster_undo, "client_factory", lambda address, ns: cluster)
    _unlock(journal)
    report = cleanup(tmp_path / "work")
    assert report.refused == [] and report.journals == 1
    assert not cluster.of_kind("PersistentVolumeClaim")
    assert [j["metadata"]["name"] for j in cluster.of_kind("Job")] == ["someone-elses"]
    assert cluster.get("Job", "someone-elses", "bench") == other


def _unlock(journal: Path) -> None:
    """The dead controller's flock went with it; here the test process still holds it:
    drop every lock of this process on the file (a journal of a process that died)."""
    import fcntl

    for fd_name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd_name}") == str(journal):
                fcntl.flock(int(fd_name), fcntl.LOCK_UN)
        except OSError:
            continue


def test_a_journal_naming_an_object_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    from pgfsbench.system.journal import Scope, Undo, out_of_bounds

    scope = Scope(tmp_path)
    bad = Undo(
        "delete_kube_object",
        {
            "kubeconfig": "/nonexistent",
            "namespace": "kube-system",
            "campaign": "x",
            "kind": "Deployment",
            "name": "coredns",
        },
    )
    assert out_of_bounds(bad, scope) is not None


def test_history_sees_a_new_node_or_class_but_not_the_runs_own_names() -> None:
    from pgfsbench.analysis.history import kubernetes_facts
    from pgfsbench.kube.environment import run_facts

    def facts(node: str, claim: str, provisioner: str) -> dict[str, str]:
        return kubernetes_facts(
            run_facts(
                {"server_version": "v1.34.4"},
                {"metadata": {"name": node}, "status": {"nodeInfo": {"kernelVersion": "6.1"}}},
                {"metadata": {"name": f"pod-{claim}"}, "status": {"qosClass": "Guaranteed"}},
                {
                    "data": (
                        {"metadata": {"name": claim}, "spec": {}},
                        {
                            "metadata": {"name": f"pv-{claim}"},
                            "spec": {"local": {"path": f"/v/{claim}"}},
                        },
                        {"metadata": {"name": "ssd"}, "provisioner": provisioner},
                    )
                },
            )
        )

    a, b = facts("node-1", "c1", "ebs.csi.aws.com"), facts("node-1", "c2", "ebs.csi.aws.com")
    assert a == b  # other claims, volumes and pods: the same environment
    c = facts("node-2", "c3", "pd.csi.storage.gke.io")
    changed = {k for k in a if a[k] != c.get(k)}
    assert "kubernetes node" in changed
    assert "kubernetes volumes.data.storage_class.provisioner" in changed


# ------------------------------------------------------------------ one loop, one policy


class AwayCluster(FakeCluster):
    """A cluster whose API server stops answering reads for ``away`` polls from the
    ``after``-th read on (as a restart of the API server looks to a client)."""

    def __init__(self, on_job: Any, after: int, away: int):
        super().__init__(on_job)
        self.reads = 0
        self.after, self.away = after, away

    def get(self, kind: str, name: str, namespace: str | None = None) -> Any:
        self.reads += 1
        if self.after <= self.reads < self.after + self.away:
            raise KubeError(f"reading {kind} {name}: the cluster cannot be reached (refused)")
        return super().get(kind, name, namespace)


def test_the_api_server_away_for_a_while_then_back_loses_no_run(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """A few polls unanswered (20 s here): the Job is followed on and its run kept."""
    logs = iter([pod_bundle(tmp_path, [1000.0]), pod_bundle(tmp_path, [2000.0])])
    cluster = AwayCluster(lambda job: PodScript(log=next(logs), polls_before_done=6), 2, 10)
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster)
    clock = iter(range(0, 100_000, 2))
    camp.clock = lambda: float(next(clock))
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert [(r.status, r.tps) for r in runs] == [("ok", 1000.0), ("ok", 2000.0)]


def test_the_api_server_gone_fails_the_run_with_its_words_and_the_matrix_goes_on(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """Unanswered past API_OUTAGE_S: that run fails with the cluster's words, the next
    cell runs, and no run is left `running` in a campaign marked done."""
    from pgfsbench.cluster.campaign import API_OUTAGE_S

    logs = iter([pod_bundle(tmp_path, [1000.0]), pod_bundle(tmp_path, [2000.0])])
    cluster = AwayCluster(lambda job: PodScript(log=next(logs)), 1, 40)
    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), cluster)
    clock = iter(range(0, 100_000, 10))
    camp.clock = lambda: float(next(clock))
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert runs[0].status == "failed"
    assert f"did not answer for {API_OUTAGE_S:.0f} s" in (runs[0].error or "")
    assert "cannot be reached" in (runs[0].error or "")
    assert runs[1].status == "ok"
    assert all(r.status != "running" for r in runs)


def test_anything_a_job_raises_fails_its_runs_and_the_matrix_goes_on(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """Not only the errors the Job runner expects: a bug or a library's exception in one
    group is that group's failure (the one loop's policy), never a campaign left with
    runs `running`."""
    logs = iter([pod_bundle(tmp_path, [2000.0])])

    def on_job(job: dict[str, Any]) -> PodScript:
        if "pl1-100g" in job["metadata"]["labels"]["pgfsbench.io/cell"]:
            raise RuntimeError("the kubelet exploded")
        return PodScript(log=next(logs))

    camp, store = campaign(tmp_path, write_spec(tmp_path, kubeconfig), FakeCluster(on_job))
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert [r.status for r in runs] == ["failed", "ok"]
    assert "RuntimeError: the kubelet exploded" in (runs[0].error or "")
    assert store.campaign(result.campaign_id).status == "done"  # type: ignore[union-attr]


def test_a_cluster_campaign_resumes_what_failed(tmp_path: Path, kubeconfig: Path) -> None:
    """--resume, as on a host: the runs without an ok result run again, into the same
    campaign, the failed ones superseded."""

    def flaky(job: dict[str, Any]) -> PodScript:
        if "pl1-100g" in job["metadata"]["labels"]["pgfsbench.io/cell"]:
            return PodScript(phase="Failed", exit_code=1, log=["oops"])
        return PodScript(log=pod_bundle(tmp_path, [2000.0]))

    spec = write_spec(tmp_path, kubeconfig)
    camp, store = campaign(tmp_path, spec, FakeCluster(flaky))
    cid = camp.execute().campaign_id
    assert [r.status for r in store.full_runs([cid])] == ["failed", "ok"]
    again = iter([pod_bundle(tmp_path, [1100.0])])
    loaded = load_spec(spec)
    resumed = ClusterCampaign(
        loaded,
        make_plan(loaded, None, []),
        store,
        workdir=tmp_path / "work",
        client=FakeCluster(lambda job: PodScript(log=next(again))),
        poll_s=0,
        sleep=lambda s: None,
        resume=cid,
    )
    assert resumed.execute().campaign_id == cid
    current = [r for r in store.full_runs([cid]) if not r.superseded_by]
    assert sorted((r.storage, r.status, r.tps) for r in current) == [
        ("pl1-100g", "ok", 1100.0),
        ("pl1-400g", "ok", 2000.0),
    ]


def test_each_job_has_the_deadline_of_its_own_runs_plus_its_pending_time(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """A 10-minute cell beside 1-minute ones gets its own deadline (the mean of the plan
    gave the long cell a third of what it needed), and the time its pod may wait Pending
    comes on top (the Job's deadline counts from its start)."""
    from pgfsbench.cluster.campaign import deadline_s

    extra = """
[workload.long]
tool = "pgbench"
builtin = "tpcb-like"
duration = "10m"
"""
    loaded = load_spec(write_spec(tmp_path, kubeconfig, extra))
    plan = make_plan(loaded, None, [])
    k8s = loaded.spec.kubernetes
    assert k8s is not None
    by_cell = {r.cell.id: deadline_s(k8s, loaded.spec.defaults, [r]) for r in plan.runs}
    long = [v for c, v in by_cell.items() if "/long" in c]
    short = [v for c, v in by_cell.items() if "/tpcb" in c]
    assert long and short
    assert min(long) >= 3 * 600 + int(k8s.pending_timeout)
    assert max(short) < min(long) - 1500


def test_a_pods_runs_are_paired_by_uuid_never_by_order() -> None:
    from types import SimpleNamespace

    from pgfsbench.cluster.campaign import paired

    pod = [  # in another order, one the task did not plan, one uuid twice
        SimpleNamespace(run_id=1, uuid="u6"),
        SimpleNamespace(run_id=2, uuid="elsewhere"),
        SimpleNamespace(run_id=3, uuid="u4"),
        SimpleNamespace(run_id=4, uuid="u4"),
    ]
    assert paired(["u4", "u5", "u6"], [40, 41, 42], pod) == [(1, 42), (3, 40)]  # type: ignore[arg-type]


def test_a_task_is_versioned_json_and_another_format_or_schema_is_refused() -> None:
    from pgfsbench.kube.task import TASK_FORMAT, version_problem

    task = Task(
        campaign="c",
        spec_name="s.toml",
        spec_text="name = 'x'\n",
        runs=(
            TaskRun("u1", "a/b/c/d", 4, 37, {"spec": "fits_ram", "ram_bytes": 4 << 30}),
            TaskRun("u2", "a/b/c/d", 5, 37, None, 812.5, "run(s) 3"),
        ),
        version="0.1.0",
        schema="0003",
    )
    again = Task.parse(task.text())
    assert again == task and again.repetitions == 2 and again.cell == "a/b/c/d"
    assert json.loads(task.text())["format"] == TASK_FORMAT
    assert version_problem(task, "0.1.0", "0003") is None
    # another version, even with the same schema, is refused: it may derive another cell
    other = version_problem(task, "0.2.0", "0003")
    assert other is not None and "0.2.0" in other and "0.1.0" in other
    why = version_problem(task, "0.2.0", "0004")
    assert why is not None and "0.2.0" in why and "0.1.0" in why and "0004" in why
    newer = json.loads(task.text()) | {"format": "pgfsbench.task/3"}
    with pytest.raises(ValueError, match="task/3"):
        Task.parse(json.dumps(newer))
    mixed = json.loads(task.text())
    mixed["runs"][1]["cell"] = "another/cell/x/y"
    with pytest.raises(ValueError, match="one cell"):
        Task.parse(json.dumps(mixed))
    for bad in ("[]", "{", json.dumps({"format": TASK_FORMAT})):
        with pytest.raises(ValueError):
            Task.parse(bad)


def test_a_rate_share_in_a_pod_is_of_the_campaigns_maximum_not_its_own(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """rate = "75%": as on a host, every run at 75% of the median of the campaign's
    unthrottled runs of the same cell so far. A pod's store has only its own runs, so its
    task brings that maximum; without an unthrottled run yet, none (the pod measures)."""
    spec = write_spec(tmp_path, kubeconfig).read_text()
    spec = spec.replace('builtin = "tpcb-like"', 'builtin = "tpcb-like"\nrate = ["max", "75%"]')
    spec = spec.replace("repetitions = 1", "repetitions = 2")
    path = tmp_path / "rate.toml"
    path.write_text(spec)
    tasks: list[Task] = []
    unthrottled = iter([[1000.0], [3000.0]])

    def on_job(job: dict[str, Any]) -> PodScript:
        def log(task: Task) -> list[str]:
            tasks.append(task)
            tps = next(unthrottled) if "rate=max" in task.cell else [750.0]
            return list(pod_bundle(tmp_path, tps, task))

        return PodScript(log=log)

    camp, _ = campaign(tmp_path, path, FakeCluster(on_job), ["pl1-100g*"])
    camp.execute()
    paced = [t.runs[0] for t in tasks if "rate=75%" in t.cell]
    assert [t.cell for t in tasks][:2] == [
        "pl1-100g/default/default/tpcb@rate=max",
        "pl1-100g/default/default/tpcb@rate=75%",
    ]
    # after one unthrottled run: its 1000; after two, the campaign's median (the upper
    # of two, as on a host)
    assert [(r.max_tps, r.repetition) for r in paced] == [(1000.0, 1), (3000.0, 2)]
    assert "run(s)" in paced[0].max_from
    free = [t.runs[0] for t in tasks if "rate=max" in t.cell]
    assert all(r.max_tps is None for r in free)


def test_the_pod_runs_the_controllers_plan_at_its_scale(
    tmp_path: Path, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod plans nothing: its cell at the scale the controller resolved ("fits_ram" of
    the pod's memory limit), its runs with the controller's repetitions and uuids."""
    from pgfsbench.kube.task import pins

    spec = write_spec(tmp_path, kubeconfig).read_text().replace("scale = 1", 'scale = "fits_ram"')
    path = tmp_path / "fits.toml"
    path.write_text(spec)
    loaded = load_spec(path)
    plan = make_plan(loaded, None, ["pl1-100g*"])
    (cell,) = plan.cells
    task = Task(
        campaign="c",
        spec_name="fits.toml",
        spec_text=spec,
        runs=(
            TaskRun("u7", cell.id, 7, cell.scale, cell.scale_basis),
            TaskRun("u8", cell.id, 8, cell.scale, cell.scale_basis),
        ),
    )
    # in the pod: no [kubernetes] (the engine runs there), and another machine's memory
    monkeypatch.setenv("PGFSBENCH_IN_POD", "1")
    pod_loaded = load_spec(path)
    pod_loaded = dataclasses.replace(
        pod_loaded, spec=pod_loaded.spec.model_copy(update={"kubernetes": None})
    )
    pod_plan = make_plan(pod_loaded, None, pinned=pins(task))
    assert [c.id for c in pod_plan.cells] == [cell.id]
    assert pod_plan.cells[0].scale == cell.scale
    assert pod_plan.cells[0].scale_basis == cell.scale_basis
    wrong = dataclasses.replace(task, runs=(TaskRun("u9", "nowhere/x/y/z", 1, 3),))
    with pytest.raises(SpecError, match="not a cell of this spec"):
        make_plan(pod_loaded, None, pinned=pins(wrong))


def test_a_scale_relative_to_ram_is_the_pods_memory_not_the_controllers(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """The controller plans and the pod runs the same numbers: "fits_ram" is half of the
    pod's memory limit (4Gi here) on both, whatever either machine has; without a limit
    it is refused (the pod's /proc/meminfo is its node's)."""
    spec = write_spec(tmp_path, kubeconfig).read_text().replace("scale = 1", 'scale = "fits_ram"')
    path = tmp_path / "fits.toml"
    path.write_text(spec)
    plan = make_plan(load_spec(path), None, [])
    basis = plan.cells[0].scale_basis
    assert basis is not None and basis["ram_bytes"] == 4 << 30
    path.write_text(
        spec.replace('resources = { cpu = "2", memory = "4Gi" }', 'resources = { cpu = "2" }')
    )
    with pytest.raises(SpecError, match="relative to the pod's memory"):
        make_plan(load_spec(path), None, [])


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(tmp_path: Path) -> None:
    """$KUBECONFIG=a:b: each cluster, context and user from the first file that names it,
    the current context from the first that sets one; a file in the list that is not
    there is skipped; every file is checked (a kubeconfig runs commands)."""
    from pgfsbench.kube.client import ClusterAddress, merged_kubeconfig

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "one", "cluster": {"server": "https://a"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "one", "user": "u"}}],
                "users": [{"name": "u", "user": {"token": "A"}}],
            }
        )
    )
    b.write_text(
        yaml.safe_dump(
            {
                "current-context": "ctx",
                "clusters": [
                    {"name": "one", "cluster": {"server": "https://b"}},
                    {"name": "two", "cluster": {"server": "https://two"}},
                ],
                "users": [{"name": "u", "user": {"token": "B"}}],
            }
        )
    )
    for f in (a, b):
        f.chmod(0o600)
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = f"{a}:{tmp_path / 'absent'}:{b}"
    try:
        address = ClusterAddress()
        assert address.paths() == [a, b] and address.path() == a
        merged = merged_kubeconfig(address.paths())
    finally:
        if old is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = old
    assert merged["current-context"] == "ctx"
    servers = {c["name"]: c["cluster"]["server"] for c in merged["clusters"]}
    assert servers == {"one": "https://a", "two": "https://two"}  # the first file's wins
    assert [u["user"]["token"] for u in merged["users"]] == ["A"]
    b.chmod(0o666)  # anyone may write it: refused, whichever file of the list it is
    from pgfsbench.system.trust import UntrustedPath

    with pytest.raises(UntrustedPath):
        merged_kubeconfig([a, b])


def test_kubectls_flags_are_the_specs_kubernetes_keys(tmp_path: Path, kubeconfig: Path) -> None:
    from pgfsbench.cli.run import _kube_sets

    sets = _kube_sets(str(kubeconfig), "prod", "bench-2")
    loaded = load_spec(write_spec(tmp_path, kubeconfig), sets)
    k8s = loaded.spec.kubernetes
    assert k8s is not None
    assert (k8s.kubeconfig, k8s.context, k8s.namespace) == (str(kubeconfig), "prod", "bench-2")
    assert _kube_sets(None, None, None) == []


def test_a_decimal_size_in_a_spec_is_refused_with_both_readings(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """500G is 500 x 10^9 bytes to Kubernetes and 500 GiB in loop:500G: one rule in a
    spec (binary), the ambiguous refused with both readings and what to write."""
    text = write_spec(tmp_path, kubeconfig).read_text().replace('size = "100Gi"', 'size = "100G"')
    path = tmp_path / "decimal.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=r"10\^9 bytes; write 100Gi"):
        load_spec(path)


def test_a_listing_cut_by_the_transport_is_retried_and_becomes_a_kube_error() -> None:
    """lightkube lists lazily: the request happens while its pages are read. A server
    that refuses the connection then is retried, and if it stays away the caller gets
    a KubeError (which the campaign's pollers handle), never the transport's own."""
    import httpx2

    from pgfsbench.kube.client import RETRY_PAUSES_S, LightkubeClient

    calls: list[int] = []

    class Lazy:
        def list(self, *args: Any, **kwargs: Any) -> Any:
            def pages() -> Any:
                calls.append(1)
                if len(calls) < 3:
                    raise httpx2.ConnectError("[Errno 111] Connection refused")
                yield from ()

            return pages()

    client: Any = object.__new__(LightkubeClient)
    client.namespace = "default"
    client._client = Lazy()
    client._sleep = lambda s: None
    assert client.select("Pod", "default", {}) == []  # the third try answered
    assert len(calls) == 3
    calls.clear()

    class Away(Lazy):
        def list(self, *args: Any, **kwargs: Any) -> Any:
            def pages() -> Any:
                calls.append(1)
                raise httpx2.ConnectError("[Errno 111] Connection refused")
                yield

            return pages()

    client._client = Away()
    with pytest.raises(KubeError, match="cannot be reached"):
        client.events("default", "Job", "j")
    assert len(calls) == len(RETRY_PAUSES_S) + 1


TWO_CLUSTERS = """
name = "two-clusters"
[kubernetes]
kubeconfig = "{kubeconfig}"
image = "registry.example/pgfsbench:1"
pending_timeout = "5s"
resources = {{ cpu = "2", memory = "4Gi" }}
[kubernetes.clusters.east]
context = "east"
namespace = "bench-east"
[kubernetes.clusters.west]
context = "west"
namespace = "bench-west"

[defaults]
scale = 1
clients = 2
duration = "5s"
warmup = "1s"
repetitions = 2

[storage.pl1-east]
fs = "pvc"
cluster = "east"
storage_class = "alicloud-disk-essd-pl1"
size = "100Gi"

[storage.pl1-west]
fs = "pvc"
cluster = "west"
storage_class = "alicloud-disk-essd-pl1"
size = "100Gi"

[workload.tpcb]
tool = "pgbench"
builtin = "tpcb-like"
"""


def test_two_clusters_in_one_campaign_run_side_by_side_into_one_store(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """Each storage's runs go to its cluster (its context, its namespace), the clusters'
    Jobs at the same time (one at a time in each), every run in the one store with its
    cluster as its host, and the two clusters' cells compared when named (the host said
    as a difference besides the storage)."""
    import time as clock

    spec = tmp_path / "two.toml"
    spec.write_text(TWO_CLUSTERS.format(kubeconfig=kubeconfig))
    alive = {"now": 0, "most": 0}
    tps = {"east": iter([1000.0, 1010.0]), "west": iter([2000.0, 2020.0])}

    def fake(name: str) -> FakeCluster:
        def on_job(job: dict[str, Any]) -> PodScript:
            alive["now"] += 1
            alive["most"] = max(alive["most"], alive["now"])
            assert job["metadata"]["namespace"] == f"bench-{name}"
            return PodScript(
                log=lambda task: pod_bundle(tmp_path, [next(tps[name])], task),
                polls_before_done=5,
            )

        cluster = FakeCluster(on_job)
        cluster.context = name
        deleting = cluster.delete

        def delete(kind: str, obj: str, namespace: str | None = None) -> bool:
            if kind == "Job":
                alive["now"] -= 1
            return deleting(kind, obj, namespace)

        cluster.delete = delete  # type: ignore[method-assign,assignment]
        return cluster

    clusters: dict[str, Any] = {"east": fake("east"), "west": fake("west")}
    loaded = load_spec(spec)
    plan = make_plan(loaded)
    store = Store(str(tmp_path / "results.sqlite"))
    camp = ClusterCampaign(
        loaded,
        plan,
        store,
        workdir=tmp_path / "work",
        clients=clusters,
        poll_s=0.01,
        sleep=clock.sleep,
    )
    result = camp.execute()
    runs = store.full_runs([result.campaign_id])
    assert sorted((r.storage, r.status, r.tps) for r in runs) == [
        ("pl1-east", "ok", 1000.0),
        ("pl1-east", "ok", 1010.0),
        ("pl1-west", "ok", 2000.0),
        ("pl1-west", "ok", 2020.0),
    ]
    assert {r.host for r in runs if r.storage == "pl1-east"} == {"k8s:east/ecs.g7.xlarge"}
    assert {r.host for r in runs if r.storage == "pl1-west"} == {"k8s:west/ecs.g7.xlarge"}
    assert alive["most"] == 2  # a Job in each cluster at once, never two in one
    for name, cluster in clusters.items():
        made = {
            m["metadata"]["namespace"]
            for k in ("Job", "ConfigMap")
            for m in cluster.objects.values()
            if m["kind"] == k
        }
        assert made <= {f"bench-{name}"}
        assert not cluster.of_kind("Job") and not cluster.of_kind("ConfigMap")
    stored = store.campaign(result.campaign_id)
    assert stored is not None
    assert set(stored.environment["kubernetes_clusters"]) == {"east", "west"}
    # the two clusters' cells compared, from the one store
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "compare",
            "pl1-east",
            "pl1-west",
            "-r",
            store.target,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    (pair,) = json.loads(out.stdout)
    assert pair["baseline"]["host"] == "k8s:east/ecs.g7.xlarge"
    assert pair["other"]["host"] == "k8s:west/ecs.g7.xlarge"
    assert pair["also_differ"] == {"host": ["k8s:east/ecs.g7.xlarge", "k8s:west/ecs.g7.xlarge"]}
    assert pair["ratio"] > 1.9
    # a pvc storage that does not say which cluster is refused by plan, with the names
    spec.write_text(spec.read_text().replace('cluster = "west"\n', ""))
    with pytest.raises(UsageError, match=r"says which it runs in \(cluster = "):
        make_plan(load_spec(spec))


@pytest.mark.parametrize("ignored", [False, True])
def test_ctrl_c_with_two_clusters_stops_both_and_deletes_their_jobs(
    tmp_path: Path, kubeconfig: Path, ignored: bool
) -> None:
    """A Ctrl-C while each cluster runs a Job: both threads stop at their next wait,
    their runs are aborted (none left `running`), their Jobs, claims and tasks deleted,
    and the interrupt reaches the caller. Deterministic: one place (system/signals) turns
    the signal into the stop every thread checks, whatever thread the kernel or Python
    woke; also when the shell started pgfsbench with SIGINT ignored (a background job:
    `ignored`), where on 0206292 the SIGINT was lost and the Jobs ran on."""
    import signal
    import threading
    import time as clock

    if ignored:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    spec = tmp_path / "two.toml"
    spec.write_text(TWO_CLUSTERS.format(kubeconfig=kubeconfig))
    main = threading.main_thread().ident
    assert main is not None
    started: list[str] = []

    def fake(name: str) -> FakeCluster:
        def on_job(job: dict[str, Any]) -> PodScript:
            started.append(name)
            if len(started) == 2:  # both clusters busy: Ctrl-C
                threading.Timer(0.05, signal.pthread_kill, (main, signal.SIGINT)).start()
            return PodScript(log=[], polls_before_done=10_000)

        cluster = FakeCluster(on_job)
        cluster.context = name
        return cluster

    clusters: dict[str, Any] = {"east": fake("east"), "west": fake("west")}
    loaded = load_spec(spec)
    store = Store(str(tmp_path / "results.sqlite"))
    camp = ClusterCampaign(
        loaded,
        make_plan(loaded),
        store,
        workdir=tmp_path / "work",
        clients=clusters,
        poll_s=0.01,
        sleep=clock.sleep,
    )
    try:
        with pytest.raises(KeyboardInterrupt):
            camp.execute()
    finally:
        if ignored:
            signal.signal(signal.SIGINT, previous)
    assert sorted(started) == ["east", "west"]
    runs = store.list_runs(None)
    assert "running" not in {r.status for r in runs}, [(r.storage, r.status, r.error) for r in runs]
    assert sorted(r.status for r in runs) == ["aborted", "aborted"]
    for cluster in clusters.values():
        for kind in ("Job", "PersistentVolumeClaim", "ConfigMap"):
            assert not cluster.of_kind(kind), kind


def test_the_files_and_programs_a_kubeconfig_names_are_trusted_as_it_is(tmp_path: Path) -> None:
    """A key, a CA or a token file another user can replace, or an exec command they can
    write, is refused: the kubeconfig alone was checked on 0206292."""
    from pgfsbench.kube.client import read_kubeconfig
    from pgfsbench.system.trust import UntrustedPath

    key, ca, tool = tmp_path / "key.pem", tmp_path / "ca.pem", tmp_path / "get-token"
    for f in (key, ca, tool):
        f.write_text("x")
        f.chmod(0o600)
    tool.chmod(0o755)
    config = tmp_path / "config"

    def write(user: dict[str, Any], cluster: dict[str, Any] | None = None) -> None:
        config.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "c", "cluster": cluster or {"server": "https://x"}}],
                    "users": [{"name": "u", "user": user}],
                }
            )
        )
        config.chmod(0o600)

    write(
        {"client-key": "key.pem", "exec": {"command": str(tool)}},
        {"certificate-authority": str(ca)},
    )
    assert read_kubeconfig(config)["users"][0]["user"]["client-key"] == "key.pem"
    for f in (key, ca, tool):
        f.chmod(0o666)
        with pytest.raises(UntrustedPath, match=f.name):
            read_kubeconfig(config)
        f.chmod(0o600 if f is not tool else 0o755)
    os.chown(tool, 65534, 65534)  # nobody's program, run as root: refused
    with pytest.raises(UntrustedPath, match="exec command"):
        read_kubeconfig(config)
    write({"exec": {"command": "no-such-plugin-here"}})
    with pytest.raises(UntrustedPath, match="not on PATH"):
        read_kubeconfig(config)


def test_options_a_cluster_campaign_cannot_use_are_refused_not_ignored(
    tmp_path: Path, kubeconfig: Path
) -> None:
    """--metrics-port, --host-name, --destroy-data-on and --force were ignored silently
    with [kubernetes] on 0206292; and plan said the pods' root filesystem was read-only
    while the manifest makes it writable."""
    from pgfsbench.cli.run import run_spec
    from pgfsbench.kube.manifests import pod_security_contexts
    from pgfsbench.kube.rules import pod_warnings
    from pgfsbench.report.inert import plain_console

    loaded = load_spec(write_spec(tmp_path, kubeconfig))
    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    with pytest.raises(UsageError, match="--host-name, --force: not with"):
        run_spec(
            loaded,
            str(tmp_path / "r.sqlite"),
            work,
            [],
            True,
            plain_console(),
            host="elsewhere",
        )
    k8s = loaded.spec.kubernetes
    assert k8s is not None
    _, container = pod_security_contexts(k8s)
    said = " ".join(pod_warnings(loaded.spec, []))
    assert container["readOnlyRootFilesystem"] is False and "read-only" not in said
