"""A capture made at the wire (pgfsbench-wirecap: what each client sent, message by message,
and what the server answered) made into the replayer's input, replay file version 2.

A session's messages are cut into steps, each ending with the server's ReadyForQuery; a
transaction ends with the first step whose status is idle. Each Execute and each simple
query is a statement, normalised by its SQL (an Execute's is its portal's prepared
statement's, as the session's own Parse and Bind named them); its outcome in the capture
(its command tag's rows, or the error its Parse, Bind or Execute met, with the SQLSTATE)
is counted the way the replayer counts the replay's (native/replayer/wire.go), so the two
compare statement by statement. A transaction that failed with a serialization failure, a
deadlock or a unique violation and that the client then sent again, statement for
statement, is marked as a retry: the replayer sends it only if the first attempt failed
there too.

What is not replayed is counted by reason: a step that would reach the server's OS (and
every later step that uses what it prepared), a step the client's connection ended before
the server answered, a cancel request. Everything else is sent as it came, COPY's data
included. Privacy as for log captures: the replay file stays in the capture's directory;
what leaves it is normalised.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.postgres.statements import normalise
from pgfsbench.workloads.replay_safety import reaches_os

WIRE_LOG = "wire.jsonl"  # pgfsbench-wirecap's events (the capture's, 0600)
WIRE_VERSION = 2  # native/replayer's WireFormatVersion
RETRY_CODES = frozenset({"40001", "40P01", "23505"})
NOT_SENT = frozenset({"X"})  # the replayer ends its sessions itself


def text_of(value: Any) -> str:
    """A written-down text: a string, or {"b": base64} for bytes that are not UTF-8."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("b"), str):
        return base64.b64decode(value["b"]).decode("utf-8", errors="replace")
    return ""


@dataclass
class Step:
    t: int
    msgs: list[dict[str, Any]] = field(default_factory=list)
    dur: int = 0
    idle: bool = False
    retry: bool = False
    answered: bool = False
    # (q, SQLSTATE or None, rows) of each statement, in order, as the capture saw them
    outcomes: list[tuple[int, str | None, int]] = field(default_factory=list)
    # the step's state while its answers are read
    pending: list[int] = field(default_factory=list)
    simple: int = -2
    simple_rows: int = 0
    simple_code: str | None = None


@dataclass
class WireSession:
    id: str
    user: str
    db: str
    params: dict[str, str]
    connect: int
    steps: list[Step] = field(default_factory=list)
    statements: dict[str, str] = field(default_factory=dict)  # prepared name -> SQL
    portals: dict[str, str] = field(default_factory=dict)  # portal -> SQL
    ended: bool = False


@dataclass
class WirePrepared:
    sessions: list[WireSession]
    queries: list[str]
    calls: list[int]
    errors: list[int]
    states: list[dict[str, int]]
    rows: list[int]
    skipped: dict[str, int]
    captured: int = 0
    open_at_end: int = 0
    not_workload: int = 0
    retries: int = 0
    start: float = 0.0

    @property
    def statements(self) -> int:
        return sum(self.calls)


def _events(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if isinstance(ev, dict):
                yield ev


def rows_of(tag: str) -> int:
    last = tag.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


def read_wire(path: Path) -> WirePrepared:
    """The sessions, their steps and the capture's own outcome of each statement."""
    sessions: dict[str, WireSession] = {}
    queries: dict[str, int] = {}
    calls: list[int] = []
    errors: list[int] = []
    states: list[dict[str, int]] = []
    rows: list[int] = []
    skipped: dict[str, int] = {}

    def skip(why: str, n: int = 1) -> None:
        skipped[why] = skipped.get(why, 0) + n

    def qid(sql: str) -> int:
        text = normalise(sql)
        if text not in queries:
            queries[text] = len(queries)
            for lst in (calls, errors, rows):
                lst.append(0)
            states.append({})
        return queries[text]

    def outcome(step: Step, q: int, code: str | None, n: int) -> None:
        step.outcomes.append((q, code, n))

    for ev in _events(path):
        m = str(ev.get("m") or "")
        sid = str(ev.get("s") or "")
        t = int(ev.get("t") or 0)
        if m == "startup":
            params = {str(k): text_of(v) for k, v in (ev.get("params") or {}).items()}
            sessions[sid] = WireSession(
                sid,
                params.get("user", ""),
                params.get("database") or params.get("user", ""),
                {k: v for k, v in params.items() if k not in ("user", "database")},
                t,
            )
            continue
        if m == "cancel":
            skip("a cancel request (its session's statement ends as it ends)")
            continue
        s = sessions.get(sid)
        if s is None:
            continue
        if m == "end":
            s.ended = True
            continue
        if ev.get("d") == "F":
            if m in NOT_SENT:
                continue
            if not s.steps or s.steps[-1].answered:
                s.steps.append(Step(t))
            step = s.steps[-1]
            msg = {k: v for k, v in ev.items() if k not in ("s", "d", "t")}
            msg["q"] = -1
            if m == "Q":
                msg["q"] = qid(text_of(ev.get("sql")))
                step.simple = msg["q"]
                step.simple_rows, step.simple_code = 0, None
            elif m == "P":
                s.statements[text_of(ev.get("name"))] = text_of(ev.get("sql"))
            elif m == "B":
                s.portals[text_of(ev.get("portal"))] = s.statements.get(text_of(ev.get("stmt")), "")
            elif m == "E":
                sql = s.portals.get(text_of(ev.get("portal")), "")
                msg["q"] = qid(sql)
                step.pending.append(msg["q"])
            elif m == "C" and ev.get("kind") == "S":
                s.statements.pop(text_of(ev.get("name")), None)
            step.msgs.append(msg)
            continue
        # the server's answers to the step in progress
        if not s.steps:
            continue
        step = s.steps[-1]
        if m == "C":
            if step.simple != -2:
                step.simple_rows += rows_of(str(ev.get("tag") or ""))
            elif step.pending:
                outcome(step, step.pending.pop(0), None, rows_of(str(ev.get("tag") or "")))
        elif m in ("s", "I") and step.simple == -2 and step.pending:
            outcome(step, step.pending.pop(0), None, 0)
        elif m == "E":
            code = str(ev.get("code") or "XX000")
            if step.simple != -2:
                step.simple_code = step.simple_code or code
            elif step.pending:
                outcome(step, step.pending.pop(0), code, 0)
                step.pending.clear()  # the server skips to the Sync
        elif m == "Z":
            if step.simple != -2 and step.simple >= 0:
                outcome(step, step.simple, step.simple_code, step.simple_rows)
            step.answered = True
            step.idle = ev.get("status") == "I"
            step.dur = t - step.t
            step.simple = -2
    prepared = WirePrepared(list(sessions.values()), [], calls, errors, states, rows, skipped)
    prepared.queries = sorted(queries, key=queries.__getitem__)
    _settle(prepared)
    return prepared


def _settle(prep: WirePrepared) -> None:
    """The capture's outcomes counted; unanswered steps dropped; retries marked; the
    statements of a transaction still open at the end counted (replayed, rolled back)."""
    for s in prep.sessions:
        if s.steps and not s.steps[-1].answered:
            last = s.steps.pop()
            n = sum(1 for m in last.msgs if m["m"] in ("Q", "E"))
            if n:
                prep.skipped["its client's connection ended before the server answered"] = (
                    prep.skipped.get("its client's connection ended before the server answered", 0)
                    + n
                )
            prep.captured += n
        for step in s.steps:
            for q, code, n in step.outcomes:
                prep.captured += 1
                prep.calls[q] += 1
                prep.rows[q] += n
                if code:
                    prep.errors[q] += 1
                    prep.states[q][code] = prep.states[q].get(code, 0) + 1
        txs = transactions(s.steps)
        if txs and not txs[-1][-1].idle:
            prep.open_at_end += sum(len(st.outcomes) for st in txs[-1])
        for before, after in itertools.pairwise(txs):
            failed = {c for st in before for _, c, _ in st.outcomes if c}
            if failed & RETRY_CODES and _shape(before) == _shape(after):
                after[0].retry = True
                prep.retries += 1


def transactions(steps: list[Step]) -> list[list[Step]]:
    out: list[list[Step]] = []
    current: list[Step] = []
    for st in steps:
        current.append(st)
        if st.idle:
            out.append(current)
            current = []
    if current:
        out.append(current)
    return out


def _shape(tx: list[Step]) -> list[int]:
    """The statements a transaction ran, in order (what its retry repeats)."""
    return [m["q"] for st in tx for m in st.msgs if m["m"] in ("Q", "E")]


def filtered(prep: WirePrepared, role_map: dict[str, str], locked: frozenset[str]) -> WirePrepared:
    """The sessions as the copy replays them: each under its role in ``role_map``, without
    the steps that would reach the server's OS (a function the copy locked, COPY ...
    PROGRAM...) nor the later steps that use what such a step prepared (counted)."""
    skipped = dict(prep.skipped)
    for s in prep.sessions:
        s.user = role_map.get(s.user, s.user)
        tainted: set[str] = set()
        kept: list[Step] = []
        for step in s.steps:
            why = None
            for m in step.msgs:
                if m["m"] in ("Q", "P"):
                    why = why or reaches_os(text_of(m.get("sql")), locked)
                    if m["m"] == "P" and why:
                        tainted.add(text_of(m.get("name")))
                if m["m"] == "B" and text_of(m.get("stmt")) in tainted:
                    why = why or "it executes a statement prepared by one that reaches the OS"
            if why:
                n = len(step.outcomes)
                key = f"reaches the server's OS: {why}"
                skipped[key] = skipped.get(key, 0) + n
                for q, code, _ in step.outcomes:
                    prep.calls[q] -= 1
                    if code:
                        prep.errors[q] -= 1
                        prep.states[q][code] -= 1
                continue
            kept.append(step)
        s.steps = kept
    prep.skipped = skipped
    return prep


def write_wire_replay(prep: WirePrepared, path: Path) -> dict[str, Any]:
    """The replayer's input (version 2): a header line, then one line a session."""
    import os

    from pgfsbench.system.held import open_new_file

    written = sessions = 0
    fd = open_new_file(path, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps({"version": WIRE_VERSION, "queries": len(prep.queries)}) + "\n")
        for s in prep.sessions:
            steps = []
            for st in s.steps:
                steps.append(
                    {"t": st.t, "dur": st.dur, "msgs": st.msgs, "idle": st.idle, "retry": st.retry}
                )
                written += len(st.outcomes)
            line = {
                "id": s.id,
                "user": s.user,
                "db": s.db,
                "params": s.params,
                "connect": s.connect,
                "steps": steps,
            }
            fh.write(json.dumps(line) + "\n")
            sessions += bool(steps)
    return {
        "statements": written,
        "already_in_the_copy": 0,
        "sessions": sessions,
        "in_copy_by_query": [0] * len(prep.queries),
    }


def queries_summary(prep: WirePrepared) -> list[dict[str, Any]]:
    return [
        {
            "q": i,
            "query": text,
            "calls": prep.calls[i],
            "errors": prep.errors[i],
            "states": {k: v for k, v in prep.states[i].items() if v},
            "rows": prep.rows[i],
        }
        for i, text in enumerate(prep.queries)
    ]
