import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pgfsbench.system.journal import (
    Journal,
    Undo,
    leftover_journals,
    undo_action,
    undo_leftover,
)
from pgfsbench.system.runner import Runner

DONE: list[str] = []


@undo_action("test_append", bound=lambda args, scope: None)
def _append(runner: Runner, args: dict[str, Any]) -> None:
    DONE.append(args["name"])


@undo_action("test_fail", bound=lambda args, scope: None)
def _fail(runner: Runner, args: dict[str, Any]) -> None:
    raise RuntimeError("busy")


def test_steps_are_written_before_and_undone_in_reverse(tmp_path: Path) -> None:
    DONE.clear()
    journal = Journal(tmp_path / "j.jsonl", Runner())
    with journal.scope():
        journal.record("a", Undo("test_append", {"name": "a"}))
        # the step is on disk before the caller does anything
        lines = (tmp_path / "j.jsonl").read_text().splitlines()
        assert json.loads(lines[-1])["what"] == "a"
        with journal.scope():
            journal.record("b", Undo("test_append", {"name": "b"}))
            journal.record("c", Undo("test_append", {"name": "c"}))
        assert DONE == ["c", "b"]
    assert DONE == ["c", "b", "a"]
    journal.close()
    assert not (tmp_path / "j.jsonl").exists()  # nothing left to undo: removed


def test_a_threads_own_scope_undoes_only_what_it_recorded(tmp_path: Path) -> None:
    """Two threads sharing a journal (a cluster's places, one thread each), their scopes
    interleaved: each undoes its own steps when its block ends, never the other's."""
    import threading

    DONE.clear()
    journal = Journal(tmp_path / "j.jsonl", Runner())
    a_recorded, b_recorded, a_done = threading.Event(), threading.Event(), threading.Event()

    def a() -> None:
        with journal.scope(own_thread=True):
            journal.record("a1", Undo("test_append", {"name": "a1"}))
            a_recorded.set()
            b_recorded.wait(10)  # b's step comes after a's mark
            journal.record("a2", Undo("test_append", {"name": "a2"}))
        a_done.set()

    def b() -> None:
        with journal.scope(own_thread=True):
            a_recorded.wait(10)
            journal.record("b1", Undo("test_append", {"name": "b1"}))
            b_recorded.set()
            a_done.wait(10)
            assert DONE == ["a2", "a1"]  # a's end left b's step alone
            journal.record("b2", Undo("test_append", {"name": "b2"}))

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert DONE == ["a2", "a1", "b2", "b1"]
    journal.close()


def test_a_failing_undo_does_not_stop_the_others_and_is_kept(tmp_path: Path) -> None:
    DONE.clear()
    journal = Journal(tmp_path / "j.jsonl", Runner())
    journal.record("a", Undo("test_append", {"name": "a"}))
    journal.record("x", Undo("test_fail"))
    failures = journal.undo_since(0)
    assert DONE == ["a"] and [f.step.what for f in failures] == ["x"]
    journal.close()
    assert (tmp_path / "j.jsonl").exists()  # kept for `pgfsbench cleanup`


def test_leftover_of_a_killed_process_is_undone_once(tmp_path: Path) -> None:
    DONE.clear()
    workdir = tmp_path / "work"
    code = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
import test_journal
from pathlib import Path
from pgfsbench.system.journal import Journal, Undo
from pgfsbench.system.runner import Runner
j = Journal.create(Path({str(workdir)!r}), Runner())
j.record("one", Undo("test_append", {{"name": "one"}}))
j.record("two", Undo("test_append", {{"name": "two"}}))
j.undo_since(1)
os._exit(0)  # dies without closing: like a SIGKILL
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    (left,) = leftover_journals(workdir)
    assert not left.locked
    assert [s.what for s in left.steps] == ["one"]  # "two" was already undone
    with (left.path).open("a") as fh:
        fh.write('{"t": "step", "seq": 3, "wh')  # torn last line
    (left,) = leftover_journals(workdir)
    assert undo_leftover(Runner(), left) == []
    assert DONE == ["one"]
    assert leftover_journals(workdir) == []


def test_a_live_journal_is_locked(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path, Runner())
    journal.record("a", Undo("test_append", {"name": "a"}))
    (left,) = leftover_journals(tmp_path)
    assert left.locked
    journal.undo_since(0)
    journal.close()


def test_children_of_a_killed_pgfsbench_are_ended_by_cleanup_and_a_live_ones_are_not(
    tmp_path: Path,
) -> None:
    """A SIGKILLed pgfsbench leaves its children running (each in its own session): an
    initdb or a load keeps a mount busy. Cleanup ends the children listed by owners that
    are gone, and never those of a pgfsbench still running (nor a pid reused since)."""
    from pgfsbench.cleanup import children_dir, cleanup
    from pgfsbench.system.runner import ChildRegistry, Runner, process_alive, process_start_time

    workdir = tmp_path / "work"
    # the "killed pgfsbench": a short-lived process whose runner registered a sleep
    script = (
        "import sys; from pathlib import Path; from pgfsbench.system.runner import "
        "ChildRegistry, Runner; r = Runner(registry=ChildRegistry(Path(sys.argv[1]))); "
        "c = r.spawn(['sleep', '120'], stdout_path=Path(sys.argv[2])); print(c.pid)"
    )
    owner = subprocess.run(
        [sys.executable, "-c", script, str(children_dir(workdir)), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=True,
    )
    orphan = int(owner.stdout)
    orphan_start = process_start_time(orphan)
    assert process_alive(orphan, orphan_start)  # outlived its parent
    # a live owner (this test) with a child of its own
    live = Runner(registry=ChildRegistry(children_dir(workdir)))
    child = live.spawn(["sleep", "120"], stdout_path=tmp_path / "out2")
    # and a listed pid that is now someone else's process: never signalled
    stranger = subprocess.Popen(["sleep", "120"], start_new_session=True)
    fake = children_dir(workdir) / "4194000-1"
    fake.mkdir()
    (fake / str(stranger.pid)).write_text('{"start_time": 1, "argv": "reused"}')
    try:
        report = cleanup(workdir)
        assert any(str(orphan) in line for line in report.undone), report.undone
        deadline = time.monotonic() + 10
        while process_alive(orphan, orphan_start) and time.monotonic() < deadline:
            time.sleep(0.1)
        # the orphan is a zombie of init at most: gone from our point of view
        assert not process_alive(orphan, orphan_start) or _zombie(orphan)
        assert child.poll() is None
        assert stranger.poll() is None
        assert not fake.exists()
    finally:
        child.kill_tree()
        stranger.kill()
        stranger.wait()
    assert not any(children_dir(workdir).glob("*/*"))  # an ended child is no longer listed


def _zombie(pid: int) -> bool:
    from pgfsbench.system.runner import process_state

    return process_state(pid) == "Z"


def test_cleanup_knows_how_to_undo_every_kind_of_step_the_code_journals() -> None:
    """`pgfsbench cleanup` runs in a fresh process: every undo action the code can journal
    must be registered by what cleanup imports (an LVM volume once was not)."""
    import re

    src = Path(__file__).resolve().parents[2] / "src" / "pgfsbench"
    kinds = {
        m.group(1)
        for f in src.rglob("*.py")
        for m in re.finditer(r'Undo\(\s*"([a-z_]+)"', f.read_text())
    }
    assert len(kinds) > 15, kinds
    registered = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, pgfsbench.cleanup, pgfsbench.system.journal as j;"
                "print(json.dumps(sorted(j._UNDO_ACTIONS)))",
            ],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
    )
    assert sorted(kinds - set(registered)) == []


CTRL_C: dict[str, Any] = {}


@undo_action("test_ctrl_c", bound=lambda args, scope: None)
def _ctrl_c(runner: Runner, args: dict[str, Any]) -> None:
    """A Ctrl-C in the middle of an undo, taken by a thread started before it (as the
    kernel may give it to the samplers' threads)."""
    DONE.append(args["name"])
    CTRL_C["go"].set()
    CTRL_C["sent"].wait(5)
    time.sleep(0.1)  # a handler would run here, in the main thread, were it not held


def test_a_ctrl_c_during_an_undo_waits_until_every_step_is_undone(tmp_path: Path) -> None:
    import os
    import signal
    import threading

    import pytest

    DONE.clear()
    CTRL_C.update(go=threading.Event(), sent=threading.Event())

    def other() -> None:
        if CTRL_C["go"].wait(10):
            os.kill(os.getpid(), signal.SIGINT)
            CTRL_C["sent"].set()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=other)
    sender.start()
    journal = Journal(tmp_path / "j.jsonl", Runner())
    try:
        journal.record("a", Undo("test_append", {"name": "a"}))
        journal.record("b", Undo("test_ctrl_c", {"name": "b"}))
        journal.record("c", Undo("test_append", {"name": "c"}))
        with pytest.raises(KeyboardInterrupt):
            journal.undo_since(0)
        # all undone, then the Ctrl-C: not lost, and not in the middle
        assert DONE == ["c", "b", "a"] and journal.pending() == []
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        CTRL_C["go"].set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
        journal.close()


def test_a_signal_in_a_hold_within_a_hold_waits_for_the_outer_one() -> None:
    import os
    import signal

    import pytest

    from pgfsbench.system.signals import signals_held

    seen: list[str] = []

    def term(signum: int, frame: object) -> None:
        raise RuntimeError("SIGTERM")

    previous = signal.signal(signal.SIGTERM, term)
    try:
        with pytest.raises(RuntimeError, match="SIGTERM"), signals_held():
            with signals_held():
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGTERM)  # twice: acted on once
                time.sleep(0.05)
                seen.append("inner done")
            time.sleep(0.05)
            seen.append("outer done")
        assert seen == ["inner done", "outer done"]
        assert signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGTERM, previous)
