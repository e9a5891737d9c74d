"""A server's stderr log (logging_collector off) made into jsonlog's lines: the capture's
prefix told apart from everything else, a message's parts and its continued lines kept,
names with the prefix's own characters in them, a carriage return left in its statement."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pgfsbench.workloads.capture_stderr import line_prefix, new_token, to_jsonlog
from pgfsbench.workloads.replay_file import log_rows, read_capture_log

TOKEN = "pgfsb0123456789abcdef"


def prefixed(
    level: str,
    message: str,
    session: str = "65f0a1b2.3039",
    user: str = "app",
    db: str = "shop",
    vxid: str = "3/7",
    txid: str = "0",
    state: str = "00000",
    stamp: str = "2026-12-01 10:00:00.123 UTC",
) -> str:
    head = line_prefix(TOKEN, 150000)
    for code, value in (
        ("%m", stamp),
        ("%c", session),
        ("%v", vxid),
        ("%x", txid),
        ("%e", state),
        ("%Q", "0"),
        ("%b", "client backend"),
        ("%u", user),
        ("%d", db),
    ):
        head = head.replace(code, value)
    # PostgreSQL writes a tab after each newline of a message
    return head + f"{level}:  " + message.replace("\n", "\n\t") + "\n"


def convert(tmp_path: Path, text: str) -> list[dict[str, object]]:
    raw = tmp_path / "stderr.raw"
    raw.write_bytes(text.encode())
    out = tmp_path / "statements.jsonl"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        to_jsonlog(raw, TOKEN, fd)
    finally:
        os.close(fd)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_the_prefix_is_new_each_capture_and_holds_jsonlogs_fields() -> None:
    assert new_token() != new_token()
    p = line_prefix(TOKEN, 150000)
    assert all(code in p for code in ("%m", "%c", "%v", "%x", "%e", "%Q", "%b", "%u", "%d"))
    assert "%Q" not in line_prefix(TOKEN, 130000)  # query ids from 14 on


def test_statements_with_their_parts_and_lines(tmp_path: Path) -> None:
    text = (
        "2026-12-01 09:59:59 UTC [123] LOG:  a line from before the reload\n"
        + prefixed("LOG", "connection authorized: user=app database=shop")
        + prefixed("LOG", "statement: SELECT 1,\n  2 -- two lines\r still the second")
        + prefixed("LOG", "duration: 0.120 ms")
        + prefixed("LOG", "execute <unnamed>: UPDATE t SET v = $1 WHERE id = $2", txid="741")
        + prefixed("DETAIL", "parameters: $1 = 'a\nb', $2 = '7'", txid="741")
        + prefixed("LOG", "duration: 0.300 ms", txid="741")
        + prefixed("ERROR", 'relation "nope" does not exist', state="42P01")
        + prefixed("STATEMENT", "SELECT * FROM nope")
        + "some other program's line\n"
    )
    rows = convert(tmp_path, text)
    assert [r["message"] for r in rows] == [
        "connection authorized: user=app database=shop",
        "statement: SELECT 1,\n  2 -- two lines\r still the second",
        "duration: 0.120 ms",
        "execute <unnamed>: UPDATE t SET v = $1 WHERE id = $2",
        "duration: 0.300 ms",
        'relation "nope" does not exist',
    ]
    assert rows[3]["detail"] == "parameters: $1 = 'a\nb', $2 = '7'" and rows[3]["txid"] == 741
    assert rows[5]["error_severity"] == "ERROR" and rows[5]["state_code"] == "42P01"
    assert rows[5]["statement"] == "SELECT * FROM nope"
    assert rows[0]["user"] == "app" and rows[0]["dbname"] == "shop" and rows[0]["vxid"] == "3/7"
    # what the replay reads from it: one session, the statements, the error
    fmt_rows = list(log_rows(tmp_path / "statements.jsonl", "jsonlog"))
    prepared = read_capture_log(fmt_rows)
    # the failing statement was never logged (it failed at parse): its own, never the
    # UPDATE's before it
    assert prepared.statements == 3 and prepared.errors == [0, 0, 1]
    (session,) = prepared.sessions
    assert session.user == "app" and session.db == "shop"


def test_names_holding_the_prefixs_characters(tmp_path: Path) -> None:
    odd_user, odd_db = "a|b>c d", "x>y|z"
    rows = convert(
        tmp_path,
        prefixed("LOG", "statement: SELECT 2", user=odd_user, db=odd_db)
        + prefixed("LOG", "statement: SELECT 3", user="", db="", session="65f0a1b2.1"),
    )
    assert rows[0]["user"] == odd_user and rows[0]["dbname"] == odd_db
    assert "user" not in rows[1] and rows[1]["message"] == "statement: SELECT 3"


def test_a_part_of_another_session_is_not_attached(tmp_path: Path) -> None:
    rows = convert(
        tmp_path,
        prefixed("LOG", "statement: SELECT 4")
        + prefixed("DETAIL", "parameters: $1 = 'x'", session="65f0a1b2.9999"),
    )
    assert len(rows) == 1 and "detail" not in rows[0]
