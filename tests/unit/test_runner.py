"""The runner's long children: waiting for one wakes the waiting thread once per check,
not the ~30 times a second of Popen.wait's polling (each wake-up is CPU taken from the
benchmark being measured)."""

from __future__ import annotations

import contextlib
import resource
import time
from pathlib import Path
from typing import Any

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


def test_a_sigterm_while_a_child_is_being_started_ends_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal lands between the fork and the moment the child is known (Popen's wait
    for the exec, the registry): it must not leave the child running, unknown."""
    import os
    import signal
    import subprocess

    from pgfsbench.system.runner import ChildRegistry, process_alive

    started: list[int] = []

    class SignalledPopen(subprocess.Popen[str]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            started.append(self.pid)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # an unheld handler runs here, before Popen returns

    class Stop(Exception):
        pass

    def term(signum: int, frame: object) -> None:
        raise Stop

    previous = signal.signal(signal.SIGTERM, term)
    monkeypatch.setattr(subprocess, "Popen", SignalledPopen)
    runner = Runner()
    runner.registry = ChildRegistry(tmp_path / "children")
    try:
        for start in (
            lambda: runner.run(["sleep", "30"], timeout=60),
            lambda: runner.spawn(["sleep", "30"], stdout_path=tmp_path / "out"),
        ):
            started.clear()
            with pytest.raises(Stop):
                start()
            assert len(started) == 1
            # ended, and not left in the registry
            assert not process_alive(started[0], None)
            assert not [p for p in (tmp_path / "children").rglob("*") if p.is_file()]
    finally:
        signal.signal(signal.SIGTERM, previous)
        runner.registry.close()
        for pid in started:  # what an unheld signal left running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_postmaster_whose_links_cannot_be_read_is_judged_by_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a pod root lacks CAP_SYS_PTRACE: another user's exe and cwd links are EACCES.
    The server must not then pass for gone (a run misdiagnosed as a crashed server)."""
    import os
    import subprocess
    import sys

    from pgfsbench.postgres.instance import is_our_postmaster

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    # a process named postgres (PR_SET_NAME) with "-D <pgdata>" in its command line, as
    # pg_ctl starts a postmaster; it says when it is ready
    code = (
        "import ctypes, time; ctypes.CDLL(None).prctl(15, b'postgres', 0, 0, 0); "
        "print('ready', flush=True); time.sleep(30)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "-D", str(pgdata)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    try:

        def denied(path: str) -> str:
            raise PermissionError(13, "Permission denied", path)

        monkeypatch.setattr(os, "readlink", denied)
        assert is_our_postmaster(proc.pid, pgdata)
        assert not is_our_postmaster(proc.pid, tmp_path / "other")
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert not is_our_postmaster(proc.pid, pgdata)  # gone
