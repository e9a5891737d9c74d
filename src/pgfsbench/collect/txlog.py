"""pgbench's per-transaction log (-l) turned into latency percentiles, per run and per second.

A hot path: millions of lines. The log is read in blocks of a few MB (memory does not
grow with the run's length), polars parses the columns needed, and latencies go into
logarithmic buckets 1% wide (as HdrHistogram does), from which every percentile is read
with <= 0.5% relative error. The maximum is exact. What is stored is the per-second
aggregates and the compact histogram, not the lines; the raw log is kept compressed as an artifact.

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
import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from pgfsbench.results.records import BUCKETS_PER_E, bucket_value_ms
from pgfsbench.system.trust import open_written_by_others

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
        out: dict[str, object] = {
            "transactions": self.transactions,
            "failed": self.failed,
            "sampling_rate": self.sampling_rate,
            **self.percentiles_ms,
        }
        if self.lag_ms is not None:
            out["schedule_lag_ms"] = self.lag_ms
        return out


def log_columns(path: Path) -> int:
    """How many columns a transaction log has (6, 7 with -R, 8 with --max-tries too)."""
    with open_written_by_others(path) as fh:
        first = fh.readline().split()
    return max(6, min(len(first), len(_NAMES)))


def _percentile_from_counts(buckets: np.ndarray, counts: np.ndarray, q: float) -> float:
    cum = np.cumsum(counts)
    idx = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return bucket_value_ms(float(buckets[min(idx, len(buckets) - 1)]))


CHUNK_BYTES = 4 << 20  # the log is read in blocks this size: memory does not grow with it
_MERGE_EVERY = 32  # partial aggregates merged every this many blocks


def _blocks(paths: Sequence[Path], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The files' lines in blocks of about `size` bytes, each ending at a line end."""
    for path in paths:
        rest = b""
        with open_written_by_others(path) as fh:
            while chunk := fh.read(size):
                chunk = rest + chunk
                cut = chunk.rfind(b"\n") + 1
                if cut == 0:  # no line end yet: one very long line
                    rest = chunk
                    continue
                rest = chunk[cut:]
                yield chunk[:cut]
        if rest.strip():
            yield rest + b"\n"


def _frames(paths: Sequence[Path], ncols: int) -> Iterator[pl.DataFrame]:
    """lat, end_us (and lag) of each block of lines; latency null for failed/skipped."""
    names = _NAMES[:ncols]
    wanted = ["lat", "epoch", "us", *(["lag"] if ncols >= 7 else [])]
    for block in _blocks(paths):
        df = pl.read_csv(
            block,
            separator=" ",
            has_header=False,
            new_columns=names,
            schema_overrides=dict.fromkeys(wanted, pl.Int64),
            null_values=["failed", "skipped"],
            truncate_ragged_lines=True,
            infer_schema=False,
        )
        yield df.select(
            pl.col("lat"),
            (pl.col("epoch") * 1_000_000 + pl.col("us")).alias("end_us"),
            *([pl.col("lag")] if ncols >= 7 else []),
        )


def _merge(parts: list[pl.DataFrame], keys: Sequence[str], has_lag: bool) -> pl.DataFrame:
    aggs = [pl.col("n").sum(), pl.col("max").max()]
    if has_lag:
        aggs += [pl.col("lag_sum").sum(), pl.col("lag_max").max()]
    return pl.concat(parts).group_by(*keys).agg(aggs)


def _first_start(path: Path, ncols: int) -> int | None:
    """When the earliest transaction in the file's first block started (us)."""
    for df in _frames([path], ncols):
        first = df.select((pl.col("end_us") - pl.col("lat")).min()).item()
        return None if first is None else int(first)
    return None


def _aggregate(
    paths: Sequence[Path], ncols: int, start_us: int | None, duration_s: float | None
) -> tuple[list[pl.DataFrame], list[pl.DataFrame], int | None, int]:
    """One pass: partial (second, bucket) and lag-bucket aggregates with seconds counted
    from start_us, when the earliest transaction really started, and the lines read."""
    has_lag = ncols >= 7
    second = (pl.col("end_us") - (start_us or 0)) // 1_000_000
    if duration_s is not None:  # transactions still finishing after -T ends
        second = second.clip(lower_bound=0, upper_bound=max(0, math.ceil(duration_s) - 1))
    aggs = [pl.len().alias("n"), pl.col("lat").max().alias("max")]
    if has_lag:
        aggs += [pl.col("lag").sum().alias("lag_sum"), pl.col("lag").max().alias("lag_max")]
    parts: list[pl.DataFrame] = []
    lag_parts: list[pl.DataFrame] = []
    earliest: int | None = None
    lines = 0
    for i, df in enumerate(_frames(paths, ncols), 1):
        lines += df.height
        first = df.select((pl.col("end_us") - pl.col("lat")).min()).item()
        if first is not None and (earliest is None or first < earliest):
            earliest = int(first)
        parts.append(
            df.with_columns(
                second.cast(pl.Int32).alias("s"),
                (pl.col("lat").clip(lower_bound=1).log() * BUCKETS_PER_E)
                .floor()
                .cast(pl.Int32)
                .alias("b"),
            )
            .group_by("s", "b")
            .agg(aggs)
        )
        if has_lag:
            lag_parts.append(
                df.drop_nulls("lag")
                .group_by(
                    (pl.col("lag").clip(lower_bound=1).log() * BUCKETS_PER_E)
                    .floor()
                    .cast(pl.Int32)
                    .alias("lb")
                )
                .agg(pl.len().alias("n"), pl.col("lag").max().alias("max"))
            )
        if i % _MERGE_EVERY == 0:
            parts = [_merge(parts, ("s", "b"), has_lag)]
            if has_lag:
                lag_parts = [_merge(lag_parts, ("lb",), False)]
    return parts, lag_parts, earliest, lines


def parse_txlog(
    paths: Sequence[Path], *, sampling_rate: float = 1.0, duration_s: float | None = None
) -> LatencyStats | None:
    """Percentiles per run and per second from one or more pgbench log files.

    Read in blocks of CHUNK_BYTES (never the whole log in memory, however long the run):
    each block's (second, bucket) -> count, max and lag go into partial aggregates,
    merged as they go, so memory is a block plus one row per (second, bucket) in use.
    Seconds count from when the first transaction started, taken from the first block of
    each file; should a later transaction have started earlier still (a very long one),
    the pass is made again from that start, so the result is exact either way."""
    existing = [p for p in paths if p.exists() and p.stat().st_size > 0]
    if not existing:
        return None
    ncols = log_columns(existing[0])
    has_lag = ncols >= 7
    starts = [_first_start(p, ncols) for p in existing]
    start_us = min((s for s in starts if s is not None), default=None)
    while True:
        parts, lag_parts, earliest, lines = _aggregate(existing, ncols, start_us, duration_s)
        if earliest is None:  # every transaction failed
            return LatencyStats(0, lines, sampling_rate, 0.0, {})
        if start_us is not None and earliest >= start_us:
            break
        start_us = earliest
    # failed transactions (no latency) are in bucket null
    per_all = _merge(parts, ("s", "b"), has_lag)
    failed = int(per_all.filter(pl.col("b").is_null())["n"].sum())
    per = per_all.drop_nulls("b").sort("s", "b")
    if per.height == 0:
        return LatencyStats(0, failed, sampling_rate, 0.0, {})
    overall = per.group_by("b").agg(pl.col("n").sum()).sort("b")
    b_all, n_all = overall["b"].to_numpy(), overall["n"].to_numpy()
    pct = {k: round(_percentile_from_counts(b_all, n_all, q), 3) for k, q in PERCENTILES.items()}
    pct["max"] = round(int(per["max"].max()) / 1000.0, 3)  # type: ignore[arg-type]
    series = _per_second(per, sampling_rate)
    lag = None
    if has_lag:
        lag, lag_series = _lag(_merge(lag_parts, ("lb",), False).sort("lb"), per)
        series.update(lag_series)
    return LatencyStats(
        int(n_all.sum()),
        failed,
        sampling_rate,
        start_us / 1e6,
        pct,
        series,
        {int(b): int(n) for b, n in zip(b_all, n_all, strict=True)},
        lag,
    )


def _lag(
    hist: pl.DataFrame, per: pl.DataFrame
) -> tuple[dict[str, float], dict[str, list[float | None]]]:
    """Schedule lag: percentiles over the run (log buckets, as for latency) and the mean
    and maximum per second."""
    stats: dict[str, float] = {}
    if hist.height:
        lb, n = hist["lb"].to_numpy(), hist["n"].to_numpy()
        for k, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            stats[k] = round(_percentile_from_counts(lb, n, q), 3)
        stats["max"] = round(int(hist["max"].max()) / 1000.0, 3)  # type: ignore[arg-type]
    rows = (
        per.group_by("s")
        .agg(pl.col("n").sum(), pl.col("lag_sum").sum(), pl.col("lag_max").max())
        .sort("s")
    )
    last = int(rows["s"].max())  # type: ignore[arg-type]
    full = pl.DataFrame({"s": np.arange(last + 1, dtype=np.int32)}).join(rows, on="s", how="left")
    avg = [
        None if (n is None or not n or t is None) else round(t / n / 1000.0, 3)
        for n, t in zip(full["n"].to_list(), full["lag_sum"].to_list(), strict=True)
    ]
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
    full = pl.DataFrame({"s": np.arange(last + 1, dtype=np.int32)}).join(rows, on="s", how="left")

    def ms(col: str) -> list[float | None]:
        return [None if v is None else round(bucket_value_ms(v), 3) for v in full[col].to_list()]

    return {
        "tps_log": [
            0.0 if c is None else round(c / sampling_rate, 1) for c in full["count"].to_list()
        ],
        "lat_p50_ms": ms("p50"),
        "lat_p90_ms": ms("p90"),
        "lat_p99_ms": ms("p99"),
        "lat_max_ms": [None if v is None else round(v / 1000.0, 3) for v in full["max"].to_list()],
    }


def compress_logs(paths: Sequence[Path], dest: Path) -> Path:
    """Concatenate the per-thread logs into one gzip artifact and remove them."""
    from pgfsbench.system.held import Held, open_new_file

    with (
        os.fdopen(open_new_file(dest, 0o644), "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3) as out,
    ):
        for p in sorted(paths):
            with open_written_by_others(p) as src:  # pgbench's, as the postgres user
                shutil.copyfileobj(src, out, 1 << 20)
            with Held.open(p.parent) as logs:  # the name removed, whatever it is now
                logs.remove(p.name)
    return dest
