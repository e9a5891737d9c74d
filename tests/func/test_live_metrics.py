"""A campaign watched by a real Prometheus (Debian's package, started here on a private port
of 127.0.0.1 with its own configuration and data directory, stopped by its pid): PromQL
over its HTTP API returns the run's TPS while the run goes on; after the campaign nothing
is served."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.func.conftest import start, wait_for, write_spec

PROMETHEUS = shutil.which("prometheus")

SPEC = """
[defaults]
scale = 2
clients = 2
threads = 1
duration = "20s"
warmup = "1s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "512M"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus(base: Path) -> Iterator[tuple[str, int]]:
    """A Prometheus scraping 127.0.0.1:<target> every second: (its API URL, target port)."""
    assert PROMETHEUS is not None
    target, port = free_port(), free_port()
    config = base / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pgfsbench\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{target}']\n"
    )
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={base / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(
                    f"prometheus exited: {proc.stderr.read() if proc.stderr else ''}"
                )
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    return bool(r.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        wait_for(ready, 60, "Prometheus ready")
        yield url, target
    finally:
        proc.terminate()  # ours, by its pid
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def query(url: str, promql: str) -> list[dict[str, Any]]:
    q = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


@pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus is not installed (bootstrap --with-tests)"
)
def test_prometheus_sees_the_runs_tps_while_it_runs(
    base: Path, prometheus: tuple[str, int]
) -> None:
    url, target = prometheus
    spec = write_spec(base / "spec.toml", SPEC)
    results = base / "r.sqlite"
    proc = start(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--metrics-port",
        str(target),
        "--host-name",
        "node-a",
    )
    try:

        def tps_while_running() -> list[dict[str, Any]]:
            if proc.poll() is not None:
                out, err = proc.communicate(timeout=30)
                raise AssertionError(f"the run ended before Prometheus saw TPS:\n{out}\n{err}")
            found = query(url, 'pgfsbench_throughput{host="node-a"}')
            return [r for r in found if float(r["value"][1]) > 0]

        found = wait_for(tps_while_running, 120, "pgfsbench_throughput > 0 in Prometheus")
        labels = found[0]["metric"]
        assert labels["cell"] == "ram/default/default/tpcb-like" and labels["unit"] == "tps"
        assert labels["campaign"] == "1" and labels["job"] == "pgfsbench"
        assert proc.poll() is None  # seen while the campaign runs
        info = query(url, 'pgfsbench_run_info{phase="measuring"}')
        assert info and info[0]["metric"]["run_id"] == "1"
        # the samplers' last second: CPU and the backends' wait events
        cpu = wait_for(
            lambda: query(url, 'pgfsbench_sample{series="cpu_user_pct"}'), 30, "cpu sample"
        )
        assert float(cpu[0]["value"][1]) >= 0
        assert query(url, "pgfsbench_runs_planned")[0]["value"][1] == "1"
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{out}\n{err}"
        assert f"http://127.0.0.1:{target}/metrics" in out
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=180)
    # the campaign is over: nothing is served on its port
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", target), timeout=2).close()
