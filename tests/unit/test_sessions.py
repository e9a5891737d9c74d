"""max_connections against the sessions a run opens (the seeds run 100 clients on a
server left as initdb made it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.plan import make_plan
from pgfsbench.postgres import sessions
from pgfsbench.spec import Cell, expand, load_spec
from pgfsbench.system.errors import UsageError

SPEC = """
[defaults]
clients = {clients}
[storage.ram]
fs = "tmpfs"
[postgres.left]
[postgres.set]
settings = {{ max_connections = {max_connections} }}
[postgres.pooled]
pooler = {{ kind = "pgbouncer", pool_mode = "transaction", default_pool_size = 20 }}
[workload.rw]
builtin = "tpcb-like"
"""


def _cells(tmp_path: Path, clients: int, max_connections: int) -> dict[str, Cell]:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(clients=clients, max_connections=max_connections))
    return {c.postgres_name: c for c in expand(load_spec(spec).spec)}


def test_a_hundred_clients_on_initdb_s_default_are_admitted(tmp_path: Path) -> None:
    cells = _cells(tmp_path, 100, 200)
    assert sessions.server_sessions(cells["left"]) == 100 + sessions.OWN_SESSIONS
    change = sessions.raised(cells["left"], 100)
    assert change is not None and (change.before, change.after) == (100, 103)
    assert "100 clients" in change.text() and "raised from 100 to 103" in change.text()
    # a server that already admits them, a spec that chose, a pool that fits: unchanged
    assert sessions.raised(cells["left"], 103) is None
    assert sessions.raised(cells["set"], 100) is None
    assert sessions.server_sessions(cells["pooled"]) == 20 + sessions.OWN_SESSIONS
    assert sessions.raised(cells["pooled"], 100) is None


def test_few_clients_change_nothing(tmp_path: Path) -> None:
    cells = _cells(tmp_path, 8, 200)
    assert sessions.raised(cells["left"], 100) is None
    assert sessions.too_few(cells["set"]) is None


def test_a_spec_that_sets_too_few_is_refused_by_plan(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(clients=100, max_connections=100))
    cells = {c.postgres_name: c for c in expand(load_spec(spec).spec)}
    said = sessions.too_few(cells["set"])
    assert said is not None and "max_connections = 100" in said and "103" in said
    with pytest.raises(UsageError, match="max_connections = 100 admits fewer"):
        make_plan(load_spec(spec))


def test_plan_says_it_raises_max_connections(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(clients=100, max_connections=150))
    plan = make_plan(load_spec(spec))
    (said,) = [w for w in plan.warnings if w.startswith("max_connections")]
    assert "up to 103" in said
    spec.write_text(SPEC.format(clients=10, max_connections=150))
    assert not [w for w in make_plan(load_spec(spec)).warnings if "max_connections" in w]


def test_a_spec_value_pgfsbench_cannot_read_is_never_overridden(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(clients=100, max_connections='"150.4"'))
    cell = {c.postgres_name: c for c in expand(load_spec(spec).spec)}["set"]
    assert sessions.spec_max_connections(cell) == 150  # PostgreSQL rounds it too
    assert sessions.too_few(cell) is None and sessions.raised(cell, 100) is None
    spec.write_text(SPEC.format(clients=100, max_connections='"lots"'))
    cell = {c.postgres_name: c for c in expand(load_spec(spec).spec)}["set"]
    assert sessions.spec_max_connections(cell) is None  # the preflight refuses it
    assert sessions.raised(cell, 100) is None  # and pgfsbench does not replace it


def test_initdb_s_choice_is_read_from_postgresql_conf(tmp_path: Path) -> None:
    (tmp_path / "postgresql.conf").write_text(
        "#max_connections = 500\nmax_connections = 40\t\t# (change requires restart)\n"
    )
    assert sessions.initdb_max_connections(tmp_path) == 40
    assert sessions.initdb_max_connections(tmp_path / "none") == sessions.INITDB_DEFAULT
