"""pgbench's per-transaction log (-l) turned into latency percentiles, per run and per second.

A hot path: millions of lines. polars reads the three columns needed (latency, epoch
second, microseconds) in parallel, and latencies go into logarithmic buckets 1% wide
(as HdrHistogram does), from which every percentile is read with <= 0.5% relative
error. The maximum is exact. What is stored is the per-second aggregates and the compact
histogram, not the lines; the raw log is kept compressed as an artifact.

Line format (PostgreSQL 10-18):
  client_id transaction_no time script_no time_epoch time_us [schedule_lag [retries]]
`time` is the latency in microseconds, or 'failed'/'skipped'; time_epoch/time_us say
when the transaction ended. With a rate limit (-R) the seventh column is the schedule
lag (how late the transaction started against its schedule), and `time` counts from the
scheduled start, so latencies include it; lag is kept as its own percentiles and series.
With --max-tries the last column is the number of retries.
"""

from __future__ import annotations

import gzip
import math
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

BUCKETS_PER_E = 100  # bucket k holds latencies in [e^(k/100), e^((k+1)/100)) us: 1% wide
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
_NAMES = ["client", "tx", "lat", "script", "epoch", "us", "lag", "retries"]


@dataclass(frozen=True)
class LatencyStats:
    transactions: int  # lines with a latency (sampled)
    failed: int
    sampling_rate: float
    start_epoch: float  # when the first sampled transaction started
    percentiles_ms: dict[str, float]  # p50 p90 p95 p99 p999 max
    series: dict[str, list[float | None]] = field(default_factory=dict)  # per second
    histogram: dict[int, int] = field(default_factory=dict)  # bucket -> count
    lag_ms: dict[str, float] | None = None  # schedule lag p50 p99 max (rate-limited runs)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"transactions": self.transactions, "failed": self.failed,
                                  "sampling_rate": self.sampling_rate, **self.percentiles_ms}
        if self.lag_ms is not None:
            out["schedule_lag_ms"] = self.lag_ms
        return out


def log_columns(path: Path) -> int:
    """How many columns a transaction log has (6, 7 with -R, 8 with --max-tries too)."""
    with path.open("rb") as fh:
        first = fh.readline().split()
    return max(6, min(len(first), len(_NAMES)))


def bucket_value_ms(bucket: float) -> float:
    """The middle of a bucket, in ms."""
    return math.exp((bucket + 0.5) / BUCKETS_PER_E) / 1000.0


def _percentile_from_counts(buckets: np.ndarray, counts: np.ndarray, q: float) -> float:
    cum = np.cumsum(counts)
    idx = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return bucket_value_ms(float(buckets[min(idx, len(buckets) - 1)]))


def parse_txlog(paths: Sequence[Path], *, sampling_rate: float = 1.0,
                duration_s: float | None = None) -> LatencyStats | None:
    """Percentiles per run and per second from one or more pgbench log files."""
    existing = [p for p in paths if p.exists() and p.stat().st_size > 0]
    if not existing:
        return None
    files = [str(p) for p in existing]
    ncols = log_columns(existing[0])
    has_lag = ncols >= 7
    end_us = pl.col("epoch") * 1_000_000 + pl.col("us")
    second = (end_us - (end_us - pl.col("lat")).min()) // 1_000_000
    if duration_s is not None:  # transactions still finishing after -T ends
        second = second.clip(upper_bound=max(0, math.ceil(duration_s) - 1))
    ints = {"lat": pl.Int64, "epoch": pl.Int64, "us": pl.Int64}
    if has_lag:
        ints["lag"] = pl.Int64
    lazy = (
        pl.scan_csv(files, separator=" ", has_header=False, new_columns=_NAMES[:ncols],
                    schema_overrides=ints, null_values=["failed", "skipped"],
                    truncate_ragged_lines=True, infer_schema=False)
        .select("lat", "epoch", "us", *(["lag"] if has_lag else []))
        .with_columns(
            second.cast(pl.Int32).alias("s"),
            (pl.col("lat").clip(lower_bound=1).log() * BUCKETS_PER_E).floor().cast(pl.Int32)
            .alias("b"),
            (end_us - pl.col("lat")).min().alias("start_us"),
        )
    )
    # one pass, never materialising the columns: (second, bucket) -> count and max;
    # failed transactions (no latency) land in bucket null
    aggs = [pl.len().alias("n"), pl.col("lat").max().alias("max"), pl.col("start_us").first()]
    if has_lag:
        aggs += [pl.col("lag").sum().alias("lag_sum"), pl.col("lag").max().alias("lag_max")]
    per_all = lazy.group_by("s", "b").agg(aggs).collect(engine="streaming")
    failed = int(per_all.filter(pl.col("b").is_null())["n"].sum())
    per = per_all.drop_nulls("b").sort("s", "b")
    if per.height == 0:
        return LatencyStats(0, failed, sampling_rate, 0.0, {})
    start_us = int(per["start_us"].min())  # type: ignore[arg-type]
    overall = per.group_by("b").agg(pl.col("n").sum()).sort("b")
    b_all, n_all = overall["b"].to_numpy(), overall["n"].to_numpy()
    pct = {k: round(_percentile_from_counts(b_all, n_all, q), 3) for k, q in PERCENTILES.items()}
    pct["max"] = round(int(per["max"].max()) / 1000.0, 3)  # type: ignore[arg-type]
    series = _per_second(per, sampling_rate)
    lag = None
    if has_lag:
        lag, lag_series = _lag(lazy, per)
        series.update(lag_series)
    return LatencyStats(int(n_all.sum()), failed, sampling_rate, start_us / 1e6, pct, series,
                        {int(b): int(n) for b, n in zip(b_all, n_all, strict=True)}, lag)


def _lag(lazy: pl.LazyFrame, per: pl.DataFrame
         ) -> tuple[dict[str, float], dict[str, list[float | None]]]:
    """Schedule lag: percentiles over the run (log buckets, as for latency) and the mean
    and maximum per second."""
    hist = (lazy.drop_nulls("lag")
            .group_by((pl.col("lag").clip(lower_bound=1).log() * BUCKETS_PER_E).floor()
                      .cast(pl.Int32).alias("lb"))
            .agg(pl.len().alias("n"), pl.col("lag").max().alias("max"))
            .collect(engine="streaming").sort("lb"))
    stats: dict[str, float] = {}
    if hist.height:
        lb, n = hist["lb"].to_numpy(), hist["n"].to_numpy()
        for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            stats[k] = round(_percentile_from_counts(lb, n, q), 3)
        stats["max"] = round(int(hist["max"].max()) / 1000.0, 3)  # type: ignore[arg-type]
    rows = per.group_by("s").agg(pl.col("n").sum(), pl.col("lag_sum").sum(),
                                 pl.col("lag_max").max()).sort("s")
    last = int(rows["s"].max())  # type: ignore[arg-type]
    full = pl.DataFrame({"s": np.arange(last + 1, dtype=np.int32)}).join(rows, on="s",
                                                                          how="left")
    avg = [None if (n is None or not n or t is None) else round(t / n / 1000.0, 3)
           for n, t in zip(full["n"].to_list(), full["lag_sum"].to_list(), strict=True)]
    mx = [None if v is None else round(v / 1000.0, 3) for v in full["lag_max"].to_list()]
    return stats, {"lag_avg_ms": avg, "lag_max_ms": mx}


def _per_second(per: pl.DataFrame, sampling_rate: float) -> dict[str, list[float | None]]:
    total = per.group_by("s").agg(pl.col("n").sum().alias("tot"))
    cum = per.join(total, on="s").with_columns(pl.col("n").cum_sum().over("s").alias("cum"))
    aggs = [pl.col("tot").first().alias("count")]
    for name, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        aggs.append(pl.col("b").filter(pl.col("cum") >= q * pl.col("tot")).first().alias(name))
    aggs.append(pl.col("max").max().alias("max"))
    rows = cum.group_by("s").agg(aggs).sort("s")
    last = int(rows["s"].max())  # type: ignore[arg-type]
    full = pl.DataFrame({"s": np.arange(last + 1, dtype=np.int32)}).join(rows, on="s",
                                                                          how="left")
    def ms(col: str) -> list[float | None]:
        return [None if v is None else round(bucket_value_ms(v), 3) for v in full[col].to_list()]

    return {
        "tps_log": [0.0 if c is None else round(c / sampling_rate, 1)
                    for c in full["count"].to_list()],
        "lat_p50_ms": ms("p50"),
        "lat_p90_ms": ms("p90"),
        "lat_p99_ms": ms("p99"),
        "lat_max_ms": [None if v is None else round(v / 1000.0, 3) for v in full["max"].to_list()],
    }


def compress_logs(paths: Sequence[Path], dest: Path) -> Path:
    """Concatenate the per-thread logs into one gzip artifact and remove them."""
    with gzip.open(dest, "wb", compresslevel=3) as out:
        for p in sorted(paths):
            with p.open("rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
            p.unlink()
    return dest
