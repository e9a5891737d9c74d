"""What a summary or a report needs, read from the store and analysed: the runs of some
campaigns with their series, summarised per cell, compared, with what stands out and the
warnings that change their reading."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from pgfsbench.analysis.agreement import Agreement
from pgfsbench.analysis.compare import Comparison
from pgfsbench.analysis.cost import INSTANCE_NOTE
from pgfsbench.analysis.disturbance import disturbance_of
from pgfsbench.analysis.history import SeriesHistory, history, series_key
from pgfsbench.analysis.observer import observer_effects
from pgfsbench.analysis.stats import Estimate
from pgfsbench.analysis.summary import (
    UNSTABLE_PCT,
    CellSummary,
    Highlights,
    highlights,
    summarise,
    unknown_baseline,
)
from pgfsbench.analysis.warnings import reading_warnings
from pgfsbench.results.records import JsonObject, StoredCampaign, StoredRun
from pgfsbench.results.store import Store
from pgfsbench.spec.profiles import Price
from pgfsbench.system.errors import UsageError


@dataclass(frozen=True)
class Analysed:
    campaigns: list[StoredCampaign]
    runs: list[StoredRun]
    cells: list[CellSummary]
    highlights: Highlights
    history: list[SeriesHistory]
    # the same pairs of cells in the store's other campaigns: do they agree?
    agreements: list[Agreement] = dataclasses.field(default_factory=list)
    # why these campaigns give no verdict at all (a busy host, too few runs): the first
    # thing every output says (None: some verdict was possible)
    headline: str | None = None

    def conditions(self) -> str:
        """What the verdicts are conditional on: the campaigns' hosts and days."""
        parts = [
            f"campaign {c.id} on {c.host or 'this host'}, {str(c.started_at or '')[:10]}"
            for c in self.campaigns
        ]
        measured = sorted({c.estimand for c in self.cells if c.estimand})
        what = f", each run measuring {' or '.join(measured)}" if measured else ""
        return (
            "These verdicts hold for "
            + "; ".join(parts)
            + what
            + ": the noise of that host on that day (another day may differ; "
            "`pgfsbench compare --across-campaigns` weighs campaigns of the same cells)"
        )


def analyse(
    store: Store,
    campaigns: list[int],
    baseline: str | None = None,
    host: str | None = None,
    unstable_pct: float = UNSTABLE_PCT,
    prices: Mapping[str, Price] | None = None,
    without_disturbed: bool = False,
) -> Analysed:
    """Runs of the campaigns, summarised per cell, compared, with what stands out.
    ``prices``: one's own volume prices (`--price-file`). ``without_disturbed``: the runs
    other work on the host disturbed are left out of every figure and verdict (and said)."""
    ids = list(campaigns)
    runs = store.full_runs(ids, host)
    left_out: list[str] = []
    if without_disturbed:
        kept = []
        for r in runs:
            d = disturbance_of(r) if r.ok else None
            if d is not None and d.disturbed:
                left_out.append(
                    f"{r.cell} #{r.repetition} (run {r.run_id}): {'; '.join(d.reasons())}"
                )
            else:
                kept.append(r)
        runs = kept
    meta = [c for c in store.campaigns() if c.id in ids]
    settled: dict[str, dict[str, object]] = {}
    for camp in meta:  # the verdicts `repetitions = "auto"` reached, valid however it stopped
        auto = camp.notes.get("auto_repetitions")
        found = auto.get("verdicts") if isinstance(auto, dict) else None
        if isinstance(found, dict) and len(ids) == 1 and baseline is None:
            settled.update({str(k): v for k, v in found.items() if isinstance(v, dict)})
    cells = summarise(
        runs, baseline=baseline, unstable_pct=unstable_pct, prices=prices, settled=settled
    )
    why = unknown_baseline(cells, baseline)
    if why is not None:  # a typo must not turn every row into its own baseline
        raise UsageError(why)
    cells, headline = no_verdict_headline(runs, cells)
    h = highlights(cells)
    if left_out:
        h.lines.insert(
            0,
            f"left out of the verdicts as disturbed (--without-disturbed): {len(left_out)} run(s)",
        )
        h.lines[1:1] = [f"  {line}" for line in left_out]
    h.lines += [e.words() for e in observer_effects(runs)]
    h.warnings = reading_warnings(runs)
    agreed = store_agreements(store, meta, cells, host, without_disturbed) if len(ids) == 1 else []
    found = Analysed(meta, runs, cells, h, store_history(store, runs), agreed, headline)
    if any(c.vs_baseline is not None for c in cells) and meta:
        h.lines.append(found.conditions())
        h.lines += [f"  {a.words()}" for a in agreed]
    return found


def no_verdict_headline(
    runs: list[StoredRun], cells: list[CellSummary]
) -> tuple[list[CellSummary], str | None]:
    """Why no verdict can be given, first of all: a host too busy for one (most runs began
    on a busy host: every verdict is withdrawn, each saying why), or no comparison with 3
    runs a side. The cells as they stand, and the sentence (None: verdicts stand)."""
    from pgfsbench.analysis.compare import Verdict
    from pgfsbench.analysis.warnings import busy_host_line

    compared = [c for c in cells if c.vs_baseline is not None and not c.reference]
    if not compared:
        return cells, None
    busy = busy_host_line(runs)
    if busy is not None and busy.startswith("this host was too busy"):
        why = "no verdict: this host was too busy (other work took its CPU during most runs)"
        out = [
            dataclasses.replace(
                c,
                vs_baseline=dataclasses.replace(c.vs_baseline, verdict=Verdict.NONE, reason=why)
                if c.vs_baseline is not None and c.vs_baseline.method == "welch"
                else c.vs_baseline,
            )
            for c in cells
        ]
        return out, "No verdict: " + busy
    if all(c.vs_baseline is not None and c.vs_baseline.verdict is Verdict.NONE for c in compared):
        reasons = sorted({c.vs_baseline.reason for c in compared if c.vs_baseline is not None})
        return cells, "No verdict in this campaign: " + "; ".join(reasons[:3])
    return cells, None


MOST_CAMPAIGNS = 20  # earlier campaigns of the same cells weighed against this one


def store_agreements(
    store: Store,
    these: list[StoredCampaign],
    cells: list[CellSummary],
    host: str | None = None,
    without_disturbed: bool = False,
) -> list[Agreement]:
    """The store's campaigns that hold the same pairs of cells as ``cells`` (the latest
    MOST_CAMPAIGNS), with these: whether they agree (analysis/agreement.py)."""
    from pgfsbench.analysis.agreement import agreements

    wanted = {c.cell for c in cells}
    found: dict[int, tuple[str, str, list[CellSummary]]] = {
        c.id: (str(c.started_at or ""), str(c.host or ""), cells) for c in these if c.id
    }
    others = [c for c in store.campaigns() if c.id not in found][-MOST_CAMPAIGNS:]
    for camp in others:
        runs = [r for r in store.list_runs(camp.id) if host is None or r.host == host]
        if without_disturbed:
            runs = [r for r in runs if not (r.ok and disturbance_of(r).disturbed)]
        if not wanted & {r.cell for r in runs}:
            continue
        found[camp.id] = (str(camp.started_at or ""), str(camp.host or ""), summarise(runs))
    if len(found) < 2:
        return []
    return agreements(found)


def store_history(store: Store, runs: list[StoredRun]) -> list[SeriesHistory]:
    """The history of the series these runs belong to, over every campaign in the store,
    for the series that more than one campaign ran."""
    keys = {series_key(r) for r in runs if r.ok}
    if not keys:
        return []
    found = history(r for r in store.list_runs(status="ok") if series_key(r) in keys)
    return [h for h in found if len({r.campaign_id for r in h.runs}) > 1]


def cell_json(c: CellSummary) -> JsonObject:
    def est(e: Estimate | None) -> JsonObject | None:
        if e is None:
            return None
        return {
            "n": e.n,
            "median": e.median,
            "mean": e.mean,
            "min": e.low,
            "max": e.high,
            "cv": e.cv,
            "ci95": [e.ci_low, e.ci_high],
            "ci_method": e.method,
        }

    def cmp(x: Comparison | None) -> JsonObject | None:
        if x is None:
            return None
        return {
            "ratio": x.ratio,
            "ci": [x.ci_low, x.ci_high],
            "ci_level": x.level,
            "family": x.family,
            "margin": x.margin,
            "estimand": x.estimand,
            "p": x.p_value,
            "verdict": str(x.verdict),
            "text": x.words(),
        }

    return {
        "cell": c.cell,
        "estimand": c.estimand,
        "label": c.label,
        "host": c.host,
        "fs": c.fs,
        "fuse": c.fuse,
        "emulated": c.emulated,
        "group": c.group_label,
        "unit": c.unit,
        "runs": c.runs,
        "ok": c.ok,
        "throughput": est(c.tps),
        "latency_p99_ms": est(c.latency_p99_ms),
        "latency_pooled": c.latency_pooled.as_dict() if c.latency_pooled else None,
        "cost": (
            {
                "usd_month": c.cost.usd_month,
                "usd_per_1000_tps": c.usd_per_1000_tps,
                "volumes": [dataclasses.asdict(v) for v in c.cost.volumes],
                "note": INSTANCE_NOTE,
            }
            if c.cost
            else None
        ),
        "load_seconds": est(c.load_seconds),
        "space_data_bytes": est(c.space_data_bytes),
        "space_wal_bytes": est(c.space_wal_bytes),
        "unstable": list(c.unstable),
        "remedies": list(c.remedies),
        "disturbed": [{"repetition": r, "why": list(w)} for r, w in c.disturbed],
        "baseline": c.baseline,
        "vs_baseline": cmp(c.vs_baseline),
        "p99_vs_baseline": cmp(c.p99_vs_baseline),
        "errors": list(c.errors),
        "warnings": list(c.warnings),
        "stalls": [
            {
                "run_id": s.run_id,
                "repetition": s.repetition,
                "episodes": [e.as_dict() for e in s.episodes],
            }
            for s in c.stalls
        ],
    }
