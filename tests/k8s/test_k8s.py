"""PostgreSQL on Kubernetes, for real: Jobs on a single-node cluster with two
StorageClasses (ext4 and XFS local volumes), runs back in the store, a pod that cannot be
scheduled, a controller killed mid-run and cleaned up, a host run compared with a cluster
run of the same cell."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from pgfsbench.kube.client import LightkubeClient
from pgfsbench.spec.cluster import MANAGED_BY
from tests.func.conftest import ROOT, pgfsbench, runs_of, show, start, wait_for
from tests.k8s.conftest import cluster_sets

SPEC = ROOT / "examples" / "k8s-test-cluster.toml"


def ours(kube: LightkubeClient) -> list[str]:
    """Every Job, Pod and claim of pgfsbench's in the namespace."""
    found = []
    for kind in ("Job", "Pod", "PersistentVolumeClaim", "ConfigMap"):
        for obj in kube.select(kind, "default", {MANAGED_BY: "pgfsbench"}):
            found.append(f"{kind} {obj['metadata']['name']}")
    return found


def run_args(base: Path, cluster_dir: Path, spec: Path = SPEC) -> list[str]:
    """`pgfsbench run SPEC` on the test cluster, its results (r.sqlite) and work directory
    (work) in ``base``."""
    return [
        "run",
        str(spec),
        "-r",
        str(base / "r.sqlite"),
        "--workdir",
        str(base / "work"),
        *cluster_sets(cluster_dir),
    ]


def wait_running(kube: LightkubeClient, timeout: float) -> None:
    """Until a pod of pgfsbench's is Running."""
    wait_for(
        lambda: any(
            (p.get("status") or {}).get("phase") == "Running"
            for p in kube.select("Pod", "default", {MANAGED_BY: "pgfsbench"})
        ),
        timeout,
        "a pod of the campaign running",
    )


def start_long_run(
    base: Path, cluster_dir: Path, kube: LightkubeClient, *extra: str
) -> subprocess.Popen[str]:
    """`pgfsbench run` of a 120 s run in the background, once its pod is Running."""
    proc = start(
        *run_args(base, cluster_dir),
        "--set",
        "defaults.repetitions=1",
        "--set",
        "defaults.duration=120s",
        *extra,
    )
    try:
        wait_running(kube, 120)
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
        *run_args(base, cluster_dir),
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
    # the cluster and the node's type; the node itself is a fact of the run
    assert shown["host"] == "k8s:test/test.2cpu"
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
        *run_args(base, cluster_dir),
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
        *run_args(base, cluster_dir),
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
    assert pair["other"]["host"] == "k8s:test/test.2cpu"
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


def cluster_sh(*args: str) -> None:
    subprocess.run(["bash", str(ROOT / "scripts" / "k8s" / "cluster.sh"), *args], check=True)


def test_the_api_server_away_for_20_s_leaves_no_run_running(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    """The API server stopped for 20 s while a run's pod runs: that run finishes (or
    fails with the cluster's words), the next runs, none is left `running`."""
    results = base / "r.sqlite"
    proc = start(
        *run_args(base, cluster_dir),
        "--only",
        "ext4-local*",
        "--set",
        "defaults.repetitions=2",
        "--set",
        "defaults.duration=40s",
    )
    try:
        wait_running(kube, 180)
        time.sleep(5)
        t0 = time.monotonic()
        cluster_sh("api-stop", str(cluster_dir))
        time.sleep(20)
        cluster_sh("api-start", str(cluster_dir))
        print(f"API server away {time.monotonic() - t0:.1f} s (stopped, 20 s, started, ready)")
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    runs = runs_of(results)
    assert len(runs) == 2, out[-2000:] + err[-2000:]
    assert "running" not in {r["status"] for r in runs}
    first, second = sorted(runs, key=lambda r: r["run_id"])
    print(f"the run the outage hit: {first['status']} {first.get('error') or ''}")
    print(f"the next: {second['status']} {second.get('error') or ''}")
    assert first["status"] == "ok" or first["error"], first
    assert second["status"] == "ok", second.get("error")
    wait_for(lambda: ours(kube) == [], 120, "nothing of the campaign left")


def test_a_namespace_enforcing_restricted_runs_the_pvc_cells(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    """The pods are what the "restricted" Pod Security Standard admits (non-root, no
    capabilities, seccomp RuntimeDefault); a privileged cell is refused by admission,
    and its run fails with the cluster's words."""
    ns = f"restricted-{uuid.uuid4().hex[:6]}"
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": ns,
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                },
            },
        }
    )
    results = base / "r.sqlite"
    try:
        t0 = time.monotonic()
        proc = pgfsbench(
            *run_args(base, cluster_dir),
            "--namespace",
            ns,
            "--set",
            "defaults.repetitions=1",
            timeout=900,
            check=False,
        )
        print(f"2 runs in a restricted namespace: {time.monotonic() - t0:.0f} s")
        runs = runs_of(results)
        assert [r["status"] for r in runs] == ["ok", "ok"], proc.stdout[-3000:]
        assert "run as user 999" in proc.stdout
        proc = pgfsbench(
            *run_args(base, cluster_dir),
            "--namespace",
            ns,
            "--only",
            "ext4-local*",
            "--set",
            "defaults.repetitions=1",
            "--set",
            "kubernetes.privileged=true",
            "--set",
            "kubernetes.pending_timeout=20s",
            timeout=600,
            check=False,
        )
        refused = [r for r in runs_of(results) if r["campaign_id"] == 2]
        assert [r["status"] for r in refused] == ["failed"], proc.stdout[-3000:]
        assert "PodSecurity" in refused[0]["error"], refused[0]["error"]
        print(f"privileged in a restricted namespace: {refused[0]['error'][:300]}")
        left = [
            f"{kind} {o['metadata']['name']}"
            for kind in ("Job", "Pod", "PersistentVolumeClaim", "ConfigMap")
            for o in kube.select(kind, ns, {MANAGED_BY: "pgfsbench"})
        ]
        assert left == [] or all("Pod" in x for x in left), left
    finally:
        kube.delete("Namespace", ns)


def test_a_freshly_formatted_ext4_volume_is_waited_for_and_the_wait_recorded(
    base: Path, cluster_dir: Path, kube: LightkubeClient
) -> None:
    """A volume formatted as kubelet formats one (mkfs.ext4 with its lazy inode-table
    initialisation), on a device that writes 8 MiB/s, mounted just before the run: the pod
    waits, bounded, until the device is idle before the warm-up, and the run records how
    long and how busy. (Measured here: 0.5 s, idle: a loop device zeroes inode tables by
    fallocate on its file, at once, throttled or not; a cloud disk takes its time.)"""
    from tests.k8s import support

    name = f"fresh-{uuid.uuid4().hex[:6]}"
    image = cluster_dir / "disks" / f"{name}.img"
    mnt = cluster_dir / "volumes" / name
    subprocess.run(["truncate", "-s", "64G", str(image)], check=True)
    t0 = time.monotonic()
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    dev = subprocess.run(
        ["losetup", "-f", "--show", str(image)], check=True, capture_output=True, text=True
    ).stdout.strip()
    # a slow disk, as a cloud volume is: 8 MiB/s of writes (blkio in the root cgroup)
    number = Path(f"/sys/block/{Path(dev).name}/dev").read_text().strip()
    throttle = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device")
    throttle.write_text(f"{number} {8 << 20}\n")
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    cls = f"ext4-{name}"
    try:
        kube.create(support.storage_class(cls, "ext4"))
        kube.create(support.local_volume(cluster_dir, cls, path=mnt))
        results = base / "r.sqlite"
        pgfsbench(
            *run_args(base, cluster_dir),
            "--only",
            "ext4-local*",
            "--set",
            "defaults.repetitions=1",
            "--set",
            f"storage.ext4-local.storage_class={cls}",
            timeout=900,
        )
        print(f"formatted, mounted, run: {time.monotonic() - t0:.0f} s")
        (run,) = runs_of(results)
        assert run["status"] == "ok", run
        shown = json.loads(
            pgfsbench("results", "show", str(run["run_id"]), "-r", str(results), "--json").stdout
        )
        idle = shown["metrics"]["idle_before_warmup"]
        print(f"fresh ext4 volume before the warm-up: {idle}")
        assert idle["waited_s"] >= 0 and isinstance(idle["idle"], bool)
        assert idle["busiest"] == Path(dev).name or idle["busiest"] is None, idle
    finally:
        # the pod's bind mount of the volume goes with the pod
        wait_for(lambda: ours(kube) == [], 120, "the pod and its claim to go")
        support.remove_volumes(kube)
        if kube.get("StorageClass", cls) is not None:
            kube.delete("StorageClass", cls)
        subprocess.run(["umount", str(mnt)], check=False)
        throttle.write_text(f"{number} 0\n")
        subprocess.run(["losetup", "-d", dev], check=False)
        mnt.rmdir()
        image.unlink()


@pytest.mark.timeout(2700)
def test_a_ten_minute_and_a_one_minute_cell_in_one_matrix_both_finish(
    base: Path, cluster_dir: Path, kube: LightkubeClient, volumes: int
) -> None:
    """Each Job's deadline is its own run's estimate (plus the time it may wait Pending),
    not the plan's mean: the long cell is not killed for the short one's sake."""
    spec = base / "long-short.toml"
    text = SPEC.read_text()
    spec.write_text(
        text.replace(
            '[workload.tpcb]\ntool = "pgbench"\nbuiltin = "tpcb-like"',
            '[workload.long]\ntool = "pgbench"\nbuiltin = "tpcb-like"\nduration = "600s"\n\n'
            '[workload.short]\ntool = "pgbench"\nbuiltin = "tpcb-like"\nduration = "60s"',
        )
    )
    results = base / "r.sqlite"
    t0 = time.monotonic()
    proc = pgfsbench(
        *run_args(base, cluster_dir, spec=spec),
        "--only",
        "ext4-local*",
        "--set",
        "defaults.repetitions=1",
        timeout=2400,
        check=False,
    )
    print(f"a 10-min and a 1-min cell: {time.monotonic() - t0:.0f} s")
    runs = {r["workload"]: r for r in runs_of(results)}
    assert runs["long"]["status"] == "ok", proc.stdout[-3000:]
    assert runs["short"]["status"] == "ok", proc.stdout[-3000:]
    for name, seconds in (("long", 600), ("short", 60)):
        assert show(results, runs[name]["run_id"])["duration_s"] == seconds
    assert ours(kube) == []


def test_plan_manifests_are_accepted_by_a_server_side_dry_run(
    base: Path, cluster_dir: Path, kube: LightkubeClient
) -> None:
    """What `plan --manifests` prints is what `kubectl apply --dry-run=server -f -` takes:
    every object passes the API server's validation and admission, nothing is made."""
    import yaml
    from lightkube import codecs

    text = pgfsbench("plan", str(SPEC), "--manifests", *cluster_sets(cluster_dir)).stdout
    docs = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in docs] == ["ConfigMap", "PersistentVolumeClaim", "Job"]
    client = kube._client  # lightkube's own, for its dry_run
    for doc in docs:
        client.create(codecs.from_dict(doc), dry_run=True)
    assert ours(kube) == []


def test_two_clusters_in_one_campaign_one_store_compared(
    base: Path,
    cluster_dir: Path,
    kube: LightkubeClient,
    volumes: int,
    second_cluster: tuple[Path, Path, LightkubeClient],
) -> None:
    """Two clusters at once, each in its own network namespace: one campaign names both,
    each storage runs in its cluster, their Jobs side by side, every run in one store,
    and `compare` puts the two clusters' cells side by side."""
    from tests.k8s import support

    dir2, kubeconfig2, kube2 = second_cluster
    support.add_volumes(kube2, dir2, 4)
    spec = base / "two.toml"
    text = SPEC.read_text()
    text = text[: text.index("[storage.ext4-local]")] + text[text.index("[postgres.default]") :]
    text = text.replace(
        "[defaults]",
        "[kubernetes.clusters.one]\n"
        f'kubeconfig = "{cluster_dir / "kubeconfig"}"\ncontext = "test"\n\n'
        "[kubernetes.clusters.two]\n"
        f'kubeconfig = "{kubeconfig2}"\ncontext = "test2"\n\n[defaults]',
    )
    text += (
        '\n[storage.ext4-one]\nfs = "pvc"\ncluster = "one"\nstorage_class = "ext4-local"\n'
        'size = "1Gi"\n\n[storage.ext4-two]\nfs = "pvc"\ncluster = "two"\n'
        'storage_class = "ext4-local"\nsize = "1Gi"\n'
    )
    spec.write_text(text)
    results = base / "r.sqlite"
    try:
        t0 = time.monotonic()
        proc = pgfsbench(
            *run_args(base, cluster_dir, spec=spec),
            "--set",
            "defaults.repetitions=3",
            timeout=1200,
            check=False,
        )
        wall = time.monotonic() - t0
        runs = runs_of(results)
        print(f"6 runs, 3 in each of two clusters, in one campaign: {wall:.0f} s")
        assert [r["status"] for r in runs] == ["ok"] * 6, proc.stdout[-3000:]
        hosts = {r["storage"]: r["host"] for r in runs}
        assert hosts == {"ext4-one": "k8s:test/test.2cpu", "ext4-two": "k8s:test2/test.2cpu"}
        assert len({r["campaign_id"] for r in runs}) == 1
        shown = json.loads(
            pgfsbench(
                "results", "show", str(runs[0]["run_id"]), "-r", str(results), "--json"
            ).stdout
        )
        assert shown["environment"]["kubernetes"]["cluster"]["context"] in ("test", "test2")
        summary = pgfsbench("results", "summary", "-r", str(results)).stdout
        assert "ext4-one" in summary and "ext4-two" in summary
        out = pgfsbench("compare", "ext4-one", "ext4-two", "-r", str(results), "--json").stdout
        (pair,) = json.loads(out)
        assert pair["baseline"]["n"] == 3 and pair["other"]["n"] == 3
        assert set(pair["also_differ"]) == {"host"} and pair["verdict"]
        print(f"cluster two against cluster one, same class: {pair['text']}")
    finally:
        wait_for(lambda: ours(kube) == [], 120, "nothing left in the first cluster")
        support.remove_volumes(kube2)
    assert not [
        o
        for kind in ("Job", "Pod", "PersistentVolumeClaim", "ConfigMap")
        for o in kube2.select(kind, "default", {MANAGED_BY: "pgfsbench"})
    ]
