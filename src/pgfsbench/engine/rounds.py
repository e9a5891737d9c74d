"""`repetitions = "auto"` wherever the runs go (this host, a cluster): the rounds its
policy (analysis/auto.py) asks for, the budget they are cut to (a resumed campaign's earlier
parts counted), the campaign's notes of how each cell stopped and each verdict."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import secrets
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from pgfsbench.engine.events import Events
from pgfsbench.plan import Plan, PlannedRun
from pgfsbench.results.records import StoredRun
from pgfsbench.results.store import Store
from pgfsbench.spec import Defaults
from pgfsbench.system.errors import Interrupted

if TYPE_CHECKING:
    from pgfsbench.analysis.auto import AutoSettings, AutoState, Comparable, RunFact
    from pgfsbench.analysis.summary import CellSummary


class CampaignResult(Protocol):
    """What the rounds read of the campaign so far (engine/campaign.CampaignResult)."""

    @property
    def campaign_id(self) -> int: ...

    @property
    def run_ids(self) -> list[int]: ...


def adaptive_rounds(
    store: Store,
    plan: Plan,
    d: Defaults,
    result: CampaignResult,
    started: float,
    events: Events,
    run_round: Callable[[list[PlannedRun]], None],
) -> None:
    """repetitions = "auto", wherever the runs go (this host, a cluster): rounds of
    `more_runs` given to ``run_round`` until none is needed or the budget (counted from
    ``started``, the campaign's start) is spent; then the notes. A round is cut to the runs
    that fit in what is left of the budget at the pace of the runs so far, the cells with
    the fewest valid runs first (analysis/auto.cut_round): the campaign ends within its
    budget (a verdict is anytime-valid, wherever its runs stop), its verdicts from a last
    look at every run. The policy itself is analysis/auto.py."""
    from pgfsbench.analysis.auto import AutoState, budget_fit, cut_round, spent_before

    # a resumed campaign goes on with its seed (the rounds' order), never a new one, and
    # its budget counts what its earlier parts spent
    camp = store.campaign(result.campaign_id) if store is not None else None
    earlier = (camp.notes if camp is not None else {}).get("auto_repetitions")
    seed = earlier.get("seed") if isinstance(earlier, dict) else None
    state = AutoState(seed=int(seed) if isinstance(seed, int) else secrets.randbits(32))
    runs = store.list_runs(result.campaign_id) if store is not None else []
    before_s, before_n = spent_before(
        earlier if isinstance(earlier, dict) else None,
        [(r.started_at, r.ended_at) for r in runs],
        time.time() - (time.monotonic() - started),
    )
    while True:
        elapsed = state.active_s = before_s + time.monotonic() - started
        if elapsed >= d.budget_s:
            state.budget_spent = True
            break
        more = more_runs(store, plan, d, result, state)
        if not more:
            break
        fit = budget_fit(elapsed, d.budget_s, before_n + len(result.run_ids), len(more))
        if fit < len(more):
            state.budget_spent = True
            valid = _valid_counts(store, result.campaign_id)
            more = cut_round(more, fit, valid, lambda r: r.cell.id)
            if not more:
                break
        events.extend(len(more))
        try:
            run_round(more)
        except (Interrupted, KeyboardInterrupt):
            state.interrupted = True  # stopped by its user: a last look at the runs made
            with contextlib.suppress(Exception):
                more_runs(store, plan, d, result, state, final=True)
                note_auto_repetitions(store, d, result.campaign_id, state)
            raise
        if state.budget_spent:
            break
    if state.budget_spent:
        # one more look, at every run made (a confidence sequence may be read at any time)
        more_runs(store, plan, d, result, state, final=True)
    note_auto_repetitions(store, d, result.campaign_id, state)


def auto_settings(d: Defaults, plan: Plan | None = None) -> AutoSettings:
    """The policy's settings from the spec's defaults (the strata a design can give:
    one with whole checkpoint cycles, two with shorter windows)."""
    from pgfsbench.analysis.auto import AutoSettings
    from pgfsbench.analysis.sequential import STRATA_WITH_CYCLES, STRATA_WITHOUT_CYCLES

    cycles = plan is not None and plan.cells and all(c.workload.cycles for c in plan.cells)
    return AutoSettings(
        least=d.repetitions_min,
        most=d.repetitions_max,
        ci_target_pct=d.ci_target_pct,
        margin=d.equivalence_margin,
        designed_strata=STRATA_WITH_CYCLES if cycles else STRATA_WITHOUT_CYCLES,
    )


def run_facts(runs: Sequence[StoredRun]) -> list[RunFact]:
    """What the policy knows of stored runs: each by its cell id alone (its host said
    elsewhere), valid when ok and undisturbed, with its stratum."""
    from pgfsbench.analysis.auto import RunFact
    from pgfsbench.analysis.disturbance import is_disturbed
    from pgfsbench.analysis.summary import stratum_of

    return [
        RunFact(
            r.cell,
            r.repetition,
            r.ok,
            float(r.throughput) if r.throughput else None,
            is_disturbed(r),
            stratum_of(r),
        )
        for r in sorted(runs, key=lambda r: r.run_id)
        if not r.superseded_by
    ]


def _valid_counts(store: Store, campaign_id: int) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in run_facts(store.list_runs(campaign_id)):
        if f.valid:
            counts[f.cell] = counts.get(f.cell, 0) + 1
    return counts


def comparable_groups(runs: Sequence[StoredRun]) -> list[Comparable]:
    """The campaign's comparable groups by cell id (a cell on several hosts of one cluster
    is one cell, in one group), each with its baseline and candidates."""
    from pgfsbench.analysis.auto import Comparable
    from pgfsbench.analysis.summary import summarise

    one_host = [dataclasses.replace(r, host=None) for r in runs if not r.superseded_by]
    by_group: dict[str, list[CellSummary]] = {}
    for c in summarise(one_host):
        by_group.setdefault(repr(c.group), []).append(c)
    out: list[Comparable] = []
    for key, members in by_group.items():
        base = next((c for c in members if c.baseline is None and not c.reference), None)
        cands = tuple(c.cell for c in members if not c.reference and c is not base)
        if base is None or not cands:
            out.append(Comparable(key, None, tuple(c.cell for c in members)))
        else:
            out.append(Comparable(key, base.cell, cands))
    return out


def more_runs(
    store: Store,
    plan: Plan,
    d: Defaults,
    result: CampaignResult,
    state: AutoState,
    *,
    final: bool = False,
) -> list[PlannedRun]:
    """repetitions = "auto": the next round's runs as the policy asks (analysis/auto.py),
    in a random order drawn from the campaign's seed; none when every comparison is
    settled or at its limits."""
    from pgfsbench.analysis.auto import plan_round

    runs = [r for r in store.list_runs(result.campaign_id) if not r.superseded_by]
    wanted = plan_round(
        run_facts(runs), comparable_groups(runs), auto_settings(d, plan), state, final=final
    )
    cells = {c.id: c for c in plan.cells}
    more: list[PlannedRun] = []
    last: dict[str, int] = {}
    for r in runs:
        last[r.cell] = max(last.get(r.cell, 0), r.repetition)
    for cell_id, n in wanted.items():
        if cell_id not in cells:
            continue
        for i in range(n):
            more.append(
                PlannedRun(
                    len(plan.runs) + len(result.run_ids) + len(more),
                    cells[cell_id],
                    last.get(cell_id, 0) + 1 + i,
                )
            )
    random.Random(state.seed + state.rounds).shuffle(more)  # noqa: S311 (an order, no secret)
    return more


def note_auto_repetitions(store: Store, d: Defaults, campaign_id: int, state: AutoState) -> None:
    """The campaign's notes: how `auto` stopped each cell and each verdict."""
    from pgfsbench.analysis.auto import notes

    camp = store.campaign(campaign_id)
    earlier = (camp.notes if camp is not None else {}).get("auto_repetitions")
    now = notes(auto_settings(d), state, d.budget_s if d.budget is not None else None)
    if isinstance(earlier, dict):
        # a resumed campaign: the first part's notes are kept beside the last look's
        parts = list(earlier.get("earlier_parts") or [])
        parts.append({k: v for k, v in earlier.items() if k != "earlier_parts"})
        now["earlier_parts"] = parts
    store.note_campaign(campaign_id, "auto_repetitions", now)
