"""Percentiles across repetitions: the merged distribution's, not a median of percentiles."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pgfsbench.analysis.histogram import merge, percentile_ms, pooled_latency, run_histogram
from pgfsbench.analysis.summary import summarise
from pgfsbench.report.terminal import fmt_p99
from pgfsbench.results.records import BUCKETS_PER_E, StoredRun, StoredSeries


def histogram_of(latencies_us: np.ndarray) -> list[list[int]]:
    """What collect.txlog stores: [bucket, count] with bucket = floor(ln(us) * 100)."""
    buckets = np.floor(np.log(np.clip(latencies_us, 1, None)) * BUCKETS_PER_E).astype(int)
    values, counts = np.unique(buckets, return_counts=True)
    return [[int(b), int(n)] for b, n in zip(values, counts, strict=True)]


def run(run_id: int, latencies_us: np.ndarray, rate: float = 1.0, rep: int = 1) -> StoredRun:
    p99 = float(np.percentile(latencies_us, 99)) / 1000
    return StoredRun(
        run_id=run_id,
        cell="ext4/default/default/tpcb-like",
        storage="ext4",
        fs="ext4",
        workload="tpcb-like",
        repetition=rep,
        throughput=1000.0,
        latency_ms={"p99": p99},
        metrics={"latency_log": {"sampling_rate": rate}},
        series={
            "latency_histogram": StoredSeries(
                "latency_histogram", histogram_of(latencies_us), step=0.0
            )
        },
    )


def test_the_merged_p99_is_not_the_median_of_the_runs_p99() -> None:
    rng = np.random.default_rng(7)
    # three repetitions: two quick, one with a slow tail (5% of its transactions at 50 ms)
    quick = [rng.lognormal(math.log(1000), 0.2, 20_000) for _ in range(2)]
    tail = np.concatenate(
        [rng.lognormal(math.log(1000), 0.2, 19_000), rng.lognormal(math.log(50_000), 0.1, 1000)]
    )
    runs = [run(i + 1, lat, rep=i + 1) for i, lat in enumerate([*quick, tail])]
    everything = np.concatenate([*quick, tail])
    exact = float(np.percentile(everything, 99)) / 1000
    pooled = pooled_latency(runs)
    assert pooled is not None and pooled.runs == 3 and pooled.transactions == 60_000
    assert pooled.percentiles_ms["p99"] == pytest.approx(exact, rel=0.006)
    median_of_p99 = float(np.median([r.latency_ms["p99"] for r in runs]))
    assert median_of_p99 < exact / 10  # what a median of percentiles would have said
    cell = summarise(runs)[0]
    assert fmt_p99(cell) == f"{pooled.percentiles_ms['p99']:,.2f}"


def test_sampled_runs_weigh_by_the_transactions_they_stand_for() -> None:
    fast = np.full(1000, 1000.0)  # 1 ms, every transaction logged
    slow = np.full(1000, 20_000.0)  # 20 ms, 1 in 10 logged: 10,000 transactions
    h = merge([run_histogram(run(1, fast)) or {}, run_histogram(run(2, slow, rate=0.1)) or {}])
    assert sum(h.values()) == pytest.approx(11_000)
    assert percentile_ms(h, 0.5) == pytest.approx(20.0, rel=0.006)
    assert percentile_ms(h, 0.05) == pytest.approx(1.0, rel=0.006)


def test_runs_without_a_histogram_fall_back_to_the_median_and_say_so() -> None:
    bare = [
        StoredRun(run_id=i, cell="c", repetition=i, throughput=10.0, latency_ms={"p99": v})
        for i, v in ((1, 2.0), (2, 4.0), (3, 3.0))
    ]
    assert pooled_latency(bare) is None
    assert fmt_p99(summarise(bare)[0]) == "~3.00"
    mixed = [*bare[:2], run(3, np.full(100, 1000.0), rep=3)]
    pooled = pooled_latency(mixed)
    assert pooled is not None and pooled.runs == 1 and pooled.runs_without == 2
    assert percentile_ms({}, 0.99) is None


def test_a_configuration_over_a_fleet_pools_every_hosts_transactions() -> None:
    from pgfsbench.analysis.pairs import host_spread

    fast = np.full(10_000, 1000.0)  # host a: 1 ms
    slow = np.full(10_000, 30_000.0)  # host b: 30 ms
    runs = [
        dataclasses.replace(run(i, lat, rep=1), host=h)
        for i, (h, lat) in enumerate((("a", fast), ("b", slow)), 1)
    ]
    spread = host_spread(summarise(runs))
    assert len(spread) == 1
    # half the fleet's transactions took 30 ms: its p99 is 30 ms, whatever each host says
    assert spread[0].p99_ms == pytest.approx(30.0, rel=0.006)
    assert spread[0].as_dict()["p99_ms_all_hosts"] == spread[0].p99_ms
