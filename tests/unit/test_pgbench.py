import dataclasses
from pathlib import Path

import pytest

from pgfsbench.spec import Workload
from pgfsbench.workloads.base import Endpoint, failure_text
from pgfsbench.workloads.pgbench import (
    init_argv,
    parse_init,
    parse_progress,
    parse_run,
    progress_series,
    run_argv,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "pgbench"
CONN = Endpoint("/run/sock", 5432, "postgres", "pgbench")


def workload(**kw: object) -> Workload:
    base = {
        "name": "w",
        "tool": "pgbench",
        "builtin": "tpcb-like",
        "scripts": (),
        "clients": 4,
        "threads": 2,
        "duration_s": 5.0,
        "warmup_s": 0.0,
        "rate": None,
        "protocol": "simple",
        "extra_args": (),
    }
    base.update(kw)
    return Workload(**base)  # type: ignore[arg-type]


def test_init_argv_client_and_server_side() -> None:
    assert init_argv("pgbench", CONN, 5, "client", False) == [
        "pgbench",
        "-i",
        "-s",
        "5",
        "-I",
        "dtgvp",
        "-h",
        "/run/sock",
        "-p",
        "5432",
        "-U",
        "postgres",
        "pgbench",
    ]
    assert "dtGvpf" in init_argv("pgbench", CONN, 5, "server", True)


def test_run_argv_builtin_rate_progress_and_no_vacuum() -> None:
    argv = run_argv(
        "pgbench",
        CONN,
        workload(rate=200.0, protocol="prepared"),
        5.0,
        base_dir=Path("/s"),
        vacuum=False,
    )
    assert argv[-1] == "pgbench"
    for piece in (
        ["-c", "4"],
        ["-j", "2"],
        ["-T", "5"],
        ["-M", "prepared"],
        ["-b", "tpcb-like"],
        ["-R", "200"],
        ["-P", "1"],
    ):
        i = argv.index(piece[0])
        assert argv[i : i + 2] == piece
    assert "-n" in argv


def test_run_argv_scripts_relative_to_spec_with_weight() -> None:
    argv = run_argv(
        "pgbench",
        CONN,
        workload(builtin=None, scripts=("a.sql@3", "/abs/b.sql")),
        5.0,
        base_dir=Path("/specs"),
    )
    assert argv[argv.index("-f") : argv.index("-f") + 2] == ["-f", "/specs/a.sql@3"]
    assert "/abs/b.sql" in argv and "-b" not in argv


def test_parse_init_client_and_server_side() -> None:
    r = parse_init((DATA / "init_client_s2.txt").read_text())
    assert r is not None and r.seconds == pytest.approx(0.31)
    assert r.phases["client-side generate"] == pytest.approx(0.16)
    assert set(r.phases) == {
        "drop tables",
        "create tables",
        "client-side generate",
        "vacuum",
        "primary keys",
    }
    s = parse_init((DATA / "init_server_s2.txt").read_text())
    assert s is not None and "server-side generate" in s.phases


def test_parse_init_wrapped_like_the_seed() -> None:
    text = (
        "vacuuming...\ncreating primary keys...\ndone in 94.21 s (drop tables 0.07 s, create "
        "tables 0.02 s, client-side generate\n    72.89 s, vacuum 0.80 s, primary keys "
        "20.43 s).\n"
    )
    r = parse_init(text)
    assert r is not None and r.seconds == pytest.approx(94.21)
    assert r.phases["client-side generate"] == pytest.approx(72.89)
    assert r.phases["primary keys"] == pytest.approx(20.43)


def test_parse_run_tpcb() -> None:
    r = parse_run((DATA / "run_tpcb.stdout").read_text())
    assert r.tps == pytest.approx(2704.442928)
    assert r.latency_avg_ms == pytest.approx(1.474)
    assert r.latency_stddev_ms == pytest.approx(1.075)
    assert r.transactions == 8098 and r.failed_transactions == 0
    assert r.initial_connection_ms == pytest.approx(11.11)
    assert r.header["number of clients"] == "4"


def test_parse_run_rate_limited_has_lag() -> None:
    r = parse_run((DATA / "run_rate.stdout").read_text())
    assert r.lag_avg_ms == pytest.approx(0.266) and r.lag_max_ms == pytest.approx(11.643)


def test_parse_run_without_progress_has_no_stddev() -> None:
    r = parse_run((DATA / "run_simple_update_noprogress.stdout").read_text())
    assert r.tps == pytest.approx(1562.790083) and r.latency_stddev_ms is None


def test_parse_run_failure_keeps_the_error() -> None:
    r = parse_run("", (DATA / "run_noconn.stderr").read_text())
    assert r.tps is None
    assert r.errors[-1] == "pgbench: error: could not create connection for setup"


def test_parse_progress_lines() -> None:
    lines = (DATA / "run_tpcb.stderr").read_text().splitlines()
    points = [p for p in map(parse_progress, lines) if p]
    assert [p.t for p in points] == [1.0, 2.0, 3.0]
    assert points[2].tps == pytest.approx(2819.7) and points[2].latency_ms == pytest.approx(1.414)
    lag = parse_progress(
        "progress: 2.0 s, 209.0 tps, lat 1.910 ms stddev 1.008, 0 failed, lag 0.288 ms"
    )
    assert lag is not None and lag.lag_ms == pytest.approx(0.288)
    zero = parse_progress("progress: 7.0 s, 0.0 tps, lat NaN ms stddev NaN, 0 failed")
    assert zero is not None and zero.tps == 0.0 and zero.latency_ms is None
    assert parse_progress("starting vacuum...end.") is None


@pytest.mark.parametrize(
    ("user_rate", "expected_tps", "most", "rate"),
    [
        (1.0, 40_000.0, 200, 0.005),  # 40,000 TPS at most 200 lines a second
        (1.0, 150.0, 200, 1.0),  # under the cap: every transaction logged
        (0.5, 300.0, 200, 0.5),  # the user's own sampling already under it
        (0.5, 4_000.0, 200, 0.05),  # the user's sampling above it: capped further
        (1.0, 40_000.0, 0, 1.0),  # 0: never capped
        (1.0, None, 200, 1.0),  # no rate known (no warm-up): not capped
        (1.0, 1e9, 200, 0.0001),  # pgbench's finest rate is the floor
    ],
)
def test_the_transaction_log_is_sampled_down_to_the_cap(
    user_rate: float, expected_tps: float | None, most: int, rate: float
) -> None:
    from pgfsbench.engine.measure import capped_log
    from pgfsbench.spec import expand, load_spec

    examples = Path(__file__).resolve().parents[2] / "examples"
    cell = next(
        c for c in expand(load_spec(examples / "quick.toml").spec) if c.workload.tool == "pgbench"
    )
    cell = dataclasses.replace(
        cell, workload=dataclasses.replace(cell.workload, sampling_rate=user_rate)
    )
    capped = capped_log(cell, expected_tps, most)
    assert capped.workload.sampling_rate == pytest.approx(rate)
    assert dataclasses.replace(capped, workload=cell.workload) == cell  # nothing else


@pytest.mark.parametrize(
    ("expected_tps", "cpus", "most", "left_out"),
    [
        (60_000.0, 2, 10_000, True),  # the overhead bench's select-only: 30,000 a CPU
        (20_000.0, 2, 10_000, False),  # exactly at the line: kept
        (20_001.0, 2, 10_000, True),
        (60_000.0, 8, 10_000, False),  # the same rate on more CPUs: kept
        (5_000.0, 2, 1, True),
        (None, 2, 10_000, False),  # no rate known (no warm-up, first run): kept
        (0.0, 2, 10_000, False),  # nothing went through the warm-up: kept
    ],
)
def test_txlog_auto_leaves_the_log_out_above_a_rate_per_cpu(
    expected_tps: float | None, cpus: int, most: int, left_out: bool
) -> None:
    from pgfsbench.engine.measure import log_left_out

    why = log_left_out(expected_tps, cpus, most)
    assert (why is not None) is left_out
    if why:
        assert f"on {cpus} CPU(s)" in why and f"txlog_max_tps_per_cpu = {most:,}" in why
        assert "txlog = true keeps it" in why


def test_txlog_auto_drops_only_a_log_there_is() -> None:
    from pgfsbench.engine.measure import auto_txlog
    from pgfsbench.workloads.pgbench import Pgbench
    from pgfsbench.workloads.sysbench import Sysbench

    logged = Pgbench("client", False, True)
    without, why = auto_txlog(logged, 60_000.0, 2, 10_000)
    assert without == Pgbench("client", False, False) and why and "30,000 a CPU" in why
    assert auto_txlog(logged, 15_000.0, 2, 10_000) == (logged, None)
    # sysbench's percentiles come from its own histogram: nothing to leave out, nothing said
    sysbench = Sysbench()
    assert auto_txlog(sysbench, 1e9, 2, 10_000) == (sysbench, None)
    plain = Pgbench("client", False, False)  # txlog = false already
    assert auto_txlog(plain, 1e9, 2, 10_000) == (plain, None)


def test_a_report_for_several_seconds_fills_each_of_them() -> None:
    """Stopped for 4 s, pgbench prints one report at 9.0 s averaged over 5-9 s: the series
    keeps its seconds (the 4 missing ones take that average), later ones stay in place."""
    lines = [
        "progress: 4.0 s, 2000.0 tps, lat 2.000 ms stddev 0.500, 0 failed",
        "progress: 5.0 s, 2100.0 tps, lat 1.900 ms stddev 0.500, 0 failed",
        "progress: 9.0 s, 0.0 tps, lat NaN ms stddev NaN, 0 failed",
        "progress: 10.0 s, 1900.0 tps, lat 2.100 ms stddev 0.600, 0 failed",
    ]
    points = [p for p in (parse_progress(ln) for ln in lines) if p is not None]
    series = progress_series(points)
    t0, tps = series["tps"]
    assert t0 == 4.0 and tps == [2000.0, 2100.0, 0.0, 0.0, 0.0, 0.0, 1900.0]
    assert series["progress_gap"] == (4.0, [0, 0, 1, 1, 1, 1, 0])


def test_a_failed_connection_says_why_the_server_refused_it() -> None:
    """pgbench's last line names the client, the line before it the server's reason."""
    stderr = (
        'pgbench: error: connection to server on socket "/var/tmp/w/sock/.s.PGSQL.5432" '
        "failed: FATAL:  sorry, too many clients already\n"
        "pgbench: error: could not create connection for client 13\n"
    )
    summary = parse_run("", stderr)
    said = failure_text(summary.errors, "pgbench exited 1")
    assert said == (
        "pgbench: error: could not create connection for client 13 "
        "(FATAL: sorry, too many clients already)"
    )
    # a last line with the server's words keeps them; no error at all: the exit status
    assert failure_text(("x", "ERROR:  deadlock detected"), "-") == "ERROR:  deadlock detected"
    assert failure_text((), "pgbench exited 2") == "pgbench exited 2"
    assert failure_text(("pgbench: error: client 3 aborted",), "-").endswith("aborted")
