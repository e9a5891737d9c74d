"""The summary as Markdown, for tickets and chat (pure: summaries in, text out)."""

from __future__ import annotations

from collections.abc import Sequence

from pgfsbench import __version__
from pgfsbench.analysis.stalls import CAUSES, describe_blocker
from pgfsbench.analysis.summary import CellSummary, Highlights, by_group
from pgfsbench.report.conditions import conditions
from pgfsbench.report.inert import markdown_inline, printable
from pgfsbench.report.terminal import (
    P99_LEGEND,
    cell_name,
    cost_lines,
    fmt_geometric,
    fmt_p99,
    fmt_range,
    fmt_space,
    fmt_spread,
    fmt_vs,
    fs_text,
    replay_rows,
)
from pgfsbench.results.records import StoredCampaign, StoredRun


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(M(c) for c in cells) + " |"


def _rule(n: int) -> str:
    """A table's header rule of ``n`` columns."""
    return "|" + " --- |" * n


# every text that comes from a results file goes through M (names, errors, evidence,
# hosts, warnings): one inert line of Markdown each (report/inert.markdown_inline)
M = markdown_inline


def conditions_lines(runs: Sequence[StoredRun], cells: Sequence[CellSummary]) -> list[str]:
    """The conditions section: what every run shares, then what differs by configuration."""
    c = conditions(runs)
    if not c.common and not c.per_cell:
        return []
    lines = ["## Conditions", "", _row(["", "every run"]), _rule(2)]
    lines += [_row([k, v]) for k, v in c.common] + [""]
    if c.differing:
        labels = {x.cell: cell_name(x) for x in cells}
        lines += [_row(["configuration", *c.differing]), _rule(len(c.differing) + 1)]
        lines += [_row([labels.get(cell, cell), *values]) for cell, values in c.per_cell]
        lines.append("")
    return lines


def render_markdown(
    campaigns: Sequence[StoredCampaign],
    cells: Sequence[CellSummary],
    highlights: Highlights,
    warnings: Sequence[str],
    runs: Sequence[StoredRun] = (),
    headline: str | None = None,
) -> str:
    names = ", ".join(f"{M(c.name)} (campaign {c.id})" for c in campaigns)
    lines = [f"# pgfsbench: {names or 'results'}", "", f"pgfsbench {__version__}", ""]
    if headline:  # the first thing said: no verdict, and why
        lines += [f"**{M(headline)}**", ""]
    hosts = sorted({c.host for c in campaigns if c.host})
    if hosts:
        lines += [
            f"Host(s): {M(', '.join(hosts))}. "
            + "; ".join(
                f"campaign {c.id}: {M((c.started_at or '')[:19])}, {M(c.status or '')}"
                for c in campaigns
            ),
            "",
        ]
    if warnings:
        lines += ["**Read with care:**", ""] + [f"- {M(w)}" for w in warnings] + [""]
    if highlights.lines:
        lines += (
            ["## What stands out", ""]
            + [
                ("  - " if line.startswith("  ") else "- ") + M(line.strip())
                for line in highlights.lines
            ]
            + [""]
        )
    lines += _summary_lines(cells)
    lines += [
        'Throughput: the geometric mean of the runs with its 95% interval, what "vs '
        'baseline" compares. ▲ faster, ▼ slower, ≈ equivalent (the interval within the '
        "margin), ? undecided (too noisy to tell), – no verdict (too few runs, a busy host, "
        "runs of two shapes): against each group's baseline (the first configuration that "
        "is not a reference), Welch's t on log throughput with Hsu's degrees of freedom, "
        "95% family-wise; ref: a reference (a ceiling, no verdict).",
        "",
    ]
    lines += conditions_lines(runs, cells)
    replays = [(r, row) for r in runs for row in replay_rows(r)]
    if replays:
        lines += ["## Replay fidelity", ""]
        lines += [f"- {M(r.cell)} #{r.repetition}, {M(k)}: {M(str(v))}" for r, (k, v) in replays]
        lines.append("")
    lines += _episode_lines(cells)
    failures = [(c, e) for c in cells for e in c.errors]
    if failures:
        lines += ["## Failed runs", ""] + [f"- {M(c.label)}: {M(e)}" for c, e in failures] + [""]
    # names, errors and evidence come from the store: each went through M above
    return printable("\n".join(lines))


def _summary_lines(cells: Sequence[CellSummary]) -> list[str]:
    """The summary table, one per group of comparable cells."""
    lines: list[str] = []
    lines += ["## Summary", ""]
    unit = cells[0].unit if cells else "tps"
    header = [
        "configuration",
        "fs",
        f"{unit} (geometric mean ±95% CI)",
        "vs baseline",
        "min–max",
        "p99 ms",
        "load s",
        "space data + pg_wal",
        "runs ok",
        "stalls",
    ]
    groups = by_group(cells)
    for members in groups:
        if len(groups) > 1:
            lines += [f"**{M(members[0].group_label)}**", ""]
        lines += [_row(header), _rule(len(header))]
        for c in members:
            lines.append(
                _row(
                    [
                        cell_name(c),
                        fs_text(c),
                        fmt_geometric(c.tps) + (" (unstable)" if c.is_unstable else ""),
                        fmt_vs(c),
                        fmt_range(c.tps),
                        fmt_p99(c),
                        fmt_spread(c.load_seconds, 1),
                        fmt_space(c),
                        f"{c.ok}/{c.runs}"
                        + (f" ({len(c.disturbed)} disturbed)" if c.disturbed else ""),
                        str(c.stall_count) if c.stall_count else "-",  # as the others
                    ]
                )
            )
        lines.append("")
    lines += [P99_LEGEND + ".", ""]
    costs = cost_lines(cells)
    if costs:
        lines += ["**What the volumes cost**", ""] + [f"- {M(ln)}" for ln in costs] + [""]
    return lines


def _episode_lines(cells: Sequence[CellSummary]) -> list[str]:
    """Each stall or slowdown with its cause, evidence, blockers and what it ruled out."""
    lines: list[str] = []
    episodes = [(c, rs, ep) for c in cells for rs in c.stalls for ep in rs.episodes]
    if episodes:
        lines += [
            "## Stalls and slowdowns",
            "",
            "Each cause weighed against the others from the evidence of the same "
            "seconds, compared with the rest of the run.",
            "",
        ]
        for c, rs, ep in episodes:
            lines.append(
                f"- **{M(c.label)} #{rs.repetition}** (run {rs.run_id}), "
                f"{M(ep.headline(c.unit))}: **{M(ep.verdict())}**"
            )
            lines += [f"  - {M(e)}" for e in ep.evidence]
            lines += [f"  - blocker: {M(describe_blocker(b))}" for b in ep.blockers]
            lines += [f"  - ruled out: not {CAUSES[k]}: {M(why)}" for k, _, why in ep.alternatives]
            if ep.missing:
                lines.append(f"  - not recorded: {M(', '.join(ep.missing))}")
        lines.append("")
    return lines
