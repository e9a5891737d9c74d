"""sysbench's command lines and parsers, on output captured from Debian's sysbench 1.0.20."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.spec import SysbenchWorkload
from pgfsbench.workloads.base import Endpoint
from pgfsbench.workloads.sysbench import (
    ERROR_LINES_KEPT,
    error_lines,
    histogram_percentiles,
    mix_options,
    parse_report,
    parse_run,
    prepare_argv,
    run_argv,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "sysbench"
CONN = Endpoint("/run/sock", 5432, "postgres", "bench")


def test_the_80_20_mix_of_the_second_seed() -> None:
    assert mix_options("80/20") == {
        "point_selects": "8",
        "index_updates": "1",
        "non_index_updates": "1",
        "range_selects": "off",
        "delete_inserts": "0",
    }
    # the captured run with these options read 80% of its queries
    s = parse_run((DATA / "run_mix8020.out").read_text())
    assert s.reads is not None and s.writes is not None
    assert s.reads / (s.reads + s.writes) == 0.8
    assert mix_options("50/50")["point_selects"] == "5"
    assert (
        mix_options("75/25")["point_selects"],
        mix_options("75/25")["index_updates"],
        mix_options("75/25")["non_index_updates"],
    ) == ("9", "2", "1")
    assert mix_options(None) == {}


def test_argv() -> None:
    cfg = SysbenchWorkload(
        tool="sysbench", script="oltp_point_select", tables=2, mix=None, options={"skip_trx": True}
    )
    argv = run_argv("sysbench", CONN, cfg, 1000, 4, 10.0, 250.0)
    assert argv[:8] == [
        "sysbench",
        "--db-driver=pgsql",
        "--pgsql-host=/run/sock",
        "--pgsql-port=5432",
        "--pgsql-user=postgres",
        "--pgsql-db=bench",
        "--tables=2",
        "--table-size=1000",
    ]
    assert "--skip_trx=on" in argv and "--threads=4" in argv and "--time=10" in argv
    assert "--rate=250" in argv and "--report-interval=1" in argv and "--histogram=on" in argv
    assert argv[-2:] == ["/usr/share/sysbench/oltp_point_select.lua", "run"]
    prep = prepare_argv("sysbench", CONN, cfg, 1000, 2)
    assert prep[-1] == "prepare" and "--threads=2" in prep


def test_reports_and_summary_of_a_run() -> None:
    text = (DATA / "run_rw.out").read_text()
    reports = [r for r in map(parse_report, text.splitlines()) if r]
    assert [r.t for r in reports] == [1, 2, 3, 4]
    assert reports[0].tps == 486.37 and reports[0].qps == 9882.25
    assert reports[1].latency_ms == 995.51 and reports[0].errors_per_s == 4.99
    s = parse_run(text)
    assert (s.transactions, s.tps, s.queries, s.ignored_errors) == (1342, 313.47, 27052, 12)
    assert s.latency_ms == {
        "min": 0.85,
        "avg": 12.71,
        "max": 1019.03,
        "p99": 12.98,
        "sum": 17060.67,
    }
    assert sum(n for _, n in s.histogram) == 1342
    pct = histogram_percentiles(s.histogram)
    assert 1.0 < pct["p50"] < pct["p90"] < pct["p99"] < pct["p999"]
    assert abs(pct["p99"] - s.latency_ms["p99"]) < 0.01  # the same bucket sysbench reports
    assert s.fatal == ()


def test_rate_limited_run_has_queue_lines_between_reports() -> None:
    text = (DATA / "run_point_rate.out").read_text()
    reports = [r for r in map(parse_report, text.splitlines()) if r]
    assert len(reports) == 3 and all(200 < r.tps < 220 for r in reports)
    assert parse_run(text).transactions is not None


def test_a_failed_connection_is_a_fatal_line() -> None:
    s = parse_run((DATA / "run_noconn.out").read_text() + (DATA / "run_noconn.err").read_text())
    assert s.transactions is None
    assert any("Connection to database failed" in f for f in s.fatal)


def test_the_run_error_is_the_cause_not_sysbenchs_wrapper_lines() -> None:
    """A run's error is its last error line: sysbench's own cause ('Connection to database
    failed', PostgreSQL's error), not 'Thread initialization failed!' that follows it."""
    s = parse_run((DATA / "run_noconn.out").read_text() + (DATA / "run_noconn.err").read_text())
    lines = error_lines(s.fatal)
    assert lines[-1].startswith(
        "FATAL: Connection to database failed: connection to server on socket"
    )
    assert "FATAL: Thread initialization failed!" in lines
    # captured through pgbouncer 1.18 in transaction mode, 175 threads, prepared statements
    # on: hundreds of FATAL lines, the last one the wrapper
    s = parse_run((DATA / "run_pooler_thread_init.out").read_text())
    assert s.fatal[-1] == "FATAL: Thread initialization failed!"
    lines = error_lines(s.fatal)
    assert len(lines) == ERROR_LINES_KEPT
    assert lines[-1].startswith("FATAL: PQprepare() failed: ERROR:  prepared statement")
    assert lines[-1].endswith("already exists")
    s = parse_run((DATA / "run_pooler_prepared.out").read_text())
    assert "does not exist" in error_lines(s.fatal)[-1]
    assert error_lines(()) == []


def test_without_prepared_statements_through_a_transaction_pooler() -> None:
    cfg = SysbenchWorkload(tool="sysbench", script="oltp_read_write", tables=2)
    assert "--db-ps-mode=disable" not in run_argv("sysbench", CONN, cfg, 1000, 4, 10.0, None)
    argv = run_argv("sysbench", CONN, cfg, 1000, 4, 10.0, None, prepared=False)
    assert "--db-ps-mode=disable" in argv and argv[-1] == "run"
    own = SysbenchWorkload(
        tool="sysbench", script="oltp_read_write", tables=2, options={"db-ps-mode": "auto"}
    )  # the spec's own choice wins
    argv = run_argv("sysbench", CONN, own, 1000, 4, 10.0, None, prepared=False)
    assert [a for a in argv if "ps-mode" in a] == ["--db-ps-mode=auto"]
