"""A figure that is not the storage's says so: CPU hogs and an I/O hog over most of the
measured phase mark the run disturbed, with the figures and who; a level shift half-way
is an episode with its cause, and so is outside work that starts and ends inside the
phase (clean runs, which say nothing: test_report.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.func.conftest import measured_start, pgfsbench, pgfsbench_runs, wait_for
from tests.func.test_observation import run_with

# timing, host-wide settings or a shared daemon: run alone (scripts/test.sh)
pytestmark = pytest.mark.exclusive

HOG = "import time\nt = time.time()\nwhile time.time() - t < {seconds}: pass\n# pgfsb-hog"


def hogs(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """Busy loops outside PostgreSQL that end by themselves."""
    return [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=seconds)]) for _ in range(n)]


def wait_all(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    for p in procs:
        p.wait(timeout=timeout)


def disturbance(detail: dict[str, Any]) -> dict[str, Any]:
    found = detail["metrics"]["disturbance"]
    assert found["format"] == 1
    return found  # type: ignore[no-any-return]


def test_cpu_hogs_over_the_whole_measured_phase_mark_the_run_and_name_them(base: Path) -> None:
    n = 2 * (os.cpu_count() or 2)

    def hog(mnt: Path) -> None:
        wait_all(hogs(n, 14), 60)

    detail = run_with(base, "10s", hog)
    found = disturbance(detail)
    assert found["disturbed"], found
    (cpu,) = [c for c in found["causes"] if c["kind"] == "host_cpu"]
    assert cpu["disturbs"] and "pgfsb-hog" not in cpu["text"]  # named by its command line
    assert "processes outside the benchmark took" in cpu["text"] and "python" in cpu["text"]
    assert "% of the machine" in cpu["text"]
    assert any(w.startswith("disturbed during the measured phase") for w in detail["warnings"])
    outside = detail["metrics"]["cpu"]["outside_cpus"]
    assert outside >= 1.0, detail["metrics"]["cpu"]  # the hogs' share, at least one CPU
    results = base / "r.sqlite"
    summary = pgfsbench("results", "summary", "--results", str(results)).stdout
    words = " ".join(summary.split())
    # the table marks the cell, and the line says once which runs, without the details
    assert " d1" in summary and re.search(r"other work on the host disturbed \S+ #1", words)
    left = pgfsbench("results", "summary", "--results", str(results), "--without-disturbed")
    assert "left out of the verdicts as disturbed" in left.stdout
    assert "ok, disturbed" in pgfsbench("results", "list", "--results", str(results)).stdout


def test_an_io_hog_on_the_disk_beneath_marks_the_run(base: Path) -> None:
    target = base / "io-hog.dat"  # on the disk that holds the loop files
    subprocess.run(["fallocate", "-l", "1G", str(target)], check=True)

    def io_hog(mnt: Path) -> None:
        subprocess.run(
            [
                "fio",
                "--name=hog",
                f"--filename={target}",
                "--size=1G",
                "--rw=write",
                "--bs=1M",
                "--direct=1",
                "--ioengine=libaio",
                "--iodepth=16",
                "--runtime=12",
                "--time_based",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )

    detail = run_with(base, "10s", io_hog)
    found = disturbance(detail)
    io = [c for c in found["causes"] if c["kind"] == "host_io"]
    assert io and io[0]["disturbs"], found
    assert "fio" in io[0]["text"] and "MB/s of I/O" in io[0]["text"]
    assert found["disturbed"]


SHORT_LIVED = (
    "import subprocess, sys, time\nend = time.time() + {seconds}\nwhile time.time() < end:\n"
    "    subprocess.run([sys.executable, '-S', '-c', 'import time\\nt = time.time()\\n"
    "while time.time() - t < 0.1: pass'])\n# pgfsb-hog"
)


def test_short_lived_hogs_inside_the_phase_are_an_episode_with_its_cause(base: Path) -> None:
    """The issue's case: CPU work outside the benchmark that starts after the measured
    phase began and ends before it ends, over most of it, here by processes of 0.1 s that
    the once-a-second process table hardly sees: a dip with a level before and after it
    (analysis/levels), its cause the outside CPU, counted as the host's CPU time less the
    benchmark's own cgroup; the cgroup is gone after the run."""
    n = 3 * (os.cpu_count() or 2)
    duration, start, length = 16, 3, 10

    def inside(mnt: Path) -> None:
        begun = wait_for(
            lambda: max(
                (t for p in pgfsbench_runs() if (t := measured_start(int(p.name))) is not None),
                default=None,
            ),
            60,
            "the measured pgbench",
        )
        time.sleep(max(0.0, begun + start - time.time()))
        code = SHORT_LIVED.format(seconds=length)
        wait_all([subprocess.Popen([sys.executable, "-S", "-c", code]) for _ in range(n)], 60)

    groups = set(Path("/sys/fs/cgroup/cpuacct").glob("pgfsbench-cpu-*"))  # another run's
    detail = run_with(base, f"{duration}s", inside)

    stalls = detail["stalls"]
    over = [e for e in stalls if e["end_s"] >= start and e["start_s"] <= start + length]
    assert over, stalls
    ep = max(over, key=lambda e: e["end_s"] - e["start_s"])
    assert ep["end_s"] - ep["start_s"] >= length / 2, ep  # the dip's level, not a second
    assert ep["cause"] == "host_cpu", ep
    assert any("too short-lived" in e for e in ep["evidence"]), ep["evidence"]
    assert detail["metrics"]["cpu"]["unseen_cpus"] > 0.3, detail["metrics"]["cpu"]
    assert set(Path("/sys/fs/cgroup/cpuacct").glob("pgfsbench-cpu-*")) <= groups  # ours gone
