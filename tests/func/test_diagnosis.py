"""Why did TPS drop, on real runs: a lock held from outside the workload is named with
its holder and is never a frozen filesystem (the frozen filesystem itself is in
test_observation.py, the clean runs in test_report.py)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from tests.func.test_observation import run_with

# timing, host-wide settings or a shared daemon: run alone (scripts/test.sh)
pytestmark = pytest.mark.exclusive


def test_a_lock_held_from_outside_is_named_with_its_holder_not_a_frozen_filesystem(
    base: Path,
) -> None:
    """A second connection holds every branch row of a tpcb-like run, idle in its
    transaction, for 4 s: every client waits behind it and nothing is written."""
    holder: list[int] = []

    def hold_the_branches(mnt: Path) -> None:
        sock = mnt.parents[1] / "sock"
        time.sleep(3)
        with psycopg.connect(
            f"host={sock} user=postgres dbname=pgbench", autocommit=True, application_name="psql"
        ) as conn:
            holder.append(conn.info.backend_pid)
            conn.execute("BEGIN")
            conn.execute("UPDATE pgbench_branches SET bbalance = bbalance")
            time.sleep(4)
            conn.execute("COMMIT")

    detail = run_with(base, "12s", hold_the_branches)
    stalls = detail["stalls"]
    (ep,) = [e for e in stalls if e["end_s"] >= 3 and e["start_s"] <= 8]
    assert ep["kind"] == "stall" and ep["cause"] == "locks", ep
    assert ep["confidence"] == "high", ep
    assert any(
        f"pid {holder[0]}" in e and "outside the workload" in e and "idle in transaction" in e
        for e in ep["evidence"]
    ), ep["evidence"]
    assert ep["blockers"] and ep["blockers"][0]["pid"] == holder[0]
    assert all(e["cause"] != "fs_frozen" for e in stalls)
    # the evidence behind it is stored with the run
    series = detail["series"]
    assert any(v for v in series["blockers"]["values"])
    assert "blocked" in series and "outside_cpu_pct" in series
    assert detail["metrics"]["block_stack"]["under_test"][0].startswith("loop")
