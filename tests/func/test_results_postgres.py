"""The results store on PostgreSQL (for teams), against a real throwaway server."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.func.conftest import pgfsbench, runs_of, show, write_spec


def test_runs_are_stored_in_a_postgresql_results_database(base: Path, results_server: str) -> None:
    spec = write_spec(
        base / "s.toml",
        """
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
""",
    )
    (base / "client").mkdir()
    pgfsbench(
        "run",
        str(spec),
        "--results",
        results_server,
        "--workdir",
        str(base / "work"),
        cwd=base / "client",
    )
    (run,) = runs_of(results_server)
    assert run["status"] == "ok" and run["tps"] > 0
    detail = show(results_server, run["run_id"])
    assert detail["series"]["tps"]["values"] and detail["latency_ms"]["p99"] > 0
    # artifacts go beside the client when the store is a server
    assert Path(detail["artifacts"]["server_log"]["path"]).is_relative_to(base / "client")
    out = subprocess.run(
        [
            "psql",
            "-h",
            results_server.split("host=")[1],
            "-U",
            "postgres",
            "-At",
            "-c",
            "SELECT count(*) FROM run",
            "results",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "1"
