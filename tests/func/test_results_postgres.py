"""The results store on PostgreSQL (for teams), against a real throwaway server."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import find_binaries
from tests.func.conftest import pgfsbench, runs_of, show, write_spec


@pytest.fixture
def results_server(base: Path) -> Iterator[str]:
    b = find_binaries()
    data, sock = base / "resultsdb", base / "rsock"
    for d in (sock, data):
        d.mkdir(mode=0o700)
        shutil.chown(d, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, b.tool("initdb"), "-D", str(data), "-A", "trust", "-U",
                    "postgres"], check=True, capture_output=True, cwd="/")
    subprocess.run([*as_pg, b.tool("pg_ctl"), "-D", str(data), "-w", "-l", str(data / "log"),
                    "-o", f"-c listen_addresses='' -c unix_socket_directories={sock}", "start"],
                   check=True, capture_output=True, cwd="/")
    try:
        subprocess.run([b.tool("psql"), "-h", str(sock), "-U", "postgres", "-c",
                        "CREATE DATABASE results"], check=True, capture_output=True)
        yield f"postgresql://postgres@/results?host={sock}"
    finally:
        subprocess.run([*as_pg, b.tool("pg_ctl"), "-D", str(data), "-m", "fast", "-w",
                        "stop"], check=False, capture_output=True, cwd="/")


def test_runs_are_stored_in_a_postgresql_results_database(base: Path,
                                                          results_server: str) -> None:
    spec = write_spec(base / "s.toml", """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "2s"
warmup = "0s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "512M"
""")
    (base / "client").mkdir()
    pgfsbench("run", str(spec), "--results", results_server, "--workdir", str(base / "work"),
              cwd=base / "client")
    (run,) = runs_of(results_server)
    assert run["status"] == "ok" and run["tps"] > 0
    detail = show(results_server, run["run_id"])
    assert detail["series"]["tps"]["values"] and detail["latency_ms"]["p99"] > 0
    # artifacts go beside the client when the store is a server
    assert Path(detail["artifacts"]["server_log"]["path"]).is_relative_to(base / "client")
    out = subprocess.run(["psql", "-h", results_server.split("host=")[1], "-U", "postgres",
                          "-At", "-c", "SELECT count(*) FROM run", "results"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "1"
