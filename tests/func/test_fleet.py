"""The fleet through Ansible for real: two inventory entries on this machine (two hosts,
one at a time since one campaign per host), each host's results fetched and imported into
one store, idempotently."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.func.conftest import pgfsbench, runs_of, write_spec


def test_two_inventory_hosts_one_store(base: Path) -> None:
    pytest.importorskip("ansible_runner")
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
size = "256M"
""")
    inventory = base / "hosts.ini"
    inventory.write_text(
        "[bench]\n"
        "node-a ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        "node-b ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n")
    team = base / "team.sqlite"
    fleet = base / "fleet"
    out = pgfsbench("fleet", "run", str(spec), "-i", str(inventory), "--results", str(team),
                    "--serial", "1", "--fleet-dir", str(fleet), "--pgfsbench-cmd",
                    f"{sys.executable} -m pgfsbench", "--set", "duration=2s", "--remote-dir",
                    str(base / "remote"), timeout=900)
    assert "node-a: done" in out.stdout or "node-a" in out.stdout, out.stdout
    state = json.loads((fleet / "fleet.json").read_text())
    assert {h: v["status"] for h, v in state["hosts"].items()} == {"node-a": "done",
                                                                   "node-b": "done"}, state
    runs = runs_of(team)
    assert sorted(r["host"] for r in runs) == ["node-a", "node-b"]
    assert all(r["status"] == "ok" for r in runs)
    assert (fleet / "fetched" / "node-a.doctor.json").is_file()
    # importing a fetched file again adds nothing twice
    again = pgfsbench("results", "import", str(fleet / "fetched" / "node-a.sqlite"),
                      "--results", str(team), "--host", "node-a")
    assert "0 run(s) added, 1 already there" in again.stdout
    status = pgfsbench("fleet", "status", "--fleet-dir", str(fleet))
    assert "node-b" in status.stdout and "done" in status.stdout
    # one campaign per host in the team's store; --host keeps one host's runs
    summary = pgfsbench("results", "summary", "--results", str(team), "--campaign", "1",
                        "--campaign", "2", "--host", "node-b")
    assert "1/1" in summary.stdout  # one run of one host, not two
    # the hosts' own directories are left under the fleet's uuid, nothing mounted or running
    remote = base / "remote" / state["run_uuid"]
    assert (remote / "node-a" / "results.sqlite").is_file()
    assert (remote / "node-b" / "results.sqlite").is_file()
    shutil.rmtree(base / "remote")
