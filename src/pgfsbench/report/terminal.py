"""Terminal tables (rich). Pure: summaries in, renderables out."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rich.box import HEAVY_HEAD
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pgfsbench.analysis.cost import INSTANCE_NOTE
from pgfsbench.analysis.disturbance import disturbance_of
from pgfsbench.analysis.history import MIN_POINTS, SeriesHistory
from pgfsbench.analysis.stalls import CAUSES, StallEpisode
from pgfsbench.analysis.stats import Estimate
from pgfsbench.analysis.summary import CellSummary, Highlights, by_group, leaders
from pgfsbench.report.inert import plain_console
from pgfsbench.results.records import StoredRun
from pgfsbench.units import human_bytes


def fmt_spread(s: Estimate | None, digits: int = 0, unit: str = "") -> str:
    """'2,703 ±1.8%' (the mean, half-width of its 95% CI), '2,703 [1,100–6,500]' when the
    interval is not symmetric about it (an interval of logs, wide), or '2,703' alone (one
    value): one statistic everywhere, the one the comparisons test."""
    if s is None:
        return "-"
    main = f"{s.mean:,.{digits}f}{unit}"
    half = s.ci_half_pct
    if half is None or s.ci_low is None or s.ci_high is None:
        return main
    below, above = s.mean - s.ci_low, s.ci_high - s.mean
    if min(below, above) < 0.8 * max(below, above):
        # an interval that is not symmetric (of logs, and wide) is shown as an interval
        return f"{main} [{s.ci_low:,.{digits}f}–{s.ci_high:,.{digits}f}]"
    return f"{main} ±{half:.1f}%"


def fmt_geometric(s: Estimate | None, digits: int = 0) -> str:
    """'2,703 ±1.8%': the geometric mean and the half-width of its 95% interval (t on log
    values), or '2,703 [1,100–6,500]' when that interval is not symmetric about it (wide),
    or the value alone (one run): the mean the ratio beside it ("vs base") is made of."""
    if s is None or s.gmean is None:
        return fmt_spread(s, digits)
    main = f"{s.gmean:,.{digits}f}"
    if s.gci_low is None or s.gci_high is None:
        return main
    below, above = s.gmean - s.gci_low, s.gci_high - s.gmean
    if min(below, above) < 0.8 * max(below, above):
        return f"{main} [{s.gci_low:,.{digits}f}–{s.gci_high:,.{digits}f}]"
    return f"{main} ±{(s.gci_high - s.gci_low) / 2 / s.gmean * 100:.1f}%"


def fmt_p99(c: CellSummary) -> str:
    """The cell's p99: of all its transactions (its runs' histograms merged), else '~' and
    the median of its runs' p99 (no histogram kept)."""
    pooled = c.latency_pooled.percentiles_ms.get("p99") if c.latency_pooled else None
    if pooled is not None:
        return f"{pooled:,.2f}"
    if c.latency_p99_ms is not None:
        return f"~{c.latency_p99_ms.median:,.2f}"
    return "-"


def fmt_cost(c: CellSummary) -> str:
    """'$24.00 · $9.60' (the volume a month, and per 1,000 TPS sustained); '?' when a
    volume's price is unknown; '' when the cell has no cloud volume."""
    if c.cost is None:
        return ""
    usd = c.cost.usd_month
    if usd is None:
        return "?"
    per = c.usd_per_1000_tps
    return f"${usd:,.2f}" + (f" · ${per:,.2f}" if per is not None else "")


def cost_lines(cells: Sequence[CellSummary]) -> list[str]:
    """One line per cell on a cloud volume: what its volumes cost and per 1,000 TPS."""
    out = []
    for c in cells:
        if c.cost is None:
            continue
        per = c.usd_per_1000_tps
        tail = f": ${per:,.2f} a month per 1,000 TPS sustained" if per is not None else ""
        if c.cost.usd_month is None:  # each volume's text says why its price is unknown
            tail = ": cost unknown"
        out.append(f"{cell_name(c)}: {c.cost.text()}{tail}")
    if out:
        out.append(f"({INSTANCE_NOTE})")
    return out


P99_LEGEND = (
    "p99: of all the cell's transactions (its runs' latency histograms merged); "
    "~ the median of its runs' p99 (no histogram kept)"
)


def fmt_range(s: Estimate | None, digits: int = 0) -> str:
    if s is None or s.n == 1:
        return "-"
    return f"{s.low:,.{digits}f}–{s.high:,.{digits}f}"


def fmt_vs(c: CellSummary) -> str:
    if c.tps is None:
        return "-"
    if c.vs_baseline is None:
        return "baseline" if c.baseline is None else "-"
    cmp = c.vs_baseline
    if cmp.change_pct is None:
        return "?"
    if c.unsafe:  # can lose or corrupt committed data: what safety costs, no verdict
        return f"{cmp.change_pct:+.1f}% unsafe"
    if c.reference:  # a ceiling, not a candidate: how far above, no verdict
        return f"{cmp.change_pct:+.1f}% ref"
    return f"{cmp.change_pct:+.1f}% {cmp.verdict.mark()}"


def cell_name(c: CellSummary) -> str:
    """A cell's label, marked when it is a reference."""
    mark = " (unsafe)" if c.unsafe else " (reference)" if c.reference else ""
    return (c.label or c.cell) + mark


def fs_text(c: CellSummary) -> str:
    """'zfs (FUSE)', 'ext4, emulated data hdd-7200': what the storage ran on."""
    return c.fs + (" (FUSE)" if c.fuse else "") + (f", {c.emulated}" if c.emulated else "")


def fmt_space(c: CellSummary) -> str:
    if c.space_data_bytes is None:
        return human_bytes(c.space_bytes.median) if c.space_bytes else "-"
    wal = f" + {human_bytes(c.space_wal_bytes.median)}" if c.space_wal_bytes else ""
    return f"{human_bytes(c.space_data_bytes.median)}{wal}"


def _best(cells: Sequence[CellSummary], key: str) -> set[tuple[object, str]]:
    """(group, cell) of the cells significantly best on a column within their comparable
    group (summary.leaders: none where the top is a tie). By group and cell: the same
    configuration at another scale or on another host is another row, which may have lost."""
    best: set[tuple[object, str]] = set()
    for members in by_group(cells):
        lead = leaders(members, key)
        if lead is not None and lead.winner is not None:
            best.add((lead.winner.group, lead.winner.cell))
    return best


# the summary's columns, dropped in this order (the last first) until the table fits the
# terminal; past them, the cells are numbered and named in a legend below
OPTIONAL_COLUMNS = ("fs", "data + pg_wal", "load s", "min–max")


def summary_table(
    cells: Sequence[CellSummary], title: str = "Summary", width: int = 160, plain: bool = False
) -> Group:
    """The seeds' table, one row per cell, grouped by what is comparable: throughput as
    mean ±95% CI, change against the group's baseline with its verdict (▲ better,
    ▼ worse, ≈ no significant difference, ? too few repetitions), p99 latency, load time,
    space (data + pg_wal), runs ok, stalls. The richest layout that fits ``width``: the
    optional columns go first (OPTIONAL_COLUMNS), then the cells are numbered and named in
    a legend; no marker and no name is ever cut."""
    # measured unconstrained: a table measured at the terminal's width says it fits
    console = plain_console(width=10_000, file=open(os.devnull, "w"))  # noqa: SIM115
    layouts: list[tuple[bool, tuple[str, ...]]] = [
        (False, OPTIONAL_COLUMNS[i:]) for i in range(len(OPTIONAL_COLUMNS) + 1)
    ]
    layouts.append((True, ()))
    parts: list[Table | Text] = []
    for numbered, optional in layouts:
        table, legend = _summary_layout(cells, title, numbered, set(optional), plain)
        if console.measure(table).maximum <= width or numbered:
            parts = [table]
            if numbered:
                parts.append(legend)
            break
    console.file.close()
    parts += [Text(line, style="dim") for line in cost_lines(cells)]
    parts.append(
        Text(
            'gmean: the geometric mean of the runs, with its 95% interval: what "vs base" '
            "compares; ▲ faster  ▼ slower  ≈ equivalent (the interval within the margin)  "
            "? undecided (too noisy to tell)  – no verdict (too few runs, a busy host, runs "
            "of two shapes), against each group's baseline, 95% family-wise; ! unstable; dN "
            "N runs disturbed by other work on the host; ref a reference (a ceiling, never "
            "the baseline); " + P99_LEGEND,
            style="dim",
        )
    )
    return Group(*parts)


def _summary_layout(
    cells: Sequence[CellSummary], title: str, numbered: bool, optional: set[str], plain: bool
) -> tuple[Table, Table]:
    """The table with these columns, and the legend of its numbers (``plain``: no box,
    for a pipe)."""
    table = Table(
        title=title,
        title_justify="left",
        show_lines=False,
        pad_edge=False,
        box=None if plain else HEAVY_HEAD,
    )
    unit = cells[0].unit if cells else "tps"
    cols = [("#", "right")] if numbered else [("cell", "left")]
    if "fs" in optional:
        cols += [("fs", "left")]
    cols += [(f"{unit} gmean ±CI", "right"), ("vs base", "right")]
    if "min–max" in optional:
        cols += [("min–max", "right")]
    cols += [("p99 ms", "right")]
    if "load s" in optional:
        cols += [("load s", "right")]
    if "data + pg_wal" in optional:
        cols += [("data + pg_wal", "right")]
    costs = any(c.cost is not None for c in cells)
    if costs:
        cols += [("$/month · per 1k tps", "right")]
    cols += [("ok", "right"), ("stalls", "right")]
    for col, justify in cols:
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    best_tps = _best(cells, "tps")
    best_p99 = _best(cells, "latency_p99_ms")
    best_load = _best(cells, "load_seconds")
    groups = by_group(cells)
    legend = Table(show_header=False, box=None, pad_edge=False)
    legend.add_column("#", justify="right")
    legend.add_column("cell")
    for gi, members in enumerate(groups):
        if len(groups) > 1:
            if gi:
                table.add_section()
            label = Text(members[0].group_label, style="bold cyan")
            if numbered:  # the group's words go above its rows, not into a column
                legend.add_row("", label)
            else:
                table.add_row(label, *[""] * (len(cols) - 1))
        for c in members:
            n = cells.index(c) + 1
            tps = Text(fmt_geometric(c.tps), style="bold" if (c.group, c.cell) in best_tps else "")
            if c.is_unstable:
                tps.append(" !", style="yellow")
            p99 = Text(fmt_p99(c), style="bold" if (c.group, c.cell) in best_p99 else "")
            row: list[str | Text] = [str(n)] if numbered else [cell_name(c)]
            if "fs" in optional:
                row += [fs_text(c)]
            row += [tps, fmt_vs(c)]
            if "min–max" in optional:
                row += [fmt_range(c.tps)]
            row += [p99]
            if "load s" in optional:
                row += [
                    Text(
                        fmt_spread(c.load_seconds, 1).split(" ")[0],
                        style="bold" if (c.group, c.cell) in best_load else "",
                    )
                ]
            if "data + pg_wal" in optional:
                row += [fmt_space(c)]
            if costs:
                row += [fmt_cost(c)]
            ok = Text(f"{c.ok}/{c.runs}")
            if c.disturbed:
                ok.append(f" d{len(c.disturbed)}", style="yellow")
            row += [ok, str(c.stall_count) if c.stall_count else "-"]
            table.add_row(*row, style=None if c.ok == c.runs else "red")
            emulated = f", {c.emulated}" if c.emulated else ""
            legend.add_row(f"{n}", f"{cell_name(c)} ({c.fs}{', FUSE' if c.fuse else ''}{emulated})")
    return table, legend


def failure_lines(cells: Sequence[CellSummary]) -> list[Text]:
    """Why runs failed, and the warnings that change the reading of the others."""
    return [Text(f"{c.cell}: {e}", style="red") for c in cells for e in c.errors] + [
        Text(f"{c.cell} {w}", style="yellow") for c in cells for w in c.warnings
    ]


def highlight_lines(h: Highlights) -> list[Text]:
    return (
        [Text("What stands out", style="bold")]
        + [Text(f"  {line}") for line in h.lines]
        + [Text(f"warning: {w}", style="yellow") for w in h.warnings]
    )


def episode_rows(ep: StallEpisode) -> list[tuple[str, str]]:
    """An episode as rows: what happened and its cause, the evidence, what it beat and
    what was not recorded."""
    rows = [(ep.kind, f"{ep.headline()}: {ep.verdict()}")]
    rows += [("", f"  evidence: {e}") for e in ep.evidence]
    rows += [("", f"  ruled out: not {CAUSES[k]}: {why}") for k, _, why in ep.alternatives]
    if ep.missing:
        rows.append(("", "  not recorded: " + ", ".join(ep.missing)))
    return rows


# (header, justify): figures are never cut, names fold onto a second line instead
RUN_COLUMNS = (
    ("run", "right"),
    ("cell", "left"),
    ("rep", "right"),
    ("status", "left"),
    ("tps", "right"),
    ("lat ms", "right"),
    ("load s", "right"),
    ("space", "right"),
    ("error", "left"),
)


# dropped in this order (the last first) until the runs' table fits the terminal
RUN_OPTIONAL = ("lat ms", "space", "load s")


def runs_table(runs: Sequence[StoredRun], plain: bool = False, width: int = 160) -> Table:
    """One line per run; the optional columns go (RUN_OPTIONAL) before a cell's name
    would have to fold."""
    rows = [
        (
            str(r.run_id),
            r.cell,
            str(r.repetition),
            r.status + (", disturbed" if r.ok and disturbance_of(r).disturbed else ""),
            f"{r.tps:,.1f}" if r.tps is not None else "-",
            f"{r.latency_avg_ms:.3f}" if r.latency_avg_ms is not None else "-",
            f"{r.load_seconds:.2f}" if r.load_seconds is not None else "-",
            human_bytes(r.space_bytes) if r.space_bytes is not None else "-",
            r.error or "" if plain else (r.error or "")[:80],
        )
        for r in runs
    ]
    console = plain_console(width=10_000, file=open(os.devnull, "w"))  # noqa: SIM115
    try:
        for drop in range(len(RUN_OPTIONAL) + 1):
            gone = set(RUN_OPTIONAL[len(RUN_OPTIONAL) - drop :])
            table = _runs_layout(rows, plain, gone)
            if console.measure(table).maximum <= width:
                return table
        return table
    finally:
        console.file.close()


def _runs_layout(rows: Sequence[tuple[str, ...]], plain: bool, gone: set[str]) -> Table:
    table = Table(box=None) if plain else Table()
    keep = [i for i, (col, _) in enumerate(RUN_COLUMNS) if col not in gone]
    for i in keep:
        col, justify = RUN_COLUMNS[i]
        widest = max((len(row[i]) for row in rows), default=0)
        if justify == "right":  # a number keeps all its digits, whatever the width
            table.add_column(col, justify="right", no_wrap=True, min_width=max(widest, len(col)))
        elif col == "error" and not plain:
            table.add_column(col, justify="left", overflow="fold", ratio=1)
        else:
            table.add_column(col, justify="left", overflow="fold")
    for row in rows:
        table.add_row(*[row[i] for i in keep])
    return table


def run_detail(run: StoredRun, episodes: Sequence[StallEpisode] = ()) -> Table:
    """A two-column view of one run, nested values summarised, with its stall episodes."""
    table = Table(show_header=False, title=f"run {run.run_id}: {run.cell}", title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in run.columns().items():
        if key in DETAILED or value is None:
            continue
        if isinstance(value, list | dict) and not value:
            continue
        table.add_row(key, shown_value(key, value))
    # what it was measured under, in words: the host (CPU, memory, kernel), PostgreSQL,
    # the settings in effect, the kernel's, the storage
    from pgfsbench.report.conditions import run_conditions

    columns = {k: shown_value(k, v) for k, v in run.columns().items() if v is not None}
    for key, words in run_conditions(run).items():
        if columns.get(key) != words:  # said above already
            table.add_row(_SHORT_KEYS.get(key, key), words)
    disturbance = run.recorded.disturbance
    if disturbance and disturbance.get("disturbed"):
        table.add_row("disturbed", Text("yes (see its warning)", style="yellow"))
    if run.fuse:
        table.add_row(
            "WARNING", Text("ZFS through FUSE (zfs-fuse): not kernel ZFS numbers", style="bold red")
        )
    for key, value in [*_storage_rows(run), *_figure_rows(run)]:
        table.add_row(key, value)
    for ep in episodes:
        for key, text in episode_rows(ep):
            table.add_row(key, Text(text, style="yellow" if key else ""))
    for w in run.warnings:
        table.add_row("warning", Text(w, style="yellow"))
    for kind, art in run.artifacts.items():
        table.add_row(f"artifact {kind}", art.path)
    return table


# the conditions' names, short enough to leave the values the table's width
_SHORT_KEYS = {
    "PostgreSQL settings (spec)": "settings (spec)",
    "PostgreSQL settings (in effect)": "settings in effect",
}


def shown_value(key: str, value: object) -> str:
    """A stored value as a reader wants it: figures rounded, times to the second, sizes
    in words, a mapping as "key value" pairs (never a Python dict)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_bytes") and isinstance(value, int):
        return f"{human_bytes(value)} ({value:,} bytes)"
    if key.endswith("_at") and isinstance(value, str):
        return when(value)
    if isinstance(value, float):
        return _rounded(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {shown_value(str(k), v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(shown_value(key, v) for v in value)
    return str(value)


def _rounded(value: float) -> str:
    """1,615.3 / 3.62 / 0.0123: four significant figures at most, thousands separated."""
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


# shown by the rows of their own, or too long for a table
DETAILED = frozenset(
    (
        "environment",
        "params",
        "storage_details",
        "space",
        "metrics",
        "kernel_applied",
        "warnings",
        "latency_ms",
    )
)


Row = tuple[str, str | Text]


def _storage_rows(run: StoredRun) -> list[Row]:
    """The volumes, the ZFS pool and datasets, and the space taken."""
    rows: list[Row] = []
    details = run.storage_details
    for role in ("data", "wal"):
        vol = details.get(role)
        if vol:
            rows.append(
                (
                    f"{role} volume",
                    f"{vol.get('fs')} on {vol.get('source')} ({vol.get('mount_options', '')})",
                )
            )
    if details.get("implementation"):
        rows.append(("zfs implementation", details["implementation"]))
    pool = details.get("pool")
    if pool:
        rows.append(
            (
                "zfs pool",
                f"{pool['name']}: {pool['layout']} of {len(pool['devices'])}"
                f" device(s), log {pool['log'] or '-'}, cache {pool['cache'] or '-'}, "
                f"ashift {pool['ashift'] or 'default'}",
            )
        )
    for role in ("data", "wal"):
        vol = details.get(role) or {}
        props = vol.get("properties")
        if props:
            shown = {
                k: props[k]
                for k in (
                    "recordsize",
                    "compression",
                    "atime",
                    "logbias",
                    "primarycache",
                    "sync",
                    "xattr",
                    "redundant_metadata",
                )
                if k in props
            }
            rows.append(
                (
                    f"zfs {role} dataset",
                    f"{vol.get('dataset')}: " + ", ".join(f"{k}={v}" for k, v in shown.items()),
                )
            )
    space = run.space
    for phase in ("after_load", "after_run"):
        figures = space.get(phase) or {}
        if figures:
            parts = [f"data directory {human_bytes(figures.get('space_bytes'))}"]
            if "compressratio" in figures:
                parts.append(f"compressratio {str(figures['compressratio']).rstrip('x')}x")
            if "zfs_used_bytes" in figures:
                parts.append(f"zfs used {human_bytes(figures['zfs_used_bytes'])}")
            rows.append((f"space {phase.replace('_', ' ')}", ", ".join(parts)))
    return rows


def end_state_text(es: dict[str, Any]) -> str:
    """'equal: 12 tables compared' or what differs, table by table."""
    if es.get("equal"):
        text = f"equal to the capture's: {es.get('tables_compared', 0)} tables compared"
    else:
        text = "; ".join(f"{d.get('table')}: {d.get('how')}" for d in es.get("differs") or [])
        text = text or "not compared"
    skipped = es.get("not_compared") or []
    return text + (f" ({len(skipped)} not compared: {skipped[0]})" if skipped else "")


def reconciled(rec: dict[str, Any]) -> str:
    """'captured 116,877 statements = 115,659 replayed + 1,195 already in the data copy +
    4 not replayable (COPY FROM STDIN: 4) + ...': every statement of the capture once."""
    captured = rec.get("captured")
    terms = [f"{int(rec.get('replayed') or 0):,} replayed"]
    if rec.get("not_sent"):
        terms.append(f"{int(rec['not_sent']):,} not sent (the replayer stopped)")
    if rec.get("retries_not_needed"):
        terms.append(
            f"{int(rec['retries_not_needed']):,} in a client's retry its first attempt made "
            "needless here"
        )
    if rec.get("already_in_the_copy"):
        terms.append(f"{int(rec['already_in_the_copy']):,} already in the data copy")
    skipped = {str(k): int(v) for k, v in (rec.get("not_replayable") or {}).items()}
    if skipped:
        terms.append(
            f"{sum(skipped.values()):,} not replayable ("
            + "; ".join(f"{why}: {n:,}" for why, n in skipped.items())
            + ")"
        )
    head = f"captured {int(captured):,} statements = " if captured is not None else ""
    text = head + " + ".join(terms)
    if rec.get("balanced") is False:
        text += " (these do not add up)"
    if rec.get("open_at_end_replayed_then_rolled_back"):
        text += (
            f"; of those replayed, {int(rec['open_at_end_replayed_then_rolled_back']):,} in a "
            "transaction still open at the capture's end, rolled back"
        )
    return text


def replay_rows(run: StoredRun) -> list[Row]:
    """A replay's fidelity to its capture, in one line, and what differed; a run of the
    lighter path says it is an approximation. Statements are never shown here."""
    tool = run.recorded.tool
    f = tool.fidelity
    rows: list[Row] = []
    if f:
        pct = f.get("wal_pct")
        rec = f.get("reconciliation")
        parts = [
            reconciled(rec)
            if isinstance(rec, dict)
            else f"{f.get('statements_replayed', 0):,} of {f.get('statements_captured', 0):,} "
            "statements replayed",
            f"errors {f.get('errors_replayed', 0)} (capture {f.get('errors_captured', 0)})",
            "WAL " + ("-" if pct is None else f"{pct:+.1f}%") + " of the capture's",
        ]
        if f.get("already_in_the_copy") and not isinstance(rec, dict):
            parts.append(f"{f['already_in_the_copy']:,} already in the data copy")
        if f.get("tablespaces"):
            parts.append(
                f"tablespaces {', '.join(map(str, f['tablespaces']))} inside the data directory "
                "(on the storage under test)"
            )
        if not isinstance(rec, dict):
            for why, n in (f.get("not_replayable") or {}).items():
                parts.append(f"{n:,} not replayable: {why}")
        if f.get("schedule_lag_max_ms") is not None:
            parts.append(f"schedule lag at most {f['schedule_lag_max_ms']:,.1f} ms")
        if f.get("replayer_cpu_us_per_tx") is not None:
            parts.append(f"replayer CPU {f['replayer_cpu_us_per_tx']:,.0f} us a transaction")
        rows.append(("replay", "; ".join(parts)))
        work = [w for w in f.get("work") or [] if isinstance(w, dict)]
        if work:
            rows.append(
                (
                    "replay work",
                    "; ".join(
                        f"{w.get('what')} {w.get('replayed', 0):,} "
                        f"(capture {w.get('captured', 0):,})"
                        for w in work
                    ),
                )
            )
        es = f.get("end_state")
        if isinstance(es, dict):
            rows.append(("replay end state", end_state_text(es)))
        for st in f.get("statements") or []:
            if isinstance(st, dict) and st.get("differs"):
                rows.append(("replay statement", f"{st.get('query')}: {st['differs']}"))
        if f.get("cannot_carry"):
            rows.append(
                ("replay from a log", "not carried: " + "; ".join(map(str, f["cannot_carry"])))
            )
        if f.get("differs"):
            rows.append(("replay differs", "; ".join(map(str, f["differs"]))))
    extra = tool.model_extra or {}
    if extra.get("approximation"):
        covered = extra.get("calls_covered_pct")
        rows.append(
            (
                "replay",
                f"an approximation: {extra['approximation']}"
                + (f"; its scripts cover {covered}% of the calls" if covered is not None else ""),
            )
        )
    return rows


def _figure_rows(run: StoredRun) -> list[Row]:
    """Latency percentiles, kernel settings, the storage ceiling, series and checkpoints."""
    rows: list[Row] = []
    if run.latency_ms:
        rows.append(
            (
                "latency percentiles",
                ", ".join(f"{k} {v:.2f} ms" for k, v in run.latency_ms.items()),
            )
        )
    elif (observer := run.recorded.observer).txlog is False:
        rows.append(
            (
                "latency percentiles",
                "not measured: no transaction log in this run ("
                + (observer.txlog_left_out or "txlog = false, or the samplers were off")
                + ")",
            )
        )
    rows += replay_rows(run)
    for a in run.kernel_applied:
        rows.append((f"kernel {a['name']}", f"{a['before']} -> {a['after']} (restored after)"))
    ceiling = run.recorded.ceiling
    if ceiling:
        fsync = ceiling.get("pg_test_fsync") or {}
        best = max(fsync.items(), key=lambda kv: kv[1]) if fsync else None
        fio = ceiling.get("fio") or {}
        rows.append(
            (
                "storage ceiling",
                (f"best fsync method {best[0]}: {best[1]:,.0f} ops/s; " if best else "")
                + (
                    f"fio 8k randrw {fio.get('read_iops', 0):,.0f} r + "
                    f"{fio.get('write_iops', 0):,.0f} w IOPS"
                    if fio
                    else ""
                ),
            )
        )
    series = run.series
    if series:
        rows.append(
            (
                "series",
                ", ".join(
                    f"{k} ({len(v.values)} {'buckets' if k == 'latency_histogram' else 's'})"
                    for k, v in series.items()
                ),
            )
        )
    for c in run.checkpoints:
        when = "?" if c.started_s is None else f"{c.started_s:+.1f} s"
        rows.append(
            (
                "checkpoint",
                f"at {when} ({c.reason}): {c.buffers} buffers, "
                f"write {c.write_s} s, sync {c.sync_s} s, "
                f"total {c.total_s} s",
            )
        )
    return rows


def history_lines(histories: Sequence[SeriesHistory]) -> list[Text]:
    """`pgfsbench history`: per series, its runs and span, then each change point with what
    changed (or that nothing recorded did), or that there is none."""
    out: list[Text] = []
    too_short: list[str] = []  # series too short for any change point: said once, at the end
    for h in histories:
        if len(h.runs) < MIN_POINTS and not h.change_points:
            too_short.append(f"{h.key.text()} ({len(h.runs)})")
            continue
        first, last = h.runs[0], h.runs[-1]
        span = f"{(first.started_at or '?')[:10]} .. {(last.started_at or '?')[:10]}"
        campaigns = len({r.campaign_id for r in h.runs})
        out.append(
            Text(
                f"{h.key.text()}: {len(h.runs)} runs in {campaigns} campaign(s), {span}",
                style="bold",
            )
        )
        for r in h.runs:
            d = disturbance_of(r)
            if d.disturbed:
                out.append(
                    Text(
                        f"  run {r.run_id} (campaign {r.campaign_id}, #{r.repetition}) "
                        f"disturbed: {'; '.join(d.reasons())}",
                        style="yellow",
                    )
                )
        for group in h.by_run():
            out.append(Text(f"  from {group[0].where()} on:"))
            for cp in group:
                worse = cp.change.ratio is not None and (cp.change.ratio > 1) != (
                    cp.metric.higher_is_better
                )
                out.append(Text(f"    {cp.change_text()}", style="red" if worse else "green"))
            for said in dict.fromkeys(cp.what_changed() for cp in group):
                out.append(Text(f"    {said}"))
        if not h.change_points:
            looked = [m for m, pts in h.points.items() if pts]
            out.append(
                Text(f"  no change point in {', '.join(looked) or 'any figure'}", style="dim")
            )
        out.extend(Text(f"  {n}", style="dim") for n in h.notes)
    if too_short:
        out.append(
            Text(
                f"{len(too_short)} series with fewer than {MIN_POINTS} runs, too few for a "
                f"change point: {'; '.join(too_short)}",
                style="dim",
            )
        )
    return out


def when(stamp: str | None) -> str:
    """'2026-11-27 13:52:54 UTC' of a stored ISO time (to the second); '-' when none."""
    if not stamp:
        return "-"
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC)
    return t.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if t.tzinfo is not None else "")
