"""PostgreSQL on Kubernetes, for real: Jobs on a single-node cluster with two
StorageClasses (ext4 and XFS local volumes), runs back in the store, a pod that cannot be
scheduled, a controller killed mid-run and cleaned up, a host run compared with a cluster
run of the same cell."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from pgfsbench.kube.client import LightkubeClient
from pgfsbench.spec.cluster import MANAGED_BY
from tests.func.conftest import ROOT, pgfsbench, runs_of, start, wait_for
from tests.k8s.conftest import cluster_sets

SPEC = ROOT / "examples" / "k8s-test-cluster.toml"


def ours(kube: LightkubeClient) -> list[str]:
    """Every Job, Pod and claim of pgfsbench's in the namespace."""
    found = []
    for kind in ("Job", "Pod", "PersistentVolumeClaim"):
        for obj in kube.select(kind, "default", {MANAGED_BY: "pgfsbench"}):
            found.append(f"{kind} {obj['metadata']['name']}")
    return found


def start_long_run(
    base: Path, cluster_dir: Path, kube: LightkubeClient, *extra: str
) -> subprocess.Popen[str]:
    """`pgfsbench run` of a 120 s run in the background, once its pod is Running."""
    proc = start(
        "run",
        str(SPEC),
        "-r",
        str(base / "r.sqlite"),
        "--workdir",
        str(base / "work"),
        *cluster_sets(cluster_dir),
        "--set",
        "defaults.repetitions=1",
        "--set",
        "defaults.duration=120s",
        *extra,
    )
    try:
        wait_for(
            lambda: any(
                (p.get("status") or {}).get("phase") == "Running"
                for p in kube.select("Pod", "default", {MANAGED_BY: "pgfsbench"})
            ),
            120,
            "a pod of the campaign running",
        )
    except BaseException:
        proc.kill()
        proc.communicate(timeout=60)
        raise
    return proc


def deleting(kube: LightkubeClient, what: str) -> bool:
    kind, name = what.split(" ", 1)
    obj = kube.get(kind, name, "default")
    return obj is None or bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def test_two_classes_three_repetitions_with_the_cluster_recorded(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    results = base / "r.sqlite"
    t0 = time.monotonic()
    proc = pgfsbench(
        "run",
        str(SPEC),
        "-r",
        str(results),
        "--workdir",
        str(base / "work"),
        *cluster_sets(cluster_dir),
        "--set",
        "defaults.repetitions=3",
        timeout=1200,
    )
    print(f"campaign of 6 runs in pods: {time.monotonic() - t0:.0f} s")
    runs = runs_of(results)
    assert [r["status"] for r in runs] == ["ok"] * 6, proc.stdout[-3000:]
    assert {r["storage"] for r in runs} == {"ext4-local", "xfs-local"}
    shown = json.loads(
        pgfsbench("results", "show", str(runs[0]["run_id"]), "-r", str(results), "--json").stdout
    )
    k8s = shown["environment"]["kubernetes"]
    assert k8s["cluster"]["server_version"] == "v1.34.4"
    assert k8s["node"]["kubelet_version"] == "v1.34.4"
    assert k8s["node"]["zone"] == "test-zone-a"
    data = k8s["volumes"]["data"]
    assert data["storage_class"]["provisioner"] == "kubernetes.io/no-provisioner"
    assert data["fs_type"] in ("ext4", "xfs")
    assert k8s["pod"]["qos_class"] == "Guaranteed"
    assert k8s["pod"]["image_id"].startswith("sha256:") or "@sha256:" in k8s["pod"]["image_id"]
    assert shown["host"].startswith("k8s:test/")
    # what the pod sees of itself: its own cgroup (its limit, its CPU and throttling)
    assert shown["environment"]["container"]["memory_limit_bytes"] == 1 << 30
    series = set(shown["series"])
    assert {"cg_cpu_pct", "cg_throttled_pct", "cg_memory_mb"} <= series, sorted(series)
    # the filesystem the pod saw is the class's
    by_storage = {r["storage"]: r for r in runs}
    assert by_storage["xfs-local"]["fs"] == "xfs" and by_storage["ext4-local"]["fs"] == "ext4"
    text = pgfsbench("results", "show", str(runs[0]["run_id"]), "-r", str(results)).stdout
    assert "Kubernetes" in text and "QoS Guaranteed" in text
    summary = pgfsbench("results", "summary", "-r", str(results)).stdout
    assert "xfs-local" in summary and "ext4-local" in summary
    assert "no verdict is possible" not in summary
    assert ours(kube) == []


def test_an_unschedulable_pod_fails_its_run_and_the_matrix_goes_on(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    results = base / "r.sqlite"
    pgfsbench(
        "run",
        str(SPEC),
        "-r",
        str(results),
        "--workdir",
        str(base / "work"),
        *cluster_sets(cluster_dir),
        "--set",
        "defaults.repetitions=1",
        "--set",
        "kubernetes.pending_timeout=15s",
        # no volume of the class is this large: the scheduler finds none to bind
        "--set",
        "storage.xfs-local.size=500Gi",
        check=False,
        timeout=600,
    )
    runs = {r["storage"]: r for r in runs_of(results)}
    assert runs["ext4-local"]["status"] == "ok"
    assert runs["xfs-local"]["status"] == "failed"
    error = runs["xfs-local"]["error"]
    assert "Pending after" in error and "FailedScheduling" in error, error
    assert "persistent volumes to bind" in error, error
    assert ours(kube) == []


def test_a_killed_controller_leaves_nothing_after_cleanup(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    proc = start_long_run(base, cluster_dir, kube)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert ours(kube), "the killed controller left its Job, pod and claim"
    out = pgfsbench("cleanup", "--workdir", str(base / "work")).stdout
    assert "Kubernetes objects of campaign" in out
    wait_for(lambda: ours(kube) == [], 120, "the pods to go with their Job")


def test_a_host_run_compares_with_a_cluster_run_of_the_same_cell(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    results = base / "r.sqlite"
    host_spec = base / "host.toml"
    text = SPEC.read_text()
    cut = text.index("[storage.ext4-local]")
    host_spec.write_text(
        text[: text.index("[kubernetes]")]
        + '[defaults]\nscale = 2\nclients = 4\nthreads = 2\nduration = "10s"\nwarmup = "2s"\n'
        + "repetitions = 2\n\n"
        + '[storage.ext4-local]\nfs = "ext4"\ndevice = "loop:1G"\n\n'
        + text[text.index("[postgres.default]") :]
    )
    assert cut > 0
    pgfsbench("run", str(host_spec), "-r", str(results), "--workdir", str(base / "work-host"))
    pgfsbench(
        "run",
        str(SPEC),
        "-r",
        str(results),
        "--workdir",
        str(base / "work"),
        *cluster_sets(cluster_dir),
        "--set",
        "defaults.repetitions=2",
        "--only",
        "ext4-local*",
        timeout=900,
    )
    out = pgfsbench(
        "compare", "-r", str(results), "--campaign", "1", "--campaign", "2", "--json"
    ).stdout
    rows = json.loads(out)
    (pair,) = rows
    cell = "ext4-local/default/default/tpcb"
    assert pair["baseline"]["cell"] == cell and pair["other"]["cell"] == cell
    assert pair["baseline"]["host"] != pair["other"]["host"]  # this host, then a node
    assert pair["other"]["host"].startswith("k8s:test/")
    assert pair["baseline"]["n"] == 2 and pair["other"]["n"] == 2
    assert pair["ratio"] > 0 and pair["verdict"]
    print(f"cluster against host, same cell: {pair['text']}")
    assert ours(kube) == []


def test_ctrl_c_deletes_the_running_job_and_its_claims(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    proc = start_long_run(base, cluster_dir, kube, "--only", "ext4-local*")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Job and claims were deleted" in err
    (run,) = runs_of(base / "r.sqlite")
    assert run["status"] == "aborted"
    # the Job at once; its pod once it has ended, and the claim after its pod (the
    # pvc-protection finalizer holds a claim in use): both already being deleted
    assert not [o for o in ours(kube) if o.startswith("Job ")]
    assert all(deleting(kube, o) for o in ours(kube) if o.startswith("PersistentVolumeClaim "))
    wait_for(lambda: ours(kube) == [], 120, "the pod, then the claim, to go")
