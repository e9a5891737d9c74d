"""Why did TPS drop, on real runs: a lock held from outside the workload is named with
its holder and is never a frozen filesystem (the frozen filesystem itself is in
test_observation.py, the clean runs in test_report.py)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from tests.func.conftest import runs_of, show, start, wait_measuring, write_spec

SPEC = """
[defaults]
scale = 1
clients = 4
threads = 2
duration = "12s"
warmup = "1s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:512M"
"""


def test_a_lock_held_from_outside_is_named_with_its_holder_not_a_frozen_filesystem(
        base: Path) -> None:
    """A second connection holds the only branch row of a scale-1 tpcb-like run, idle in
    its transaction, for 4 s: every client waits behind it and nothing is written."""
    spec = write_spec(base / "s.toml", SPEC)
    results = base / "r.sqlite"
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    try:
        wait_measuring(proc, 120)
        sock = next((base / "work" / "cells").glob("run-*/sock"))
        time.sleep(3)
        with psycopg.connect(f"host={sock} user=postgres dbname=pgbench", autocommit=True,
                             application_name="psql") as conn:
            holder = conn.info.backend_pid
            conn.execute("BEGIN")
            conn.execute("UPDATE pgbench_branches SET bbalance = bbalance WHERE bid = 1")
            time.sleep(4)
            conn.execute("COMMIT")
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    (run,) = runs_of(results)
    detail = show(results, run["run_id"])
    stalls = detail["stalls"]
    assert stalls, detail["series"]["tps"]
    (ep,) = [e for e in stalls if e["end_s"] >= 3 and e["start_s"] <= 8]
    assert ep["kind"] == "stall" and ep["cause"] == "locks", ep
    assert ep["confidence"] == "high", ep
    assert any(f"pid {holder}" in e and "outside the workload" in e
               and "idle in transaction" in e for e in ep["evidence"]), ep["evidence"]
    assert ep["blockers"] and ep["blockers"][0]["pid"] == holder
    assert all(e["cause"] != "fs_frozen" for e in stalls)
    # the evidence behind it is stored with the run
    series = detail["series"]
    assert any(v for v in series["blockers"]["values"])
    assert "blocked" in series and "outside_cpu_pct" in series
    assert detail["metrics"]["block_stack"]["under_test"] == ["loop0"] or \
        detail["metrics"]["block_stack"]["under_test"][0].startswith("loop")
