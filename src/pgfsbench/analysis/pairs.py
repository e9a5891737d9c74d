"""Which cells to compare with which (pure): A against B by name across all comparable
cells, or the same cells from two sources (campaigns, result files, machines, dates)."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from pgfsbench.analysis.compare import Comparison, compare
from pgfsbench.analysis.summary import DIMS, CellSummary, matches


@dataclass(frozen=True)
class Pair:
    base: CellSummary
    other: CellSummary
    throughput: Comparison
    p99: Comparison | None
    base_source: str = ""
    other_source: str = ""


def make_pair(base: CellSummary, other: CellSummary, base_source: str = "",
              other_source: str = "") -> Pair:
    p99 = (compare(base.p99_values, other.p99_values, higher_is_better=False)
           if base.p99_values and other.p99_values else None)
    return Pair(base, other, compare(base.values, other.values), p99, base_source,
                other_source)


def _named_dims(cell: CellSummary, pattern: str) -> set[str]:
    return {d for d in DIMS if fnmatch.fnmatchcase(getattr(cell, d), pattern)}


def pairs_by_name(cells: Sequence[CellSummary], a: str, b: str) -> list[Pair]:
    """Each cell that `a` names against the comparable cell that `b` names and that is
    otherwise the same (storage ext4 vs xfs: for every workload, clients and scale)."""
    left = [c for c in cells if matches(c, a)]
    right = [c for c in cells if matches(c, b)]
    out: list[Pair] = []
    for x in left:
        same_except = set(DIMS) - _named_dims(x, a) - {d for y in right for d in
                                                       _named_dims(y, b)}
        for y in right:
            if y is x or y.group != x.group:
                continue
            if all(getattr(x, d) == getattr(y, d) for d in same_except) and \
                    ("@" not in x.cell or x.cell.split("@")[1] == y.cell.split("@")[-1]):
                out.append(make_pair(x, y))
    return out


def pairs_across(base: Sequence[CellSummary], other: Sequence[CellSummary], base_source: str,
                 other_source: str) -> list[Pair]:
    """The same cells (by id) from two sources: two campaigns, two files, two machines."""
    by_id = {c.cell: c for c in other}
    return [make_pair(c, by_id[c.cell], base_source, other_source)
            for c in base if c.cell in by_id]
