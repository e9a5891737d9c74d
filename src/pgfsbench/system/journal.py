"""The undo journal: every provisioning step is written down (and fsynced) *before* it is done.

A step is recorded with the way to undo it. Normal exit, an error, Ctrl-C and SIGTERM undo
the steps in reverse through `Journal.scope()`; after a SIGKILL, `pgfsbench cleanup` reads
the journal files left in the work directory and undoes what is still recorded. Every undo
action is idempotent: it checks the current state first (is it still mounted, attached,
running, and is it still ours?) because the step may have been recorded and never done.

Undo actions are registered by name by the modules that know how to perform them
(storage, kernel, postgres), which keeps this bottom layer free of upward imports.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.runner import Runner
from pgfsbench.system.signals import signals_held

UndoAction = Callable[[Runner, dict[str, object]], None]
_UNDO_ACTIONS: dict[str, UndoAction] = {}


def undo_action(kind: str) -> Callable[[UndoAction], UndoAction]:
    """Register the function that undoes steps of ``kind``."""

    def register(fn: UndoAction) -> UndoAction:
        _UNDO_ACTIONS[kind] = fn
        return fn

    return register


@dataclass(frozen=True)
class Undo:
    """How to undo one step: a registered action name and its JSON-serialisable arguments."""

    kind: str
    args: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    seq: int
    what: str
    undo: Undo


@dataclass(frozen=True)
class UndoFailure:
    step: Step
    error: str


class Journal:
    """An append-only JSON-lines journal owned (flock) by one pgfsbench process."""

    def __init__(self, path: Path, runner: Runner, meta: dict[str, object] | None = None):
        self.path = path
        self.runner = runner
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._steps: list[Step] = []
        self._undone: set[int] = set()
        self._seq = 0
        self.failures: list[UndoFailure] = []
        header = {
            "t": "meta",
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
            "argv": sys.argv,
        }
        header.update(meta or {})
        self._write(header)

    @classmethod
    def create(
        cls, workdir: Path, runner: Runner, meta: dict[str, object] | None = None
    ) -> Journal:
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"
        return cls(workdir / "journal" / name, runner, meta)

    def _write(self, record: dict[str, object]) -> None:
        os.write(self._fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(self._fd)

    def note(self, **fields: object) -> None:
        """Add information for cleanup (e.g. which results rows belong to this run)."""
        self._write({"t": "note", **fields})

    def record(self, what: str, undo: Undo) -> Step:
        """Write down a step and how to undo it; call this before doing the step."""
        if undo.kind not in _UNDO_ACTIONS:
            raise PgfsbenchError(f"internal: no undo action registered for {undo.kind!r}")
        self._seq += 1
        step = Step(self._seq, what, undo)
        self._write(
            {
                "t": "step",
                "seq": step.seq,
                "what": what,
                "undo": {"kind": undo.kind, "args": undo.args},
            }
        )
        self._steps.append(step)
        return step

    def mark(self) -> int:
        return self._seq

    def undo_since(self, mark: int) -> list[UndoFailure]:
        """Undo, newest first, every step recorded after ``mark`` that is not undone yet.

        SIGINT/SIGTERM are held back meanwhile: a second Ctrl-C must not leave a
        half-undone stack. They are delivered (and stop the campaign) once it is done."""
        with signals_held():
            return self._undo_since(mark)

    def _undo_since(self, mark: int) -> list[UndoFailure]:
        failures: list[UndoFailure] = []
        for step in reversed(self._steps):
            if step.seq <= mark or step.seq in self._undone:
                continue
            error = run_undo(self.runner, step)
            if error is None:
                self._undone.add(step.seq)
                self._write({"t": "undone", "seq": step.seq})
            else:
                failures.append(UndoFailure(step, error))
        self.failures.extend(failures)
        return failures

    @contextlib.contextmanager
    def scope(self) -> Iterator[Journal]:
        """Undo everything recorded inside the block when it exits, however it exits."""
        mark = self.mark()
        try:
            yield self
        finally:
            self.undo_since(mark)

    def pending(self) -> list[Step]:
        return [s for s in self._steps if s.seq not in self._undone]

    def close(self) -> None:
        """Release the journal; it is removed when nothing in it remains to undo."""
        remaining = self.pending()
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        if not remaining:
            self.path.unlink(missing_ok=True)


def run_undo(runner: Runner, step: Step) -> str | None:
    """Perform one undo; return None on success or the reason it failed."""
    action = _UNDO_ACTIONS.get(step.undo.kind)
    if action is None:
        return f"no undo action {step.undo.kind!r}"
    try:
        action(runner, dict(step.undo.args))
    except Exception as exc:  # an undo must never stop the others from running
        return f"{type(exc).__name__}: {exc}"
    return None


@dataclass(frozen=True)
class LeftoverJournal:
    path: Path
    meta: dict[str, object]
    steps: list[Step]
    notes: list[dict[str, object]]
    locked: bool


def read_journal(path: Path) -> LeftoverJournal:
    """Parse a journal file; a torn last line (killed mid-write) is ignored."""
    meta: dict[str, object] = {}
    steps: dict[int, Step] = {}
    undone: set[int] = set()
    notes: list[dict[str, object]] = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        kind = rec.get("t")
        if kind == "meta":
            meta = rec
        elif kind == "step":
            steps[rec["seq"]] = Step(
                rec["seq"], rec["what"], Undo(rec["undo"]["kind"], rec["undo"]["args"])
            )
        elif kind == "undone":
            undone.add(rec["seq"])
        elif kind == "note":
            notes.append(rec)
    pending = [s for seq, s in sorted(steps.items()) if seq not in undone]
    return LeftoverJournal(path, meta, pending, notes, locked=_is_locked(path))


def _is_locked(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def leftover_journals(workdir: Path) -> list[LeftoverJournal]:
    directory = workdir / "journal"
    if not directory.is_dir():
        return []
    return [read_journal(p) for p in sorted(directory.glob("*.jsonl"))]


def undo_leftover(runner: Runner, journal: LeftoverJournal) -> list[UndoFailure]:
    """Undo what a dead run left, newest first; append 'undone' records as we go."""
    failures: list[UndoFailure] = []
    fd = os.open(journal.path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for step in reversed(journal.steps):
            error = run_undo(runner, step)
            if error is None:
                os.write(fd, (json.dumps({"t": "undone", "seq": step.seq}) + "\n").encode())
            else:
                failures.append(UndoFailure(step, error))
        os.fsync(fd)
    finally:
        os.close(fd)
    if not failures:
        journal.path.unlink(missing_ok=True)
    return failures
