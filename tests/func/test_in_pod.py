"""The engine as it runs in a pod (PGFSBENCH_IN_POD=1, what the Job's manifest sets): its
own cgroup sampled each second and its limits recorded. The real pod: tests/k8s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.func.conftest import ROOT, runs_of, show, write_spec


def test_a_run_in_a_pod_records_its_own_cgroup(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "3s"
warmup = "0s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "256M"
""",
    )
    results = base / "r.sqlite"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "run",
            str(spec),
            "--results",
            str(results),
            "--workdir",
            str(base / "work"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PGFSBENCH_IN_POD": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = runs_of(results)
    detail = show(results, run["run_id"])
    assert {"cg_cpu_pct", "cg_throttled_pct", "cg_memory_mb"} <= set(detail["series"])
    assert detail["environment"]["container"]["cgroup"] in ("v1", "v2")
    assert detail["metrics"]["format"] == 1
    assert "format_problems" not in detail["metrics"]
