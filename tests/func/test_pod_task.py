"""A pod's command on this host: `pgfsbench pod-run` with a task as a cluster's controller
plans it (kube/task.py), the engine for real (tmpfs, PostgreSQL, pgbench), and the bundle
it prints read back. The pod plans nothing: its scale, repetitions, uuids and, for a rate
"N%", the maximum are the task's. The real cluster: tests/k8s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pgfsbench.kube import bundle
from pgfsbench.kube.task import Task, TaskRun
from pgfsbench.results.store import Store
from pgfsbench.spec import expand, load_spec
from tests.func.conftest import ROOT

SPEC = """
name = "pod-task"
[defaults]
# on this machine that would be gigabytes: the task's scale (2) is what runs
scale = "fits_ram"
clients = 2
threads = 1
duration = "3s"
warmup = "0s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "512M"
[workload.paced]
tool = "pgbench"
builtin = "simple-update"
rate = "75%"
"""


def pod_run(*args: str) -> subprocess.CompletedProcess[str]:
    """`pgfsbench pod-run` as a Job's manifest starts it (PGFSBENCH_IN_POD=1)."""
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", "pod-run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PGFSBENCH_IN_POD": "1"},
    )


def test_the_pod_runs_its_tasks_runs_as_planned(base: Path) -> None:
    spec = base / "spec.toml"
    spec.write_text(SPEC)
    (cell,) = expand(load_spec(spec).spec, lambda cell, text: (1, {}))
    task = Task(
        campaign="c0ffee00-0000-4000-8000-000000000001",
        spec_name="spec.toml",
        spec_text=SPEC,
        runs=(
            TaskRun("1d9c2a1e-0000-4000-8000-000000000004", cell.id, 4, 2, None, 400.0, "run(s) 3"),
            TaskRun("1d9c2a1e-0000-4000-8000-000000000005", cell.id, 5, 2, None, 400.0, "run(s) 3"),
        ),
    )
    task_file = base / "task.json"
    task_file.write_text(task.text())
    home = base / "home"
    done = pod_run(
        "--home", str(home), "--task", str(task_file), "--bundle", str(base / "bundle.tar.gz")
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    framed = bundle.unframe(done.stdout.splitlines())
    assert framed.data is not None, framed.problem
    assert (base / "bundle.tar.gz").read_bytes() == framed.data  # kept for a second pod
    results = bundle.unpack(framed.data, base / "back")
    store = Store.foreign(results, artifacts_root=base / "back" / bundle.ARTIFACTS_DIR)
    try:
        runs = sorted(store.full_runs(None), key=lambda r: r.repetition)
    finally:
        store.close()
    assert [(r.uuid, r.repetition, r.scale, r.status) for r in runs] == [
        (t.uuid, t.repetition, 2, "ok") for t in task.runs
    ]
    for r in runs:
        rate = r.metrics["rate"]
        # 75% of the task's maximum, not one the pod measured itself
        assert rate["max_tps"] == 400.0 and rate["target_tps"] == 300.0, rate
        assert rate["max_from"] == "run(s) 3"
        assert r.tps is not None and r.tps < 330, r.tps
    # a task of another format is refused before anything runs, and says why
    newer = json.loads(task.text()) | {"format": "pgfsbench.task/3"}
    task_file.write_text(json.dumps(newer))
    refused = pod_run("--home", str(home), "--task", str(task_file))
    assert refused.returncode == 2 and "pgfsbench.task/3" in refused.stderr
    assert "Traceback" not in refused.stderr
