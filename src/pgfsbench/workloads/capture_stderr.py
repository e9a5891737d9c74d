"""Capture from a server whose log is its standard error (``logging_collector = off``,
Debian's default: the service manager, pg_ctlcluster, points the server's stderr at
/var/log/postgresql/postgresql-VERSION-CLUSTER.log). Turning the collector on needs a
restart; this needs none.

The capture sets, by reload (journaled and put back like every other setting it sets), a
``log_line_prefix`` of its own: a random token per capture, then the fields jsonlog has
(timestamp, session id, virtual and real transaction ids, SQLSTATE, query id, backend
type, user, database), the free-text ones each ended by the token. The file is read
through the server (``pg_read_binary_file('/proc/self/fd/2')``: a backend's standard error
is the postmaster's), as the server's user reads its own files; root opens no path. Before
that, the server's stderr must be a regular file on a mounted filesystem (a pipe, a socket
or a terminal would be read from, taking lines away from their reader, or not be kept):
``/proc/self/fdinfo/2`` names its mount, which ``/proc/self/mountinfo`` must list.

The lines are then made into jsonlog's (statements.jsonl): a message is written in one
piece (its DETAIL, CONTEXT and STATEMENT lines after it, each with the prefix again); a line
of a message that holds a newline continues with a tab (PostgreSQL writes one after each
newline); a line without the token is not the capture's (another program's, or a line
logged before the reload) and is counted, never parsed.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from pgfsbench.workloads.capture_sql import one, read_log

if TYPE_CHECKING:
    import psycopg

STDERR = "/proc/self/fd/2"
# filesystems whose files are not a log kept on disk (a terminal, /dev/null, proc...)
NOT_A_LOG = frozenset({"devtmpfs", "devpts", "proc", "sysfs", "cgroup", "cgroup2", "debugfs"})
PRIMARY = frozenset(
    {
        "DEBUG1",
        "DEBUG2",
        "DEBUG3",
        "DEBUG4",
        "DEBUG5",
        "DEBUG",
        "LOG",
        "INFO",
        "NOTICE",
        "WARNING",
        "ERROR",
        "FATAL",
        "PANIC",
    }
)
# a message's other parts, as jsonlog names them
SECONDARY = {
    "DETAIL": "detail",
    "HINT": "hint",
    "QUERY": "internal_query",
    "CONTEXT": "context",
    "STATEMENT": "statement",
    "LOCATION": "location",
}
_LEVEL = re.compile(r"^([A-Z0-9]{3,9}):  ")


def new_token() -> str:
    """A token no log line holds by chance (and no name, before the capture sets it)."""
    return "pgfsb" + secrets.token_hex(8)


def line_prefix(token: str, version: int) -> str:
    """The capture's log_line_prefix: the fixed fields between ``<`` and ``>``, then user
    and database each ended by the token."""
    query_id = "|%Q" if version >= 140000 else ""
    return f"{token}<%m|%c|%v|%x|%e{query_id}|%b>{token}u%u{token}d%d{token}e "


def stderr_problem(conn: psycopg.Connection[Any]) -> str | None:
    """Why the server's standard error cannot be read as its log (None: it can): it must
    be a regular file on a mounted filesystem, read through the server."""

    try:
        fdinfo = str(
            one(conn, "SELECT pg_catalog.pg_read_file('/proc/self/fdinfo/2', 0, 4096, true)") or ""
        )
        mounts = str(
            one(conn, "SELECT pg_catalog.pg_read_file('/proc/self/mountinfo', 0, 1048576, true)")
            or ""
        )
    except Exception as exc:
        return f"the server cannot read its own /proc/self ({' '.join(str(exc).split())[:200]})"
    found = re.search(r"^mnt_id:\s*(\d+)$", fdinfo, re.M)
    if found is None:
        return "the server's /proc/self/fdinfo/2 names no mount (not Linux, or no stderr)"
    for line in mounts.splitlines():
        fields = line.split(" ")
        if fields and fields[0] == found.group(1) and " - " in line:
            fstype = line.split(" - ", 1)[1].split(" ", 1)[0]
            if fstype in NOT_A_LOG:
                return f"the server's stderr is on {fstype} (a terminal or /dev/null): not kept"
            return None
    return (
        "the server's stderr is a pipe or a socket (a service manager's journal, a "
        "container's log), not a file: reading it would take lines from its reader"
    )


def stderr_size(conn: psycopg.Connection[Any]) -> int:

    return int(one(conn, "SELECT size FROM pg_catalog.pg_stat_file(%s, true)", STDERR) or 0)


@dataclass
class Parsed:
    rows: int = 0
    foreign_lines: int = 0  # lines without the token: not the capture's
    undecoded: int = 0  # rows with bytes that are not UTF-8 (replaced)
    parts: dict[str, int] = field(default_factory=dict)


def _fields(token: str, text: str) -> dict[str, Any] | None:
    """One prefixed line as jsonlog's fields, or None when it is not of the prefix."""
    head = token + "<"
    if not text.startswith(head):
        return None
    close = text.find(">" + token + "u", len(head))
    if close < 0:
        return None
    fixed = text[len(head) : close].split("|")
    rest = text[close + len(token) + 2 :]
    user, sep1, rest = rest.partition(token + "d")
    db, sep2, rest = rest.partition(token + "e ")
    if not sep1 or not sep2 or len(fixed) not in (6, 7):
        return None
    stamp, session, vxid, txid, state = fixed[:5]
    query_id = fixed[5] if len(fixed) == 7 else ""
    backend = fixed[-1]
    level = _LEVEL.match(rest)
    if level is None:
        return None
    row: dict[str, Any] = {
        "timestamp": stamp,
        "session_id": session,
        "error_severity": level.group(1),
        "message": rest[level.end() :],
    }
    for key, value in (
        ("user", user),
        ("dbname", db),
        ("vxid", vxid),
        ("state_code", state),
        ("backend_type", backend),
    ):
        if value:
            row[key] = value
    if txid.isdigit() and txid != "0":
        row["txid"] = int(txid)
    if query_id.lstrip("-").isdigit() and query_id != "0":
        row["query_id"] = int(query_id)
    return row


def _records(token: str, lines: Iterator[bytes], parsed: Parsed) -> Iterator[dict[str, Any]]:
    current: dict[str, Any] | None = None
    part = "message"
    for raw in lines:
        text = raw.decode("utf-8", errors="replace")
        if "\ufffd" in text:
            parsed.undecoded += 1
        if text.startswith("\t") and current is not None:
            current[part] = f"{current.get(part, '')}\n{text[1:]}"
            continue
        fields = _fields(token, text)
        if fields is None:
            parsed.foreign_lines += 1
            continue
        level = str(fields["error_severity"])
        if (
            level in SECONDARY
            and current is not None
            and fields.get("session_id") == current.get("session_id")
        ):
            part = SECONDARY[level]
            current[part] = fields["message"]
            parsed.parts[part] = parsed.parts.get(part, 0) + 1
            continue
        if level not in PRIMARY:
            parsed.foreign_lines += 1
            continue
        if current is not None:
            yield current
        current, part = fields, "message"
    if current is not None:
        yield current


def _split(fh: IO[bytes]) -> Iterator[bytes]:
    """The file's lines split at newlines only (a carriage return is a statement's)."""
    rest = b""
    while chunk := fh.read(1 << 20):
        pieces = (rest + chunk).split(b"\n")
        rest = pieces.pop()
        yield from pieces
    if rest:
        yield rest  # the last line, maybe cut at the read's size limit: parsed as it is


def to_jsonlog(raw: Path, token: str, out_fd: int) -> Parsed:
    """The stderr lines in ``raw`` written to ``out_fd`` as jsonlog's lines."""
    parsed = Parsed()
    with open(raw, "rb") as fh, os.fdopen(os.dup(out_fd), "w", encoding="utf-8") as out:
        for row in _records(token, _split(fh), parsed):
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            parsed.rows += 1
    return parsed


def await_stderr(conn: psycopg.Connection[Any], prefix: str, timeout: float = 10.0) -> int:
    """The server's stderr log's size once the reload took effect (the capture's prefix
    and log_statement in force), after checking the file grows when the server logs (a
    statement of this session's, logged and left out as the capture's own)."""
    from pgfsbench.system.errors import CapabilityError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        on = one(conn, "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'log_statement'")
        if on == "all" and one(conn, "SHOW log_line_prefix") == prefix:
            break
        time.sleep(0.1)
    else:
        raise CapabilityError("the server did not take the capture's settings within 10 s")
    offset = stderr_size(conn)
    while time.monotonic() < deadline + 5:
        one(conn, "SELECT 'pgfsbench capture: the log grows'")
        if stderr_size(conn) > offset:
            return offset
        time.sleep(0.2)
    raise CapabilityError(
        "the server's standard error does not grow when it logs a statement: its log is "
        "not kept there (turn logging_collector on at a restart, then capture)"
    )


def stderr_log(
    conn: psycopg.Connection[Any], offset: int, out: Path, token: str, limit: int
) -> tuple[int, dict[str, Any]]:
    """The stderr log from ``offset`` (from its start when it was rotated meanwhile: a
    copy-and-truncate left it shorter), read through the server into a file of the
    capture's, made into jsonlog's lines, then removed."""
    from pgfsbench.system.held import Held, open_new_file
    from pgfsbench.workloads.replay_file import LOG_FILE

    rotated = stderr_size(conn) < offset
    raw_name = "stderr.raw"
    fd = open_new_file(out / raw_name, 0o600)
    try:
        size = read_log(conn, [(STDERR, 0 if rotated else offset)], fd, limit)
    finally:
        os.close(fd)
    fd = open_new_file(out / LOG_FILE, 0o600)
    try:
        parsed = to_jsonlog(out / raw_name, token, fd)
    finally:
        os.close(fd)
        with Held.open(out) as capture_dir:
            capture_dir.remove(raw_name)
    return size, {
        "rotated_during_capture": rotated,
        "rows": parsed.rows,
        "lines_not_the_captures": parsed.foreign_lines,
        "rows_not_utf8": parsed.undecoded,
    }
