"""The fleet trusts no host it has not met and keeps no password: host keys checked by
default, the state written in a checked directory, 0600, without the store's password."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pgfsbench.fleet.driver import STATE, FleetState, ansible_env, new_state
from pgfsbench.system.trust import UntrustedPath


def test_host_keys_are_checked_unless_new_ones_are_accepted() -> None:
    assert ansible_env()["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert "ANSIBLE_SSH_COMMON_ARGS" not in ansible_env()
    accepting = ansible_env(accept_new_host_keys=True)
    assert accepting["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert accepting["ANSIBLE_SSH_COMMON_ARGS"] == "-o StrictHostKeyChecking=accept-new"


def test_the_state_is_private_and_keeps_no_password(tmp_path: Path) -> None:
    spec, inventory = tmp_path / "s.toml", tmp_path / "hosts.ini"
    spec.write_text("")
    inventory.write_text("")
    fleet = tmp_path / "fleet"
    url = "postgresql://bob:hunter2@db/team"
    state = new_state(spec, inventory, url, fleet, "pgfsbench", "")
    text = (fleet / STATE).read_text()
    assert "hunter2" not in text and json.loads(text)["results"].startswith("postgresql://bob:")
    assert stat.S_IMODE((fleet / STATE).stat().st_mode) == 0o600
    assert FleetState.load(fleet).run_uuid == state.run_uuid


def test_a_planted_state_link_or_a_shared_directory_is_refused(tmp_path: Path) -> None:
    spec, inventory = tmp_path / "s.toml", tmp_path / "hosts.ini"
    spec.write_text("")
    inventory.write_text("")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone could have planted fleet-state.json as a link here
    victim = tmp_path / "victim"
    victim.write_text("root's")
    (shared / STATE).symlink_to(victim)
    with pytest.raises(UntrustedPath):
        new_state(spec, inventory, "r.sqlite", shared, "pgfsbench", "")
    assert victim.read_text() == "root's"


def test_an_inventory_is_trusted_as_a_kubeconfig_and_keeps_host_keys_checked(
    tmp_path: Path,
) -> None:
    """Ansible runs what an inventory says as root: one another user could write (or its
    group_vars), and one that turns the check of the hosts' keys off, are refused."""
    from pgfsbench.fleet.driver import inventory_problem

    place = tmp_path / "fleet"
    place.mkdir(mode=0o755)
    inventory = place / "hosts.ini"
    inventory.write_text("[bench]\nnode-a ansible_host=10.0.0.1\n")
    inventory.chmod(0o644)
    assert inventory_problem(inventory) is None
    inventory.chmod(0o666)
    assert "writable by others" in (inventory_problem(inventory) or "")
    inventory.chmod(0o644)
    os.chown(inventory, 65534, 65534)
    assert "owned by" in (inventory_problem(inventory) or "")
    os.chown(inventory, 0, 0)
    for off in (
        "node-a ansible_ssh_common_args='-o StrictHostKeyChecking=no'\n",
        "node-a ansible_ssh_extra_args='-o UserKnownHostsFile=/dev/null'\n",
        "[all:vars]\nansible_host_key_checking=False\n",
    ):
        inventory.write_text("[bench]\n" + off)
        assert "check of the hosts' keys off" in (inventory_problem(inventory) or ""), off
    inventory.write_text("[bench]\nnode-a ansible_host=10.0.0.1\n")
    group_vars = place / "group_vars"
    group_vars.mkdir()
    (group_vars / "bench.yml").write_text("ansible_ssh_common_args: -o StrictHostKeyChecking=off\n")
    assert "bench.yml" in (inventory_problem(inventory) or "")
    (group_vars / "bench.yml").write_text("x: 1\n")
    (group_vars / "bench.yml").chmod(0o666)
    assert "bench.yml" in (inventory_problem(inventory) or "")
