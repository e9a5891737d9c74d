"""Latency percentiles over several runs: the percentile of their merged distribution, not a
median of their percentiles (pure).

Each run keeps its transactions' latencies as counts in 1%-wide log buckets (series
"latency_histogram", see `results.records.BUCKETS_PER_E`): merging runs adds the counts, so
a cell's p99 over its repetitions, or a configuration's over a fleet's hosts, is read from
every transaction they logged, each weighing the same. A run that logged a sample of its
transactions (pgbench --sampling-rate) counts each logged one 1/rate times. The percentile
is the middle of its bucket: within 0.5% of the exact value.

A median of the runs' p99s is what a table shows when no histogram was kept (runs from
before the histogram existed, sysbench): `pooled_latency` says how many runs it merged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pgfsbench.results.records import StoredRun, bucket_value_ms

QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}


@dataclass(frozen=True)
class PooledLatency:
    percentiles_ms: dict[str, float]  # p50 p90 p95 p99 p999 of the merged distribution
    transactions: int  # what the merged distribution counts (logged / sampling rate)
    runs: int  # runs merged
    runs_without: int  # runs of the group that kept no histogram (left out)
    histogram: dict[int, float] = field(default_factory=dict, repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        return {
            "percentiles_ms": self.percentiles_ms,
            "transactions": self.transactions,
            "runs": self.runs,
            "runs_without_histogram": self.runs_without,
        }


def run_histogram(run: StoredRun) -> dict[int, float] | None:
    """A run's latency histogram (bucket -> transactions it stands for), None without one."""
    series = run.series.get("latency_histogram")
    if series is None or not series.values:
        return None
    log = run.recorded.latency_log
    rate = float(log.sampling_rate or 1.0) if log is not None else 1.0
    weight = 1.0 / rate if rate > 0 else 1.0
    out: dict[int, float] = {}
    for pair in series.values:
        if isinstance(pair, list | tuple) and len(pair) == 2:
            out[int(pair[0])] = out.get(int(pair[0]), 0.0) + float(pair[1]) * weight
    return out or None


def merge(histograms: Iterable[dict[int, float]]) -> dict[int, float]:
    merged: dict[int, float] = {}
    for h in histograms:
        for b, n in h.items():
            merged[b] = merged.get(b, 0.0) + n
    return merged


def percentile_ms(histogram: dict[int, float], q: float) -> float | None:
    """The bucket holding the q-th quantile, as its middle in ms."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    target = q * total
    seen = 0.0
    for b in sorted(histogram):
        seen += histogram[b]
        if seen >= target:
            return bucket_value_ms(b)
    return bucket_value_ms(max(histogram))


def pooled(histograms: Iterable[dict[int, float]], runs: int, without: int) -> PooledLatency:
    """The percentiles of merged histograms."""
    merged = merge(histograms)
    pct = {}
    for name, q in QUANTILES.items():
        v = percentile_ms(merged, q)
        if v is not None:
            pct[name] = round(v, 3)
    return PooledLatency(pct, math.floor(sum(merged.values()) + 0.5), runs, without, merged)


def pooled_latency(runs: Iterable[StoredRun]) -> PooledLatency | None:
    """The percentiles of the ok runs' merged latency histograms (None: no run kept one)."""
    hists = []
    without = 0
    for r in runs:
        if not r.ok:
            continue
        h = run_histogram(r)
        if h is None:
            without += 1
        else:
            hists.append(h)
    if not hists:
        return None
    return pooled(hists, len(hists), without)
