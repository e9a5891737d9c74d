"""A capture's log made into the replayer's input (`native/replayer`), and the statements
it holds made into normalised text (literals out) for every place outside the capture.

The jsonlog lines of a session, in their order (line_num), become its transactions: an
explicit block (BEGIN or START TRANSACTION to COMMIT, END, ROLLBACK or ABORT; PREPARE
TRANSACTION ends one too), else each statement alone, as the server ran it. A statement is
the simple protocol's ("statement: ...", a string that may hold several) or the extended
protocol's ("execute NAME: ..." with its parameters in the detail, `<unnamed>` for the
unnamed statement); the "duration: ..." line right after it is its time in the capture. An
error line after a statement is the capture's error for it (what the replay should also
see). What cannot be replayed is counted and named, never silently dropped: COPY's data is
not in the log; a session's statements before its first transaction boundary when the
capture began inside a transaction; a line the parser does not understand.

Privacy: the replay file and the raw log stay in the capture directory (root's, 0600);
everything else (reports, summaries, a run's artifacts) gets `normalise`d text only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pgfsbench.postgres.statements import normalise, without_comments
from pgfsbench.workloads.replay_safety import reaches_os

REPLAY_VERSION = 1  # native/replayer's FormatVersion
MANIFEST = "manifest.json"  # a capture's manifest (pgfsbench capture)
LOG_FILE = "statements.jsonl"  # the server's jsonlog lines of the capture, as it wrote them
CSV_LOG_FILE = "statements.csv"  # or its csvlog rows (format = "csvlog" in the manifest)
REPLAY_FILE = "replay.jsonl"
QUERIES_FILE = "queries.json"  # normalised statements: no literal, safe to show

_EXECUTE = re.compile(r"^execute (?:fetch from )?(<unnamed>|[^:]+): (.*)$", re.S)
_DURATION = re.compile(r"^duration: ([\d.]+) ms$")
_PARAM = re.compile(r"\$(\d+) = (NULL|'((?:[^']|'')*)')")
_BEGIN = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION)\b", re.I)
_END = re.compile(r"^\s*(COMMIT|END|ABORT|ROLLBACK|PREPARE\s+TRANSACTION)\b(?!\s+TO\b)", re.I)
_ROLLBACK_TO = re.compile(r"^\s*ROLLBACK\s+(WORK\s+|TRANSACTION\s+)?TO\b", re.I)
_COPY_IN = re.compile(r"^\s*COPY\b.*\bFROM\s+STDIN\b", re.I | re.S)
_COPY = re.compile(r"^\s*COPY\b", re.I)


def parameters(detail: str | None) -> list[str | None]:
    """'parameters: $1 = '5', $2 = NULL' as the values, in order ($n)."""
    if not detail or not detail.startswith("parameters: "):
        return []
    found: dict[int, str | None] = {}
    for m in _PARAM.finditer(detail):
        found[int(m.group(1))] = None if m.group(2) == "NULL" else m.group(3).replace("''", "'")
    return [found.get(i) for i in range(1, max(found, default=0) + 1)]


def _when(stamp: str) -> float:
    """jsonlog's timestamp ('2026-11-28 10:45:01.123 UTC') as epoch seconds."""
    text, _, zone = stamp.rpartition(" ")
    base = datetime.strptime(text, "%Y-%m-%d %H:%M:%S.%f")
    if zone in ("UTC", "GMT"):
        from datetime import UTC

        return base.replace(tzinfo=UTC).timestamp()
    # another zone name: read as the host's local time (a capture is read on its host)
    return base.timestamp()


@dataclass
class Statement:
    sql: str
    kind: str  # simple | prepared | unnamed
    name: str
    params: list[str | None]
    t: float  # epoch seconds
    q: int
    dur_ms: float | None = None
    error: str | None = None  # the capture's SQLSTATE, when it failed there


@dataclass
class Transaction:
    statements: list[Statement] = field(default_factory=list)
    xid: int = 0  # the largest transaction id its lines carried (0: none assigned)
    explicit: bool = False


@dataclass
class Session:
    id: str
    user: str
    db: str
    connect: float | None
    transactions: list[Transaction] = field(default_factory=list)
    open_tx: Transaction | None = None
    # a transaction began before the capture: its statements are skipped to the boundary
    skipping: bool = False
    last: Statement | None = None


@dataclass
class Prepared:
    start: float
    sessions: list[Session]
    queries: list[str]  # normalised, by index
    calls: list[int]
    errors: list[int]
    skipped: dict[str, int]  # why -> statements that cannot be replayed
    # the workload's statements in the log (every client session's but the capture's
    # own): each is replayed, already in the data copy, or not replayable (``skipped``)
    captured: int = 0
    # of those replayed: in a transaction still open at the capture's end (rolled back)
    open_at_end: int = 0
    # statements in the log that are not the workload's (the capture's own session,
    # background processes): not counted in ``captured``
    not_workload: int = 0
    # each statement's errors by SQLSTATE, as the capture's log said
    states: list[dict[str, int]] = field(default_factory=list)

    @property
    def statements(self) -> int:
        return sum(self.calls)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


# csvlog's columns (PostgreSQL 13 on; 14 adds leader_pid and query_id at the end), named
# as jsonlog names the same fields
_CSV_FIELDS = {
    0: "timestamp",
    1: "user",
    2: "dbname",
    5: "session_id",
    9: "vxid",
    10: "txid",
    11: "error_severity",
    12: "state_code",
    13: "message",
    14: "detail",
    23: "backend_type",
}


def _csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    """csvlog's rows as jsonlog's lines: the same names, an empty field absent. A row
    cut short (the end of a log read at its size limit) is left out."""
    import csv

    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        for fields in csv.reader(fh):
            if len(fields) < 23:
                continue
            yield {
                name: fields[i] for i, name in _CSV_FIELDS.items() if i < len(fields) and fields[i]
            }


def log_file_name(fmt: str) -> str:
    """The capture's log file, by its format."""
    return CSV_LOG_FILE if fmt == "csvlog" else LOG_FILE


def log_rows(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    """A capture's log (jsonlog or csvlog) as jsonlog's lines."""
    return _csv_rows(path) if fmt == "csvlog" else _lines(path)


OPEN_AT_START = "_open_at_start"  # a line of a transaction begun before the capture


OPEN_AT_END = "in a transaction still open at the capture's end (replayed, then rolled back)"
_PARAM_REF = re.compile(r"\$[0-9]+")


def tx_effect(sql: str) -> tuple[bool, bool]:
    """What a simple query's string does to its session's transaction: (leaves one open,
    ends the one it found). A string of several statements ("BEGIN; UPDATE ...; COMMIT")
    is one message: its own transactions begin and end in it, so it leaves none open."""
    from pgfsbench.postgres.statements import tokens

    parts: list[str] = []
    current: list[str] = []
    for tok in tokens(sql):
        if tok.kind == "other" and tok.text == ";":
            parts.append("".join(current))
            current = []
        elif tok.kind != "comment":
            current.append(tok.text)
    parts.append("".join(current))
    open_now: bool | None = None  # None: as the string found it
    ends_found = False
    for part in (p for p in parts if p.strip()):
        if _BEGIN.match(part) and not _END.match(part):
            open_now = True
        elif _END.match(part) and not _ROLLBACK_TO.match(part):
            if open_now is None:
                ends_found = True
            open_now = False
    return bool(open_now), ends_found


def workload_statement(row: dict[str, Any], own: set[str] | frozenset[str]) -> bool | None:
    """Whether a log line is a statement of the workload (True), a statement of the
    capture's own session or of a background process (False), or no statement (None):
    the one count the capture prints and the replay's reconciliation starts from."""
    if _statement_of(str(row.get("message") or "")) is None:
        return None
    sid = str(row.get("session_id") or "")
    return bool(sid) and sid not in own and row.get("backend_type") in (None, "client backend")


def _statement_of(message: str) -> str | None:
    if message.startswith("statement: "):
        return message[len("statement: ") :]
    if m := _EXECUTE.match(message):
        return m.group(2)
    return None


def _marked_open_at_start(lines: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The lines, those of a transaction that was open when the capture began marked
    (OPEN_AT_START). A session first seen without its connection line holds its first
    virtual transaction's lines back until that transaction shows which it is: one that
    ends (COMMIT, ROLLBACK...) before it begins was open before the capture, written or
    not (a read-only one has no transaction id: only its vxid tells); one that begins,
    or is followed by another, was not."""
    held: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    seen: set[str] = set()
    for row in lines:
        sid = str(row.get("session_id") or "")
        vxid = str(row.get("vxid") or "")
        if sid and sid not in seen:
            seen.add(sid)
            message = str(row.get("message") or "")
            connected = message.startswith("connection ")
            sql = _statement_of(message)
            begins = sql is not None and bool(_BEGIN.match(sql)) and not _END.match(sql)
            if not connected and not begins and vxid and not vxid.endswith("/0"):
                held[sid] = (vxid, [row])
                continue
        if sid in held:
            first, rows = held[sid]
            if vxid != first:
                del held[sid]
                yield from rows
                yield row
                continue
            sql = _statement_of(str(row.get("message") or ""))
            if sql is not None and _BEGIN.match(sql) and not _END.match(sql):
                del held[sid]
                yield from rows
                yield row
                continue
            rows.append(row)
            if sql is not None and _END.match(sql) and not _ROLLBACK_TO.match(sql):
                del held[sid]
                for r in rows:
                    yield {**r, OPEN_AT_START: True}
            continue
        yield row
    for _, rows in held.values():
        yield from rows


def read_capture_log(lines: Iterable[dict[str, Any]], leave_out: Iterable[str] = ()) -> Prepared:
    """The sessions and their transactions from jsonlog lines (one capture); the
    sessions ``leave_out`` names (the capture's own) are not the workload."""
    own = set(leave_out)
    sessions: dict[str, Session] = {}
    queries: dict[str, int] = {}
    calls: list[int] = []
    errors: list[int] = []
    states: list[dict[str, int]] = []
    skipped: dict[str, int] = {}
    start: float | None = None

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    def qid(sql: str) -> int:
        text = normalise(sql)
        if text not in queries:
            queries[text] = len(queries)
            calls.append(0)
            errors.append(0)
            states.append({})
        return queries[text]

    def close(s: Session) -> None:
        if s.open_tx is not None and s.open_tx.statements:
            s.transactions.append(s.open_tx)
        s.open_tx = None

    captured = not_workload = 0
    for row in _marked_open_at_start(lines):
        sid = str(row.get("session_id") or "")
        counted = workload_statement(row, own)
        if counted is not None:
            captured += counted
            not_workload += not counted
        if not sid or sid in own or row.get("backend_type") not in (None, "client backend"):
            continue
        message = str(row.get("message") or "")
        if row.get(OPEN_AT_START):
            if _statement_of(message) is not None:
                skip("in a transaction open when the capture began")
            continue
        t = _when(str(row.get("timestamp")))
        start = t if start is None else min(start, t)
        s = sessions.get(sid)
        if s is None:
            first = message.startswith("connection ")
            s = sessions[sid] = Session(
                sid, str(row.get("user") or ""), str(row.get("dbname") or ""), t if first else None
            )
            # a session already connected when the capture began may be inside a
            # transaction: its statements wait for a boundary, unless nothing says so
            s.skipping = not first and int(row.get("txid") or 0) != 0
        if row.get("user"):
            s.user = str(row["user"])
        if row.get("dbname"):
            s.db = str(row["dbname"])
        xid = int(row.get("txid") or 0)
        severity = str(row.get("error_severity") or "")
        failing = str(row.get("statement") or "")
        code = str(row.get("state_code") or "ERROR")
        unlogged = (
            severity in ("ERROR", "FATAL")
            and bool(failing)
            and (
                s.last is None
                or s.last.sql != failing
                or s.last.dur_ms is not None
                or s.last.error is not None
            )
        )
        if unlogged and not s.skipping:
            # a statement that failed before it was logged (at parse, or at bind): its
            # error is its own, never the statement before's
            captured += 1
            if _PARAM_REF.search(without_comments(failing)):
                skip("failed at bind in the capture: its parameters are not in the log")
                continue
            stmt = Statement(failing, "simple", "", [], t, qid(failing), error=code)
            calls[stmt.q] += 1
            errors[stmt.q] += 1
            states[stmt.q][code] = states[stmt.q].get(code, 0) + 1
            s.last = stmt
            if s.open_tx is not None:
                s.open_tx.statements.append(stmt)
            else:
                s.transactions.append(Transaction([stmt], xid))
            continue
        if severity in ("ERROR", "FATAL") and s.last is not None:
            s.last.error = code
            errors[s.last.q] += 1
            states[s.last.q][code] = states[s.last.q].get(code, 0) + 1
            if s.open_tx is not None:
                s.open_tx.xid = max(s.open_tx.xid, xid)
            continue
        if m := _DURATION.match(message):
            if s.last is not None and s.last.dur_ms is None:
                s.last.dur_ms = float(m.group(1))
            if s.transactions and s.open_tx is None:
                s.transactions[-1].xid = max(s.transactions[-1].xid, xid)
            elif s.open_tx is not None:
                s.open_tx.xid = max(s.open_tx.xid, xid)
            continue
        if message.startswith("statement: "):
            sql, kind, name, params = message[len("statement: ") :], "simple", "", []
        elif m := _EXECUTE.match(message):
            name = m.group(1)
            sql, kind = m.group(2), ("unnamed" if name == "<unnamed>" else "prepared")
            params = parameters(row.get("detail"))
            name = "" if kind == "unnamed" else name
        else:
            continue  # connections, disconnections, checkpoints...: not statements
        if s.skipping:
            skip("in a transaction open when the capture began")
            if _END.match(sql):
                s.skipping = False
            continue
        if why := reaches_os(sql):
            skip(f"reaches the server's OS: {why}")
            continue
        if _COPY_IN.match(sql):
            skip("COPY FROM STDIN (its data is not in the log)")
            continue
        if _COPY.match(sql):
            skip("COPY (its data does not go through statements)")
            continue
        stmt = Statement(sql, kind, name, params, t, qid(sql))
        calls[stmt.q] += 1
        s.last = stmt
        opens, closes = tx_effect(sql) if kind == "simple" else (
            bool(_BEGIN.match(sql)) and not _END.match(sql),
            bool(_END.match(sql)) and not _ROLLBACK_TO.match(sql),
        )  # fmt: skip
        if s.open_tx is not None:
            s.open_tx.statements.append(stmt)
            s.open_tx.xid = max(s.open_tx.xid, xid)
            if closes:
                close(s)
                if opens:  # "COMMIT; BEGIN; ...": a new one left open
                    s.open_tx = Transaction([], xid, explicit=True)
        elif opens:
            s.open_tx = Transaction([stmt], xid, explicit=True)
        else:
            # one statement, or one string whose transactions all end in it
            s.transactions.append(Transaction([stmt], xid))
    open_at_end = 0
    for s in sessions.values():
        if s.open_tx is not None:
            # still open at the capture's end: replayed as far as it went (it is rolled
            # back when the session ends), and said
            open_at_end += len(s.open_tx.statements)
            close(s)
    by_index = sorted(queries, key=queries.__getitem__)
    return Prepared(
        start or 0.0,
        list(sessions.values()),
        by_index,
        calls,
        errors,
        skipped,
        states=states,
        captured=captured,
        open_at_end=open_at_end,
        not_workload=not_workload,
    )


def write_replay(prep: Prepared, path: Path, skip_xids: set[int] | None = None) -> dict[str, Any]:
    """The replayer's input: a header line, then one line a session. Transactions whose
    transaction id the data copy already holds as committed (``skip_xids``) are left out:
    their work is in the copy. Returns what was written and left out."""
    import os

    from pgfsbench.system.held import open_new_file

    written = dropped = sessions = 0
    in_copy = [0] * len(prep.queries)
    fd = open_new_file(path, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps({"version": REPLAY_VERSION, "queries": len(prep.queries)}) + "\n")
        for s in prep.sessions:
            txs = []
            for tx in s.transactions:
                if skip_xids and tx.xid and tx.xid in skip_xids:
                    dropped += len(tx.statements)
                    for st in tx.statements:
                        in_copy[st.q] += 1
                    continue
                txs.append(
                    {
                        "stmts": [
                            {
                                "sql": st.sql,
                                "kind": st.kind,
                                **({"name": st.name} if st.name else {}),
                                **({"params": st.params} if st.params else {}),
                                "t": round((st.t - prep.start) * 1e6),
                                "dur": round((st.dur_ms or 0.0) * 1000),
                                "q": st.q,
                            }
                            for st in tx.statements
                        ]
                    }
                )
                written += len(tx.statements)
            connect = s.connect if s.connect is not None else prep.start
            line = {
                "id": s.id,
                "user": s.user,
                "db": s.db,
                "connect": round((connect - prep.start) * 1e6),
                "tx": txs,
            }
            fh.write(json.dumps(line) + "\n")
            sessions += bool(txs)
    return {
        "statements": written,
        "already_in_the_copy": dropped,
        "sessions": sessions,
        "in_copy_by_query": in_copy,
    }


def with_roles(prep: Prepared, role_map: dict[str, str], locked: frozenset[str]) -> Prepared:
    """The sessions as the copy replays them: each under its role in ``role_map`` (a
    superuser's under the replay's own), without the statements that call a function
    locked in the copy (counted by reason)."""
    import dataclasses

    skipped = dict(prep.skipped)
    sessions = []
    for s in prep.sessions:
        txs = []
        for tx in s.transactions:
            kept = []
            for st in tx.statements:
                why = reaches_os(st.sql, locked) if locked else None
                if why:
                    key = f"reaches the server's OS: {why}"
                    skipped[key] = skipped.get(key, 0) + 1
                    prep.calls[st.q] -= 1
                    continue
                kept.append(st)
            if kept:
                txs.append(dataclasses.replace(tx, statements=kept))
        sessions.append(dataclasses.replace(s, user=role_map.get(s.user, s.user), transactions=txs))
    return dataclasses.replace(prep, sessions=sessions, skipped=skipped)


def transaction_ids(prep: Prepared) -> list[int]:
    return sorted({tx.xid for s in prep.sessions for tx in s.transactions if tx.xid})


def queries_summary(prep: Prepared) -> list[dict[str, object]]:
    """The normalised statements with their captured calls and errors (by SQLSTATE): what
    a report may show of a capture."""
    return [
        {
            "q": i,
            "query": text,
            "calls": prep.calls[i],
            "errors": prep.errors[i],
            "states": dict(prep.states[i]) if i < len(prep.states) else {},
        }
        for i, text in enumerate(prep.queries)
    ]


def read_capture(directory: Path) -> Prepared:
    from pgfsbench.system.trust import read_trusted

    manifest = json.loads(read_trusted(directory / MANIFEST))
    own = [str(s) for s in manifest.get("own_sessions") or []]
    fmt = str(manifest.get("format") or "jsonlog")
    return read_capture_log(log_rows(directory / log_file_name(fmt), fmt), own)
