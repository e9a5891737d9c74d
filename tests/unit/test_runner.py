"""The runner's long children: waiting for one wakes the waiting thread once per check,
not the ~30 times a second of Popen.wait's polling (each wake-up is CPU taken from the
benchmark being measured)."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from pgfsbench.system.errors import CommandError, Stalled
from pgfsbench.system.runner import Runner


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_nvcsw + usage.ru_nivcsw


def test_waiting_for_a_child_wakes_once_per_check(tmp_path: Path) -> None:
    child = Runner().spawn(["sleep", "1.2"], stdout_path=tmp_path / "out")
    checks: list[float] = []

    def check() -> str | None:
        checks.append(time.monotonic())
        return None

    before, started = _switches(), time.monotonic()
    assert child.wait_watching(30, check, interval=0.5) == 0
    took, woke = time.monotonic() - started, _switches() - before
    assert 1.1 < took < 1.6  # it returns as soon as the child ends, not at a check
    assert len(checks) == 2
    # polling would have switched ~35 times in 1.2 s; one wake-up per check and the end
    assert woke <= 8, woke


def test_a_stalled_child_is_ended_and_a_late_one_times_out(tmp_path: Path) -> None:
    runner = Runner()
    child = runner.spawn(["sleep", "30"], stdout_path=tmp_path / "a")
    started = time.monotonic()
    with pytest.raises(Stalled, match="no progress"):
        child.wait_watching(30, lambda: "no progress", interval=0.2)
    assert time.monotonic() - started < 5 and child.poll() is not None
    child = runner.spawn(["sleep", "30"], stdout_path=tmp_path / "b")
    with pytest.raises(CommandError):
        child.wait(0.3)
    assert child.poll() is not None
    child = runner.spawn(["sh", "-c", "exit 3"], stdout_path=tmp_path / "c")
    assert child.wait(10) == 3
