"""Comparisons across hosts: within each host first, then the hosts combined as blocks."""

from __future__ import annotations

from pgfsbench.analysis.pairs import across_hosts, host_spread, make_pair
from pgfsbench.analysis.stats import estimate
from pgfsbench.analysis.summary import CellSummary


def cell(storage: str, host: str, values: list[float]) -> CellSummary:
    return CellSummary(
        cell=f"{storage}/p/k/w",
        storage=storage,
        fs=storage,
        postgres="p",
        kernel="k",
        workload="w",
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
        label=storage,
        host=host,
        clients=8,
        scale=10,
        values=tuple(values),
    )


def test_a_consistent_gain_on_every_host_is_faster_across_hosts() -> None:
    pairs = [
        make_pair(cell("ext4", h, [1000, 1010, 990]), cell("xfs", h, [g * 1000, g * 1010, g * 990]))
        for h, g in (("a", 1.10), ("b", 1.12), ("c", 1.09))
    ]
    (combined,) = across_hosts(pairs)
    assert [h for h, _, _ in combined.per_host] == ["a", "b", "c"]
    assert combined.ratio is not None and 1.09 < combined.ratio < 1.12
    assert combined.ci_low is not None and combined.ci_low > 1.02
    assert combined.verdict == "faster across hosts taken together (n=3 hosts)"
    slower = across_hosts([make_pair(p.other, p.base) for p in pairs])[0]
    assert slower.verdict == "slower across hosts taken together (n=3 hosts)"


def test_hosts_that_disagree_give_no_verdict_and_one_host_none_at_all() -> None:
    pairs = [
        make_pair(cell("ext4", h, [1000, 1000, 1000]), cell("xfs", h, [g * 1000] * 3))
        for h, g in (("a", 1.3), ("b", 0.8))
    ]
    (combined,) = across_hosts(pairs)
    assert combined.verdict.startswith("undecided across hosts: too noisy to tell")
    (alone,) = across_hosts(pairs[:1])
    assert alone.verdict == "no verdict across hosts: 1 host" and alone.ci_low is None


def test_host_to_host_spread_of_one_configuration() -> None:
    (spread,) = host_spread([cell("ext4", "a", [1000] * 3), cell("ext4", "b", [1200] * 3)])
    assert dict(spread.medians) == {"a": 1000, "b": 1200}
    assert spread.cv is not None and 0.12 < spread.cv < 0.15
