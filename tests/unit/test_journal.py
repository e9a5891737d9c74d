import json
import subprocess
import sys
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


@undo_action("test_append")
def _append(runner: Runner, args: dict[str, Any]) -> None:
    DONE.append(args["name"])


@undo_action("test_fail")
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
