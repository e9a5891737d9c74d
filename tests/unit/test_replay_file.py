"""A capture's log made into sessions and transactions, and its statements normalised:
the literals never leave the capture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pgfsbench.postgres.statements import normalise
from pgfsbench.workloads.replay_file import (
    parameters,
    queries_summary,
    read_capture_log,
    write_replay,
)


def line(sid: str, n: int, message: str, **kw: Any) -> dict[str, Any]:
    return {
        "timestamp": f"2026-11-28 10:00:{n // 1000:02d}.{n % 1000:03d} UTC",
        "user": "app",
        "dbname": "shop",
        "session_id": sid,
        "line_num": n,
        "backend_type": "client backend",
        "message": message,
        "txid": kw.pop("txid", 0),
        **kw,
    }


def test_literals_become_parameters_and_comments_go() -> None:
    sql = "SELECT * FROM t WHERE a = 'x''y' AND b = 42 AND c = $$z$$ /* secret 7 */ -- 9\n"
    assert normalise(sql) == "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3"
    # parameters stay, literals numbered after them; identifiers stay
    assert (
        normalise('UPDATE "t1" SET x = $1 WHERE id = 5') == 'UPDATE "t1" SET x = $1 WHERE id = $2'
    )
    assert normalise("SELECT e'a\\'b', 1.5e3, col2 FROM t").count("$") == 2


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 '-", min_size=1, max_size=40))
def test_no_string_literal_survives_normalisation(secret: str) -> None:
    quoted = secret.replace("'", "''")
    out = normalise(f"INSERT INTO t VALUES ('{quoted}', 12345)")
    assert out == "INSERT INTO t VALUES ($1, $2)"


def test_parameters_with_quotes_and_nulls() -> None:
    assert parameters("parameters: $1 = 'it''s', $2 = NULL, $3 = '3'") == ["it's", None, "3"]
    assert parameters(None) == [] and parameters("other detail") == []


def test_sessions_transactions_durations_and_errors() -> None:
    rows = [
        line("s1", 1, "connection authorized: user=app database=shop"),
        line("s1", 2, "statement: BEGIN"),
        line("s1", 3, "duration: 0.010 ms"),
        line(
            "s1",
            4,
            "execute P0_1: UPDATE t SET v = v + $1 WHERE id = $2",
            detail="parameters: $1 = '5', $2 = '7'",
        ),
        line("s1", 5, "duration: 0.200 ms", txid=900),
        line("s1", 6, "statement: COMMIT", txid=900),
        line("s1", 7, "statement: SELECT 1/0"),
        line("s1", 8, "division by zero", error_severity="ERROR", state_code="22012"),
        line("s1", 9, "execute <unnamed>: SELECT $1", detail="parameters: $1 = 'x'"),
    ]
    prep = read_capture_log(rows)
    (s,) = prep.sessions
    assert s.user == "app" and s.db == "shop" and s.connect is not None
    assert [len(t.statements) for t in s.transactions] == [3, 1, 1]
    tx = s.transactions[0]
    assert tx.explicit and tx.xid == 900
    assert [st.kind for st in tx.statements] == ["simple", "prepared", "simple"]
    assert tx.statements[1].params == ["5", "7"] and tx.statements[1].dur_ms == 0.2
    assert s.transactions[1].statements[0].error == "22012"
    assert s.transactions[2].statements[0].kind == "unnamed"
    summary = {q["query"]: q for q in queries_summary(prep)}
    assert summary["SELECT $1/$2"]["errors"] == 1


def test_what_cannot_replay_is_counted_and_named() -> None:
    rows = [
        # a session already inside a transaction when the capture began (a txid, no BEGIN)
        line("old", 1, "statement: UPDATE t SET v = 1", txid=50),
        line("old", 2, "statement: COMMIT", txid=50),
        line("old", 3, "statement: SELECT 2"),
        line("c", 4, "statement: COPY t FROM STDIN"),
        line("c", 5, "statement: SELECT 3"),
        line("own", 6, "statement: SELECT pg_current_wal_lsn()"),
    ]
    prep = read_capture_log(rows, leave_out=["own"])
    assert prep.skipped == {
        "in a transaction open when the capture began": 2,
        "COPY FROM STDIN (its data is not in the log)": 1,
    }
    assert [s.id for s in prep.sessions] == ["old", "c"]
    assert prep.statements == 2


def test_the_replay_file_leaves_out_what_the_copy_holds(tmp_path: Path) -> None:
    rows = [
        line("s", 1, "statement: BEGIN"),
        line("s", 2, "statement: INSERT INTO t VALUES (1)", txid=10),
        line("s", 3, "statement: COMMIT", txid=10),
        line("s", 4, "statement: BEGIN"),
        line("s", 5, "statement: INSERT INTO t VALUES (2)", txid=11),
        line("s", 6, "statement: COMMIT", txid=11),
    ]
    prep = read_capture_log(rows)
    path = tmp_path / "r.jsonl"
    counts = write_replay(prep, path, skip_xids={10})
    assert counts == {
        "statements": 3,
        "already_in_the_copy": 3,
        "sessions": 1,
        "in_copy_by_query": [1, 1, 1],
    }
    header, session = (json.loads(x) for x in path.read_text().splitlines())
    assert header == {"version": 1, "queries": 3}
    (tx,) = session["tx"]
    assert tx["stmts"][1]["sql"] == "INSERT INTO t VALUES (2)" and tx["stmts"][1]["t"] > 0
    assert (path.stat().st_mode & 0o777) == 0o600


def test_a_replay_that_differs_is_marked_as_such_never_as_the_hosts_disturbance() -> None:
    """A fidelity difference was worded as the host's disturbance ("the neighbours' as much
    as the storage's"), and --without-disturbed then left no replay run at all."""
    from pgfsbench.analysis.disturbance import is_disturbed
    from pgfsbench.analysis.replay_marks import marks
    from pgfsbench.analysis.summary import summarise
    from pgfsbench.results.records import StoredRun

    def run(rep: int, differs: list[str], replay: dict[str, object]) -> StoredRun:
        metrics: dict[str, object] = {
            "tool": {"name": "replay", "fidelity": {"differs": differs}, "replay": replay}
        }
        return StoredRun(
            run_id=rep, campaign_id=1, cell="ext4/p/k/mine", storage="ext4", workload="mine",
            repetition=rep, status="ok", metrics=metrics, throughput=100.0 + rep,
            transactions=5000, latency_avg_ms=2.0,
        )  # fmt: skip

    long_enough = {"wall_s": 30.0, "mode": "fast"}
    marked = run(1, ["WAL +9.0% of the capture's (limit 5%)"], long_enough)
    assert not is_disturbed(marked)
    (why,) = marks(marked)
    assert why.startswith("the replay differs from its capture") and "WAL +9.0%" in why
    # a fast replay of 0.02 s: no figure, no verdict, and said
    short = run(2, [], {"wall_s": 0.024, "mode": "fast"})
    assert "too short to measure" in marks(short)[0]
    # a timed replay whose schedule ran 50 ms late for 2 ms statements: no latency
    lagging = run(3, [], {"wall_s": 30.0, "mode": "timed", "schedule_lag_max_ms": 50.0})
    assert "schedule ran late" in marks(lagging)[0]
    (cell,) = summarise([marked, short, lagging])
    assert cell.values == (101.0, 103.0)  # the short run gives no figure
    assert cell.latency_avg_ms is not None and cell.latency_avg_ms.n == 1
    assert cell.disturbed == () and len(cell.replay_marks) == 3


def test_results_show_says_a_replays_fidelity_and_an_approximation() -> None:
    from pgfsbench.report.terminal import replay_rows
    from pgfsbench.results.records import StoredRun

    fidelity = {
        "statements_captured": 1000,
        "statements_replayed": 990,
        "errors_captured": 0,
        "errors_replayed": 0,
        "wal_pct": 1.25,
        "not_replayable": {"COPY FROM STDIN (its data is not in the log)": 3},
        "replayer_cpu_us_per_tx": 80.4,
        "differs": ["10 of 1000 statements not replayed"],
        "statements": [{"query": "UPDATE t SET v = $1", "calls_captured": 990}],
    }
    run = StoredRun(
        campaign_id=1,
        cell="c",
        repetition=1,
        status="ok",
        metrics={"tool": {"name": "replay", "fidelity": fidelity}},
    )
    (line, differs) = replay_rows(run)
    text = str(line[1])
    assert text.startswith("990 of 1,000 statements replayed; errors 0 (capture 0); WAL +1.2%")
    assert "3 not replayable: COPY FROM STDIN" in text and "80 us a transaction" in text
    assert differs == ("replay differs", "10 of 1000 statements not replayed")
    approx = StoredRun(
        campaign_id=1,
        cell="c",
        repetition=1,
        status="ok",
        metrics={
            "tool": {
                "name": "replay",
                "approximation": "pgbench scripts",
                "calls_covered_pct": 97.5,
            }
        },
    )
    assert replay_rows(approx) == [
        ("replay", "an approximation: pgbench scripts; its scripts cover 97.5% of the calls")
    ]


def test_the_work_done_between_two_snapshots_by_database_and_statement() -> None:
    from pgfsbench.workloads.replay_fidelity import work_of

    before = {
        "database": [
            {"datname": "app", "xact_commit": 10, "tup_updated": 5, "xact_rollback": 0},
            {"datname": "postgres", "xact_commit": 3},
        ],
        "wal": [{"wal_records": 100, "wal_fpi": 7}],
        "statements": [{"queryid": "1", "dbid": 5, "shared_blks_dirtied": 40}],
    }
    after = {
        "database": [
            {"datname": "app", "xact_commit": 110, "tup_updated": 305, "xact_rollback": 2},
            {"datname": "postgres", "xact_commit": 4},
            {"datname": "new", "xact_commit": 1},  # created since: counted whole
        ],
        "wal": [{"wal_records": 1100, "wal_fpi": 9}],
        "statements": [
            {"queryid": "1", "dbid": 5, "shared_blks_dirtied": 90},
            {"queryid": "2", "dbid": 5, "shared_blks_dirtied": 3},
        ],
    }
    done = work_of(before, after)
    assert done["commits"] == 102 and done["rollbacks"] == 2 and done["rows updated"] == 300
    assert done["WAL records"] == 1000 and done["full-page images"] == 2
    assert done["blocks dirtied"] == 53
    # a side without pg_stat_statements: blocks dirtied is not claimed
    assert "blocks dirtied" not in work_of({"database": []}, {"database": []})


def test_a_read_only_transaction_open_at_the_start_is_told_by_its_vxid() -> None:
    """A session inside a transaction that had not written when the capture began has no
    transaction id: on 0206292 its statements up to COMMIT became autocommit statements
    (the transaction split). Its virtual transaction id tells: the statements of the first
    one, ended before any BEGIN, are left out; a session whose first transaction begins in
    the capture, or an autocommit one, is replayed whole."""
    rows = [
        line("ro", 1, "statement: SELECT 1", vxid="3/40"),
        line("ro", 2, "statement: SELECT 2", vxid="3/40"),
        line("ro", 3, "statement: COMMIT", vxid="3/40"),
        line("ro", 4, "statement: SELECT 3", vxid="3/41"),
        line("auto", 5, "statement: SELECT 4", vxid="4/7"),
        line("auto", 6, "statement: SELECT 5", vxid="4/8"),
        line("tx", 7, "statement: BEGIN", vxid="5/2"),
        line("tx", 8, "statement: SELECT 6", vxid="5/2"),
        line("tx", 9, "statement: COMMIT", vxid="5/2"),
    ]
    prep = read_capture_log(rows)
    assert prep.skipped == {"in a transaction open when the capture began": 3}
    by_id = {s.id: s for s in prep.sessions}
    assert [[st.sql for st in t.statements] for t in by_id["ro"].transactions] == [["SELECT 3"]]
    assert len(by_id["auto"].transactions) == 2
    assert [[st.sql for st in t.statements] for t in by_id["tx"].transactions] == [
        ["BEGIN", "SELECT 6", "COMMIT"]
    ]


def test_every_captured_statement_is_accounted_for_once(tmp_path: Path) -> None:
    """captured = replayed + not sent + already in the copy + not replayable, by reason;
    a transaction open at the capture's end is replayed (said), never "not replayable";
    the capture's own session and background processes are not the workload."""
    from pgfsbench.workloads.replay_fidelity import reconciliation
    from pgfsbench.workloads.replay_file import with_roles, workload_statement

    rows = [
        # a session inside a transaction when the capture began: to its boundary, skipped
        line("s0", 1, "statement: UPDATE t SET v = 1", txid=700, vxid="3/1"),
        line("s0", 2, "statement: COMMIT", txid=700, vxid="3/1"),
        line("s0", 3, "statement: SELECT 2", vxid="3/2"),
        line("s1", 4, "connection authorized: user=app database=shop"),
        line("s1", 5, "statement: BEGIN"),
        line("s1", 6, "statement: INSERT INTO t VALUES (1)", txid=800),
        line("s1", 7, "statement: COMMIT", txid=800),  # committed in the copy: dropped
        line("s1", 8, "statement: COPY t FROM STDIN"),
        line("s1", 9, "statement: SELECT pg_read_file('/etc/passwd')"),
        line("s1", 10, "statement: BEGIN"),
        line("s1", 11, "statement: DELETE FROM t", txid=801),  # open at the end
        line("own", 12, "statement: SELECT 'the capture itself'"),
        line("bg", 13, "statement: VACUUM", backend_type="autovacuum worker"),
    ]
    own = frozenset({"own"})
    assert [workload_statement(r, own) for r in rows[11:]] == [False, False]
    prep = with_roles(read_capture_log(rows, own), {}, frozenset())
    assert prep.captured == 10 and prep.not_workload == 2 and prep.open_at_end == 2
    counts = write_replay(prep, tmp_path / "r.jsonl", {800})
    assert counts["already_in_the_copy"] == 3 and counts["statements"] == 3
    summary = {
        "captured": prep.captured,
        "open_at_end": prep.open_at_end,
        "not_workload": prep.not_workload,
        "written": counts,
        "skipped": prep.skipped,
    }
    rec = reconciliation(summary, {"statements": 2})
    assert rec["balanced"] is True, rec
    assert rec["replayed"] == 2 and rec["not_sent"] == 1
    assert sum(rec["not_replayable"].values()) == 4
    assert not any("still open" in why for why in rec["not_replayable"])
    assert rec["open_at_end_replayed_then_rolled_back"] == 2
    # the statements table counts the same way: captured = in the copy + to replay
    in_copy = counts["in_copy_by_query"]
    assert sum(in_copy) == 3 and sum(prep.calls) == 3 + counts["statements"]


def test_a_string_of_statements_keeps_its_own_transaction() -> None:
    """ "BEGIN; UPDATE ...; INSERT ...; COMMIT" in one message was glued to the session's
    next statements as one transaction, "still open, rolled back" at the end."""
    from pgfsbench.workloads.replay_file import tx_effect

    assert tx_effect("BEGIN; UPDATE t SET v = 1; INSERT INTO h VALUES (1); COMMIT") == (
        False,
        False,
    )
    assert tx_effect("BEGIN; UPDATE t SET v = 1") == (True, False)
    assert tx_effect("UPDATE t SET v = ';'; COMMIT") == (False, True)
    assert tx_effect("COMMIT; BEGIN") == (True, True)
    rows = [
        line("s", 1, "statement: BEGIN; UPDATE t SET v = 1; INSERT INTO h VALUES (1); COMMIT"),
        line("s", 2, "statement: SELECT 1"),
        line("s", 3, "statement: SELECT 2"),
    ]
    prep = read_capture_log(rows)
    (s,) = prep.sessions
    assert [len(t.statements) for t in s.transactions] == [1, 1, 1] and prep.open_at_end == 0


def test_a_statement_that_failed_before_it_was_logged_is_its_own() -> None:
    """A syntax error (never logged as a statement) was charged to the statement before
    it; a bind error's parameters are not in the log: said, not replayed."""
    rows = [
        line("s", 1, "statement: BEGIN"),
        line("s", 2, "duration: 0.010 ms"),
        line("s", 3, 'syntax error at or near "SELEC"', error_severity="ERROR",
             state_code="42601", statement="SELEC 1"),
        line("s", 4, "statement: ROLLBACK"),
        line("s", 5, "duration: 0.010 ms"),
        line("s", 6, 'invalid input syntax for type integer: "x"', error_severity="ERROR",
             state_code="22P02", statement="SELECT * FROM t WHERE id = $1"),
    ]  # fmt: skip
    prep = read_capture_log(rows)
    (s,) = prep.sessions
    sqls = [st.sql for tx in s.transactions for st in tx.statements]
    assert sqls == ["BEGIN", "SELEC 1", "ROLLBACK"]
    failed = s.transactions[0].statements[1]
    assert failed.error == "42601" and prep.errors[failed.q] == 1
    begin_q = s.transactions[0].statements[0].q
    assert prep.errors[begin_q] == 0  # never charged to BEGIN
    assert prep.states[failed.q] == {"42601": 1}
    assert prep.skipped == {"failed at bind in the capture: its parameters are not in the log": 1}
    assert prep.captured == 4
