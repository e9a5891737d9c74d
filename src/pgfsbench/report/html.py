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
        names.append(c.cell + (" (FUSE)" if c.fuse else ""))
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
                   unit: str) -> dict[str, Any] | None:
    fig = go.Figure()
    for r in runs:
        s = (r.get("series") or {}).get(name)
        if not s:
            continue
        xs = [s["t0"] + i * s["step"] for i in range(len(s["values"]))]
        fig.add_trace(go.Scatter(x=xs, y=s["values"], mode="lines",
                                 name=f"{r['cell']} #{r['repetition']}"))
    if not fig.data:
        return None
    fig.update_layout(title=title, xaxis_title="seconds into the measured phase",
                      yaxis_title=unit, margin={"l": 10, "r": 10, "t": 40, "b": 30},
                      height=380, legend={"orientation": "h"})
    return json.loads(fig.to_json())  # type: ignore[no-any-return]


def render_report(campaign: Mapping[str, Any] | None, runs: Sequence[Mapping[str, Any]],
                  *, inline_js: bool = True) -> str:
    cells = summarise(runs)
    base = next((c.tps.median for c in cells if c.tps), None)
    rows = []
    for c in cells:
        rows.append({
            "cell": c.cell, "fs": c.fs, "fuse": c.fuse, "implementation": c.implementation,
            "tps": fmt_spread(c.tps, 0),
            "rel": f"{(c.tps.median / base - 1) * 100:+.1f}%" if c.tps and base else "-",
            "spread": f"{c.tps.rel_range * 100:.1f}%" if c.tps and c.tps.n > 1 else "-",
            "latency": fmt_spread(c.latency_avg_ms, 2),
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
        _series_figure("TPS per second", runs, "tps", "tps"),
        _series_figure("Latency per second (average)", runs, "latency_avg_ms", "ms"),
        _series_figure("Latency per second (p99, from the transaction log)", runs, "lat_p99_ms",
                       "ms"),
    ) if f is not None]
    env = dict(campaign.get("environment") or {}) if campaign else {}
    return _env.get_template("report.html.j2").render(
        campaign=campaign, env=env, rows=rows, charts=charts, timeline=timeline,
        runs=runs, any_fuse=any(c.fuse for c in cells), version=__version__,
        plotly_js=get_plotlyjs() if inline_js else "",
        figures_json=json.dumps({"bars": dict(charts),
                                 "timeline": timeline}),
    )


def write_report(store: Store, path: Path, *, campaign_id: int | None = None) -> Path:
    campaign_id = campaign_id if campaign_id is not None else store.latest_campaign_id()
    campaign = next((c for c in store.campaigns() if c["id"] == campaign_id), None)
    runs = [store.get_run(int(r["run_id"])) for r in store.list_runs(campaign_id)]
    path.write_text(render_report(campaign, runs))
    return path
