"""When server-side prepared statements survive pgbouncer, and what is refused when not."""

from pathlib import Path

import pytest

from pgfsbench.postgres.pgbouncer import prepared_statements_lost, problems, version_number
from pgfsbench.spec import Pooler, expand, load_spec


def test_version_number_from_what_pgbouncer_version_prints() -> None:
    assert version_number("PgBouncer 1.18.0") == (1, 18, 0)
    assert version_number("pgbouncer 1.24") == (1, 24)
    assert version_number("PgBouncer 1.21.0\nlibevent 2.1.12-stable") == (1, 21, 0)
    assert version_number("?") is None


@pytest.mark.parametrize(
    ("mode", "version", "settings", "lost"),
    [
        ("session", "PgBouncer 1.18.0", {}, False),  # a client keeps its server connection
        ("transaction", "PgBouncer 1.18.0", {}, True),  # Debian 12's: no tracking at all
        ("statement", "PgBouncer 1.18.0", {"max_prepared_statements": 100}, True),
        ("transaction", "PgBouncer 1.21.0", {}, True),  # tracking, off by default
        ("transaction", "PgBouncer 1.21.0", {"max_prepared_statements": 100}, False),
        ("transaction", "PgBouncer 1.24.1", {}, False),  # on by default (200)
        ("transaction", "PgBouncer 1.24.1", {"max_prepared_statements": 0}, True),
        ("transaction", "?", {}, True),  # an unknown version is not trusted to keep them
    ],
)
def test_prepared_statements_lost_by_mode_version_and_setting(
    mode: str, version: str, settings: dict[str, int], lost: bool
) -> None:
    pooler = Pooler.model_validate({"pool_mode": mode, "settings": settings})
    why = prepared_statements_lost(pooler, version)
    assert (why is not None) is lost
    if why is not None:
        assert mode in why and "prepared statements" in why


def test_pgbench_prepared_through_a_transaction_pooler_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text("""
[storage.ram]
fs = "tmpfs"
[postgres.pooled]
pooler = { kind = "pgbouncer", pool_mode = "transaction" }
[postgres.session]
pooler = { kind = "pgbouncer", pool_mode = "session" }
[postgres.direct]
[workload.prepared]
builtin = "select-only"
protocol = "prepared"
[workload.extended]
builtin = "select-only"
protocol = "extended"
[workload.oltp]
tool = "sysbench"
script = "oltp_read_only"
""")
    found = {c.id: problems(c, "PgBouncer 1.18.0") for c in expand(load_spec(spec).spec)}
    refused = {cell for cell, said in found.items() if said}
    assert refused == {"ram/pooled/default/prepared"}  # sysbench goes without them instead
    (said,) = found["ram/pooled/default/prepared"]
    assert "pgbench -M prepared" in said and 'protocol = "extended"' in said
    assert "pgbouncer 1.18.0 in transaction mode" in said
    assert not any(problems(c, "PgBouncer 1.24.0") for c in expand(load_spec(spec).spec))
