"""Export runs or their per-second series as CSV or Parquet (polars)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from pgfsbench.collect.txlog import bucket_value_ms
from pgfsbench.results.store import Store

SCALAR_TYPES = (int, float, str, bool, type(None))


def _flat(run: dict[str, Any]) -> dict[str, Any]:
    """Scalars as columns; nested values as JSON text so nothing is lost."""
    return {
        k: v if isinstance(v, SCALAR_TYPES) else json.dumps(v, default=str) for k, v in run.items()
    }


def export_runs(
    store: Store, output: Path, fmt: str, *, series: bool = False, host: str | None = None
) -> int:
    runs = [r for r in store.list_runs() if host is None or r.get("host") == host]
    if series:
        rows: list[dict[str, Any]] = []
        for r in runs:
            detail = store.get_run(int(r["run_id"]))
            for name, s in detail["series"].items():
                if name == "latency_histogram":
                    # [bucket, count] pairs: t is the bucket's latency in ms, value its count
                    for bucket, count in s["values"]:
                        rows.append(
                            {
                                "run_id": r["run_id"],
                                "cell": r["cell"],
                                "series": "latency_histogram_ms",
                                "t": bucket_value_ms(bucket),
                                "value": count,
                            }
                        )
                    continue
                for i, value in enumerate(s["values"]):
                    if isinstance(value, list | tuple):
                        continue  # no other series holds lists; never let one break export
                    if isinstance(value, dict):
                        for key, v in value.items():
                            rows.append(
                                {
                                    "run_id": r["run_id"],
                                    "cell": r["cell"],
                                    "series": f"{name}.{key}",
                                    "t": s["t0"] + i * s["step"],
                                    "value": v,
                                }
                            )
                    else:
                        rows.append(
                            {
                                "run_id": r["run_id"],
                                "cell": r["cell"],
                                "series": name,
                                "t": s["t0"] + i * s["step"],
                                "value": value,
                            }
                        )
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
    if fmt == "parquet":
        frame.write_parquet(output)
    else:
        frame.write_csv(output)
    return frame.height
