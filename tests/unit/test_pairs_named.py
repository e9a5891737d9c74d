"""`compare A B` pairs the cells that differ where A and B name them, and says exactly the
axes they differ in (one name on every axis, as `advise` once wrote, is not three)."""

from __future__ import annotations

from pgfsbench.analysis.pairs import pairs_by_name
from pgfsbench.analysis.stats import estimate
from pgfsbench.analysis.summary import CellSummary
from pgfsbench.cli.compare import differ_lines


def cell(storage: str, postgres: str, kernel: str, values: list[float]) -> CellSummary:
    return CellSummary(
        cell=f"{storage}/{postgres}/{kernel}/tpcb-like",
        storage=storage,
        fs="ext4",
        postgres=postgres,
        kernel=kernel,
        workload="tpcb-like",
        runs=len(values),
        ok=len(values),
        tps=estimate(values),
        latency_avg_ms=None,
        latency_p99_ms=None,
        load_seconds=None,
        space_bytes=None,
        implementation=None,
        fuse=False,
        errors=(),
        label=f"{storage}/{postgres}",
        clients=8,
        scale=10,
        values=tuple(values),
    )


def matrix(name: str) -> list[CellSummary]:
    return [
        cell(s, p, name, [100.0 + i, 102.0 + i, 101.0 + i])
        for i, (s, p) in enumerate(
            [(name, name), (name, "walcomp"), ("noatime", name), ("noatime", "walcomp")]
        )
    ]


def test_one_name_on_every_axis_is_still_one_axis_compared() -> None:
    cells = matrix("as-found")
    pairs = pairs_by_name(cells, "as-found", "walcomp")
    # within each storage, the postgres configurations; never across storage too
    assert sorted((p.base.cell, p.other.cell) for p in pairs) == [
        ("as-found/as-found/as-found/tpcb-like", "as-found/walcomp/as-found/tpcb-like"),
        ("noatime/as-found/as-found/tpcb-like", "noatime/walcomp/as-found/tpcb-like"),
    ]
    assert all(p.differ == ("postgres",) and p.also_differ == () for p in pairs)
    assert differ_lines(pairs) == [
        "the two sides differ in postgres (as-found -> walcomp) only, in 2 comparisons"
    ]


def test_what_else_differs_is_named_exactly() -> None:
    cells = [cell("ext4", "default", "k", [100.0, 101.0]), cell("zfs", "zfs", "k", [70.0, 71.0])]
    (p,) = pairs_by_name(cells, "ext4", "zfs")
    # "zfs" names both the storage and the postgres configuration of B, but A's postgres
    # is not named by "ext4": postgres differs beyond what was named
    assert p.differ == ("storage", "postgres") and p.also_differ == ("postgres",)
    assert differ_lines([p]) == ["the two sides differ in storage (ext4 -> zfs)"]


def test_whole_cells_named_by_id_differ_as_named() -> None:
    cells = [cell("ext4", "a", "k", [100.0, 101.0]), cell("xfs", "b", "k", [90.0, 91.0])]
    (p,) = pairs_by_name(cells, "ext4/a/k/tpcb-like", "xfs/b/k/tpcb-like")
    assert p.differ == ("storage", "postgres") and p.also_differ == ()
