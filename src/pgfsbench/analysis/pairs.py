"""Which cells to compare with which (pure): A against B by name across all comparable
cells, or the same cells from two sources (campaigns, result files, machines, dates)."""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from pgfsbench.analysis.compare import Comparison, Verdict, compare
from pgfsbench.analysis.summary import DIMS, CellSummary, matches


@dataclass(frozen=True)
class Pair:
    base: CellSummary
    other: CellSummary
    throughput: Comparison
    p99: Comparison | None
    base_source: str = ""
    other_source: str = ""
    # the dimensions in which the two differ beyond the ones the user named (a comparison of
    # ext4 with zfs whose postgres configurations differ too): said with the result
    also_differ: tuple[str, ...] = ()
    # every dimension in which the two cells differ (the named ones and the others)
    differ: tuple[str, ...] = ()


def make_pair(
    base: CellSummary, other: CellSummary, base_source: str = "", other_source: str = ""
) -> Pair:
    """B against A as the summary judges it: stratified by the checkpoints in each run's
    window when both sides recorded them, at the baseline's margin. When B's comparison with
    A is the one an `auto` campaign's confidence sequence settled (A is B's baseline, one
    source), that is the answer, valid however the campaign stopped; a fixed-sample test of
    the same runs is not (the campaign stopped by looking at them), either way round."""
    p99 = (
        compare(base.p99_values, other.p99_values, higher_is_better=False, margin=base.margin)
        if base.p99_values and other.p99_values
        else None
    )
    tps = _settled(base, other) if base_source == other_source else None
    if tps is None:
        tps = compare(
            base.values, other.values, margin=base.margin, strata=(base.strata, other.strata)
        )
    return Pair(base, other, tps, p99, base_source, other_source)


def _settled(base: CellSummary, other: CellSummary) -> Comparison | None:
    """The campaign's sequential verdict of this pair, oriented B against A, if it has one."""
    if base.group != other.group:
        return None
    found = other.vs_baseline
    if found is not None and found.method == "sequence" and other.baseline == base.label:
        return found
    found = base.vs_baseline
    if found is not None and found.method == "sequence" and base.baseline == other.label:
        return inverted(found)
    return None


def inverted(c: Comparison) -> Comparison:
    """A against B from B against A: the ratio and interval turned over, the verdict too."""
    flip = {Verdict.BETTER: Verdict.WORSE, Verdict.WORSE: Verdict.BETTER}
    word = {"faster": "slower", "slower": "faster", "lower": "higher", "higher": "lower"}
    reason = c.reason
    for was in word:
        if reason.startswith(was):
            reason = word[was] + reason[len(was) :]
            break
    return dataclasses.replace(
        c,
        n_base=c.n_other,
        n_other=c.n_base,
        ratio=None if c.ratio is None else 1 / c.ratio,
        ci_low=None if c.ci_high is None else 1 / c.ci_high,
        ci_high=None if c.ci_low is None else 1 / c.ci_low,
        verdict=flip.get(c.verdict, c.verdict),
        reason=reason.replace(f"n={c.n_base} vs {c.n_other}", f"n={c.n_other} vs {c.n_base}"),
        d=None if c.d is None else -c.d,
        strata=(),
    )


def _named(cell: CellSummary, pattern: str) -> set[str]:
    """The dimensions of ``cell`` that ``pattern`` names: all of them when it names the
    whole cell (its id, or a label that joins several dimensions)."""
    if fnmatch.fnmatchcase(cell.cell, pattern) or (
        "/" in cell.label and fnmatch.fnmatchcase(cell.label, pattern)
    ):
        return set(DIMS)
    return {d for d in DIMS if fnmatch.fnmatchcase(getattr(cell, d), pattern)}


def differing(x: CellSummary, y: CellSummary) -> tuple[str, ...]:
    """The dimensions in which two cells differ, in the order of a cell id."""
    return tuple(d for d in DIMS if getattr(x, d) != getattr(y, d))


def pairs_by_name(cells: Sequence[CellSummary], a: str, b: str) -> list[Pair]:
    """Each cell that `a` names against each comparable cell that `b` names and that differs
    from it only where the two names do (storage ext4 vs xfs: for every postgres, kernel,
    workload, clients and scale). A dimension differs "as named" when `a` names the one
    cell's value and `b` the other's; when no pair differs only so, the pairs that differ
    in more are compared and what else differs is said (``also_differ``)."""
    left = [c for c in cells if matches(c, a)]
    right = [c for c in cells if matches(c, b)]
    out: list[Pair] = []
    loose: list[Pair] = []
    for x in left:
        named_x = _named(x, a)
        for y in right:
            # two hosts (two clusters of a campaign, a fleet's machines) are never a group;
            # named by the user, A on one and B on the other are compared, and said
            elsewhere = y.group[:-1] == x.group[:-1] and y.host != x.host
            if (
                y is x
                or (y.group != x.group and not elsewhere)
                or ("@" in x.cell and x.cell.split("@")[1] != y.cell.split("@")[-1])
            ):
                continue
            diff = differing(x, y)
            if not diff and not elsewhere:
                continue  # the same cell twice (two names for one thing): nothing compared
            named = named_x & _named(y, b)
            beyond = tuple(d for d in diff if d not in named)
            if not elsewhere and not beyond:
                out.append(dataclasses.replace(make_pair(x, y), differ=diff))
            else:
                loose.append(
                    dataclasses.replace(
                        make_pair(x, y),
                        differ=diff,
                        also_differ=beyond + (("host",) if elsewhere else ()),
                    )
                )
    # what the user named, even when the two differ in more than that: compared, and said
    return out or loose


def pairs_across(
    base: Sequence[CellSummary], other: Sequence[CellSummary], base_source: str, other_source: str
) -> list[Pair]:
    """The same cells (by id) from two sources: two campaigns, two files, two machines."""
    by_id = {c.cell: c for c in other}
    return [make_pair(c, by_id[c.cell], base_source, other_source) for c in base if c.cell in by_id]


@dataclass(frozen=True)
class AcrossHosts:
    """The same comparison (B against A, same workload, clients, scale) made on each host,
    then combined with the host as a block: the geometric mean of the per-host ratios and
    its 95% t interval over hosts."""

    base: str
    other: str
    workload: str
    per_host: tuple[tuple[str, float | None, str], ...]  # host, ratio, that host's verdict
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str

    def as_dict(self) -> dict[str, object]:
        return {
            "base": self.base,
            "other": self.other,
            "workload": self.workload,
            "per_host": [{"host": h, "ratio": r, "verdict": v} for h, r, v in self.per_host],
            "ratio": self.ratio,
            "ci95": [self.ci_low, self.ci_high],
            "verdict": self.verdict,
        }


def across_hosts(pairs: Sequence[Pair]) -> list[AcrossHosts]:
    """Pairs made within each host, grouped by what they compare, then combined."""
    from pgfsbench.analysis.compare import MARGIN, combine_blocks

    groups: dict[tuple[str, str, str, str], list[Pair]] = {}
    for p in pairs:
        key = (
            p.base.label,
            p.other.label,
            p.base.workload,
            f"{p.base.clients}|{p.base.scale}|{p.base.rate}",
        )
        groups.setdefault(key, []).append(p)
    out = []
    for (base, other, workload, _), ps in groups.items():
        per = tuple(
            (p.base.host or "?", p.throughput.ratio, p.throughput.verdict_words())
            for p in sorted(ps, key=lambda p: p.base.host or "")
        )
        ratios = [r for _, r, _ in per if r is not None]
        combined = combine_blocks(ratios)
        if combined is None:
            out.append(
                AcrossHosts(base, other, workload, per, None, None, None, "no verdict (no ratio)")
            )
            continue
        ratio, lo, hi = combined
        if len(ratios) < 2:
            verdict = f"no verdict across hosts: {len(ratios)} host"
            lo_v: float | None = None
            hi_v: float | None = None
        else:
            lo_v, hi_v = lo, hi
            if lo > 1:
                verdict = f"faster across hosts taken together (n={len(ratios)} hosts)"
            elif hi < 1:
                verdict = f"slower across hosts taken together (n={len(ratios)} hosts)"
            elif lo > 1 - MARGIN and hi < 1 + MARGIN:
                verdict = (
                    f"equivalent within ±{MARGIN * 100:g}% across hosts (n={len(ratios)} hosts)"
                )
            else:
                verdict = f"undecided across hosts: too noisy to tell (n={len(ratios)} hosts)"
        out.append(AcrossHosts(base, other, workload, per, ratio, lo_v, hi_v, verdict))
    return out


@dataclass(frozen=True)
class HostSpread:
    """One configuration on several hosts: how much the hosts disagree."""

    cell: str
    medians: tuple[tuple[str, float], ...]  # host, median throughput
    cv: float | None  # across hosts
    # the p99 of every transaction on every host (their runs' histograms merged)
    p99_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "cell": self.cell,
            "medians": dict(self.medians),
            "cv": self.cv,
            "p99_ms_all_hosts": self.p99_ms,
        }


def host_spread(cells: Sequence[CellSummary]) -> list[HostSpread]:
    import statistics

    from pgfsbench.analysis.histogram import pooled

    by_label: dict[str, list[CellSummary]] = {}
    for c in cells:
        if c.tps is not None:
            by_label.setdefault(c.cell, []).append(c)
    out = []
    for label, cs in by_label.items():
        meds = tuple(sorted((c.host or "?", c.tps.median) for c in cs if c.tps is not None))
        vals = [m for _, m in meds]
        cv = (
            statistics.stdev(vals) / statistics.mean(vals)
            if len(vals) >= 2 and statistics.mean(vals) > 0
            else None
        )
        lat = [c.latency_pooled for c in cs if c.latency_pooled is not None]
        p99 = (
            pooled(
                (p.histogram for p in lat),
                sum(p.runs for p in lat),
                sum(p.runs_without for p in lat),
            ).percentiles_ms.get("p99")
            if lat
            else None
        )
        out.append(HostSpread(label, meds, cv, p99))
    return out
