"""The dimensions of the matrix, in one place.

A *table* dimension is a set of named configurations in the spec (`[storage.NAME]`);
a *values* dimension is a list of values swept over (`clients = [4, 32]`), given in the
defaults or in a workload. Adding a dimension is adding a row here (and the field that
holds its values); the matrix expansion, `[[matrix.include/exclude]]` rules, cell ids,
`--only` globs and the store all follow from this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    name: str
    source: str  # "table" or "values"
    doc: str


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension("storage", "table", "filesystem, its options and devices"),
    Dimension("postgres", "table", "PostgreSQL settings, initdb options, binaries"),
    Dimension("kernel", "table", "sysctls and transparent huge pages"),
    Dimension("workload", "table", "what the clients do"),
    Dimension("scale", "values", "data size (pgbench scale)"),
    Dimension("clients", "values", "concurrent client connections"),
    Dimension("rate", "values", "target transactions per second (absent: as fast as it goes)"),
)
TABLES = tuple(d.name for d in DIMENSIONS if d.source == "table")
SWEEPS = tuple(d.name for d in DIMENSIONS if d.source == "values")
