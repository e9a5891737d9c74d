"""Whole checkpoint cycles (`cycles = N`): a CHECKPOINT starts the warm-up's last cycle, the
timed checkpoint that follows starts the measured window, and the window ends on a cycle
boundary; the run records what its window held."""

from __future__ import annotations

from pathlib import Path

from tests.func.conftest import pgfsbench, runs_of, show, write_spec

# not `exclusive`: its figures are the server's own checkpoint times on tmpfs, which a
# neighbour's load does not move by seconds


def test_a_window_of_one_whole_cycle_holds_its_one_timed_checkpoint(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 2
clients = 4
repetitions = 1
cycles = 1
[storage.ram]
fs = "tmpfs"
size = "1G"
[postgres.fast.settings]
checkpoint_timeout = "30s"
[workload.rw]
builtin = "tpcb-like"
""",
    )
    results = base / "r.sqlite"
    plan = pgfsbench("plan", str(spec)).stdout
    assert "30 s + 30 s" in plan and "steady state over 1 checkpoint cycle (30 s each)" in plan
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    window = show(results, run["run_id"])["metrics"]["window"]
    assert window["kind"] == "cycles" and window["stratum"] == "cycles", window
    # phase-locked: the timed checkpoint starts within a second or two of the window
    (only,) = window["checkpoints"]
    assert only["kind"] == "timed" and abs(only["started_s"]) < 2.0, window
    assert window["timed"] == 1 and window["requested"] == 0 and "marked" not in window
    assert 29 <= window["window_start_after_checkpoint_s"] <= 33, window
    assert len(window["per_cycle_tps"]) == 1 and window["per_cycle_tps"][0] > 0
