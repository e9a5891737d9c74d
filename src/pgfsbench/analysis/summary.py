"""One summary per cell over its repetitions, and what stands out across cells (pure).

Every figure is an Estimate (median, range, 95% CI of the mean); a cell whose
repetitions disagree more than a threshold is marked unstable, with the likely reason the
data shows; cells are compared only within a comparable group (same workload, clients,
scale, rate or share of the maximum, and host), each against its group's baseline, with a
verdict that may be "no significant difference".
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pgfsbench.advisor.safety import unsafe_of_params
from pgfsbench.analysis.compare import MARGIN, Comparison, Verdict, compare, family_wise
from pgfsbench.analysis.cost import RunCost, run_cost
from pgfsbench.analysis.disturbance import disturbance_of
from pgfsbench.analysis.histogram import PooledLatency, pooled_latency
from pgfsbench.analysis.replay_marks import lagged, too_short
from pgfsbench.analysis.replay_marks import marks as replay_marks
from pgfsbench.analysis.series import align
from pgfsbench.analysis.stalls import StallEpisode, find_stalls
from pgfsbench.analysis.stats import Estimate, estimate
from pgfsbench.results.records import StoredRun
from pgfsbench.spec.profiles import Price
from pgfsbench.system.errors import did_you_mean

# the old name of Estimate, for the renderers
Spread = Estimate
DIMS = ("storage", "postgres", "kernel", "workload")
UNSTABLE_PCT = 5.0
WARMUP_GAP = 0.2  # warm-up throughput this far from the measured one: not warmed up
# workload, clients, scale, rate, share of the maximum, host
GroupKey = tuple[str, int | None, int | None, float | None, float | None, str | None]


@dataclass(frozen=True)
class RunStalls:
    run_id: int
    repetition: int
    episodes: tuple[StallEpisode, ...]


@dataclass(frozen=True)
class CellSummary:
    cell: str
    storage: str
    fs: str
    postgres: str
    kernel: str
    workload: str
    runs: int
    ok: int
    tps: Estimate | None  # the throughput (in `unit`; tps for OLTP)
    latency_avg_ms: Estimate | None
    latency_p99_ms: Estimate | None
    load_seconds: Estimate | None
    space_bytes: Estimate | None
    implementation: str | None
    fuse: bool
    errors: tuple[str, ...]
    label: str = ""  # the cell without the dimensions that do not vary
    warnings: tuple[str, ...] = ()  # what changes the reading of its runs (busy host...)
    unit: str = "tps"
    scale: int | None = None
    clients: int | None = None
    rate: float | None = None
    rate_share: float | None = None  # a share of the cell's maximum ("75%" -> 0.75)
    host: str | None = None
    campaign_id: int | None = None
    values: tuple[float, ...] = ()  # the ok runs' throughput (for comparisons)
    p99_values: tuple[float, ...] = ()
    load_values: tuple[float, ...] = ()
    space_data_bytes: Estimate | None = None
    space_wal_bytes: Estimate | None = None
    unstable: tuple[str, ...] = ()  # why its repetitions disagree (empty: stable)
    stalls: tuple[RunStalls, ...] = ()
    vs_baseline: Comparison | None = None
    p99_vs_baseline: Comparison | None = None
    baseline: str | None = None  # the label of its group's baseline (None: it is one)
    # a reference (RAM, fsync off), not a candidate: never the best nor the baseline
    reference: bool = False
    # how its settings can lose or corrupt committed data (advisor/safety.py): such a cell
    # is a reference too, shown as what safety costs
    unsafe: tuple[str, ...] = ()
    # "emulated data hdd-7200": devices answered by a device model, not a real disk
    emulated: str | None = None
    # the percentiles of all its ok runs' transactions (their histograms merged)
    latency_pooled: PooledLatency | None = None
    # its capped cloud volumes' monthly price (None: not a cloud volume)
    cost: RunCost | None = None
    # its ok runs that other work on the host disturbed: (repetition, why)
    disturbed: tuple[tuple[int, tuple[str, ...]], ...] = ()
    # what would make its repetitions agree, for the reasons found (empty: stable)
    remedies: tuple[str, ...] = ()
    # each of `values`' runs' stratum: checkpoints in its window (None: not recorded)
    strata: tuple[str | None, ...] = ()
    # its replay runs marked (analysis/replay_marks.py): (repetition, marks)
    replay_marks: tuple[tuple[int, tuple[str, ...]], ...] = ()
    # the practical margin of "equivalent" its spec stated (equivalence_margin)
    margin: float = MARGIN
    # what its runs measure: "steady state over 1 checkpoint cycle (300 s each)", "a 60 s
    # window" (the workload's estimand)
    estimand: str = ""

    @property
    def usd_per_1000_tps(self) -> float | None:
        """The volume's monthly price per 1,000 TPS the cell sustained (its mean)."""
        return self.cost.per_1000_tps(self.tps.mean if self.tps else None) if self.cost else None

    @property
    def group(self) -> GroupKey:
        """Cells are comparable only within a group: same workload, clients, scale, rate
        (a TPS, or a share of each cell's own maximum) and host (never across workloads;
        never a paced run against an unpaced one)."""
        return (self.workload, self.clients, self.scale, self.rate, self.rate_share, self.host)

    @property
    def group_label(self) -> str:
        parts = [self.workload]
        if self.clients is not None:
            parts.append(f"{self.clients} clients")
        if self.scale is not None:
            parts.append(f"scale {self.scale}")
        if self.rate:
            parts.append(f"rate {self.rate:g}/s")
        if self.rate_share:
            parts.append(f"at {self.rate_share * 100:g}% of max")
        if self.host:
            parts.append(f"on {self.host}")
        return ", ".join(parts)

    @property
    def stall_count(self) -> int:
        return sum(len(s.episodes) for s in self.stalls)

    @property
    def is_unstable(self) -> bool:
        return bool(self.unstable)


def spread(values: Iterable[float | None]) -> Estimate | None:
    return estimate(values)


def _rate(run: StoredRun) -> float | None:
    rate = run.param("workload").get("rate")
    return float(rate) if rate else None


def _share(run: StoredRun) -> float | None:
    share = run.param("workload").get("rate_fraction")
    return float(share) if share else None


def _reference(run: StoredRun) -> bool:
    """Whether a run's storage or postgres configuration is marked as a reference."""
    return any(bool(run.param(dim).get("reference")) for dim in ("storage", "postgres"))


def _space(run: StoredRun, key: str) -> float | None:
    v = (run.space.get("after_load") or {}).get(key)
    return float(v) if v is not None else None


def emulated_of(run: StoredRun) -> str | None:
    """'emulated pool 5 x hdd-5400, log sata-ssd': the device models under a run's storage."""
    by_role: dict[str, list[str]] = {}
    for d in (run.storage_details.get("emulated_devices") or {}).values():
        by_role.setdefault(str(d.get("role")), []).append(str(d.get("device_model")))
    parts = [
        f"{role} {len(models)} x {models[0]}"
        if len(models) > 1 and len(set(models)) == 1
        else f"{role} {', '.join(models)}"
        for role, models in by_role.items()
    ]
    return "emulated " + ", ".join(parts) if parts else None


def stalls_of(run: StoredRun) -> tuple[StallEpisode, ...]:
    """The stall episodes of a stored run (needs its series)."""
    if not run.series:
        return ()
    return tuple(find_stalls(align(run)))


def stratum_of(run: StoredRun) -> str | None:
    """A run's stratum: how many checkpoints fell in its measured window, as the run
    recorded it (None: not recorded, an older run, or no server log)."""
    window = run.metrics.get("window")
    if isinstance(window, dict) and isinstance(window.get("stratum"), str):
        return str(window["stratum"])
    return None


def margin_of(run: StoredRun) -> float:
    value = run.params.get("equivalence_margin") if isinstance(run.params, dict) else None
    return float(value) if isinstance(value, int | float) and 0 < value <= 0.5 else MARGIN


def estimand_of(run: StoredRun) -> str:
    """What a run measured, in words: its workload's window."""
    window = run.metrics.get("window")
    if isinstance(window, dict) and isinstance(window.get("estimand"), str):
        return str(window["estimand"])
    return f"a {float(run.duration_s or 0):g} s window" if run.duration_s else ""


def _in_measured_window(run: StoredRun) -> int:
    duration = float(run.duration_s or 0)
    return sum(
        1
        for c in run.checkpoints
        if (c.ended_s is None and c.started_s is not None and c.started_s <= duration)  # running
        or (
            c.ended_s is not None
            and c.ended_s >= 0
            and (c.started_s if c.started_s is not None else c.ended_s) <= duration
        )
    )


def unstable_reasons(
    ok: Sequence[StoredRun],
    est: Estimate | None,
    stalls: Sequence[RunStalls],
    threshold_pct: float,
    disturbed: Sequence[int] = (),
) -> tuple[str, ...]:
    """Why the repetitions of a cell disagree, where the data shows it."""
    return tuple(r for r, _ in _unstable(ok, est, stalls, threshold_pct, disturbed))


# what to change, by the reason found (the first of each is said)
REMEDIES = {
    "spread": 'more repetitions (repetitions = "auto" runs until the interval is tight) '
    "or longer runs (duration)",
    "disturbed": "a quieter host (stop what else runs there), or leave the disturbed runs "
    "out of the verdicts (--without-disturbed)",
    "checkpoint": "runs several times checkpoint_timeout long (duration), so each holds "
    "its share of checkpoints",
    "warm": "a longer warm-up (warmup)",
    "stalls": "the stalls' causes below (each is named with its evidence)",
}


def _unstable(
    ok: Sequence[StoredRun],
    est: Estimate | None,
    stalls: Sequence[RunStalls],
    threshold_pct: float,
    disturbed: Sequence[int],
) -> list[tuple[str, str]]:
    """(reason, its kind in REMEDIES), the spread first."""
    if est is None or est.n < 2 or est.rel_range * 100 <= threshold_pct:
        return []
    reasons = [(f"repetitions spread {est.rel_range * 100:.1f}% (> {threshold_pct:g}%)", "spread")]
    if disturbed:
        reasons.append(
            (f"other work on the host disturbed #{', #'.join(map(str, disturbed))}", "disturbed")
        )
    with_cp = [r.repetition for r in ok if _in_measured_window(r)]
    if with_cp and len(with_cp) < len(ok):
        reasons.append(
            (
                f"a checkpoint ran during repetition(s) #{', #'.join(map(str, with_cp))} only",
                "checkpoint",
            )
        )
    cold = [
        r.repetition
        for r in ok
        if r.warmup_tps and r.throughput and abs(r.warmup_tps / r.throughput - 1) > WARMUP_GAP
    ]
    if cold:
        reasons.append(
            (
                f"warm-up throughput differs by more than {WARMUP_GAP * 100:.0f}% "
                f"from the measured one in #{', #'.join(map(str, cold))}: not warm yet",
                "warm",
            )
        )
    busy = [r.repetition for r in ok if any("busy host" in w for w in r.warnings)]
    if busy:
        reasons.append((f"busy host before #{', #'.join(map(str, busy))}", "disturbed"))
    stalled = [s.repetition for s in stalls if s.episodes]
    if stalled and len(stalled) < len(ok):
        reasons.append((f"stalls in #{', #'.join(map(str, stalled))} only", "stalls"))
    return reasons


def remedies_for(kinds: Sequence[str]) -> tuple[str, ...]:
    """What to change for these reasons: the specific ones first; the generic advice
    (more or longer runs) only when nothing more specific was found."""
    specific = [REMEDIES[k] for k in dict.fromkeys(kinds) if k != "spread"]
    return tuple(specific or [REMEDIES["spread"]])


def summarise(
    runs: Iterable[StoredRun],
    *,
    baseline: str | None = None,
    unstable_pct: float = UNSTABLE_PCT,
    prices: Mapping[str, Price] | None = None,
    settled: Mapping[str, Mapping[str, object]] | None = None,
) -> list[CellSummary]:
    """Group runs by cell (and host, in first-seen order), summarise the ok ones, and
    compare each group's cells with its baseline. Runs superseded by a resumed run are
    left out. Stalls are found when the runs carry their series. ``prices``: one's own
    volume prices, over the published ones. ``settled``: the verdicts a `repetitions =
    "auto"` campaign reached (its notes, by cell): they stand for its cells, valid however
    it stopped, where a fixed-sample test of the same runs would not be."""
    groups: dict[tuple[str, str | None], list[StoredRun]] = {}
    for r in runs:
        if r.superseded_by:
            continue
        groups.setdefault((r.cell, r.host), []).append(r)
    return with_baselines(
        with_labels(
            [_cell(cell, host, rows, unstable_pct, prices) for (cell, host), rows in groups.items()]
        ),
        baseline,
        settled,
    )


def _cell(
    cell: str,
    host: str | None,
    rows: list[StoredRun],
    unstable_pct: float,
    prices: Mapping[str, Price] | None = None,
) -> CellSummary:
    """One cell's summary over its runs."""
    marked = tuple((r.repetition, m) for r in rows if r.ok and (m := replay_marks(r)))
    # a replay too short to measure gives no figure; one whose schedule lagged, no latency
    ok = [r for r in rows if r.ok and too_short(r) is None]
    timely = [r for r in ok if lagged(r) is None]
    first = rows[0]
    unsafe = tuple(
        u.text() for u in unsafe_of_params(first.param("storage"), first.param("postgres"))
    )
    thr = [r.figure for r in ok]
    p99 = [r.latency_ms.get("p99") for r in timely]
    stalls = tuple(RunStalls(r.run_id, r.repetition, stalls_of(r)) for r in rows)
    est = estimate(thr)
    ok_ids = {r.run_id for r in ok}
    disturbed = tuple(
        (r.repetition, tuple(d.reasons())) for r in ok if (d := disturbance_of(r)).disturbed
    )
    unstable = _unstable(
        ok,
        est,
        [s for s in stalls if s.run_id in ok_ids],
        unstable_pct,
        [rep for rep, _ in disturbed],
    )
    return CellSummary(
        cell=cell,
        storage=first.storage,
        fs=first.fs,
        postgres=first.postgres,
        kernel=first.kernel,
        workload=first.workload,
        runs=len(rows),
        ok=len([r for r in rows if r.ok]),
        tps=est,
        latency_avg_ms=estimate(r.latency_avg_ms for r in timely),
        latency_p99_ms=estimate(p99),
        load_seconds=estimate(r.load_seconds for r in ok),
        space_bytes=estimate(r.space_bytes for r in ok),
        implementation=next((r.implementation for r in rows if r.implementation), None),
        fuse=any(r.fuse for r in rows),
        errors=tuple(dict.fromkeys(r.error for r in rows if not r.ok and r.error)),
        warnings=tuple(dict.fromkeys(f"#{r.repetition}: {w}" for r in rows for w in r.warnings)),
        unit=next((r.throughput_unit for r in rows if r.throughput_unit), "tps"),
        scale=first.scale,
        clients=first.clients,
        rate=_rate(first),
        rate_share=_share(first),
        host=host,
        campaign_id=first.campaign_id,
        values=tuple(float(v) for v in thr if v is not None),
        strata=tuple(stratum_of(r) for r in ok if r.figure is not None),
        margin=margin_of(first),
        estimand=estimand_of(first),
        p99_values=tuple(float(v) for v in p99 if v is not None),
        load_values=tuple(float(r.load_seconds) for r in ok if r.load_seconds is not None),
        reference=_reference(first) or bool(unsafe),
        unsafe=unsafe,
        emulated=emulated_of(first),
        space_data_bytes=estimate(_space(r, "data_bytes") for r in ok),
        space_wal_bytes=estimate(_space(r, "pg_wal_bytes") for r in ok),
        unstable=tuple(r for r, _ in unstable),
        remedies=remedies_for([k for _, k in unstable]) if unstable else (),
        disturbed=disturbed,
        replay_marks=marked,
        stalls=stalls,
        latency_pooled=pooled_latency(ok),
        cost=run_cost(ok[0] if ok else first, prices),
    )


def with_labels(cells: list[CellSummary]) -> list[CellSummary]:
    """Label each cell by the dimensions that vary across ``cells`` (storage at least)."""
    varying = [d for d in DIMS if len({getattr(c, d) for c in cells}) > 1] or ["storage"]
    labels = []
    for c in cells:
        label = "/".join(getattr(c, d) for d in varying)
        if "@" in c.cell:
            label += "@" + c.cell.split("@", 1)[1]
        labels.append(label)
    if len({(lb, c.host) for lb, c in zip(labels, cells, strict=True)}) < len(cells):
        labels = [c.cell for c in cells]
    return [dataclasses.replace(c, label=lb) for c, lb in zip(cells, labels, strict=True)]


def by_group(cells: Sequence[CellSummary]) -> list[list[CellSummary]]:
    """The cells of each comparable group together, groups in the order they first appear
    (a campaign's cells come storage by storage, so one group's cells are apart)."""
    groups: dict[GroupKey, list[CellSummary]] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    return list(groups.values())


def matches(cell: CellSummary, pattern: str) -> bool:
    """A cell named by a glob on its id, its label or one of its dimensions."""
    return any(
        fnmatch.fnmatchcase(str(v), pattern)
        for v in (cell.cell, cell.label, cell.storage, cell.postgres, cell.kernel, cell.workload)
    )


def unknown_baseline(cells: Sequence[CellSummary], baseline: str | None) -> str | None:
    """Why ``baseline`` names no cell here (None: it names one, or none was given)."""
    if not baseline or not cells or any(matches(c, baseline) for c in cells):
        return None
    names = [c.label for c in cells] + [c.storage for c in cells] + [c.cell for c in cells]
    return f"--baseline {baseline}: no cell matches it" + did_you_mean(baseline, names)


def with_baselines(
    cells: list[CellSummary],
    baseline: str | None,
    settled: Mapping[str, Mapping[str, object]] | None = None,
) -> list[CellSummary]:
    """Each comparable group's baseline: the cell ``baseline`` names, else its first."""
    by_group: dict[GroupKey, list[int]] = {}
    for i, c in enumerate(cells):
        by_group.setdefault(c.group, []).append(i)
    out = list(cells)
    for members in by_group.values():
        candidates = [i for i in members if not cells[i].reference] or members
        base_i = next(
            (
                i
                for i in members
                if baseline and matches(cells[i], baseline) and not cells[i].unsafe
            ),
            None if baseline else candidates[0],
        )
        if base_i is None:
            continue
        base = cells[base_i]
        others = [i for i in members if i != base_i]
        tps: dict[int, Comparison | None] = {
            i: compare(
                base.values,
                cells[i].values,
                margin=base.margin,
                strata=(base.strata, cells[i].strata),
            )
            for i in others
        }
        p99: dict[int, Comparison | None] = {
            i: compare(
                base.p99_values, cells[i].p99_values, higher_is_better=False, margin=base.margin
            )
            if base.p99_values and cells[i].p99_values
            else None
            for i in others
        }
        # the candidates' comparisons are one family each (throughput, p99), judged at the
        # family's level (Bonferroni: the chance of any false verdict in the group within
        # 5%); references and unsafe cells are measured against the baseline but take no
        # verdict
        family = [i for i in others if not cells[i].reference]
        for figure in (tps, p99):
            adjusted = family_wise([figure[i] for i in family])
            figure.update(dict(zip(family, adjusted, strict=True)))
        for i in family:
            stored = (settled or {}).get(cells[i].cell)
            if stored is not None and stored.get("baseline") == base.cell:
                tps[i] = sequential_comparison(stored, tps[i])
        for i in others:
            out[i] = dataclasses.replace(
                cells[i], baseline=base.label, vs_baseline=tps[i], p99_vs_baseline=p99[i]
            )
    return out


_SETTLED_VERDICT = {
    "faster": Verdict.BETTER,
    "slower": Verdict.WORSE,
    "equivalent": Verdict.EQUIVALENT,
    "mixed": Verdict.NONE,
    "unsettled": Verdict.UNDECIDED,
}


def sequential_comparison(stored: Mapping[str, object], fixed: Comparison | None) -> Comparison:
    """A comparison as the campaign's confidence sequence settled it (its notes): the
    ratio and interval of the sequence, its verdict; the fixed-sample test's p is kept
    beside it, said to be uncorrected for the stopping."""

    def num(key: str) -> float | None:
        value = stored.get(key)
        return float(value) if isinstance(value, int | float) else None

    margin = num("margin") or MARGIN
    said = str(stored.get("verdict"))
    verdict = _SETTLED_VERDICT.get(said, Verdict.NONE)
    word = {
        Verdict.BETTER: "faster",
        Verdict.WORSE: "slower",
        Verdict.EQUIVALENT: f"equivalent within ±{margin * 100:.1f}%",
        Verdict.UNDECIDED: "unsettled at the campaign's end: too noisy to tell",
        Verdict.NONE: "settled apart in its strata (faster in some, slower in others)",
    }[verdict]
    if stored.get("failed"):
        word = "unsettled: its looks disagreed beyond chance (the runs do not follow the model)"
    elif verdict is Verdict.UNDECIDED and (num("low") is None or num("high") is None):
        # the sequence's interval is not yet finite: a ratio without one is no estimate
        word = (
            "unsettled at the campaign's end: no finite interval yet (too few runs for "
            "their spread: Welch's degrees of freedom too few for the anytime-valid sequence)"
        )
    strata = stored.get("strata")
    if isinstance(strata, dict) and strata:
        word += " (" + "; ".join(f"{v} with {k} checkpoint(s)" for k, v in strata.items()) + ")"
    n_base, n_other = int(num("n_base") or 0), int(num("n") or 0)
    reason = f"{word} (anytime-valid confidence sequence, n={n_base} vs {n_other})"
    return Comparison(
        n_base,
        n_other,
        num("ratio"),
        num("low"),
        num("high"),
        None,
        margin,
        verdict,
        reason,
        True,
        method="sequence",
        estimand=str(stored.get("estimand") or ""),
    )


MOST_EPISODES = 3  # a run with more is summed up by cause (results show lists each)


def episode_lines(who: str, rs: RunStalls, unit: str) -> list[str]:
    """What stands out of a run's stalls and slowdowns: each with its cause, the evidence
    and what it beat; a run with many summed up by cause."""
    eps = rs.episodes
    if len(eps) > MOST_EPISODES:
        by_cause: dict[str, list[StallEpisode]] = {}
        for ep in eps:
            by_cause.setdefault(ep.verdict(), []).append(ep)
        kinds = sorted({ep.kind for ep in eps})
        return [
            f"{who}: {len(eps)} {' and '.join(k + 's' for k in kinds)} "
            f"({sum(ep.length_s for ep in eps):g} s in all, "
            f"{sum(ep.delayed_tx for ep in eps):,} transactions delayed): "
            + "; ".join(
                f"{v} x{len(group)}"
                for v, group in sorted(by_cause.items(), key=lambda kv: -len(kv[1]))
            )
            + f" (results show {rs.run_id} lists each)"
        ]
    lines = []
    for ep in eps:
        lines.append(f"{who}: {ep.headline(unit)}: {ep.verdict()}")
        lines.append(f"  {'because ' if ep.cause != 'unknown' else ''}{ep.because()}")
        if ep.alternatives:
            lines.append(f"  {ep.ruled_out(2)}")
    return lines


@dataclass(frozen=True)
class Leaders:
    """The top of a comparable group for one figure: the cell with the best mean, and the
    cells it is not significantly ahead of (too few repetitions to tell counts as not).
    The best is a winner only when that list is empty: it is then significantly ahead of
    every other cell, each test at 95% (an intersection of tests: no correction needed)."""

    best: CellSummary
    tied: tuple[CellSummary, ...]
    # the cells said to be behind the best, each with its test against the best (Holm's
    # correction over those tests: several "behind" claims hold together at 5%)
    behind: tuple[tuple[CellSummary, Comparison], ...] = ()

    @property
    def winner(self) -> CellSummary | None:
        return None if self.tied else self.best


def _tps_values(c: CellSummary) -> tuple[float, ...]:
    return c.values


def _p99_values(c: CellSummary) -> tuple[float, ...]:
    return c.p99_values


def _load_values(c: CellSummary) -> tuple[float, ...]:
    return c.load_values


# figure -> (its per-run values, higher is better)
FIGURES: dict[str, tuple[Callable[[CellSummary], tuple[float, ...]], bool]] = {
    "tps": (_tps_values, True),
    "latency_p99_ms": (_p99_values, False),
    "load_seconds": (_load_values, False),
}


def leaders(members: Sequence[CellSummary], figure: str = "tps") -> Leaders | None:
    """Who leads a group on ``figure`` (None with fewer than two candidates measured).
    References (RAM, fsync off) are never candidates."""
    values_of, higher = FIGURES[figure]
    measured = [c for c in members if values_of(c)]
    candidates = [c for c in measured if not c.reference]
    if len(candidates) < 2:
        return None

    def mean(c: CellSummary) -> float:  # the geometric mean, as the comparisons test
        vals = [v for v in values_of(c) if v > 0]
        return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0

    best = (max if higher else min)(candidates, key=mean)
    others = [c for c in candidates if c is not best]

    def strata(a: CellSummary, b: CellSummary) -> tuple[Sequence[str | None], ...] | None:
        # throughput is compared by the checkpoints in each window, as against a baseline
        return (a.strata, b.strata) if figure == "tps" else None

    def test(a: CellSummary, b: CellSummary) -> Comparison:
        pair = strata(a, b)
        return compare(
            values_of(a),
            values_of(b),
            higher_is_better=higher,
            margin=best.margin,
            strata=(pair[0], pair[1]) if pair else None,
        )

    tests = [test(c, best) for c in others]
    tied = tuple(c for c, t in zip(others, tests, strict=True) if t.verdict is not Verdict.BETTER)
    # the same tests the other way round (each cell against the best), corrected together
    against = family_wise([test(best, c) for c in others])
    behind = tuple(
        (c, t)
        for c, t in zip(others, against, strict=True)
        if t is not None and t.verdict is Verdict.WORSE
    )
    return Leaders(best, tied, behind)


@dataclass
class Highlights:
    """What stands out, in sentences derived from the data."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def centre(e: Estimate | None) -> float:
    """A figure's centre as every ratio beside it is made: the geometric mean (the
    arithmetic one only where a value is not positive)."""
    if e is None:
        return 0.0
    return e.gmean if e.gmean is not None else e.mean


def highlights(cells: Sequence[CellSummary]) -> Highlights:
    h = Highlights()
    groups: dict[GroupKey, list[CellSummary]] = {}
    for c in cells:
        groups.setdefault(c.group, []).append(c)
    for members in groups.values():
        measured = [c for c in members if c.tps is not None]
        if len(measured) < 2:
            continue
        candidates = [c for c in measured if not c.reference] or measured
        best = max(candidates, key=lambda c: centre(c.tps))
        unit = best.unit
        head = f"{members[0].group_label}: "
        lead = leaders(members)
        # settled by the campaign's confidence sequences: each with its own words
        settled = [c for c in candidates if c.vs_baseline and c.vs_baseline.method == "sequence"]
        tested = [c for c in candidates if c not in settled]
        better = [c for c in tested if c.vs_baseline and c.vs_baseline.verdict.decided]
        same = [c for c in tested if c.vs_baseline and c.vs_baseline.verdict is Verdict.EQUIVALENT]
        undecided = [
            c for c in tested if c.vs_baseline and c.vs_baseline.verdict is Verdict.UNDECIDED
        ]
        none = [c for c in tested if c.vs_baseline and c.vs_baseline.verdict is Verdict.NONE]
        base = next((c for c in candidates if c.baseline is None), candidates[0])
        assert best.tps is not None
        if settled:
            # a campaign that stopped on its own data: only its confidence sequences hold,
            # so no fixed-sample "best" or "behind" is claimed
            h.lines.append(
                head
                + f"highest geometric mean {best.label} at {centre(best.tps):,.0f} {unit}; each "
                f"against {base.label} as the campaign's anytime-valid confidence sequences "
                "settled it:"
            )
        elif lead is not None and lead.winner is None:
            # "best" only for a significant winner: otherwise the top is a tie
            top = sorted([lead.best, *lead.tied], key=lambda c: -(centre(c.tps)))
            h.lines.append(
                head
                + "no cell is ahead of the others by the data: "
                + ", ".join(
                    f"{c.label} ({centre(c.tps):,.0f} {unit})" for c in top if c.tps is not None
                )
                + (
                    " at the top; "
                    + "; ".join(
                        f"{c.label} significantly behind {lead.best.label} ({t.words()})"
                        for c, t in lead.behind
                    )
                    if lead.behind
                    else ""
                )
            )
        else:
            h.lines.append(
                head
                + f"best {best.label} at {centre(best.tps):,.0f} {unit} (geometric mean)"
                + (", significantly ahead of every other" if lead is not None else "")
                + (
                    ""
                    if best is base or best.vs_baseline is None
                    else f"; {best.vs_baseline.words()} against {base.label}"
                )
            )
        for c in [*settled, *better]:
            assert c.vs_baseline is not None
            h.lines.append(f"  {c.label} vs {c.baseline}: {c.vs_baseline.words()}")
        if same:
            h.lines.append(
                f"  equivalent to {base.label}: "
                + ", ".join(
                    f"{c.label} ({c.vs_baseline.change_pct:+.1f}% "
                    f"{c.vs_baseline.interval_words()}, within ±{c.vs_baseline.margin * 100:.1f}%)"
                    for c in same
                    if c.vs_baseline and c.vs_baseline.change_pct is not None
                )
            )
        if undecided:
            h.lines.append(
                f"  undecided against {base.label}, too noisy to tell: "
                + ", ".join(
                    f"{c.label} ({c.vs_baseline.change_pct:+.1f}% {c.vs_baseline.interval_words()})"
                    for c in undecided
                    if c.vs_baseline and c.vs_baseline.change_pct is not None
                )
            )
        for c in none:
            assert c.vs_baseline is not None
            h.lines.append(f"  {c.label}: {c.vs_baseline.reason}")
        for ref in (c for c in measured if c.unsafe and c.tps is not None):
            assert ref.tps is not None
            h.lines.append(
                f"  unsafe {ref.label}: {centre(ref.tps):,.0f} {unit}, never the best "
                f"({'; '.join(ref.unsafe)})"
                + (
                    f"; what safety costs: the best safe mean ({best.label}) is "
                    f"{100 * centre(best.tps) / centre(ref.tps):.0f}% of it"
                    if ref is not best and centre(ref.tps) > 0
                    else ""
                )
            )
        for ref in (c for c in measured if c.reference and not c.unsafe and c.tps is not None):
            assert ref.tps is not None
            h.lines.append(
                f"  reference {ref.label}: {centre(ref.tps):,.0f} {unit}; the highest geometric "
                f"mean ({best.label}) reaches {100 * centre(best.tps) / centre(ref.tps):.0f}% of it"
                if ref is not best and centre(ref.tps) > 0
                else f"  reference {ref.label}: {centre(ref.tps):,.0f} {unit}"
            )
    for c in cells:
        if c.unstable:
            h.lines.append(f"{c.label} is unstable: {'; '.join(c.unstable)}")
    # each remedy once, naming the cells it is for
    remedies: dict[str, list[str]] = {}
    for c in cells:
        for remedy in c.remedies:
            remedies.setdefault(remedy, []).append(c.label)
    for remedy, labels in remedies.items():
        h.lines.append(
            f"  to steady {', '.join(labels)}: {remedy} (docs/guide/answers.md: unstable cells)"
        )
    # the disturbed runs in one line: the causes are each run's (results show RUN)
    disturbed = [
        f"{c.label} #{', #'.join(str(rep) for rep, _ in c.disturbed)}" for c in cells if c.disturbed
    ]
    if disturbed:
        h.lines.append(
            "other work on the host disturbed "
            + "; ".join(disturbed)
            + ": those figures may be the neighbours' as much as the storage's (`results "
            "show RUN` names what ran; --without-disturbed leaves them out)"
        )
    # a replay's own marks: never the host's disturbance
    for c in cells:
        for rep, said in c.replay_marks:
            h.lines.append(f"{c.label} #{rep}: " + "; ".join(said))
    for c in cells:
        for rs in c.stalls:
            h.lines += episode_lines(f"{c.label} #{rs.repetition}", rs, c.unit)
    failed = [c for c in cells if c.ok < c.runs]
    for c in failed:
        h.lines.append(
            f"{c.label}: {c.runs - c.ok} of {c.runs} run(s) failed: " + "; ".join(c.errors[:2])
        )
    return h
