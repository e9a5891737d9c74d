"""The undo journal: every provisioning step is written down (and fsynced) *before* it is done.

A step is recorded with the way to undo it. Normal exit, an error, Ctrl-C and SIGTERM undo
the steps in reverse through `Journal.scope()`; after a SIGKILL, `pgfsbench cleanup` reads
the journal files left in the work directory and undoes what is still recorded. Every undo
action is idempotent: it checks the current state first (is it still mounted, attached,
running, and is it still ours?) because the step may have been recorded and never done.

Undo actions are registered by name by the modules that know how to perform them
(storage, kernel, postgres), which keeps this bottom layer free of upward imports. Each
comes with its bound: what its arguments may name (a path inside the work directory, a
kernel file pgfsbench changes, a process started after the journal's writer). A step is
checked against its bound when it is recorded (a step of ours outside it is a bug) and
again before `pgfsbench cleanup` undoes it: a journal is a file on disk, and cleanup runs
as root.

A journal says who wrote it (uid, boot, pid and its start time); cleanup undoes only
journals that root wrote, in a work directory that only root can write (system/trust.py).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.runner import Runner, process_start_time
from pgfsbench.system.secrets import shown_argv
from pgfsbench.system.signals import signals_held
from pgfsbench.system.trust import (
    UntrustedPath,
    boot_id,
    open_nofollow,
    read_trusted,
    trusted_uids,
)

FORMAT = 2  # 2: the header says who wrote it (uid, boot_id, pid_start)


@dataclass(frozen=True)
class Scope:
    """What a journal's steps may touch: its work directory, the real devices its run was
    given, and the process that wrote it (its children start after it, on the same boot)."""

    workdir: Path
    devices: tuple[str, ...] = ()
    writer_pid: int | None = None
    writer_start: int | None = None
    boot_id: str = ""

    def same_boot(self) -> bool:
        return bool(self.boot_id) and self.boot_id == boot_id()


UndoAction = Callable[[Runner, dict[str, object]], None]
# why the arguments of a step fall outside what pgfsbench can have done (None: within)
Bound = Callable[[dict[str, object], Scope], str | None]
_UNDO_ACTIONS: dict[str, UndoAction] = {}
_BOUNDS: dict[str, Bound] = {}


def undo_action(kind: str, *, bound: Bound) -> Callable[[UndoAction], UndoAction]:
    """Register the function that undoes steps of ``kind``, and the bound its arguments
    must keep to (checked when a step is recorded and before cleanup undoes it)."""

    def register(fn: UndoAction) -> UndoAction:
        _UNDO_ACTIONS[kind] = fn
        _BOUNDS[kind] = bound
        return fn

    return register


def registered_actions() -> dict[str, Bound]:
    """Every undo action and its bound (for the documentation and the tests)."""
    return dict(_BOUNDS)


def out_of_bounds(undo: Undo, scope: Scope) -> str | None:
    """Why this undo may not be done for a journal of ``scope`` (None: it may)."""
    bound = _BOUNDS.get(undo.kind)
    if bound is None:
        return f"no undo action {undo.kind!r}"
    try:
        return bound(dict(undo.args), scope)
    except (KeyError, TypeError, ValueError) as exc:
        return f"malformed arguments ({type(exc).__name__}: {exc})"


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

    def __init__(
        self,
        path: Path,
        runner: Runner,
        meta: dict[str, object] | None = None,
        *,
        workdir: Path | None = None,
    ):
        self.path = path
        self.runner = runner
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # a new file of our own: never one planted there, never through a symlink
        self._fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._steps: list[Step] = []
        self._undone: set[int] = set()
        self._seq = 0
        self._threads: dict[int, int] = {}  # step -> the thread that recorded it
        self.failures: list[UndoFailure] = []
        me = os.getpid()
        header: dict[str, object] = {
            "t": "meta",
            "format": FORMAT,
            "pid": me,
            "pid_start": process_start_time(me),
            "uid": os.geteuid(),
            "boot_id": boot_id(),
            "host": socket.gethostname(),
            "started": time.time(),
            "argv": shown_argv(sys.argv),
        }
        header.update(meta or {})
        devices = header.get("devices")
        self.reach = Scope(
            Path(os.path.realpath(workdir or path.parent.parent)),
            tuple(str(d) for d in devices) if isinstance(devices, list) else (),
            me,
            process_start_time(me),
            boot_id(),
        )
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
        why = out_of_bounds(undo, self.reach)
        if why is not None:  # cleanup would refuse it: ours must never be
            raise PgfsbenchError(f"internal: step {what!r} is outside its bound: {why}")
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
        self._threads[step.seq] = threading.get_ident()
        return step

    def amend(self, step: Step, **args: object) -> Step:
        """Add to a step's undo what was learnt once it was done (a pool's guid): its undo
        then acts only on that very object."""
        undo = Undo(step.undo.kind, {**step.undo.args, **args})
        amended = Step(step.seq, step.what, undo)
        self._write({"t": "amend", "seq": step.seq, "args": args})
        self._steps = [amended if s.seq == step.seq else s for s in self._steps]
        return amended

    def settle(self, step: Step, why: str) -> None:
        """A step whose undo is now someone else's (a Job left to the cluster's TTL
        controller, which deletes its claims with it): never undone by us."""
        self._undone.add(step.seq)
        self._write({"t": "undone", "seq": step.seq, "settled": why})

    def mark(self) -> int:
        return self._seq

    def undo_since(self, mark: int, thread: int | None = None) -> list[UndoFailure]:
        """Undo, newest first, every step recorded after ``mark`` that is not undone yet
        (with ``thread``: only those that thread recorded).

        SIGINT/SIGTERM are held back meanwhile: a second Ctrl-C must not leave a
        half-undone stack. They are delivered (and stop the campaign) once it is done."""
        with signals_held():
            return self._undo_since(mark, thread)

    def _undo_since(self, mark: int, thread: int | None = None) -> list[UndoFailure]:
        failures: list[UndoFailure] = []
        for step in reversed(self._steps):
            if step.seq <= mark or step.seq in self._undone:
                continue
            if thread is not None and self._threads.get(step.seq) != thread:
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
    def scope(self, own_thread: bool = False) -> Iterator[Journal]:
        """Undo everything recorded inside the block when it exits, however it exits
        (``own_thread``: only what this thread recorded, when threads share the journal,
        each in a scope of its own: a cluster's places, one thread each)."""
        mark = self.mark()
        thread = threading.get_ident() if own_thread else None
        try:
            yield self
        finally:
            self.undo_since(mark, thread)

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
    refused: str | None = None  # why nothing in it may be undone (None: it may)


def read_journal(path: Path, workdir: Path | None = None) -> LeftoverJournal:
    """Parse a journal file; a torn last line (killed mid-write) is ignored. One that
    root did not write, or that names what pgfsbench cannot have done, comes back
    ``refused`` with the reason, and nothing of it is to be undone."""
    meta: dict[str, object] = {}
    steps: dict[int, Step] = {}
    undone: set[int] = set()
    notes: list[dict[str, object]] = []
    try:
        text = read_trusted(path).decode(errors="replace")
    except (UntrustedPath, OSError) as exc:
        return LeftoverJournal(path, {}, [], [], locked=False, refused=_reason(exc))
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            kind = rec.get("t")
            if kind == "meta":
                meta = rec
            elif kind == "step":
                steps[int(rec["seq"])] = Step(
                    int(rec["seq"]),
                    str(rec["what"]),
                    Undo(str(rec["undo"]["kind"]), dict(rec["undo"]["args"])),
                )
            elif kind == "amend" and int(rec["seq"]) in steps:
                old = steps[int(rec["seq"])]
                steps[old.seq] = Step(
                    old.seq, old.what, Undo(old.undo.kind, {**old.undo.args, **rec["args"]})
                )
            elif kind == "undone":
                undone.add(int(rec["seq"]))
            elif kind == "note":
                notes.append(rec)
        except (json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
            continue
    pending = [s for seq, s in sorted(steps.items()) if seq not in undone]
    scope = _scope_of(meta, workdir or path.parent.parent)
    refused = _writer_problem(meta) or _steps_problem(pending, scope)
    return LeftoverJournal(path, meta, pending, notes, _is_locked(path), refused)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"it cannot be read ({exc.strerror})"
    return str(exc)


def _scope_of(meta: dict[str, object], workdir: Path) -> Scope:
    devices = meta.get("devices")
    pid, start = meta.get("pid"), meta.get("pid_start")
    return Scope(
        Path(os.path.realpath(workdir)),
        tuple(str(d) for d in devices) if isinstance(devices, list) else (),
        pid if isinstance(pid, int) else None,
        start if isinstance(start, int) else None,
        str(meta.get("boot_id") or ""),
    )


def _writer_problem(meta: dict[str, object]) -> str | None:
    """A journal is undone only if it says root (or the user running cleanup) wrote it."""
    if not meta:
        return "it has no header: not a journal pgfsbench wrote"
    uid = meta.get("uid")
    if uid is None:
        return None  # an older pgfsbench's: the file's owner (checked on reading) tells
    if not isinstance(uid, int) or uid not in trusted_uids():
        return f"it was written by uid {uid}, not root"
    return None


def _steps_problem(steps: list[Step], scope: Scope) -> str | None:
    problems = [
        f"step {s.seq} ({s.what}): {why}"
        for s in steps
        if (why := out_of_bounds(s.undo, scope)) is not None
    ]
    if problems:
        return "it asks for what pgfsbench cannot have done: " + "; ".join(problems[:5])
    return None


def _is_locked(path: Path) -> bool:
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except (UntrustedPath, OSError):
        return False
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
    return [read_journal(p, workdir) for p in sorted(directory.glob("*.jsonl"))]


def undo_leftover(runner: Runner, journal: LeftoverJournal) -> list[UndoFailure]:
    """Undo what a dead run left, newest first; append 'undone' records as we go."""
    if journal.refused is not None:
        raise UntrustedPath(f"{journal.path.name}: not undone: {journal.refused}")
    failures: list[UndoFailure] = []
    try:
        fd = open_nofollow(journal.path, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise
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
