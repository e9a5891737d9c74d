"""How many server sessions a run opens, so that ``max_connections`` admits them all.

A run opens the workload's clients (through a pooler: at most its server pool), and
sessions of pgfsbench's own: the sampler's, a control session (checkpoints, settings,
space) and one a workload may open beside its clients (pgbench's vacuum, COPY's
checks). The server admits ``max_connections`` sessions in all; pgfsbench connects as the
superuser, so the reserved slots are open to it. Where the spec leaves
``max_connections``, pgfsbench raises the server's (initdb's choice, 100 on most hosts)
to what the run needs and says so; a spec that sets it lower is refused before anything
is made. The seeds' runs (100 clients, postgresql.conf unchanged) need this: 100 clients
and a sampler do not fit in 100 sessions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import Cell
from pgfsbench.system.errors import UsageError

OWN_SESSIONS = 3
INITDB_DEFAULT = 100  # what initdb writes unless the host's shared memory is too small


def _int(value: object) -> int | None:
    """A whole number as PostgreSQL reads one (it rounds a decimal fraction)."""
    text = str(value).strip()
    if not re.fullmatch(r"\d+(\.\d*)?", text):
        return None
    return round(float(text))


def server_sessions(cell: Cell) -> int:
    """The sessions the cell's runs open at once at most."""
    clients = max(1, cell.workload.clients)
    pooler = cell.postgres.pooler
    if pooler is not None:
        reserve = _int(pooler.settings.get("reserve_pool_size", 0)) or 0
        clients = min(clients, pooler.default_pool_size + reserve)
    return clients + OWN_SESSIONS


def _spec_value(cell: Cell) -> tuple[bool, object]:
    """Whether the cell's configuration sets ``max_connections``, and to what."""
    for name, value in cell.postgres.settings.items():
        if name.lower() == "max_connections":
            return True, value
    return False, None


def spec_sets_max_connections(cell: Cell) -> bool:
    return _spec_value(cell)[0]


def spec_max_connections(cell: Cell) -> int | None:
    """``max_connections`` as the cell's configuration sets it (None: left to the server,
    or a value that is not a number, which the preflight refuses with its reason)."""
    sets, value = _spec_value(cell)
    return _int(value) if sets else None


def too_few(cell: Cell) -> str | None:
    """Why the configuration's own ``max_connections`` cannot admit the run (None: it can,
    or the configuration leaves it to pgfsbench)."""
    own = spec_max_connections(cell)
    need = server_sessions(cell)
    if own is None or own >= need:
        return None
    return (
        f"postgres {cell.postgres_name}: max_connections = {own} admits fewer sessions than "
        f"cell {cell.id} opens ({need}: {_who(cell, need)}); raise it to {need} or leave it out"
    )


def _who(cell: Cell, need: int) -> str:
    """Whose sessions ``need`` counts, as the messages say it."""
    clients = need - OWN_SESSIONS
    who = f"the pooler's server pool of {clients}" if cell.postgres.pooler else f"{clients} clients"
    return f"{who} and {OWN_SESSIONS} sessions of pgfsbench's"


def initdb_max_connections(pgdata: Path) -> int:
    """The ``max_connections`` initdb chose for this host (written in postgresql.conf)."""
    try:
        text = (pgdata / "postgresql.conf").read_text()
    except OSError:
        return INITDB_DEFAULT
    found = re.findall(r"(?m)^\s*max_connections\s*=\s*(\d+)", text)
    return int(found[-1]) if found else INITDB_DEFAULT


@dataclass(frozen=True)
class Raised:
    """max_connections as pgfsbench set it, and why (recorded with the run)."""

    before: int
    after: int
    why: str

    def as_dict(self) -> dict[str, object]:
        return {
            "setting": "max_connections",
            "from": self.before,
            "to": self.after,
            "why": self.why,
        }

    def text(self) -> str:
        return (
            f"max_connections raised from {self.before} to {self.after} by pgfsbench "
            f"({self.why}; the spec left it to the server)"
        )


def raised(cell: Cell, server_value: int) -> Raised | None:
    """The ``max_connections`` pgfsbench sets when the spec leaves it and the server's
    value would refuse some of the run's sessions (None: nothing to change)."""
    need = server_sessions(cell)
    if spec_sets_max_connections(cell) or need <= server_value:
        return None
    return Raised(server_value, need, _who(cell, need))


def plan_warnings(cells: list[Cell]) -> list[str]:
    """What `plan` says of the cells' sessions; a configuration that sets too few is
    refused (UsageError) before anything is made."""
    raise_to = 0  # the most sessions a cell that leaves max_connections to us opens
    for cell in cells:
        if (few := too_few(cell)) is not None:
            raise UsageError(few)
        if not spec_sets_max_connections(cell):
            raise_to = max(raise_to, server_sessions(cell))
    if raise_to <= INITDB_DEFAULT:
        return []
    return [
        f"max_connections: where the spec leaves it, pgfsbench raises the server's "
        f"(initdb's, usually {INITDB_DEFAULT}) to what a run opens, up to {raise_to} here "
        f"(its clients and {OWN_SESSIONS} sessions of pgfsbench's), and records it; set it "
        "in the spec to choose"
    ]
