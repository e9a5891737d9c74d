"""The fleet through Ansible for real: two inventory entries on this machine (two hosts,
one at a time since one campaign per host), each host's results fetched and imported into
one store, idempotently."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path

import pytest

from tests.func.conftest import (
    measuring_pgbench_of,
    pgfsbench,
    runs_of,
    start,
    wait_for,
    write_spec,
)


def tiny_spec(duration: str, two: bool = False) -> str:
    """Tiny tmpfs cells: one (ram) or two (ram, ram2) configurations per host."""
    spec = (
        "[defaults]\nscale = 1\nclients = 2\nthreads = 1\n"
        f'duration = "{duration}"\nwarmup = "0s"\nrepetitions = 1\n'
        '[storage.ram]\nfs = "tmpfs"\nsize = "256M"\n'
    )
    return spec + ('[storage.ram2]\nfs = "tmpfs"\nsize = "256M"\n' if two else "")


def test_two_inventory_hosts_one_store(
    base: Path, sshd: dict[str, str], results_server: str
) -> None:
    """node-a through Ansible's local connection, node-b over real SSH (its own sshd on
    127.0.0.1); both hosts' runs in one PostgreSQL results database."""
    pytest.importorskip("ansible_runner")
    spec = write_spec(base / "s.toml", tiny_spec("2s", two=True))
    inventory = base / "hosts.ini"
    over_ssh = " ".join(f"{k}='{v}'" for k, v in sshd.items())
    inventory.write_text(
        "[bench]\n"
        "node-a ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        f"node-b {over_ssh}\n"
    )
    team = results_server
    fleet = base / "fleet"
    out = pgfsbench(
        "fleet",
        "run",
        str(spec),
        "-i",
        str(inventory),
        "--results",
        str(team),
        "--serial",
        "1",
        "--fleet-dir",
        str(fleet),
        "--pgfsbench-cmd",
        f"{sys.executable} -m pgfsbench",
        "--set",
        "duration=2s",
        "--remote-dir",
        str(base / "remote"),
        timeout=900,
    )
    assert "node-a: done" in out.stdout or "node-a" in out.stdout, out.stdout
    state = json.loads((fleet / "fleet.json").read_text())
    assert {h: v["status"] for h, v in state["hosts"].items()} == {
        "node-a": "done",
        "node-b": "done",
    }, state
    # each host's progress came back while it ran: runs done of total (and an ETA)
    assert all((v["runs_done"], v["runs_total"]) == (2, 2) for v in state["hosts"].values())
    overhead = {h: _controller_s(v) for h, v in state["hosts"].items()}
    assert all(s is not None and s >= 0 for s in overhead.values()), state
    print(f"controller seconds per host: {overhead}")  # for the note (pytest -s)
    assert "node-b: running 2/2 runs" in out.stdout or "node-b: done 2/2 runs" in out.stdout
    runs = runs_of(team)
    assert sorted(r["host"] for r in runs) == ["node-a", "node-a", "node-b", "node-b"]
    assert all(r["status"] == "ok" for r in runs), [(r["status"], r.get("error")) for r in runs]
    assert (fleet / "fetched" / "node-a.doctor.json").is_file()
    # node-b really came over SSH: its sshd logged the key's login
    assert "Accepted publickey for root" in (base / "ssh" / "sshd.log").read_text()
    # importing a fetched file again adds nothing twice
    again = pgfsbench(
        "results",
        "import",
        str(fleet / "fetched" / "node-a.sqlite"),
        "--results",
        str(team),
        "--host",
        "node-a",
    )
    assert "0 run(s) added, 2 already there" in again.stdout
    status = pgfsbench("fleet", "status", "--fleet-dir", str(fleet))
    assert "node-b" in status.stdout and "done" in status.stdout
    # one campaign per host in the team's store; --host keeps one host's runs
    one_host = json.loads(
        pgfsbench("compare", "ram", "ram2", "--results", team, "--host", "node-b", "--json").stdout
    )
    assert [(p["baseline"]["host"], p["other"]["host"]) for p in one_host] == [("node-b", "node-b")]
    node_a_run = next(r["run_id"] for r in runs if r["host"] == "node-a")
    wrong = pgfsbench(
        "results", "show", str(node_a_run), "--results", team, "--host", "node-b", check=False
    )
    assert wrong.returncode == 2 and "node-a" in wrong.stderr
    summary = pgfsbench(
        "results",
        "summary",
        "--results",
        str(team),
        "--campaign",
        "1",
        "--campaign",
        "2",
        "--host",
        "node-b",
    )
    assert "1/1" in summary.stdout and "2/2" not in summary.stdout  # one host's runs
    # compared within each host, then across the two hosts; the report's host view
    by_host = json.loads(
        pgfsbench("compare", "--by", "host", "--results", str(team), "--json").stdout
    )
    (combined,) = by_host["across_hosts"]
    assert [h["host"] for h in combined["per_host"]] == ["node-a", "node-b"]
    assert combined["ratio"] is not None
    assert re.fullmatch(
        r"((faster|slower) across hosts taken together|equivalent within ±2% across hosts"
        r"|undecided across hosts: too noisy to tell) \(n=2 hosts\)",
        combined["verdict"],
    )
    assert {s["cell"] for s in by_host["host_spread"]} == {
        "ram/default/default/tpcb-like",
        "ram2/default/default/tpcb-like",
    }
    report = base / "team.html"
    pgfsbench("report", "--results", team, "--campaign", "1", "--campaign", "2", "-o", str(report))
    html = report.read_text()
    assert '<table id="hosts"' in html and ">node-a</th>" in html and ">node-b</th>" in html
    # the hosts' own directories are left under the fleet's uuid, nothing mounted or running
    remote = base / "remote" / state["run_uuid"]
    assert (remote / "node-a" / "results.sqlite").is_file()
    assert (remote / "node-b" / "results.sqlite").is_file()
    shutil.rmtree(base / "remote")


def test_an_unreachable_host_is_reported_and_the_other_completes(base: Path) -> None:
    pytest.importorskip("ansible_runner")
    spec = write_spec(base / "s.toml", tiny_spec("2s"))
    inventory = base / "hosts.ini"
    inventory.write_text(
        "[bench]\n"
        "node-a ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
        "node-x ansible_host=127.0.0.1 ansible_port=1 ansible_user=nobody "
        "ansible_ssh_common_args='-o ConnectTimeout=5 -o BatchMode=yes'\n"
    )
    team = base / "team.sqlite"
    fleet = base / "fleet"
    proc = pgfsbench(
        "fleet",
        "run",
        str(spec),
        "-i",
        str(inventory),
        "--results",
        str(team),
        "--fleet-dir",
        str(fleet),
        "--pgfsbench-cmd",
        f"{sys.executable} -m pgfsbench",
        "--remote-dir",
        str(base / "remote"),
        check=False,
        timeout=900,
    )
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "node-x" in proc.stderr and "did not finish" in proc.stderr
    hosts = json.loads((fleet / "fleet.json").read_text())["hosts"]
    assert hosts["node-a"]["status"] == "done"
    assert hosts["node-x"]["status"] == "unreachable" and hosts["node-x"]["error"]
    assert [r["host"] for r in runs_of(team)] == ["node-a"]
    shutil.rmtree(base / "remote")


def _controller_s(host: dict[str, object]) -> int | None:
    from pgfsbench.fleet.driver import HostState

    return HostState(**host).controller_s()  # type: ignore[arg-type]


def _remote_run_pid(host: str) -> int | None:
    """The `pgfsbench run` the playbook started for ``host`` (found by its arguments)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"pgfsbench" in args
            and b"run" in args
            and host.encode() in args
            and b"--host-name" in args
        ):
            return int(entry.name)
    return None


def test_a_host_killed_half_way_is_completed_by_fleet_resume(base: Path) -> None:
    pytest.importorskip("ansible_runner")
    spec = write_spec(base / "s.toml", tiny_spec("6s", two=True))
    inventory = base / "hosts.ini"
    inventory.write_text(
        "[bench]\nnode-a ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n"
    )
    team = base / "team.sqlite"
    fleet = base / "fleet"
    args = ["--fleet-dir", str(fleet)]
    proc = start(
        "fleet",
        "run",
        str(spec),
        "-i",
        str(inventory),
        "--results",
        str(team),
        *args,
        "--pgfsbench-cmd",
        f"{sys.executable} -m pgfsbench",
        "--remote-dir",
        str(base / "remote"),
    )
    try:
        pid = wait_for(lambda: _remote_run_pid("node-a"), 120, "the host's run to start")
        wait_for(lambda: measuring_pgbench_of(pid), 120, "the host's first cell to measure")
        os.kill(pid, signal.SIGKILL)  # the host's benchmark dies half-way
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 6, out + err
    state = json.loads((fleet / "fleet.json").read_text())["hosts"]["node-a"]
    assert state["status"] == "failed" and state["campaign"] == 1, state
    resumed = pgfsbench("fleet", "resume", *args, timeout=900)
    assert "node-a" in resumed.stdout
    state = json.loads((fleet / "fleet.json").read_text())["hosts"]["node-a"]
    assert state["status"] == "done", state
    runs = runs_of(team)
    current = [r for r in runs if not r["superseded_by"]]
    assert sorted(r["cell"].split("/")[0] for r in current if r["status"] == "ok") == [
        "ram",
        "ram2",
    ], runs
    assert {r["campaign_id"] for r in runs} == {1}  # resumed into the same campaign
    shutil.rmtree(base / "remote")
