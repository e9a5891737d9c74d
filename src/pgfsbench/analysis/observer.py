"""What observing cost (pure): the cells run with `samplers = "alternate"` have pairs of
runs, one watched (samplers and pgbench's transaction log) and one not, in the same cell;
the ratio of their throughputs, pair by pair, is the observer's effect on this stack."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from pgfsbench.analysis.stats import hodges_lehmann, t_interval, t_interval_log
from pgfsbench.results.metrics import ObserverFigures
from pgfsbench.results.records import StoredRun


@dataclass(frozen=True)
class ObserverEffect:
    cell: str
    host: str | None
    campaign_id: int | None
    ratios: tuple[float, ...]  # watched / not watched, one per pair, in run order
    ratio: float  # geometric mean of the pairs' ratios
    ci_low: float | None  # 95% t interval on the log ratios (None below 2 pairs)
    ci_high: float | None
    sampler_cpu_pct: float | None  # median over the watched runs, % of one core
    benchmark_cpu_pct: dict[str, float]  # median benchmark CPU, % of one core, by side
    # the samplers plus the server backend answering them (median, % of one core)
    observer_cpu_pct: float | None = None
    # the benchmark's CPU per transaction (median, microseconds), by side: what the
    # transaction log costs the client whatever the throughput
    benchmark_cpu_us_per_tx: dict[str, float] = field(default_factory=dict)
    # what watching adds to the benchmark's own CPU (the transaction log's cost), pair by
    # pair: mean of (watched - not watched) in points of % of one core, with its 95% t
    # interval (None below two pairs)
    benchmark_cpu_extra_pct: tuple[float, float | None, float | None] | None = None
    # the same ratio robust to a few disturbed pairs (a burst of the host's load in one
    # run of a pair): Hodges-Lehmann on the log ratios with its Wilcoxon signed-rank 95%
    # interval (no interval below 6 pairs)
    robust: tuple[float, float | None, float | None] | None = None

    @property
    def total_cpu_pct(self) -> float | None:
        """The whole observer in % of one core: the samplers with their backend (or alone
        when the backend was not measured) plus what watching added to the benchmark."""
        own = self.observer_cpu_pct if self.observer_cpu_pct is not None else self.sampler_cpu_pct
        if own is None or self.benchmark_cpu_extra_pct is None:
            return None
        return own + self.benchmark_cpu_extra_pct[0]

    @property
    def pairs(self) -> int:
        return len(self.ratios)

    def words(self) -> str:
        if self.ci_low is None or self.ci_high is None:
            interval = "one pair: no interval"
        else:
            interval = f"95% CI [{self.ci_low:.4f}, {self.ci_high:.4f}]"
            if self.ci_low > 1 or self.ci_high < 1:
                interval += f", observing made it {'faster' if self.ci_low > 1 else 'slower'}"
            else:
                interval += ", no significant effect"
        if self.robust is not None and self.robust[1] is not None and self.robust[2] is not None:
            interval += (
                f"; robust to disturbed pairs (Hodges-Lehmann) {self.robust[0]:.4f} "
                f"[{self.robust[1]:.4f}, {self.robust[2]:.4f}]"
            )
        cpu = (
            ""
            if self.sampler_cpu_pct is None
            else f"; samplers used {self.sampler_cpu_pct:.2f}% of a core"
        )
        if cpu and self.observer_cpu_pct is not None:
            cpu += f" ({self.observer_cpu_pct:.2f}% with their server backend)"
        per_tx = self.benchmark_cpu_us_per_tx
        if "watched" in per_tx and "not watched" in per_tx:
            cpu += (
                f"; the benchmark's CPU per transaction {per_tx['watched']:.2f} us "
                f"watched, {per_tx['not watched']:.2f} us not"
            )
        extra = self.benchmark_cpu_extra_pct
        if extra is not None:
            low, high = extra[1], extra[2]
            cpu += f"; watching added {extra[0]:+.2f} points of a core to the benchmark" + (
                "" if low is None or high is None else f" (95% CI [{low:+.2f}, {high:+.2f}])"
            )
            if self.total_cpu_pct is not None:
                cpu += f", the whole observer about {self.total_cpu_pct:.2f}% of a core"
        where = f" on {self.host}" if self.host else ""
        return (
            f"observer effect in {self.cell}{where}: throughput watched / not watched "
            f"{self.ratio:.4f} over {self.pairs} pair(s), {interval}{cpu}"
        )


def geometric_ci(ratios: Sequence[float]) -> tuple[float, float | None, float | None]:
    """The geometric mean of paired ratios with its 95% t interval on the log ratios
    (no interval below two pairs)."""
    centre = math.exp(statistics.fmean(math.log(x) for x in ratios))
    if len(ratios) < 2:
        return centre, None, None
    low, high = t_interval_log(list(ratios))
    return centre, low, high


def robust_ratio(ratios: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Paired ratios' Hodges-Lehmann centre with its 95% Wilcoxon signed-rank interval,
    on the log ratios (no interval below 6 ratios)."""
    centre, low, high = hodges_lehmann([math.log(x) for x in ratios])
    return (
        math.exp(centre),
        None if low is None else math.exp(low),
        None if high is None else math.exp(high),
    )


def _observer(run: StoredRun) -> ObserverFigures:
    return run.recorded.observer


def _throughput(run: StoredRun) -> float | None:
    v = run.figure
    return v if v is not None and v > 0 else None


def _pairs(runs: Iterable[StoredRun]) -> list[tuple[StoredRun, StoredRun]]:
    """The runs of one cell paired (1, 2), (3, 4)... by repetition, as (watched, not
    watched), for each pair whose two runs are ok and were one of each."""
    by_rep = {r.repetition: r for r in runs if r.ok and _observer(r).on is not None}
    out = []
    for first in sorted(k for k in by_rep if k % 2 == 1):
        a, b = by_rep.get(first), by_rep.get(first + 1)
        if a is None or b is None or bool(_observer(a).on) == bool(_observer(b).on):
            continue
        out.append((a, b) if _observer(a).on else (b, a))
    return out


def pair_ratios(runs: Iterable[StoredRun]) -> list[float]:
    """Watched over not watched throughput, pair by pair (see `_pairs`)."""
    ratios = []
    for on, off in _pairs(runs):
        x, y = _throughput(on), _throughput(off)
        if x is not None and y is not None:
            ratios.append(x / y)
    return ratios


def _paired_cpu_extra(
    runs: Iterable[StoredRun],
) -> tuple[float, float | None, float | None] | None:
    """What watching added to the benchmark's CPU (% of one core), pair by pair."""
    diffs = [
        a - b
        for on, off in _pairs(runs)
        if (a := _cpu_pct(on)) is not None and (b := _cpu_pct(off)) is not None
    ]
    if not diffs:
        return None
    if len(diffs) < 2:
        return diffs[0], None, None
    low, high = t_interval(diffs)
    return statistics.fmean(diffs), low, high


def _cpu_per(run: StoredRun, by: float | None, scale: float) -> float | None:
    """The benchmark's CPU seconds divided by one of the run's figures, times ``scale``."""
    cpu = _observer(run).benchmark_cpu_s
    return None if cpu is None or not by else scale * float(cpu) / float(by)


def _cpu_pct(run: StoredRun) -> float | None:
    """% of one core over the measured phase."""
    return _cpu_per(run, run.duration_s, 100)


def _cpu_us_per_tx(run: StoredRun) -> float | None:
    """Microseconds per transaction."""
    return _cpu_per(run, run.transactions, 1e6)


def _watched_median(
    runs: Iterable[StoredRun], figure: Callable[[ObserverFigures], float | None]
) -> float | None:
    vals = [float(v) for r in runs if _observer(r).on and (v := figure(_observer(r))) is not None]
    return statistics.median(vals) if vals else None


def _by_side(
    runs: Sequence[StoredRun], figure: Callable[[StoredRun], float | None]
) -> dict[str, float]:
    """The median of a run's figure over the watched and over the not-watched runs."""
    out: dict[str, float] = {}
    for side, on in (("watched", True), ("not watched", False)):
        vals = [v for r in runs if bool(_observer(r).on) == on if (v := figure(r)) is not None]
        if vals:
            out[side] = round(statistics.median(vals), 2)
    return out


def observer_effects(runs: Iterable[StoredRun]) -> list[ObserverEffect]:
    """One effect per cell (and host) whose runs alternated watched and not watched."""
    cells: dict[tuple[int | None, str, str | None], list[StoredRun]] = {}
    for r in runs:
        if r.superseded_by or not _observer(r).alternating:
            continue
        cells.setdefault((r.campaign_id, r.cell, r.host), []).append(r)
    out = []
    for (campaign, cell, host), rows in cells.items():
        ratios = pair_ratios(rows)
        if not ratios:
            continue
        ratio, low, high = geometric_ci(ratios)
        ok = [r for r in rows if r.ok]
        cpu = _watched_median(ok, lambda o: o.sampler_cpu_pct_of_a_core)
        total = _watched_median(ok, lambda o: o.observer_cpu_pct_of_a_core)
        bench, per_tx = _by_side(ok, _cpu_pct), _by_side(ok, _cpu_us_per_tx)
        out.append(
            ObserverEffect(
                cell,
                host,
                campaign,
                tuple(ratios),
                ratio,
                low,
                high,
                cpu,
                bench,
                total,
                per_tx,
                _paired_cpu_extra(rows),
                robust_ratio(ratios),
            )
        )
    return out
