"""Data size relative to memory, and a cgroup memory limit that makes "exceeds RAM"
reachable at a small size."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.func.conftest import pgfsbench, runs_of, show, write_spec

# timing, host-wide settings or a shared daemon: run alone (scripts/test.sh)
pytestmark = pytest.mark.exclusive

MEMCG = Path("/sys/fs/cgroup/memory")


def test_exceeds_ram_under_a_memory_limit(base: Path) -> None:
    if not (MEMCG / "memory.limit_in_bytes").exists():
        pytest.skip("no cgroup v1 memory controller here")
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = "exceeds_ram"
clients = 2
threads = 1
duration = "3s"
warmup = "0s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:1G"
[postgres.p]
settings = { shared_buffers = "16MB" }
[workload.ro]
builtin = "select-only"
""",
    )
    results = base / "r.sqlite"
    work = ["--results", str(results), "--workdir", str(base / "work")]
    plan = pgfsbench("plan", str(spec), "--memory-limit", "96M", "--workdir", str(base / "work"))
    assert (
        "scale 12 = exceeds_ram" in plan.stdout and "memory limit (emulated RAM)" in plan.stdout
    ), plan.stdout
    pgfsbench("run", str(spec), *work, "--memory-limit", "96M")
    (run,) = runs_of(results)
    assert run["status"] == "ok" and run["scale"] == 12
    assert run["cell"].endswith("@scale=exceeds_ram") or run["cell"].endswith("/ro")
    full = show(results, run["run_id"])
    basis = full["params"]["scale_basis"]
    assert basis["spec"] == "exceeds_ram" and basis["memory_limited"] is True
    assert basis["ram_bytes"] == 96 << 20 and basis["ratio_to_ram"] >= 1.9
    limit = full["metrics"]["memory_limit"]
    assert limit["set"] == 96 << 20 and limit["pids_moved"] >= 1
    assert limit["peak_bytes"] <= (96 << 20) + (4 << 20)  # the kernel held it to the limit
    assert any("RAM was emulated" in w for w in full["warnings"])
    assert not list(MEMCG.glob("pgfsbench-run-*")), "the memory cgroup was left behind"
