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
    f({"event": "runner_on_unreachable", "event_data": {"host": "b", "task": "x",
                                                         "res": {"msg": "no route"}}})
    f({"event": "runner_on_failed", "event_data": {"host": "c", "task": "the run failed",
                                                    "res": {"msg": "boom"}}})
    f({"event": "runner_on_failed", "event_data": {"host": "d", "task": "t",
                                                    "ignore_errors": True}})
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
    for needle in ("async:", "poll:", "ansible.builtin.fetch", "cleanup", "run_uuid",
                   "doctor --json", "--host-name {{ inventory_hostname }}", "serial:"):
        assert needle in text, needle
