"""Export runs or their per-second series as CSV or Parquet (polars)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import polars as pl

from pgfsbench.results.records import StoredRun, bucket_value_ms
from pgfsbench.results.store import Store
from pgfsbench.system.held import write_file
from pgfsbench.system.printable import printable

SCALAR_TYPES = (int, float, str, bool, type(None))


def _flat(run: StoredRun) -> dict[str, object]:
    """Scalars as columns; nested values as JSON text so nothing is lost. Text is made
    printable: a stored name or error may hold escape sequences for whoever views the
    file in a terminal (report/inert.py)."""
    flat = {
        k: v if isinstance(v, SCALAR_TYPES) else json.dumps(v, default=str)
        for k, v in run.columns().items()
    }
    return {k: printable(v) if isinstance(v, str) else v for k, v in flat.items()}


def series_rows(run: StoredRun) -> list[dict[str, object]]:
    """One row per value of each of the run's series: (run_id, cell, series, t, value).
    A histogram's [bucket, count] pairs become t = the bucket's latency in ms, value =
    its count; a series of objects (wait events) one series per key."""
    rows: list[dict[str, object]] = []

    def add(series: str, t: float, value: object) -> None:
        rows.append(
            {
                "run_id": run.run_id,
                "cell": printable(run.cell),
                "series": printable(series),
                "t": t,
                "value": value,
            }
        )

    for name, s in run.series.items():
        if name == "latency_histogram":
            for bucket, count in s.values:
                add("latency_histogram_ms", bucket_value_ms(bucket), count)
            continue
        for i, value in enumerate(s.values):
            t = s.t0 + i * s.step
            if isinstance(value, list | tuple):
                continue  # no other series holds lists; never let one break export
            if isinstance(value, dict):
                for key, v in value.items():
                    add(f"{name}.{key}", t, v)
            else:
                add(name, t, value)
    return rows


def export_runs(
    store: Store, output: Path, fmt: str, *, series: bool = False, host: str | None = None
) -> int:
    runs = [r for r in store.list_runs() if host is None or r.host == host]
    if series:
        rows = [row for r in runs for row in series_rows(store.get_run(r.run_id))]
        frame = pl.DataFrame(
            rows,
            schema={
                "run_id": pl.Int64,
                "cell": pl.Utf8,
                "series": pl.Utf8,
                "t": pl.Float64,
                "value": pl.Float64,
            },
        )
    else:
        frame = pl.DataFrame([_flat(r) for r in runs], infer_schema_length=None)
    buffer = io.BytesIO()
    if fmt == "parquet":
        frame.write_parquet(buffer)
    else:
        frame.write_csv(buffer)
    # other users' command lines may be in it (a disturbance's): root's alone, made anew
    write_file(output, buffer.getvalue(), 0o600)
    return frame.height
