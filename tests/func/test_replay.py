"""Your own workload: a server of the test's own, its pgbench workloads captured
(`pgfsbench capture`), replayed by pgfsbench-replay (the tables' end state, every
statement) and as a cell's workload (`tool = "replay"`: fidelity, WAL), a planted literal
in no artifact outside the capture, and the server's settings put back after the capture
and after a SIGKILL during one plus `pgfsbench cleanup`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.postgres.binaries import find_binaries
from pgfsbench.workloads.replay import replayer_path
from tests.func.conftest import ROOT, pgfsbench, runs_of
from tests.func.test_doctor import PG_USER, sh

pytestmark = pytest.mark.skipif(replayer_path() is None, reason="pgfsbench-replay not built (Go)")

CANARY = "canary-literal-5f0e9c"
PLANTED = "planted-before-the-copy-9d41"
PORT = 5997
SETTINGS = ("log_statement", "log_destination", "log_duration", "lc_messages", "log_connections")


def psql(sock: Path, sql: str, db: str = "postgres") -> str:
    bindir = find_binaries().bindir
    return sh(
        str(bindir / "psql"),
        "-h",
        str(sock),
        "-p",
        str(PORT),
        "-d",
        db,
        "-Atqc",
        sql,
        user=PG_USER,
    ).strip()


@pytest.fixture
def server(base: Path) -> Iterator[Path]:
    """A PostgreSQL 15 server of the test's own on a private socket, with the logging
    collector on (as capture needs), loaded by pgbench -i."""
    bindir = find_binaries().bindir
    pgdata, sock = base / "src", base / "sock"
    for d in (pgdata, sock):
        d.mkdir()
        shutil.chown(d, PG_USER, PG_USER)
    sh(str(bindir / "initdb"), "-D", str(pgdata), "--auth=trust", user=PG_USER)
    with (pgdata / "postgresql.conf").open("a") as f:
        f.write(
            f"listen_addresses = ''\nunix_socket_directories = '{sock}'\nport = {PORT}\n"
            "logging_collector = on\nlog_directory = 'log'\n"
            "shared_preload_libraries = 'pg_stat_statements'\n"
        )
    with (pgdata / "pg_hba.conf").open("a") as f:
        f.write("local replication all trust\n")
    sh(
        str(bindir / "pg_ctl"),
        "-D",
        str(pgdata),
        "-w",
        "-l",
        str(pgdata / "server.log"),
        "start",
        user=PG_USER,
    )
    try:
        psql(sock, "CREATE EXTENSION pg_stat_statements")
        sh(
            str(bindir / "pgbench"),
            "-h",
            str(sock),
            "-p",
            str(PORT),
            "-i",
            "-s",
            "1",
            "-q",
            "postgres",
            user=PG_USER,
        )
        yield sock
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-m", "immediate", "-w", "stop", user=PG_USER)


def start_capture(
    base: Path, sock: Path, seconds: int, out: Path, *extra: str
) -> subprocess.Popen[str]:
    """`pgfsbench capture` of the test's server, its output a pipe (its first line says
    when the capture began)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "capture",
            *extra,
            "--dsn",
            f"host={sock} port={PORT} user={PG_USER} dbname=postgres",
            "--seconds",
            str(seconds),
            "-o",
            str(out),
            "--workdir",
            str(base / "work"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def settings(sock: Path) -> dict[str, str]:
    names = ",".join(f"'{n}'" for n in SETTINGS)
    rows = psql(sock, f"SELECT name || '=' || setting FROM pg_settings WHERE name IN ({names})")
    return dict(line.split("=", 1) for line in rows.splitlines())


def workload(sock: Path) -> None:
    """pgbench simple-update with prepared statements, then tpcb-like (hot branch rows,
    simple protocol), and one statement with the planted literal."""
    bindir = find_binaries().bindir
    common = ["-h", str(sock), "-p", str(PORT), "-c", "4", "-j", "2", "-T", "2", "postgres"]
    sh(str(bindir / "pgbench"), "-M", "prepared", "-b", "simple-update", *common, user=PG_USER)
    psql(sock, f"UPDATE pgbench_branches SET filler = '{CANARY}' WHERE bid = 1")
    # an error whose message quotes the literal: the replay's server must not log it
    with contextlib.suppress(subprocess.CalledProcessError):
        psql(sock, f"SELECT '{CANARY}'::int")
    sh(str(bindir / "pgbench"), "-b", "tpcb-like", *common, user=PG_USER)


def end_state(sock: Path) -> str:
    return psql(
        sock,
        "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || "
        "(SELECT sum(bbalance) FROM pgbench_branches) || ' ' || "
        "(SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || "
        "(SELECT count(*) FROM pgbench_history)",
    )


def test_capture_then_replay_as_captured_and_as_a_cell(base: Path, server: Path) -> None:
    """... and pgbench_history in a tablespace outside the data directory: the capture
    copies it (tablespaces/OID, never where the server keeps it), the replay's data has it
    as a directory in pg_tblspc (on the cell's filesystem, no link followed), and the
    report says so."""
    sock = server
    space = base / "space"
    space.mkdir()
    shutil.chown(space, PG_USER, PG_USER)
    psql(sock, f"CREATE TABLESPACE elsewhere LOCATION '{space}'")
    psql(sock, "ALTER TABLE pgbench_history SET TABLESPACE elsewhere")
    oid = psql(sock, "SELECT oid FROM pg_tablespace WHERE spcname = 'elsewhere'")
    before = settings(sock)
    # a literal in the server's own log before the capture begins (its log directory is
    # in its data directory): it must end nowhere, the capture's copy included
    with contextlib.suppress(AssertionError, subprocess.CalledProcessError):
        psql(sock, f"SELECT '{PLANTED}'::int")
    assert any(PLANTED.encode() in p.read_bytes() for p in (base / "src" / "log").iterdir())
    capture_dir = base / "capture"
    proc = start_capture(base, sock, 8, capture_dir)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # "capturing for 8 s": the data copy is made
    assert "capturing" in first, first + proc.stdout.read()
    workload(sock)
    out = proc.stdout.read()
    assert proc.wait(timeout=120) == 0, out
    captured_end = end_state(sock)
    assert settings(sock) == before  # put back
    auto = (base / "src" / "postgresql.auto.conf").read_text().splitlines()
    assert [ln for ln in auto if ln.strip() and not ln.startswith("#")] == []
    assert sorted(os.listdir(capture_dir)) == [
        "base",
        "manifest.json",
        "statements.jsonl",
        "tablespaces",
    ]
    assert (capture_dir.stat().st_mode & 0o777) == 0o700
    manifest = json.loads((capture_dir / "manifest.json").read_text())
    assert manifest["base"]["tablespaces"] == [
        {"oid": int(oid), "name": "elsewhere", "location": str(space)}
    ]
    assert any((capture_dir / "tablespaces" / oid).rglob("*"))
    # pgfsbench unpacked the copy itself: no link, and no file PostgreSQL did not make (the
    # server's log directory, with the workload's literals, is left out and named)
    assert not (capture_dir / "base" / "pg_tblspc" / oid).exists()
    assert not (capture_dir / "base" / "log").exists()
    assert any(k.startswith("log/") for k in manifest["base"]["left_out"]), manifest["base"]
    assert manifest["base"]["unprivileged_uid"] >= 61184

    # a cell replays it as fast as it can: every statement, the capture's WAL
    spec = base / "replay.toml"
    spec.write_text(
        f'[defaults]\nrepetitions = 1\nwarmup = "0s"\n[storage.ext4]\nfs = "ext4"\n'
        f'device = "loop:1G"\n[workload.mine]\ntool = "replay"\ncapture = "{capture_dir}"\n'
        'mode = "fast"\ncommit_order = true\n'
    )
    results = base / "r.sqlite"
    pgfsbench(
        "run", str(spec), "--results", str(results), "--workdir", str(base / "work"), timeout=600
    )
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    shown = json.loads(
        pgfsbench("results", "show", str(run["run_id"]), "--results", str(results), "--json").stdout
    )
    fidelity = shown["metrics"]["tool"]["fidelity"]
    assert shown["metrics"]["tool"]["replay"]["commit_order"] is True  # in the capture's order
    rec = fidelity["reconciliation"]
    # every captured statement once: replayed, or already in the copy, or not replayable
    assert rec["balanced"] is True and rec["not_sent"] == 0, rec
    assert (
        rec["captured"]
        == json.loads((capture_dir / "manifest.json").read_text())["log"]["statements"]
    )
    assert rec["replayed"] == fidelity["statements_replayed"] > 1000, fidelity
    assert (
        rec["replayed"] + rec["already_in_the_copy"] + sum(rec["not_replayable"].values())
        == rec["captured"]
    )
    replayed = shown["metrics"]["tool"]["replay"]
    assert replayed["sessions"] >= 8 and replayed["data_bytes"] > 10 << 20, replayed
    assert replayed["wall_s"] > 0 and replayed["captured_s"] >= 8
    # the capture's one error (the literal cast to int) and nothing more
    assert fidelity["errors_replayed"] == fidelity["errors_captured"] == 1, fidelity
    assert not fidelity["differs"], fidelity
    assert abs(fidelity["wal_pct"]) <= 5, fidelity
    # the servers' own counters side by side: the same commits and rows updated (give or
    # take autovacuum's catalog rows and the counters a backend had not flushed)
    work = {w["what"]: w for w in fidelity["work"]}
    for what in ("commits", "rows updated"):
        assert abs(work[what]["pct"]) <= 10, fidelity["work"]
    report = base / "report.html"
    pgfsbench("report", "--results", str(results), "-o", str(report))
    html = report.read_text()
    # its statements normalised: the planted literal's statement with $n in its place
    assert "Replay fidelity" in html and "SET filler = $1 WHERE bid = $2" in html
    assert fidelity["tablespaces"] == ["elsewhere"]
    assert "The capture's tablespaces (elsewhere) were restored inside" in html
    # the data template the cells are copied from, kept in the capture's own directory
    # (never in the work directory): the tablespace a directory in it
    assert not list((base / "work" / "initdb-templates").glob("replay-*"))
    (template,) = (capture_dir / "templates").glob("*/pgdata/pg_tblspc/" + oid)
    assert template.is_dir() and not template.is_symlink()
    assert any(p.name.startswith("PG_") for p in template.iterdir())

    # the replay file, then straight into a copy of the data template (the capture's copy
    # restored and made safe: its superusers' objects the replay role's): the end state
    (replay_file,) = capture_dir.glob("replay-*.jsonl")
    copy = base / "copy"
    shutil.copytree(template.parent.parent, copy)
    sh("chown", "-R", f"{PG_USER}:{PG_USER}", str(copy))
    copy.chmod(0o700)
    with (copy / "postgresql.conf").open("a") as f:
        f.write(f"port = 5996\nunix_socket_directories = '{sock}'\nlisten_addresses = ''\n")
    bindir = find_binaries().bindir
    sh(
        str(bindir / "pg_ctl"),
        "-D",
        str(copy),
        "-w",
        "-l",
        str(copy / "server.log"),
        "start",
        user=PG_USER,
    )
    logs = base / "logs"
    logs.mkdir()
    shutil.chown(logs, PG_USER, PG_USER)
    try:
        # two processes, the sessions shared: the same end state
        stats = _replay(
            replay_file, sock, "-jobs", "2", "-log", str(logs / "txlog"), port=5996, timeout=300
        )
        assert stats["unsent_statements"] == 0 and stats["failed_transactions"] == 1, stats
        assert stats["jobs"] == 2
        # one transaction log a process, as pgbench's threads: every transaction in one of them
        assert sorted(p.name for p in logs.iterdir()) == ["txlog", "txlog.1"]
        logged = sum(len(p.read_text().splitlines()) for p in logs.iterdir())
        assert logged == stats["transactions"], (logged, stats["transactions"])
        state = sh(
            str(bindir / "psql"),
            "-h",
            str(sock),
            "-p",
            "5996",
            "-d",
            "postgres",
            "-Atqc",
            "SELECT (SELECT sum(abalance) FROM pgbench_accounts) || ' ' || "
            "(SELECT sum(bbalance) FROM pgbench_branches) || ' ' || "
            "(SELECT sum(tbalance) FROM pgbench_tellers) || ' ' || "
            "(SELECT count(*) FROM pgbench_history)",
            user=PG_USER,
        ).strip()
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(copy), "-m", "fast", "-w", "stop", user=PG_USER)
    # the copy's state plus the replayed transactions that were not already in it
    assert state == captured_end

    # the literal stays in the capture: not in the store, the report or a run's files
    assert CANARY.encode() in (capture_dir / "statements.jsonl").read_bytes()
    outside = [results, report, *(p for p in (base / "work").rglob("*") if p.is_file())]
    leaked = [str(p) for p in outside if p.exists() and CANARY.encode() in p.read_bytes()]
    assert leaked == []
    # the literal of the server's own log before the capture: in no copy, template or run
    copies = [p for p in capture_dir.rglob("*") if p.is_file()]
    planted = [
        str(p) for p in outside + copies if p.exists() and PLANTED.encode() in p.read_bytes()
    ]
    assert planted == []


def test_a_capture_killed_is_put_back_by_cleanup(base: Path, server: Path) -> None:
    sock = server
    before = settings(sock)
    proc = start_capture(base, sock, 60, base / "capture")
    try:
        deadline = time.monotonic() + 60
        while settings(sock).get("log_statement") != "all":
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert settings(sock)["log_statement"] == "all"  # left changed by the kill
    done = pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert "capture settings" in done.stdout
    assert settings(sock) == before
    shutil.rmtree(base / "capture", ignore_errors=True)


def test_the_lighter_path_from_pg_stat_statements(base: Path, server: Path) -> None:
    """No statement logged, no setting changed: pgbench scripts from pg_stat_statements
    and the tables' statistics, run on a copy of the data, said to be an approximation."""
    sock = server
    before = settings(sock)
    capture_dir = base / "stats-capture"
    proc = start_capture(base, sock, 4, capture_dir, "--from-stats")
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "pg_stat_statements" in first, first + proc.stdout.read()
    bindir = find_binaries().bindir
    sh(
        str(bindir / "pgbench"),
        "-h",
        str(sock),
        "-p",
        str(PORT),
        "-c",
        "2",
        "-T",
        "3",
        "-M",
        "prepared",
        "-b",
        "simple-update",
        "postgres",
        user=PG_USER,
    )
    out = proc.stdout.read()
    assert proc.wait(timeout=120) == 0, out
    assert settings(sock) == before
    stats = json.loads((capture_dir / "stats.json").read_text())
    queries = [s["query"] for s in stats["scripts"]]
    assert any(q.startswith("UPDATE pgbench_accounts SET abalance") for q in queries), stats
    spec = base / "stats.toml"
    spec.write_text(
        f'[defaults]\nrepetitions = 1\nwarmup = "0s"\nduration = "3s"\n[storage.ext4]\n'
        f'fs = "ext4"\ndevice = "loop:1G"\n[workload.mine]\ntool = "replay"\n'
        f'capture = "{capture_dir}"\nmode = "fast"\n'
    )
    results = base / "s.sqlite"
    pgfsbench(
        "run", str(spec), "--results", str(results), "--workdir", str(base / "work"), timeout=600
    )
    (run,) = runs_of(results)
    assert run["status"] == "ok" and run["throughput"] > 0, run
    shown = json.loads(
        pgfsbench("results", "show", str(run["run_id"]), "--results", str(results), "--json").stdout
    )
    assert "pg_stat_statements" in shown["metrics"]["tool"]["approximation"]


def test_a_fleet_captures_on_each_host_in_csvlog_and_keeps_it_there(
    base: Path, server: Path
) -> None:
    """`fleet capture` through Ansible (a local-connection host), in csvlog (the format of
    PostgreSQL 13 and 14, here forced on 15): the capture made on the host, its counts back
    at the controller, no literal in the controller's files, the server's settings put
    back; the csvlog read as jsonlog is: the same sessions, transactions and parameters, a
    literal holding the CSV's own delimiters (comma, quote, newline) whole."""
    pytest.importorskip("ansible_runner")
    from pgfsbench.workloads.replay_file import read_capture

    sock = server
    before = settings(sock)
    inventory = base / "hosts.ini"
    dsn = f"host={sock} port={PORT} user={PG_USER} dbname=postgres"
    inventory.write_text(
        "[db]\nnode-a ansible_connection=local ansible_python_interpreter=/usr/bin/python3 "
        f"pgfsbench_capture_dsn='{dsn}'\n"
    )
    fleet = base / "fleet"
    capture_dir = base / "fleet-capture"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "fleet",
            "capture",
            "-i",
            str(inventory),
            "--seconds",
            "4",
            "-o",
            str(capture_dir),
            "--fleet-dir",
            str(fleet),
            "--pgfsbench-cmd",
            f"{sys.executable} -m pgfsbench",
            "--log-format",
            "csvlog",
            "--remote-workdir",
            str(base / "remote-work"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    bindir = find_binaries().bindir
    tricky = "a, \"quoted\" ''x''\nsecond line"
    try:
        deadline = time.monotonic() + 120
        # the capture's start is taken once the settings are on, before its base backup
        # (a statement logged between the two is before the capture: it was lost here once)
        while not (capture_dir / "base").exists():
            assert time.monotonic() < deadline and proc.poll() is None, (
                proc.stdout.read() if proc.stdout else ""
            )
            time.sleep(0.2)
        assert settings(sock).get("log_statement") == "all"
        psql(sock, f"UPDATE pgbench_branches SET filler = '{CANARY}' WHERE bid = 1")
        psql(sock, f"SELECT '{tricky}'::text")
        sh(
            str(bindir / "pgbench"),
            *("-h", str(sock), "-p", str(PORT), "-M", "prepared", "-b", "simple-update"),
            *("-c", "2", "-j", "1", "-t", "30", "-n", "postgres"),
            user=PG_USER,
        )
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "node-a: done" in out, out
    assert (base / "remote-work" / "journal").is_dir()  # the journal where it was told
    assert settings(sock) == before
    assert sorted(os.listdir(capture_dir)) == ["base", "manifest.json", "statements.csv"]
    assert json.loads((capture_dir / "manifest.json").read_text())["format"] == "csvlog"
    assert CANARY.encode() in (capture_dir / "statements.csv").read_bytes()
    (kept,) = fleet.glob("capture-*.json")
    summary = json.loads(kept.read_text())["node-a"]["summary"]
    assert summary["statements"] >= 1 and summary["directory"] == str(capture_dir), summary
    leaked = [str(p) for p in fleet.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert leaked == [], leaked
    prep = read_capture(capture_dir)
    texts = [st.sql for s in prep.sessions for tx in s.transactions for st in tx.statements]
    assert f"SELECT '{tricky}'::text" in texts
    workers = [
        s
        for s in prep.sessions
        if any(st.kind == "prepared" for tx in s.transactions for st in tx.statements)
    ]
    # pgbench's 2 clients: 30 transactions each, BEGIN..END of 5 prepared statements,
    # every UPDATE with its 2 parameters
    assert len(workers) == 2
    for s in workers:
        assert len(s.transactions) == 30
        for tx in s.transactions:
            assert [st.kind for st in tx.statements] == ["prepared"] * 5
            assert len(tx.statements[1].params) == 2
            assert all(p is not None for p in tx.statements[1].params)
    assert not prep.skipped, prep.skipped


def _replay_file(path: Path, sessions: list[list[list[dict[str, object]]]]) -> None:
    """A replay file by hand: sessions of transactions of statements (t in µs)."""
    queries = 0
    lines = []
    for i, txs in enumerate(sessions):
        for tx in txs:
            for st in tx:
                queries = max(queries, int(str(st["q"])) + 1)
        lines.append(
            json.dumps(
                {
                    "id": f"s{i}",
                    "user": PG_USER,
                    "db": "postgres",
                    "connect": 0,
                    "tx": [{"stmts": tx} for tx in txs],
                }
            )
        )
    path.write_text(json.dumps({"version": 1, "queries": queries}) + "\n" + "\n".join(lines) + "\n")
    shutil.chown(path, PG_USER, PG_USER)


def _replay(
    path: Path, sock: Path, *args: str, port: int = PORT, timeout: float = 60
) -> dict[str, Any]:
    """pgfsbench-replay, fast, on the server at sock: its JSON summary."""
    with path.open("rb") as fh:
        done = subprocess.run(
            [
                "runuser",
                "-u",
                PG_USER,
                "--",
                str(replayer_path()),
                "-in",
                "-",
                "-host",
                str(sock),
                "-port",
                str(port),
                "-mode",
                "fast",
                "-progress",
                "0",
                *args,
            ],
            stdin=fh,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    stats: dict[str, Any] = json.loads(done.stdout)
    return stats


def test_a_fast_replay_names_lock_timeouts_copy_and_stops_at_its_limit(
    base: Path, server: Path
) -> None:
    """Fast mode's loop (one thread a process, every socket waited on at once): a row
    another session holds ends its statements by lock_timeout, counted by SQLSTATE; a
    COPY whose data was not captured fails and the session goes on; NULL and empty
    parameters; a prepared name redefined; and -max-seconds ends a replay whose
    statement waits, the rest counted unsent."""
    sock = server
    bindir = find_binaries().bindir
    update = "UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2"
    held = [
        [
            {"sql": "BEGIN", "kind": "simple", "t": 10 * i, "dur": 1, "q": 0},
            {
                "sql": update,
                "kind": "prepared",
                "name": "u",
                "params": ["1", "1"],
                "t": 10 * i + 1,
                "dur": 1,
                "q": 1,
            },
            {"sql": "END", "kind": "simple", "t": 10 * i + 2, "dur": 1, "q": 2},
        ]
        for i in range(3)
    ]
    other = [
        [
            {
                "sql": "SELECT $1::int IS NULL, $2::text = ''",
                "kind": "unnamed",
                "params": [None, ""],
                "t": 5 * i,
                "dur": 1,
                "q": 3,
            }
        ]
        for i in range(20)
    ] + [
        [{"sql": "COPY pgbench_history FROM STDIN", "kind": "simple", "t": 200, "dur": 1, "q": 4}],
        # the name "u" again, for another statement: closed, parsed anew
        [
            {
                "sql": "SELECT $1::int + 1",
                "kind": "prepared",
                "name": "u",
                "params": ["41"],
                "t": 210,
                "dur": 1,
                "q": 5,
            }
        ],
        [
            {
                "sql": "SELECT $1::int + 1",
                "kind": "prepared",
                "name": "u",
                "params": ["1"],
                "t": 220,
                "dur": 1,
                "q": 5,
            }
        ],
    ]
    replay = base / "held.jsonl"
    _replay_file(replay, [held, other])
    holder = subprocess.Popen(
        [
            "runuser",
            "-u",
            PG_USER,
            "--",
            str(bindir / "psql"),
            "-h",
            str(sock),
            "-p",
            str(PORT),
            "-d",
            "postgres",
            "-Atq",
            "-c",
            "BEGIN",
            "-c",
            "SELECT bid FROM pgbench_branches WHERE bid = 1 FOR UPDATE",
            "-c",
            "SELECT pg_sleep(60)",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # the row held once the holder sleeps (its FOR UPDATE done)
        deadline = time.monotonic() + 10
        while (
            psql(sock, "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)'")
            != "1"
        ):
            assert time.monotonic() < deadline, "the holder never slept"
            time.sleep(0.05)
        stats = _replay(replay, sock, "-lock-timeout", "200ms", "-jobs", "1")
        by_q = {q["q"]: q for q in stats["queries"]}
        assert by_q[1]["calls"] == 3 and by_q[1]["sqlstates"] == {"55P03": 3}, by_q
        assert by_q[3]["calls"] == 20 and by_q[3]["errors"] == 0 and by_q[3]["rows"] == 20, by_q
        assert by_q[4]["errors"] == 1 and list(by_q[4]["sqlstates"]) == ["57014"], by_q
        assert by_q[5]["calls"] == 2 and by_q[5]["errors"] == 0, by_q
        assert stats["unsent_statements"] == 0 and stats["failed_transactions"] == 4, stats
        assert stats["statements"] == 3 * 3 + 23, stats

        # a statement waiting for the row when the limit comes: ended, the rest unsent
        started = time.monotonic()
        stats = _replay(replay, sock, "-lock-timeout", "30s", "-max-seconds", "1")
        assert time.monotonic() - started < 10
        by_q = {q["q"]: q for q in stats["queries"]}
        assert by_q[1]["sqlstates"] == {"client": 1}, by_q
        assert stats["unsent_statements"] == 3 + 3, stats  # its END, and the next two blocks
    finally:
        holder.kill()
        holder.wait()
