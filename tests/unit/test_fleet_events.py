"""The fleet's view of Ansible's events: one state per host, imports as files arrive."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.fleet.driver import PLAYBOOK, FleetState, Follower


def test_events_make_host_states_and_trigger_the_import(tmp_path: Path) -> None:
    state = FleetState("u1", "s.toml", "hosts.ini", "team.sqlite", str(tmp_path), "pgfsbench")
    (tmp_path / "fetched").mkdir()
    (tmp_path / "fetched" / "a.sqlite").write_text("")
    imported: list[tuple[str, str]] = []
    seen: list[str] = []

    def import_file(path: Path, host: str) -> tuple[str, int | None]:
        imported.append((path.name, host))
        return "1 run(s) added", 1

    f = Follower(state, lambda s: seen.append(s.run_uuid), import_file)
    f({"event": "runner_on_start", "event_data": {"host": "a", "task": "pgfsbench run"}})
    f({"event": "runner_on_ok", "event_data": {"host": "a", "task": "the host's results"}})
    f(
        {
            "event": "runner_on_unreachable",
            "event_data": {"host": "b", "task": "x", "res": {"msg": "no route"}},
        }
    )
    f(
        {
            "event": "runner_on_failed",
            "event_data": {"host": "c", "task": "the run failed", "res": {"msg": "boom"}},
        }
    )
    f(
        {
            "event": "runner_on_failed",
            "event_data": {"host": "d", "task": "t", "ignore_errors": True},
        }
    )
    f({"event": "playbook_on_stats", "event_data": {}})
    assert imported == [("a.sqlite", "a")]
    hosts = state.hosts
    assert hosts["a"].status == "running" and hosts["a"].campaign == 1
    assert hosts["b"].status == "unreachable" and hosts["b"].error == "no route"
    assert hosts["c"].status == "failed" and hosts["c"].error == "boom"
    assert hosts["d"].status == "pending"
    again = FleetState.load(tmp_path)  # saved on every event
    assert again.hosts["c"].error == "boom" and len(seen) == 5


def test_the_playbook_ships_with_the_package() -> None:
    text = PLAYBOOK.read_text()
    for needle in (
        "async:",
        "poll:",
        "ansible.builtin.fetch",
        "cleanup",
        "run_uuid",
        "doctor --json",
        "--host-name {{ inventory_hostname }}",
        "serial:",
    ):
        assert needle in text, needle


def test_the_polled_progress_file_becomes_runs_done_of_total_and_an_eta(tmp_path: Path) -> None:
    import json
    import time

    from pgfsbench.cli.run import ProgressFile

    progress = tmp_path / "progress.json"
    pf = ProgressFile(progress, total=4, estimated_s=400)
    first = json.loads(progress.read_text())
    assert (first["done"], first["total"], first["eta_s"], first["finished"]) == (0, 4, 400, False)
    pf.cell = "ext4/default/default/tpcb-like #1"
    pf.write(phase="measuring")
    pf.started -= 30  # the first run took 30 s
    pf.finished_run("ok")
    now = json.loads(progress.read_text())
    assert now["done"] == 1 and now["counts"] == {"ok": 1} and 89 <= now["eta_s"] <= 91
    assert not list(tmp_path.glob("*.tmp"))  # replaced atomically

    state = FleetState("u1", "s.toml", "hosts.ini", "team.sqlite", str(tmp_path), "pgfsbench")
    shown: list[str] = []
    f = Follower(state, lambda s: shown.append(s.hosts["a"].phase), lambda p, h: ("", None))
    f({"event": "runner_on_start", "event_data": {"host": "a", "task": "pgfsbench run progress"}})
    f(
        {
            "event": "runner_retry",
            "event_data": {
                "host": "a",
                "task": "pgfsbench run progress",
                "res": {"stdout_lines": [progress.read_text().strip(), "running"]},
            },
        }
    )
    a = state.hosts["a"]
    assert a.status == "running" and a.runs() == "1/4" and a.eta() == "0:01:30", a
    assert a.phase == "ext4/default/default/tpcb-like #1 · measuring"
    f(
        {
            "event": "runner_retry",
            "event_data": {  # before the run wrote its file
                "host": "a",
                "task": "pgfsbench run progress",
                "res": {"stdout_lines": ["{}", "running"]},
            },
        }
    )
    assert a.runs() == "1/4"
    f({"event": "runner_on_ok", "event_data": {"host": "a", "task": "pgfsbench run result"}})
    assert a.phase == "run finished"
    pf.write(finished=True)
    assert json.loads(progress.read_text())["finished"] is True
    assert time.time() - json.loads(progress.read_text())["updated"] < 60


def test_controller_seconds_are_the_hosts_wall_time_minus_its_run() -> None:
    from pgfsbench.fleet.driver import HostState

    h = HostState(
        "a",
        status="done",
        started_at="2026-11-23T00:00:00+00:00",
        ended_at="2026-11-23T00:01:40+00:00",
        run_s=70,
    )
    assert h.controller_s() == 30
    assert HostState("b", started_at="2026-11-23T00:00:00+00:00").controller_s() is None
