"""The self-contained HTML report: tables and plotly charts, no network needed to view it.

Pure in its core (`render_report`: results in, HTML out); `write_report` reads the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from jinja2 import Environment, PackageLoader, select_autoescape
from plotly.offline import get_plotlyjs

from pgfsbench import __version__
from pgfsbench.analysis.summary import CellSummary, Spread, summarise
from pgfsbench.report.terminal import fmt_spread
from pgfsbench.results.store import Store
from pgfsbench.units import human_bytes

_env = Environment(loader=PackageLoader("pgfsbench.report", "templates"),
                   autoescape=select_autoescape(["html"]))


def _bar(cells: Sequence[CellSummary], attr: str, title: str, unit: str,
         scale: float = 1.0, better: str = "") -> dict[str, Any]:
    names, med, lo, hi = [], [], [], []
    for c in cells:
        s: Spread | None = getattr(c, attr)
        if s is None:
            continue
        names.append((c.label or c.cell) + (" (FUSE)" if c.fuse else ""))
        med.append(s.median / scale)
        lo.append((s.median - s.low) / scale)
        hi.append((s.high - s.median) / scale)
    fig = go.Figure(go.Bar(
        x=med, y=names, orientation="h",
        error_x={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
        hovertemplate="%{y}: %{x:,.2f} " + unit + "<extra></extra>"))
    fig.update_layout(title=f"{title} ({unit}){' — ' + better if better else ''}",
                      yaxis={"autorange": "reversed"}, margin={"l": 10, "r": 10, "t": 40,
                                                               "b": 30},
                      height=120 + 28 * len(names))
    return json.loads(fig.to_json())  # type: ignore[no-any-return]


def _series_figure(title: str, runs: Sequence[Mapping[str, Any]], name: str,
                   unit: str, checkpoints: bool = False,
                   labels: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    fig = go.Figure()
    for r in runs:
        s = (r.get("series") or {}).get(name)
        if not s:
            continue
        xs = [s["t0"] + i * s["step"] for i in range(len(s["values"]))]
        label = (labels or {}).get(r["cell"], r["cell"])
        fig.add_trace(go.Scatter(x=xs, y=s["values"], mode="lines",
                                 name=f"{label} #{r['repetition']}"))
        if checkpoints:
            for c in r.get("checkpoints") or []:
                if c.get("started_s") is not None and c["started_s"] >= 0:
                    fig.add_vrect(x0=c["started_s"], x1=max(c["ended_s"], c["started_s"] + 0.2),
                                  fillcolor="orange", opacity=0.15, line_width=0,
                                  annotation_text="checkpoint", annotation_position="top left")
    if not fig.data:
        return None
    fig.update_layout(title=title, xaxis_title="seconds into the measured phase",
                      yaxis_title=unit, margin={"l": 10, "r": 10, "t": 40, "b": 30},
                      height=400, legend={"orientation": "h", "y": -0.25})
    return json.loads(fig.to_json())  # type: ignore[no-any-return]


def _waits_figure(run: Mapping[str, Any], top: int = 8) -> dict[str, Any] | None:
    """What the backends were waiting on, second by second (stacked), for one run."""
    s = (run.get("series") or {}).get("waits")
    if not s or not any(s["values"]):
        return None
    totals: dict[str, float] = {}
    for second in s["values"]:
        for event, n in (second or {}).items():
            totals[event] = totals.get(event, 0.0) + n
    events = sorted(totals, key=lambda e: -totals[e])[:top]
    xs = [s["t0"] + i * s["step"] for i in range(len(s["values"]))]
    fig = go.Figure()
    for event in events:
        fig.add_trace(go.Scatter(x=xs, y=[(v or {}).get(event, 0) for v in s["values"]],
                                 name=event, stackgroup="waits", mode="lines"))
    fig.update_layout(title=f"Backends by wait event: {run['cell']} #{run['repetition']}",
                      xaxis_title="seconds into the measured phase", yaxis_title="backends",
                      margin={"l": 10, "r": 10, "t": 40, "b": 30}, height=320)
    return json.loads(fig.to_json())  # type: ignore[no-any-return]


def render_report(campaign: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]],
                  *, inline_js: bool = True) -> str:
    cells = summarise(runs)
    labels = {c.cell: c.label for c in cells}
    base = next((c.tps.median for c in cells if c.tps), None)
    rows = []
    for c in cells:
        rows.append({
            "cell": c.label or c.cell, "fs": c.fs, "fuse": c.fuse,
            "implementation": c.implementation,
            "tps": fmt_spread(c.tps, 0),
            "rel": f"{(c.tps.median / base - 1) * 100:+.1f}%" if c.tps and base else "-",
            "spread": f"{c.tps.rel_range * 100:.1f}%" if c.tps and c.tps.n > 1 else "-",
            "latency": fmt_spread(c.latency_avg_ms, 2),
            "p99": fmt_spread(c.latency_p99_ms, 2),
            "load": fmt_spread(c.load_seconds, 1),
            "space": human_bytes(c.space_bytes.median) if c.space_bytes else "-",
            "ok": f"{c.ok}/{c.runs}", "failed": c.ok < c.runs, "errors": c.errors,
        })
    charts = [
        ("tps", _bar(cells, "tps", "Transactions per second", "tps", better="larger is better")),
        ("latency", _bar(cells, "latency_avg_ms", "Average latency", "ms",
                         better="smaller is better")),
        ("load", _bar(cells, "load_seconds", "Load time (pgbench -i)", "s",
                      better="smaller is better")),
        ("space", _bar(cells, "space_bytes", "Space used after load", "MiB", scale=1 << 20,
                       better="smaller is better")),
    ]
    timeline = [f for f in (
        _series_figure("TPS per second (checkpoints shaded)", runs, "tps", "tps",
                       checkpoints=True, labels=labels),
        _series_figure("Latency p99 per second (transaction log)", runs, "lat_p99_ms", "ms",
                       checkpoints=True, labels=labels),
        _series_figure("Dirty page cache", runs, "dirty_kb", "kB", labels=labels),
        _series_figure("Writes to the devices under test", runs, "disk_write_mbps", "MB/s",
                       labels=labels),
        _series_figure("CPU iowait", runs, "cpu_iowait_pct", "%", labels=labels),
        _series_figure("WAL generated", runs, "wal_mbps", "MB/s", labels=labels),
    ) if f is not None]
    timeline += [f for f in (_waits_figure(r) for r in runs[:12]) if f is not None]
    env = dict(campaign.get("environment") or {}) if campaign else {}
    return _env.get_template("report.html.j2").render(
        campaign=campaign, env=env, rows=rows, charts=charts, timeline=timeline,
        runs=runs, any_fuse=any(c.fuse for c in cells), version=__version__,
        plotly_js=get_plotlyjs() if inline_js else "",
        figures_json=json.dumps({"bars": dict(charts),
                                 "timeline": timeline}),
    )


def write_report(store: Store, path: Path, *, campaign_ids: list[int]) -> Path:
    campaigns = [c for c in store.campaigns() if c["id"] in campaign_ids]
    runs = [store.get_run(int(r["run_id"])) for cid in campaign_ids
            for r in store.list_runs(cid) if not r.get("superseded_by")]
    path.write_text(render_report(campaigns[0] if campaigns else None, runs))
    return path
