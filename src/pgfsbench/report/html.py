"""The self-contained HTML report: answers first (what stands out, the verdicts), evidence
second (charts with confidence intervals, each run's timeline). No network needed.

Pure: campaigns, runs and their summaries in, one HTML document out. plotly.js is embedded
once, gzip-compressed (about 2 MB instead of 5) and unpacked by the browser
(DecompressionStream); figures are built in the page from compact per-run data, so no
layout is repeated per run.
"""

from __future__ import annotations

import base64
import functools
import gzip
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from jinja2 import Environment, PackageLoader, select_autoescape
from plotly.offline import get_plotlyjs

from pgfsbench import __version__
from pgfsbench.analysis.history import METRICS, SeriesHistory
from pgfsbench.analysis.series import Aligned, align
from pgfsbench.analysis.stalls import CAUSES, StallEpisode, describe_blocker
from pgfsbench.analysis.stats import Estimate
from pgfsbench.analysis.summary import CellSummary, GroupKey, Highlights, by_group, leaders
from pgfsbench.report.conditions import conditions
from pgfsbench.report.terminal import (
    P99_LEGEND,
    cell_name,
    cost_lines,
    end_state_text,
    fmt_geometric,
    fmt_p99,
    fmt_range,
    fmt_space,
    fmt_spread,
    fmt_vs,
    fs_text,
    reconciled,
    when,
)
from pgfsbench.results.records import StoredCampaign, StoredRun
from pgfsbench.units import human_bytes, human_seconds

_env = Environment(
    loader=PackageLoader("pgfsbench.report", "templates"),
    autoescape=select_autoescape(["html", "j2"]),
)

# one colour per wait event across the whole report (Okabe-Ito, then Tableau)
PALETTE = [
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#F0E442",
    "#000000",
    "#4E79A7",
    "#F28E2B",
    "#59A14F",
    "#E15759",
    "#76B7B2",
    "#B07AA1",
    "#FF9DA7",
    "#9C755F",
    "#BAB0AC",
    "#EDC948",
]


@functools.cache
def packed_plotly() -> str:
    return base64.b64encode(gzip.compress(get_plotlyjs().encode(), 9, mtime=0)).decode()


def _num(v: float | None, digits: int = 3) -> float | None:
    if v is None or not math.isfinite(v):
        return None
    return round(v, digits)


def _arr(values: Any, digits: int = 2) -> list[float | None]:
    return [_num(float(v), digits) for v in values]


def wait_colours(runs: Sequence[StoredRun]) -> dict[str, str]:
    """Wait events by total weight across every run, each with its own colour."""
    totals: dict[str, float] = {}
    for r in runs:
        waits = r.series.get("waits")
        for second in waits.values if waits is not None else []:
            for event, n in (second or {}).items():
                totals[event] = totals.get(event, 0.0) + float(n)
    events = sorted(totals, key=lambda e: -totals[e])
    return {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(events)}


def run_data(
    run: StoredRun, label: str, stalls: Sequence[StallEpisode], top_waits: int = 8
) -> dict[str, object]:
    """What one run's timeline needs, aligned on the measured seconds."""
    al = align(run)
    data: dict[str, object] = {
        "id": run.run_id,
        "label": f"{label} #{run.repetition}",
        "status": run.status,
        "t": list(range(1, al.seconds + 1)),
    }
    for key, name, div, digits in (
        ("tps", "tps", 1, 1),
        ("tps_log", "tps_log", 1, 1),
        ("p50", "lat_p50_ms", 1, 3),
        ("p99", "lat_p99_ms", 1, 3),
        ("max", "lat_max_ms", 1, 3),
        ("disk_w", "disk_write_mbps", 1, 2),
        ("disk_r", "disk_read_mbps", 1, 2),
        ("util", "disk_util_pct", 1, 1),
        ("dirty", "dirty_kb", 1024, 1),
        ("wb", "writeback_kb", 1024, 1),
        ("iowait", "cpu_iowait_pct", 1, 1),
        ("await", "disk_await_ms", 1, 3),
        ("out_cpu", "outside_cpu_pct", 1, 1),
    ):
        if al.has(name):
            data[key] = _arr(al.get(name) / div, digits)
    if al.has("outside_write_mbps") or al.has("outside_read_mbps"):
        data["out_io"] = _arr(
            np.nan_to_num(al.get("outside_write_mbps"))
            + np.nan_to_num(al.get("outside_read_mbps")),
            2,
        )
    beneath = _beneath(al)
    if beneath:
        data["beneath"] = beneath
    if al.sampled("blocked"):
        data["blocked"] = [
            None if sec is None else sum(n for k, n in sec.items() if k.startswith("benchmark|"))
            for sec in al.structured["blocked"]
        ]
    if al.waits:
        totals: dict[str, float] = {}
        for sec in al.waits:
            for e, n in sec.items():
                if not e.startswith("Client/"):
                    totals[e] = totals.get(e, 0.0) + n
        events = sorted(totals, key=lambda e: -totals[e])[:top_waits]
        data["waits"] = {e: [_num(sec.get(e, 0.0), 2) for sec in al.waits] for e in events}
    data["checkpoints"] = [
        {
            "s": _num(c.start, 2),
            "sync": _num(c.sync_start, 2),
            "e": _num(c.ended_s, 2),
            "reason": c.reason + (", still running when the run ended" if c.running else ""),
            "buffers": c.buffers,
        }
        for c in al.checkpoints
        if c.ended_s >= 0 and c.start <= al.seconds
    ]
    data["stalls"] = [episode_data(e) for e in stalls]
    data["events"] = [{"s": e.start_s, "e": e.end_s, "label": e.label} for e in al.events]
    return data


def _beneath(al: Aligned) -> dict[str, object] | None:
    """The disks that hold the devices under test (a loop device's file): what they did,
    and how much of it the storage under test does not explain."""
    beneath = [d for d in al.beneath if al.has(f"disk.{d}.write_mbps")]
    if beneath:
        total = sum(
            (
                np.nan_to_num(al.device(d, "write_mbps")) + np.nan_to_num(al.device(d, "read_mbps"))
                for d in beneath
            ),
            np.zeros(al.seconds),
        )
        ours = np.nan_to_num(al.get("disk_write_mbps")) + np.nan_to_num(al.get("disk_read_mbps"))
        return {
            "names": beneath,
            "io": _arr(total, 2),
            "other": _arr(np.clip(total - ours, 0, None), 2),
            "await": {
                d: _arr(al.device(d, "await_ms"), 3)
                for d in beneath
                if al.has(f"disk.{d}.await_ms")
            },
        }
    return None


def episode_data(e: StallEpisode) -> dict[str, object]:
    """An episode as the report shows it: on the timeline and in the stalls table."""
    return {
        "s": e.start_s,
        "e": e.end_s,
        "kind": e.kind,
        "cause": e.cause_text,
        "confidence": e.confidence,
        "headline": e.headline(),
        "evidence": list(e.evidence),
        "ruled_out": [f"not {CAUSES[k]}: {why}" for k, _, why in e.alternatives],
        "missing": list(e.missing),
        "blockers": [describe_blocker(b) for b in e.blockers],
    }


# the repetitions are drawn as dots on their bar when there are this few of them
FEW_RUNS = 10


def bar_kind(c: CellSummary, p99: bool = False) -> str:
    """A bar's mark by its verdict against the baseline (throughput's, or p99 latency's
    own): the baseline, better, worse, the same (no significant difference), or no
    verdict (too few runs); references and unsafe cells are lines."""
    if c.baseline is None:
        return "baseline"
    comparison = c.p99_vs_baseline if p99 else c.vs_baseline
    if comparison is None:
        return "none"
    return {
        "better": "better",
        "worse": "worse",
        "equivalent": "same",
        "undecided": "undecided",
    }.get(str(comparison.verdict), "none")


def bar_words(c: CellSummary) -> str:
    """What a bar says of its verdict: '-71.0% slower', 'undecided', 'no verdict (why)'."""
    if c.baseline is None:
        return "baseline"
    v = c.vs_baseline
    if v is None:
        return "no verdict"
    if v.verdict.decided or str(v.verdict) == "equivalent":
        return f"{(v.change_pct or 0):+.1f}% {v.verdict_words()}"
    if str(v.verdict) == "undecided":
        return f"{(v.change_pct or 0):+.1f}%: undecided, too noisy to tell"
    why = v.reason.removeprefix("no verdict: ").split(";")[0].split(" (")[0]
    return f"no verdict ({why})"


def _bar_group(cells: Sequence[CellSummary]) -> dict[str, object]:
    """One comparable group's bars: mean with its 95% CI, the median in the hover."""

    def bars(attr: str, scale: float = 1.0) -> dict[str, object]:
        names, mean, lo, hi, med = [], [], [], [], []
        kinds: list[str] = []  # each bar's verdict against its baseline (bar_kind)
        words: list[str] = []  # and in words (bar_words)
        runs: list[list[float | None]] = []  # the repetitions' own values, drawn when few
        refs = []  # references: a line across the chart (a ceiling), not a bar
        for c in cells:
            e = getattr(c, attr)
            if e is None:
                continue
            if c.reference:
                refs.append(
                    {
                        "name": c.label,
                        "value": _num(e.mean / scale),
                        "unsafe": "; ".join(c.unsafe),
                    }
                )
                continue
            names.append(c.label + (" (FUSE)" if c.fuse else ""))
            kinds.append(bar_kind(c) if attr == "tps" else "")
            words.append(bar_words(c) if attr == "tps" else "")
            values = c.values if attr == "tps" else ()
            runs.append([_num(v / scale) for v in values] if 0 < len(values) <= FEW_RUNS else [])
            med.append(_num(e.median / scale))
            if attr == "tps" and e.gmean is not None:
                # the geometric mean and its interval: what the verdicts compare
                mean.append(_num(e.gmean / scale))
                lo.append(None if e.gci_low is None else _num((e.gmean - e.gci_low) / scale))
                hi.append(None if e.gci_high is None else _num((e.gci_high - e.gmean) / scale))
                continue
            mean.append(_num(e.mean / scale))
            # no interval for a single run: no error bar
            lo.append(None if e.ci_low is None else _num((e.mean - e.ci_low) / scale))
            hi.append(None if e.ci_high is None else _num((e.ci_high - e.mean) / scale))
        return {
            "names": names,
            "mean": mean,
            "lo": lo,
            "hi": hi,
            "median": med,
            "refs": refs,
            "stat": "geometric mean" if attr == "tps" else "mean",
            "kinds": kinds,
            "words": words,
            "runs": runs,
        }

    def p99_bars() -> dict[str, object]:
        """The table's p99 (of all the cell's transactions, its runs' histograms merged; else
        the median of its runs' p99), whiskers from the lowest to the highest run's p99."""
        names, value, lo, hi, med = [], [], [], [], []
        kinds: list[str] = []  # each bar's p99 verdict against its baseline
        for c in cells:
            e = c.latency_p99_ms
            pooled = c.latency_pooled.percentiles_ms.get("p99") if c.latency_pooled else None
            if c.reference or (e is None and pooled is None):
                continue
            shown = pooled if pooled is not None else (e.median if e else None)
            if shown is None:
                continue
            names.append(c.label + (" (FUSE)" if c.fuse else ""))
            value.append(_num(shown))
            kinds.append(bar_kind(c, p99=True))
            med.append(_num(e.median) if e else None)
            several = e is not None and e.n > 1
            lo.append(_num(max(0.0, shown - e.low)) if several and e else None)
            hi.append(_num(max(0.0, e.high - shown)) if several and e else None)
        return {
            "names": names,
            "mean": value,
            "lo": lo,
            "hi": hi,
            "median": med,
            "refs": [],
            "stat": "p99",
            "kinds": kinds,
        }

    space: dict[str, object] = {
        "names": [c.label for c in cells],
        "data": [
            _num(
                (
                    c.space_data_bytes.median
                    if c.space_data_bytes
                    else (c.space_bytes.median if c.space_bytes else 0)
                )
                / 2**20,
                1,
            )
            for c in cells
        ],
        "wal": [
            _num((c.space_wal_bytes.median if c.space_wal_bytes else 0) / 2**20, 1) for c in cells
        ],
    }
    space["alike"] = space_alike(cells)
    return {
        "title": cells[0].group_label,
        "unit": cells[0].unit,
        "tps": bars("tps"),
        "p99": p99_bars(),
        "load": bars("load_seconds"),
        "space": space,
    }


# cells whose space after the load differs by less than this share are said in a line:
# a chart of equal bars draws no difference
SPACE_ALIKE = 0.02


def space_alike(cells: Sequence[CellSummary]) -> str | None:
    """A sentence when every cell took the same space after the load (within SPACE_ALIKE
    of the smallest, in all and in pg_wal), else None (the chart then shows the
    differences)."""

    def total(c: CellSummary) -> float | None:
        data = c.space_data_bytes or c.space_bytes
        if data is None:
            return None
        return data.median + (c.space_wal_bytes.median if c.space_wal_bytes else 0.0)

    totals = [total(c) for c in cells]
    if len(cells) < 2 or any(t is None or t <= 0 for t in totals):
        return None
    known = [t for t in totals if t is not None]
    wal = [c.space_wal_bytes.median if c.space_wal_bytes else 0.0 for c in cells]
    if max(known) > min(known) * (1 + SPACE_ALIKE) or max(wal) > min(wal) * (1 + SPACE_ALIKE):
        return None
    return (
        f"Space after load: alike on every cell ({fmt_space(cells[0])}, the cells within "
        f"{SPACE_ALIKE:.0%} of each other)."
    )


def _g(e: Estimate) -> tuple[float, float, float]:
    """(centre, low, high): the geometric mean and its interval, else the mean's."""
    if e.gmean is not None:
        return e.gmean, e.gci_low or e.gmean, e.gci_high or e.gmean
    return e.mean, e.ci_low or e.mean, e.ci_high or e.mean


def _sweeps(cells: Sequence[CellSummary]) -> list[dict[str, object]]:
    """Throughput and p99 against clients, and against scale, where the campaign swept them."""
    out: list[dict[str, object]] = []
    for dim in ("clients", "scale", "rate"):
        lines: dict[str, list[tuple[float, CellSummary]]] = {}
        for c in cells:
            if dim == "rate":
                x: float | None = (
                    c.rate_share * 100 if c.rate_share else (100.0 if c.rate is None else None)
                )
            else:
                x = getattr(c, dim)
            if x is None or c.tps is None:
                continue
            others = [o for o in ("clients", "scale") if o != dim]
            key = (
                f"{c.storage}/{c.postgres}/{c.kernel}/{c.workload} ("
                + ", ".join(f"{o} {getattr(c, o)}" for o in others)
                + ")"
                + (f" on {c.host}" if c.host else "")
            )
            if dim != "rate":
                key += f" {c.rate_share * 100:g}%" if c.rate_share else ""
            lines.setdefault(key, []).append((float(x), c))
        lines = {k: sorted(v, key=lambda p: p[0]) for k, v in lines.items() if len(v) > 1}
        if not lines:
            continue
        label = {"rate": "load (% of the maximum)"}.get(dim, dim)
        out.append(
            {
                "dim": label,
                "lines": [
                    {
                        "name": k,
                        "x": [x for x, _ in v],
                        # the geometric mean and its interval, as everywhere a ratio is
                        "y": [_num(_g(c.tps)[0]) if c.tps else None for _, c in v],
                        "lo": [_num(_g(c.tps)[0] - _g(c.tps)[1]) if c.tps else None for _, c in v],
                        "hi": [_num(_g(c.tps)[2] - _g(c.tps)[0]) if c.tps else None for _, c in v],
                        "p99": [
                            _num(c.latency_p99_ms.median) if c.latency_p99_ms else None
                            for _, c in v
                        ],
                    }
                    for k, v in lines.items()
                ],
            }
        )
    return out


def remedy_number(seen: dict[str, int], remedy: str) -> int:
    """The number a remedy is said under, 1 for the first one met."""
    return seen.setdefault(remedy, len(seen) + 1)


def remedy_notes(cells: Sequence[CellSummary]) -> list[tuple[int, str]]:
    """Each remedy once, numbered as the rows point at them (table_rows)."""
    seen: dict[str, int] = {}
    for c in (c for members in by_group(cells) for c in members):
        for r in c.remedies:
            remedy_number(seen, r)
    return [(n, r) for r, n in seen.items()]


def table_rows(cells: Sequence[CellSummary]) -> list[dict[str, object]]:
    """The summary table's rows, group by group (the template heads each group)."""
    best: dict[GroupKey, dict[str, str]] = {}
    for members in by_group(cells):
        best[members[0].group] = {}
        for key in ("tps", "latency_p99_ms", "load_seconds"):
            # the star only for a significant winner (summary.leaders)
            lead = leaders(members, key)
            if lead is not None and lead.winner is not None:
                best[members[0].group][key] = lead.winner.cell
    rows = []
    remedies_seen: dict[str, int] = {}
    for c in (c for members in by_group(cells) for c in members):
        b = best[c.group]
        rows.append(
            {
                "group": c.group_label,
                "cell": cell_name(c),
                "id": c.cell,
                "fs": fs_text(c),
                "reference": c.reference,
                "fuse": c.fuse,
                "tps": fmt_geometric(c.tps),
                "range": fmt_range(c.tps),
                "vs": fmt_vs(c),
                "verdict": str(c.vs_baseline.verdict) if c.vs_baseline else "",
                "vs_words": c.vs_baseline.words()
                if c.vs_baseline
                else ("baseline" if c.baseline is None else ""),
                "p99": fmt_p99(c),
                "load": fmt_spread(c.load_seconds, 1),
                "space": fmt_space(c),
                "ok": f"{c.ok}/{c.runs}",
                "failed": c.ok < c.runs,
                "errors": c.errors,
                "unstable": "; ".join(c.unstable),
                "remedies": "; or ".join(c.remedies),
                # each remedy said once under the table, the row pointing at it (a phone
                # showed the same 18 lines a row)
                "remedy_refs": [remedy_number(remedies_seen, r) for r in c.remedies],
                "disturbed": ", ".join(f"#{r}" for r, _ in c.disturbed),
                "stalls": c.stall_count,
                "best_tps": b.get("tps") == c.cell,
                "best_p99": b.get("latency_p99_ms") == c.cell,
                "best_load": b.get("load_seconds") == c.cell,
            }
        )
    return rows


def host_matrix(cells: Sequence[CellSummary], hosts: Sequence[str]) -> list[dict[str, object]]:
    """Configuration x host: each cell's median throughput on each host, and the
    host-to-host spread."""
    from pgfsbench.analysis.pairs import host_spread

    out: list[dict[str, object]] = []
    for s in host_spread(cells):
        medians = dict(s.medians)
        out.append(
            {
                "cell": s.cell,
                "values": [f"{medians[h]:,.0f}" if h in medians else "-" for h in hosts],
                "cv": "-" if s.cv is None else f"{s.cv * 100:.1f}%",
                "p99": "-" if s.p99_ms is None else f"{s.p99_ms:,.2f}",
            }
        )
    return out


def _across(cells: Sequence[CellSummary]) -> list[dict[str, object]]:
    from pgfsbench.analysis.pairs import across_hosts, make_pair

    by_label = {(c.label, c.group): c for c in cells}
    pairs = [
        make_pair(by_label[(c.baseline, c.group)], c)
        for c in cells
        if c.baseline is not None and (c.baseline, c.group) in by_label
    ]
    out: list[dict[str, object]] = []
    for a in across_hosts(pairs):
        ratio = (
            "-"
            if a.ratio is None
            else f"{(a.ratio - 1) * 100:+.1f}%"
            + (
                ""
                if a.ci_low is None or a.ci_high is None
                else f" [{(a.ci_low - 1) * 100:+.1f}%, {(a.ci_high - 1) * 100:+.1f}%]"
            )
        )
        out.append(
            {
                "base": a.base,
                "other": a.other,
                "ratio": ratio,
                "verdict": a.verdict,
                "per_host": ", ".join(
                    f"{h} {'-' if r is None else f'{(r - 1) * 100:+.1f}%'}"
                    for h, r, _ in a.per_host
                ),
            }
        )
    return out


def history_data(h: SeriesHistory) -> dict[str, object]:
    """One series over time for the history section: each figure's points (x: when the run
    started) and its change points (a dashed line at the first run after each)."""
    metrics = []
    for m in METRICS:
        pts = h.points.get(m.name, ())
        if not pts:
            continue
        cps = [c for c in h.change_points if c.metric.name == m.name]
        metrics.append(
            {
                "label": m.label,
                "unit": m.unit,
                "x": [p.started_at for p in pts],
                "y": [_num(p.value, 3) for p in pts],
                "text": [f"campaign {p.campaign_id}, run {p.run_id}" for p in pts],
                "cps": [{"x": c.first.started_at, "text": c.change_text()} for c in cps],
            }
        )
    return {
        "title": h.key.text(),
        "metrics": metrics,
        "changes": [
            {
                "where": group[0].where(),
                "lines": [c.change_text() for c in group],
                "worse": [
                    c.change.ratio is not None and (c.change.ratio > 1) != c.metric.higher_is_better
                    for c in group
                ],
                "said": list(dict.fromkeys(c.what_changed() for c in group)),
            }
            for group in h.by_run()
        ],
        "runs": len(h.runs),
        "campaigns": len({r.campaign_id for r in h.runs}),
    }


def replay_rows(
    runs: Sequence[StoredRun], labels: dict[tuple[str, str | None], str]
) -> list[dict[str, object]]:
    """Each replay's fidelity: what it replayed of its capture, what could not be, errors,
    WAL, lag, its own CPU, and its statements (normalised: never a literal)."""
    out: list[dict[str, object]] = []
    for r in runs:
        f = r.recorded.tool.fidelity
        if not f:
            continue
        out.append(
            {
                "label": f"{labels.get((r.cell, r.host), r.cell)} #{r.repetition}",
                "reconciled": reconciled(f["reconciliation"])
                if isinstance(f.get("reconciliation"), dict)
                else f"{f.get('statements_replayed')} of {f.get('statements_captured')} replayed",
                "captured": f.get("statements_captured"),
                "replayed": f.get("statements_replayed"),
                "not_replayable": dict(f.get("not_replayable") or {}),
                "in_copy": f.get("already_in_the_copy"),
                "tablespaces": ", ".join(map(str, f.get("tablespaces") or [])),
                "errors": f"{f.get('errors_replayed')} (capture: {f.get('errors_captured')})",
                "wal": "-" if f.get("wal_pct") is None else f"{f['wal_pct']:+.1f}%",
                "lag": f.get("schedule_lag_max_ms"),
                "cpu": f.get("replayer_cpu_us_per_tx"),
                "differs": list(f.get("differs") or []),
                "statements": list(f.get("statements") or []),
                "end_state": end_state_text(f["end_state"])
                if isinstance(f.get("end_state"), dict)
                else None,
                "cannot_carry": list(f.get("cannot_carry") or []),
                "work": [w for w in f.get("work") or [] if isinstance(w, dict)],
            }
        )
    return out


def render_report(
    campaigns: Sequence[StoredCampaign],
    runs: Sequence[StoredRun],
    cells: Sequence[CellSummary],
    highlights: Highlights,
    *,
    history: Sequence[SeriesHistory] = (),
    inline_js: bool = True,
    headline: str | None = None,
) -> str:
    labels = {(c.cell, c.host): c.label for c in cells}
    stalls = {s.run_id: s.episodes for c in cells for s in c.stalls}
    figures: dict[str, Any] = {
        "groups": [_bar_group(members) for members in by_group(cells)],
        "sweeps": _sweeps(cells),
        "runs": [
            run_data(
                r,
                labels.get((r.cell, r.host), r.cell),
                stalls.get(r.run_id, ()),
            )
            for r in runs
        ],
        "colours": wait_colours(runs),
        "history": [history_data(h) for h in history],
    }
    first_stalled = next((i for i, r in enumerate(figures["runs"]) if r["stalls"]), 0)
    hosts = sorted({c.host or "?" for c in cells})
    env = {k: readable(k, v) for k, v in (campaigns[0].environment if campaigns else {}).items()}
    cond = conditions(runs)
    labels_by_cell = {c.cell: cell_name(c) for c in cells}
    return _env.get_template("report.html.j2").render(
        conditions=cond,
        condition_rows=[(labels_by_cell.get(cell, cell), values) for cell, values in cond.per_cell],
        campaigns=campaigns,
        campaign_lines=[campaign_line(c) for c in campaigns],
        env=env,
        rows=table_rows(cells),
        remedies=remedy_notes(cells),
        highlights=highlights,
        runs=runs,
        version=__version__,
        any_fuse=any(c.fuse for c in cells),
        plotly_packed=packed_plotly() if inline_js else "",
        figures_json=script_json(figures),
        first_run=first_stalled,
        hosts=hosts if len(hosts) > 1 else [],
        host_rows=host_matrix(cells, hosts) if len(hosts) > 1 else [],
        across=_across(cells) if len(hosts) > 1 else [],
        stalled_runs=[(r["label"], s) for r in figures["runs"] for s in r["stalls"]],
        has_history=bool(history),
        p99_legend=P99_LEGEND,
        cost_lines=cost_lines(cells),
        replays=replay_rows(runs, labels),
        headline=headline,
    )


# Inside <script>, the HTML parser ends the element at the first "</script" whatever the
# JavaScript around it; "<!--" and U+2028/U+2029 change how it is read too. Every character
# that could is written as a JSON escape, which JavaScript reads back as the same text.
_SCRIPT_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def script_json(value: object) -> str:
    """JSON to embed in a <script> element: no text in it (a storage name, a command line
    of an outside process) can end the element or start another."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False)
    for raw, escaped in _SCRIPT_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def campaign_line(c: StoredCampaign) -> str:
    """'campaign 3 on vm: 2026-11-27 13:52:54 UTC, 2 min 5 s, status done'."""
    import datetime as dt

    took = ""
    if c.started_at and c.ended_at:
        try:
            seconds = (
                dt.datetime.fromisoformat(c.ended_at) - dt.datetime.fromisoformat(c.started_at)
            ).total_seconds()
            took = f", took {human_seconds(seconds)}"
        except ValueError:
            took = ""
    return (
        f"campaign {c.id} on {c.host or '?'}: started {when(c.started_at)}{took}, status {c.status}"
    )


def readable(key: str, value: object) -> object:
    """An environment value as a reader wants it: sizes in bytes as MiB/GiB."""
    if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
        return f"{human_bytes(value)} ({value:,} bytes)"
    return value
