"""pgfsbench compare."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from pgfsbench.cli import app
from pgfsbench.cli.results import (
    DEFAULT_RESULTS,
    RESULTS_ENV,
    BaselineOpt,
    CsvOpt,
    PriceFileOpt,
    WithoutDisturbedOpt,
    campaign_ids,
    flat,
    open_store,
    output_format,
    print_csv,
    read_prices,
)
from pgfsbench.report.inert import plain_console
from pgfsbench.report.terminal import fmt_geometric
from pgfsbench.system.errors import UsageError

if TYPE_CHECKING:
    from pgfsbench.analysis.pairs import Pair
    from pgfsbench.analysis.summary import CellSummary
    from pgfsbench.spec.profiles import Price

STYLE = {"better": "green", "worse": "red", "no significant difference": "", "no verdict": "dim"}


def pair_json(p: Pair) -> dict[str, object]:
    def side(c: Any, source: str) -> dict[str, object]:
        t = c.tps
        return {
            "cell": c.cell,
            "label": c.label,
            "host": c.host,
            "source": source,
            "n": t.n if t else 0,
            "median": t.median if t else None,
            "ci95": [t.ci_low, t.ci_high] if t else None,
            "usd_month": c.cost.usd_month if c.cost else None,
            "usd_per_1000_tps": c.usd_per_1000_tps,
            "disturbed": [{"repetition": r, "why": list(w)} for r, w in c.disturbed],
        }

    cmp = p.throughput
    return {
        "baseline": side(p.base, p.base_source),
        "other": side(p.other, p.other_source),
        "also_differ": {d: [getattr(p.base, d), getattr(p.other, d)] for d in p.also_differ},
        "differ": {d: [getattr(p.base, d), getattr(p.other, d)] for d in p.differ},
        "group": p.base.group_label,
        "ratio": cmp.ratio,
        "ci95": [cmp.ci_low, cmp.ci_high],
        "ci_level": cmp.level,
        "margin": cmp.margin,
        "estimand": cmp.estimand,
        # the runs do not record their checkpoints: the interval allows for a slow mode they
        # may have missed, this deep (share of throughput; analysis/hidden.py)
        "allows_for_missed_slow_mode": None
        if cmp.hidden_depth is None
        else round(1 - math.exp(-cmp.hidden_depth), 4),
        "p": cmp.p_value,
        "verdict": str(cmp.verdict),
        "text": cmp.words(),
        "p99": None
        if p.p99 is None
        else {"ratio": p.p99.ratio, "verdict": str(p.p99.verdict), "text": p.p99.words()},
    }


def same_store(a: str, b: str) -> bool:
    """Whether two --results name one store (the same file under two spellings too)."""
    if a == b:
        return True
    if "://" in a or "://" in b:
        return False
    try:
        return Path(a).samefile(b)
    except OSError:
        return False


@app.command("compare")
def compare_cmd(
    a: Annotated[
        str | None,
        typer.Argument(
            help="The baseline: a cell id, or a storage, postgres, kernel or workload name "
            "(globs allowed)."
        ),
    ] = None,
    b: Annotated[str | None, typer.Argument(help="What to compare with it (same forms).")] = None,
    results: Annotated[
        list[str] | None,
        typer.Option(
            "--results",
            "-r",
            help="SQLite file or postgresql:// URL; twice to compare two files cell by cell "
            "(default: $PGFSBENCH_RESULTS, else pgfsbench.sqlite).",
        ),
    ] = None,
    campaign: Annotated[
        list[int] | None,
        typer.Option(
            "--campaign",
            help="Campaign id; twice to compare two campaigns cell by cell (default: the latest).",
        ),
    ] = None,
    baseline: BaselineOpt = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="host: compare within each host, then combine the hosts (the geometric "
            "mean of per-host ratios with its 95% CI) and show each "
            "configuration's host-to-host spread (every campaign by default).",
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="Only the runs of this host (a store holding a fleet's hosts)."
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the comparisons as JSON (ratios, intervals, verdicts)."),
    ] = False,
    price_file: PriceFileOpt = None,
    without_disturbed: WithoutDisturbedOpt = False,
    as_csv: CsvOpt = False,
    across_campaigns: Annotated[
        bool,
        typer.Option(
            "--across-campaigns",
            help="Every campaign of the store (or those --campaign names) that holds the "
            "same pairs of cells: each campaign's ratio, whether they agree (Cochran's Q, "
            "tau) and what they say together (random effects, 95%).",
        ),
    ] = False,
) -> None:
    """Is B faster than A? Ratio of geometric means with its interval (Welch's t on log
    throughput, Hsu's degrees of freedom, 95% family-wise) and a verdict, only between
    comparable cells (same workload, clients, scale). Without A and B, every cell against
    its group's baseline. With --across-campaigns, whether campaigns of the same cells
    agree."""
    targets = results or [os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS]
    camps = campaign or []
    if across_campaigns:
        _across_campaigns(targets, camps, a, b, as_json, without_disturbed)
        return
    if by is not None:
        if by != "host":
            raise UsageError("--by takes host")
        if host is not None:
            raise UsageError("--by host compares every host; --host keeps one: not both")
        _by_host(targets, camps, a, b, baseline, as_json, without_disturbed)
        return
    if len(targets) > 2 or len(camps) > 2 or (len(targets) == 2 and len(camps) == 1):
        raise UsageError(
            "compare takes at most two sources: two --results (each with its "
            "own --campaign, or its latest), or two --campaign of one store"
        )
    if len(targets) == 2 and len(camps) < 2 and same_store(targets[0], targets[1]):
        raise UsageError(
            f"both --results name {targets[0]}: a store compared with itself "
            "says nothing (give --campaign twice to compare two of its campaigns)"
        )
    prices = read_prices(price_file)
    pairs = (
        _pairs_across(targets, camps, a, baseline, host, prices, without_disturbed)
        if len(targets) == 2 or len(camps) == 2
        else _pairs_within(targets[0], campaign, a, b, baseline, host, prices, without_disturbed)
    )
    how = output_format(as_csv, as_json)
    if how == "json":
        print(json.dumps([pair_json(p) for p in pairs], indent=1, default=str))
        return
    if how == "csv":
        print_csv([flat(pair_json(p)) for p in pairs])
        return
    _print_pairs(pairs)


def _across_campaigns(
    targets: list[str],
    camps: list[int],
    a: str | None,
    b: str | None,
    as_json: bool,
    without_disturbed: bool,
) -> None:
    """Campaigns of the same cells side by side (analysis/agreement.py)."""
    from pgfsbench.analysis.agreement import agreements
    from pgfsbench.analysis.disturbance import disturbance_of
    from pgfsbench.analysis.summary import summarise

    if len(targets) != 1:
        raise UsageError("--across-campaigns reads one store")
    store = open_store(targets[0])
    chosen = [c for c in store.campaigns() if not camps or c.id in camps]
    found = {}
    for camp in chosen:
        runs = store.list_runs(camp.id)
        if without_disturbed:
            runs = [r for r in runs if not (r.ok and disturbance_of(r).disturbed)]
        found[camp.id] = (str(camp.started_at or ""), str(camp.host or ""), summarise(runs))
    rows = agreements(found)
    if a is not None:
        rows = [r for r in rows if fnmatch_any(r.baseline, a) or fnmatch_any(r.other, a)]
    if b is not None:
        rows = [r for r in rows if fnmatch_any(r.baseline, b) or fnmatch_any(r.other, b)]
    if as_json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, default=str))
        return
    console = plain_console()
    if not rows:
        console.print("no pair of cells is in more than one campaign of this store", markup=False)
        return
    for r in rows:
        console.print(f"{r.group}: {r.words()}", markup=False, highlight=False)


def fnmatch_any(label: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(label, pattern) or any(
        fnmatch.fnmatchcase(part, pattern) for part in label.split("/")
    )


def _pairs_across(
    targets: list[str],
    camps: list[int],
    a: str | None,
    baseline: str | None,
    host: str | None,
    prices: dict[str, Price] | None = None,
    without_disturbed: bool = False,
) -> list[Pair]:
    """Two sources (two stores, or two campaigns of one), cell by cell."""
    from pgfsbench.analysis.pairs import pairs_across
    from pgfsbench.analysis.summary import matches
    from pgfsbench.report.loading import analyse

    sources = []
    for i in range(2):
        store = open_store(targets[i] if len(targets) == 2 else targets[0])
        ids = campaign_ids(store, [camps[i]] if camps else None)
        name = f"{store.target} campaign {ids[0]}"
        found = analyse(
            store, ids, baseline, host, prices=prices, without_disturbed=without_disturbed
        )
        sources.append((name, found.cells))
    (na, ca), (nb, cb) = sources
    if a is not None:
        ca = [c for c in ca if matches(c, a)]
    pairs = pairs_across(ca, cb, na, nb)
    if not pairs:
        raise UsageError("the two sources have no cell in common")
    return pairs


def _pairs_within(
    target: str,
    campaign: list[int] | None,
    a: str | None,
    b: str | None,
    baseline: str | None,
    host: str | None,
    prices: dict[str, Price] | None = None,
    without_disturbed: bool = False,
) -> list[Pair]:
    """The cells A and B name in one campaign, or every cell against its baseline."""
    from pgfsbench.analysis.pairs import make_pair, pairs_by_name
    from pgfsbench.analysis.summary import matches
    from pgfsbench.report.loading import analyse

    store = open_store(target)
    cells = analyse(
        store,
        campaign_ids(store, campaign),
        baseline,
        host,
        prices=prices,
        without_disturbed=without_disturbed,
    ).cells
    if (a is None) != (b is None):
        raise UsageError("give both A and B, or neither (every cell against its baseline)")
    if a is None or b is None:
        by_label = {(c.label, c.group): c for c in cells}
        return [
            make_pair(by_label[(c.baseline, c.group)], c)
            for c in cells
            if c.baseline is not None and (c.baseline, c.group) in by_label
        ]
    for name in (a, b):
        if not any(matches(c, name) for c in cells):
            raise UsageError(
                f"no cell named {name!r} (cells: "
                + ", ".join(sorted({c.label for c in cells}))
                + ")"
            )
    pairs = pairs_by_name(cells, a, b)
    if not pairs:
        raise UsageError(
            f"no comparable cells: {a!r} and {b!r} name no pair with the "
            "same workload, clients and scale"
        )
    return pairs


def _mark(cell: CellSummary) -> str:
    """' [2 disturbed]' when other work on the host disturbed some of its runs."""
    return f" [{len(cell.disturbed)} disturbed]" if cell.disturbed else ""


def _print_pairs(pairs: list[Pair]) -> None:
    console = plain_console()
    table = Table(
        title="B against A (95% family-wise; geometric means, as the ratio is)",
        title_justify="left",
    )
    for col in ("A", "B", "A tps [95% CI]", "B tps [95% CI]", "B/A [95% CI]", "verdict", "p99"):
        table.add_column(col, justify="left" if col in ("A", "B", "verdict") else "right")
    for p in pairs:
        cmp = p.throughput
        ratio = (
            "-"
            if cmp.ratio is None
            else (
                f"{(cmp.ratio - 1) * 100:+.1f}%"
                + (
                    ""
                    if cmp.ci_low is None or cmp.ci_high is None
                    else f" [{(cmp.ci_low - 1) * 100:+.1f}%, {(cmp.ci_high - 1) * 100:+.1f}%]"
                )
            )
        )
        verdict = Text(
            f"{cmp.verdict.mark()} {cmp.verdict_words()}", style=STYLE.get(cmp.verdict.value, "")
        )
        p99 = (
            "-"
            if p.p99 is None or p.p99.change_pct is None
            else f"{p.p99.change_pct:+.1f}% {p.p99.verdict.mark()}"
        )
        table.add_row(
            p.base.label + (f" ({p.base_source})" if p.base_source else "") + _mark(p.base),
            p.other.label + (f" ({p.other_source})" if p.other_source else "") + _mark(p.other),
            fmt_geometric(p.base.tps),
            fmt_geometric(p.other.tps),
            ratio,
            verdict,
            p99,
        )
    console.print(table)
    from pgfsbench.report.terminal import cost_lines

    sides = {id(c): c for p in pairs for c in (p.base, p.other)}
    for line in cost_lines(list(sides.values())):
        console.print(line, markup=False, highlight=False)
    for line in differ_lines(pairs):
        console.print(line, markup=False, highlight=False)
    for p in pairs:
        if p.also_differ:
            console.print(
                Text(
                    f"{p.other.label} and {p.base.label} also differ in "
                    + "; ".join(
                        f"{d} ({getattr(p.base, d)} and {getattr(p.other, d)})"
                        for d in p.also_differ
                    )
                    + ": the difference is theirs together",
                    style="yellow",
                )
            )


def differ_lines(pairs: Sequence[Pair]) -> list[str]:
    """What each comparison changes, said once for the pairs that change the same: "B
    against A differs in postgres only (settings-today -> wal_compression-on)"."""
    said: dict[str, int] = {}
    for p in pairs:
        named = [d for d in p.differ if d not in p.also_differ]
        if not named:
            continue
        what = ", ".join(f"{d} ({getattr(p.base, d)} -> {getattr(p.other, d)})" for d in named)
        key = what + ("" if p.also_differ else " only")
        said[key] = said.get(key, 0) + 1
    return [
        f"the two sides differ in {what}" + (f", in {n} comparisons" if n > 1 else "")
        for what, n in said.items()
    ]


def _by_host(
    targets: list[str],
    camps: list[int],
    a: str | None,
    b: str | None,
    baseline: str | None,
    as_json: bool,
    without_disturbed: bool = False,
) -> None:
    from pgfsbench.analysis.pairs import across_hosts, host_spread, make_pair, pairs_by_name
    from pgfsbench.report.loading import analyse

    if len(targets) != 1:
        raise UsageError("--by host reads one store (import the hosts' files into it)")
    store = open_store(targets[0])
    ids = camps or [c.id for c in store.campaigns()]
    if not ids:
        raise UsageError(f"{store.target} holds no campaign yet")
    cells = analyse(store, ids, baseline, without_disturbed=without_disturbed).cells
    if (a is None) != (b is None):
        raise UsageError("give both A and B, or neither (every cell against its baseline)")
    if a is not None and b is not None:
        pairs = pairs_by_name(cells, a, b)
    else:
        by_label = {(c.label, c.group): c for c in cells}
        pairs = [
            make_pair(by_label[(c.baseline, c.group)], c)
            for c in cells
            if c.baseline is not None and (c.baseline, c.group) in by_label
        ]
    combined = across_hosts(pairs)
    spread = host_spread(cells)
    if as_json:
        print(
            json.dumps(
                {
                    "across_hosts": [c.as_dict() for c in combined],
                    "host_spread": [s.as_dict() for s in spread],
                },
                indent=1,
                default=str,
            )
        )
        return
    console = plain_console()
    table = Table(
        title="B against A on each host, then across hosts (95% confidence)", title_justify="left"
    )
    for col in ("A", "B", "per host", "across hosts [95% CI]", "verdict"):
        table.add_column(col)
    for c in combined:
        per = ", ".join(
            f"{h} {'-' if r is None else f'{(r - 1) * 100:+.1f}%'}" for h, r, _ in c.per_host
        )
        ratio = (
            "-"
            if c.ratio is None
            else f"{(c.ratio - 1) * 100:+.1f}%"
            + (
                ""
                if c.ci_low is None or c.ci_high is None
                else f" [{(c.ci_low - 1) * 100:+.1f}%, {(c.ci_high - 1) * 100:+.1f}%]"
            )
        )
        table.add_row(c.base, c.other, per, ratio, c.verdict)
    console.print(table)
    hosts = Table(title="each configuration on each host (median throughput)", title_justify="left")
    for col in ("cell", "hosts", "host-to-host CV", "p99 ms, all hosts' transactions"):
        hosts.add_column(col)
    for s in spread:
        hosts.add_row(
            s.cell,
            ", ".join(f"{h} {m:,.0f}" for h, m in s.medians),
            "-" if s.cv is None else f"{s.cv * 100:.1f}%",
            "-" if s.p99_ms is None else f"{s.p99_ms:,.2f}",
        )
    console.print(hosts)
