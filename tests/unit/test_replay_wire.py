"""A wire capture read into steps and statements, counted as the replayer counts a replay
(native/replayer/wire_test.go counts the same step the same way), retries marked, what
reaches the OS left out with what depends on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgfsbench.workloads.replay_wire import filtered, read_wire, write_wire_replay


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def F(s: int, t: int, m: str, **kw: Any) -> dict[str, Any]:
    return {"s": s, "t": t, "d": "F", "m": m, **kw}


def B(s: int, t: int, m: str, **kw: Any) -> dict[str, Any]:
    return {"s": s, "t": t, "d": "B", "m": m, **kw}


def test_steps_statements_and_their_outcomes(tmp_path: Path) -> None:
    ins = "INSERT INTO t VALUES ($1, $2)"
    events = [
        {"m": "begin", "t": 0},
        F(1, 1, "startup", params={"user": "app", "database": "shop",
                                    "options": "-c search_path=app,public"}),
        B(1, 2, "R"),
        B(1, 3, "Z", status="I"),
        # a statement executed twice in one step: the second a unique violation
        F(1, 10, "P", name="s1", sql=ins, oids=[3802, 17]),
        F(1, 10, "B", portal="", stmt="s1", pf=[0, 1], v=[{"t": "{}"}, {"b": "AAEC"}], rf=[]),
        F(1, 10, "E", portal="", max=0),
        F(1, 10, "B", portal="", stmt="s1", pf=[0, 1], v=[{"t": "{}"}, None], rf=[]),
        F(1, 10, "E", portal="", max=0),
        F(1, 10, "S"),
        B(1, 11, "1"), B(1, 11, "2"), B(1, 11, "C", tag="INSERT 0 1"), B(1, 11, "2"),
        B(1, 12, "E", code="23505", severity="ERROR"), B(1, 13, "Z", status="I"),
        # a string of statements: one message, one query
        F(1, 20, "Q", sql="BEGIN; UPDATE t SET v = 1; COMMIT"),
        B(1, 21, "C", tag="BEGIN"), B(1, 21, "C", tag="UPDATE 3"), B(1, 21, "C", tag="COMMIT"),
        B(1, 22, "Z", status="I"),
        # COPY with its data
        F(1, 30, "Q", sql="COPY t FROM STDIN"), B(1, 31, "G"),
        F(1, 32, "d", data="MQkyCg=="), F(1, 32, "c"),
        B(1, 33, "C", tag="COPY 1"), B(1, 33, "Z", status="I"),
        # a syntax error at parse: its own statement, failed
        F(1, 40, "P", name="", sql="SELEC 1", oids=[]), F(1, 40, "B", portal="", stmt="",
                                                          pf=[], v=[], rf=[]),
        F(1, 40, "E", portal="", max=0), F(1, 40, "S"),
        B(1, 41, "E", code="42601", severity="ERROR"), B(1, 41, "Z", status="I"),
        F(1, 50, "X"),
        {"s": 1, "d": "F", "m": "end", "t": 51},
    ]  # fmt: skip
    prep = read_wire(write(tmp_path / "wire.jsonl", events))
    (s,) = prep.sessions
    assert s.user == "app" and s.db == "shop"
    assert s.params == {"options": "-c search_path=app,public"}
    assert [len(st.msgs) for st in s.steps] == [6, 1, 3, 4]
    q_ins = prep.queries.index("INSERT INTO t VALUES ($1, $2)")
    assert prep.calls[q_ins] == 2 and prep.errors[q_ins] == 1
    assert prep.states[q_ins] == {"23505": 1} and prep.rows[q_ins] == 1
    q_multi = prep.queries.index("BEGIN; UPDATE t SET v = $1; COMMIT")
    assert prep.calls[q_multi] == 1 and prep.rows[q_multi] == 3
    q_copy = prep.queries.index("COPY t FROM STDIN")
    assert prep.rows[q_copy] == 1
    q_bad = prep.queries.index("SELEC $1")
    assert prep.states[q_bad] == {"42601": 1}
    assert prep.captured == 5 and prep.open_at_end == 0 and prep.skipped == {}
    counts = write_wire_replay(prep, tmp_path / "replay.jsonl")
    assert counts["statements"] == 5 and counts["sessions"] == 1
    header, line = (tmp_path / "replay.jsonl").read_text().splitlines()
    assert json.loads(header)["version"] == 2
    session = json.loads(line)
    # the messages as they came (binary values as base64), X left to the replayer
    assert session["steps"][0]["msgs"][1]["v"] == [{"t": "{}"}, {"b": "AAEC"}]
    assert all(m["m"] != "X" for st in session["steps"] for m in st["msgs"])


def test_a_retried_transaction_is_marked_and_the_os_left_out(tmp_path: Path) -> None:
    upd = "UPDATE acc SET b = b + 1 WHERE id = 1"
    events = [
        F(1, 0, "startup", params={"user": "app", "database": "shop"}),
        F(1, 1, "Q", sql="BEGIN"), B(1, 1, "C", tag="BEGIN"), B(1, 1, "Z", status="T"),
        F(1, 2, "Q", sql=upd), B(1, 2, "E", code="40001"), B(1, 2, "Z", status="E"),
        F(1, 3, "Q", sql="ROLLBACK"), B(1, 3, "C", tag="ROLLBACK"), B(1, 3, "Z", status="I"),
        # the client's retry: the same statements
        F(1, 4, "Q", sql="BEGIN"), B(1, 4, "C", tag="BEGIN"), B(1, 4, "Z", status="T"),
        F(1, 5, "Q", sql=upd), B(1, 5, "E", code="40001"), B(1, 5, "Z", status="E"),
        F(1, 6, "Q", sql="ROLLBACK"), B(1, 6, "C", tag="ROLLBACK"), B(1, 6, "Z", status="I"),
        F(1, 7, "P", name="evil", sql="SELECT pg_read_file('/etc/shadow')", oids=[]),
        F(1, 7, "S"), B(1, 7, "1"), B(1, 7, "Z", status="I"),
        F(1, 8, "B", portal="", stmt="evil", pf=[], v=[], rf=[]), F(1, 8, "E", portal="", max=0),
        F(1, 8, "S"), B(1, 8, "C", tag="SELECT 1"), B(1, 8, "Z", status="I"),
    ]  # fmt: skip
    prep = read_wire(write(tmp_path / "wire.jsonl", events))
    (s,) = prep.sessions
    assert [st.retry for st in s.steps][:6] == [False, False, False, True, False, False]
    assert prep.retries == 1
    prep = filtered(prep, {"app": "pgfsbench_replay"}, frozenset())
    (s,) = prep.sessions
    assert s.user == "pgfsbench_replay"
    # the Parse that reaches the OS and the Execute of what it prepared: both left out
    assert len(s.steps) == 6
    assert sum(prep.skipped.values()) == 1 and "reaches the server's OS" in next(iter(prep.skipped))
