"""Capture on a Debian cluster as shipped: made by pg_createcluster (postgresql-common's
own configuration: local connections by peer authentication only, logging_collector off,
the server's stderr in the log file pg_ctlcluster opens), under directories the test made
(PG_CLUSTER_CONF_ROOT keeps its configuration there too). Root is refused by peer: capture
connects as the server's OS user, copies the data as that user, and reads the statements
from the stderr log with a prefix of its own set by reload, all put back after; no restart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import find_binaries
from pgfsbench.workloads.replay_file import log_rows, read_capture_log
from tests.func.conftest import ROOT, pgfsbench
from tests.func.test_doctor import PG_USER, sh

PORT = 5993
CLUSTER = "pgfsbtest"
pytestmark = pytest.mark.skipif(
    shutil.which("pg_createcluster") is None, reason="postgresql-common is not installed"
)


@pytest.fixture
def debian(base: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A cluster made and started by postgresql-common, as a Debian host has it."""
    major = str(find_binaries().major)
    env = {**os.environ, "PG_CLUSTER_CONF_ROOT": str(base / "etc")}
    for d in ("etc", "sock", "log"):
        (base / d).mkdir()
        shutil.chown(base / d, PG_USER, PG_USER)
    subprocess.run(
        [
            "pg_createcluster",
            "-d",
            str(base / "data"),
            "-l",
            str(base / "log" / "server.log"),
            "-s",
            str(base / "sock"),
            "-p",
            str(PORT),
            major,
            CLUSTER,
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    ctl = ["pg_ctlcluster", major, CLUSTER]
    subprocess.run([*ctl, "start"], env=env, check=True, capture_output=True, timeout=120)
    try:
        yield base / "sock", env
    finally:
        subprocess.run([*ctl, "stop", "-m", "fast"], env=env, capture_output=True, timeout=120)


def psql(sock: Path, sql: str) -> str:
    bindir = find_binaries().bindir
    return sh(
        str(bindir / "psql"), "-h", str(sock), "-p", str(PORT), "-Atqc", sql, user=PG_USER
    ).strip()


def test_capture_on_a_stock_debian_cluster(base: Path, debian: tuple[Path, dict[str, str]]) -> None:
    sock, _ = debian
    bindir = find_binaries().bindir
    # as shipped: no collector, peer authentication; root is refused
    assert psql(sock, "SHOW logging_collector") == "off"
    prefix_before = psql(sock, "SHOW log_line_prefix")
    hba = psql(sock, "SELECT string_agg(type || ' ' || auth_method, ',') FROM pg_hba_file_rules")
    assert "local peer" in hba
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
    out = base / "capture"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "capture",
            "--dsn",
            f"host={sock} port={PORT} user={PG_USER} dbname=postgres",
            "--seconds",
            "4",
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
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "capturing" in first, first + proc.stdout.read()
    sh(
        str(bindir / "pgbench"),
        "-h",
        str(sock),
        "-p",
        str(PORT),
        "-c",
        "2",
        "-T",
        "2",
        "-M",
        "prepared",
        "-b",
        "simple-update",
        "postgres",
        user=PG_USER,
    )
    psql(sock, "SELECT 'multi\nline'::text AS x")
    said = proc.stdout.read()
    assert proc.wait(timeout=120) == 0, said
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["log"]["source"] == "stderr" and manifest["connected_as"] == PG_USER
    assert manifest["base"]["as_server_user"] == PG_USER
    assert manifest["log_stderr"]["rotated_during_capture"] is False
    # every line the capture's: its statements, sessions and parameters
    prepared = read_capture_log(
        log_rows(out / "statements.jsonl", "jsonlog"), manifest["own_sessions"]
    )
    assert prepared.captured == manifest["log"]["statements"] > 100
    assert f"captured {prepared.captured} statements" in said
    assert len(prepared.sessions) >= 3  # pgbench's 2 clients and psql
    texts = {st.sql for s in prepared.sessions for tx in s.transactions for st in tx.statements}
    assert "SELECT 'multi\nline'::text AS x" in texts
    assert any(
        st.params for s in prepared.sessions for tx in s.transactions for st in tx.statements
    ), "parameters of the prepared statements"
    # the settings put back, no restart, nothing left in postgresql.auto.conf
    assert psql(sock, "SHOW log_line_prefix") == prefix_before
    assert psql(sock, "SHOW log_statement") == "none"
    auto = (base / "data" / "postgresql.auto.conf").read_text().splitlines()
    assert [ln for ln in auto if ln.strip() and not ln.startswith("#")] == []
    assert (out / "base" / "PG_VERSION").is_file() and not (out / "stderr.raw").exists()
    assert sorted(os.listdir(out)) == ["base", "manifest.json", "statements.jsonl"]
    # advise, as the README has it, on the same stock cluster (peer: as its OS user)
    advised = pgfsbench(
        "advise",
        "--dsn",
        f"host={sock} port={PORT} user={PG_USER}",
        "--try",
        "wal_compression=on",
        "--workdir",
        str(base / "work"),
        "-o",
        str(base / "mine.toml"),
    )
    assert "settings-today" in (base / "mine.toml").read_text(), advised.stdout
    assert "[postgres.wal_compression-on.settings]" in (base / "mine.toml").read_text()
