"""pgfsbench results list | show | export."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pgfsbench.cli import app
from pgfsbench.report.inert import plain_console
from pgfsbench.results.target import shown
from pgfsbench.system.errors import StoreError, UsageError
from pgfsbench.system.held import write_file

if TYPE_CHECKING:
    from rich.console import Console

    from pgfsbench.report.loading import Analysed
    from pgfsbench.results.store import Store
    from pgfsbench.spec.profiles import Price

UNSTABLE_PCT = 5.0  # the default of analysis.summary (kept here: it is slow to import)

results_app = typer.Typer(help="Read the results store.", no_args_is_help=True)
app.add_typer(results_app, name="results")

# the results store when --results is not given: $PGFSBENCH_RESULTS, else this file (as
# psql takes $PGDATABASE)
RESULTS_ENV = "PGFSBENCH_RESULTS"
DEFAULT_RESULTS = "pgfsbench.sqlite"
ResultsOpt = Annotated[
    str,
    typer.Option(
        "--results",
        "-r",
        envvar=RESULTS_ENV,
        help=f"SQLite file or postgresql:// URL (default: ${RESULTS_ENV}, else pgfsbench.sqlite).",
    ),
]
HostOpt = Annotated[str | None, typer.Option("--host", help="Only the runs of this host.")]


def open_store(results: str) -> Store:
    from pgfsbench.results.store import Store

    if "://" not in results and not Path(results).is_file():
        raise UsageError(f"{results}: no such results file" + _elsewhere(Path(results)))
    return Store(results)


def _header(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(16)


def _elsewhere(missing: Path) -> str:
    """The results files beside the missing one, to point at (the demo's, a campaign's)."""
    folder = missing.parent if str(missing.parent) else Path()
    try:
        found = sorted(
            p.name
            for p in folder.glob("*.sqlite")
            if p.is_file() and _header(p) == b"SQLite format 3\x00"
        )[:5]
    except OSError:
        return ""
    if not found:
        return f" (give --results FILE, or set {RESULTS_ENV})"
    first = shlex.quote(str(folder / found[0]) if str(missing.parent) != "." else found[0])
    return f"; here: {', '.join(found)} (e.g. --results {first}, or export {RESULTS_ENV}={first})"


# What a command prints is asked for by one flag in every command: --json or --csv (as
# psql's --csv), else a table (plain, without boxes, into a pipe). --format is only for the
# file a command writes (report: html or markdown; export: csv or parquet).
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV (a header, then one line per row).")]


def output_format(as_csv: bool, as_json: bool) -> str:
    """table, csv or json from the two flags (not both)."""
    if as_csv and as_json:
        raise UsageError("--csv or --json, not both")
    return "json" if as_json else "csv" if as_csv else "table"


def print_csv(rows: list[dict[str, object]]) -> None:
    """Rows as CSV on standard output (psql's --csv habit: a header, then the rows)."""
    import csv
    import sys

    if not rows:
        return
    writer = csv.DictWriter(sys.stdout, fieldnames=list(rows[0]), extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _csv_value(v) for k, v in row.items()})


def _csv_value(value: object) -> object:
    """A CSV field: JSON for nested values, true/false for booleans (not Python's True),
    floats to 10 significant digits (not 1694.7633480000002)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.10g}"
    return json.dumps(value, default=str) if isinstance(value, dict | list) else value


@results_app.command("list")
def list_cmd(
    results: ResultsOpt = DEFAULT_RESULTS,
    campaign: Annotated[int | None, typer.Option(help="Only this campaign.")] = None,
    host: HostOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    as_csv: CsvOpt = False,
) -> None:
    """One line per run (cell x repetition)."""
    from pgfsbench.report.terminal import runs_table
    from pgfsbench.results.store import LIST_KEYS

    how = output_format(as_csv, as_json)
    store = open_store(results)
    runs = [r for r in store.list_runs(campaign) if host is None or r.host == host]
    rows = [{k: getattr(r, k) for k in LIST_KEYS} for r in runs]
    if how == "json":
        print(json.dumps(rows, indent=1, default=str))
        return
    if how == "csv":
        print_csv(rows)
        return
    console = plain_console()
    console.print(runs_table(runs, plain=not console.is_terminal, width=console.width))


@results_app.command("show")
def show_cmd(
    run_id: Annotated[int, typer.Argument(help="The run's id (see results list).")],
    results: ResultsOpt = DEFAULT_RESULTS,
    host: Annotated[
        str | None,
        typer.Option("--host", help="Refuse the run unless it is this host's (a fleet's store)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Everything stored about one run, with its stall episodes and their causes."""
    from pgfsbench.analysis.summary import stalls_of

    store = open_store(results)
    try:
        run = store.get_run(run_id)
    except StoreError as exc:  # a run that is not there is a usage error, as every name is
        if not str(exc).startswith(f"no run {run_id}"):
            raise
        raise UsageError(f"no run {run_id} in {store.target} (`results list` lists them)") from None
    if host is not None and run.host != host:
        raise UsageError(
            f"run {run_id} is {run.host!r}'s, not {host!r}'s "
            f"(`results list --host {host}` lists that host's runs)"
        )
    episodes = stalls_of(run)
    if as_json:
        shown = {**run.as_dict(), "stalls": [e.as_dict() for e in episodes]}
        print(json.dumps(shown, indent=1, default=str))
        return
    from pgfsbench.report.terminal import run_detail

    plain_console().print(run_detail(run, episodes))


FORMATS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def export_format(output: Path, fmt: str | None) -> str:
    """The format follows the file's extension; --format must agree with it if given."""
    by_ext = FORMATS.get(output.suffix.lower())
    if fmt is not None and fmt not in ("csv", "parquet"):
        raise UsageError("--format is csv or parquet")
    if by_ext is None:
        if fmt is None:
            raise UsageError(f"{output}: name it .csv or .parquet (or give --format)")
        return fmt
    if fmt is not None and fmt != by_ext:
        raise UsageError(f"{output} ends in {output.suffix} but --format is {fmt}")
    return by_ext


@results_app.command("export")
def export_cmd(
    output: Annotated[Path, typer.Argument(help="File to write (.csv or .parquet).")],
    results: ResultsOpt = DEFAULT_RESULTS,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="csv or parquet (default: from the file's extension)."),
    ] = None,
    series: Annotated[
        bool,
        typer.Option(help="Export the per-second series (long form) instead of one row per run."),
    ] = False,
    host: HostOpt = None,
) -> None:
    """Write runs (or their per-second series) as CSV or Parquet for analysis elsewhere."""
    from pgfsbench.results.export import export_runs

    chosen = export_format(output, fmt)
    store = open_store(results)
    n = export_runs(store, output, chosen, series=series, host=host)
    plain_console().print(f"wrote {n} rows to {output}")


def campaign_ids(store: Store, campaigns: list[int] | None) -> list[int]:
    """The campaigns asked for (each must exist), or the latest one."""
    known = {c.id for c in store.campaigns()}
    if campaigns:
        missing = [c for c in campaigns if c not in known]
        if missing:
            raise UsageError(
                f"no campaign {missing[0]} in {store.target} (there are: "
                f"{', '.join(map(str, sorted(known))) or 'none'})"
            )
        return list(campaigns)
    latest = store.latest_campaign_id()
    if latest is None:
        raise UsageError(f"{store.target} holds no campaign yet")
    return [latest]


CampaignOpt = Annotated[
    list[int] | None,
    typer.Option("--campaign", help="Campaign id (repeatable; default: the latest)."),
]
WithoutDisturbedOpt = Annotated[
    bool,
    typer.Option(
        "--without-disturbed",
        help="Leave out of every figure and verdict the runs that other work on the host "
        "disturbed (each run records what else took the CPU, the disks or the memory during "
        "its measured phase); the runs left out are listed with their reasons.",
    ),
]
BaselineOpt = Annotated[
    str | None,
    typer.Option(
        help="The baseline of each comparable group: a storage, postgres, kernel or workload "
        "name, or a glob on the cell (default: each group's first cell)."
    ),
]


PriceFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--price-file",
        help="A TOML file of one's own cloud volume prices (a table per profile: "
        "per_gib_month, per_iops_month, iops_included, per_mbps_month, mbps_included, tiers), "
        "over the published ones.",
    ),
]


def flat(data: dict[str, object], prefix: str = "") -> dict[str, object]:
    """A cell's JSON as one CSV row: nested objects as dotted columns."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flat(value, f"{name}."))
        else:
            out[name] = value
    return out


def read_prices(path: Path | None) -> dict[str, Price] | None:
    if path is None:
        return None
    from pgfsbench.analysis.cost import load_price_file

    try:
        return load_price_file(path)
    except (OSError, ValueError) as exc:  # tomllib's errors are ValueErrors
        raise UsageError(f"--price-file {path}: {exc}") from exc


def print_summary(console: Console, a: Analysed, title: str) -> None:
    from pgfsbench.report.terminal import failure_lines, highlight_lines, summary_table

    if a.headline:  # the first thing said: no verdict, and why
        console.print(a.headline, style="bold yellow", markup=False, highlight=False)
    console.print(
        summary_table(a.cells, title=title, width=console.width, plain=not console.is_terminal)
    )
    for line in highlight_lines(a.highlights):
        console.print(line)
    for line in failure_lines(a.cells):
        console.print(line)


@results_app.command("summary")
def summary_cmd(
    results: ResultsOpt = DEFAULT_RESULTS,
    campaign: CampaignOpt = None,
    baseline: BaselineOpt = None,
    host: HostOpt = None,
    unstable_pct: Annotated[
        float,
        typer.Option(
            help="Repetitions spreading more than this (% of the median) make a cell unstable."
        ),
    ] = UNSTABLE_PCT,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print each cell's figures and verdicts as JSON.")
    ] = False,
    price_file: PriceFileOpt = None,
    without_disturbed: WithoutDisturbedOpt = False,
    as_csv: CsvOpt = False,
) -> None:
    """The summary table of one or several campaigns (a re-run of failed cells, a sweep run
    as separate campaigns), with confidence intervals, verdicts and stalls."""
    from pgfsbench.report.loading import analyse, cell_json

    store = open_store(results)
    a = analyse(
        store,
        campaign_ids(store, campaign),
        baseline,
        host,
        unstable_pct,
        read_prices(price_file),
        without_disturbed,
    )
    how = output_format(as_csv, as_json)
    if how == "csv":
        print_csv([flat(cell_json(c)) for c in a.cells])
        return
    if how == "json":
        print(
            json.dumps(
                {
                    "campaigns": [c.id for c in a.campaigns],
                    "cells": [cell_json(c) for c in a.cells],
                    "highlights": a.highlights.lines,
                    "warnings": a.highlights.warnings,
                },
                indent=1,
                default=str,
            )
        )
        return
    title = f"campaign(s) {', '.join(str(c.id) for c in a.campaigns)} in {shown(results)}"
    print_summary(plain_console(), a, title)


@app.command("report")
def report_cmd(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="File to write (default: pgfsbench-report.html or .md)."
        ),
    ] = None,
    results: ResultsOpt = DEFAULT_RESULTS,
    campaign: CampaignOpt = None,
    baseline: BaselineOpt = None,
    host: HostOpt = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="html (self-contained, with charts) or markdown (md, for tickets)."
        ),
    ] = "html",
    price_file: PriceFileOpt = None,
    without_disturbed: WithoutDisturbedOpt = False,
) -> None:
    """Write the report of one or several campaigns: what stands out first, evidence after."""
    formats = {"html": "html", "markdown": "md", "md": "md"}
    if fmt.lower() not in formats:
        raise UsageError(f"--format is html or markdown (md), not {fmt!r}")
    fmt = formats[fmt.lower()]
    from pgfsbench.report.loading import analyse

    output = output or Path(f"pgfsbench-report.{fmt}")
    store = open_store(results)
    a = analyse(
        store,
        campaign_ids(store, campaign),
        baseline,
        host,
        prices=read_prices(price_file),
        without_disturbed=without_disturbed,
    )
    if fmt == "md":
        from pgfsbench.report.markdown import render_markdown

        text = render_markdown(
            a.campaigns, a.cells, a.highlights, a.highlights.warnings, a.runs, a.headline
        )
        write_file(output, text, 0o644)
    else:
        from pgfsbench.report.html import render_report

        text = render_report(
            a.campaigns, a.runs, a.cells, a.highlights, history=a.history, headline=a.headline
        )
        write_file(output, text, 0o644)
    plain_console().print(f"report: {output.resolve()}")


@results_app.command("import")
def import_cmd(
    source: Annotated[str, typer.Argument(help="The results file (or URL) to import from.")],
    results: ResultsOpt = DEFAULT_RESULTS,
    host: Annotated[
        str | None,
        typer.Option(
            "--host",
            help="Record the imported runs under this host name (an inventory "
            "name); default: the host each run recorded.",
        ),
    ] = None,
) -> None:
    """Copy campaigns and runs from another results store into this one, idempotently
    (runs are matched by uuid and host: importing again adds nothing twice)."""
    from pgfsbench.results.importer import import_store

    src = open_store(source)
    dst = open_store(results) if "://" in results else _create_store(results)
    report = import_store(src, dst, host)
    plain_console().print(
        f"{shown(source)} -> {shown(results)}: {report.text()}", markup=False, highlight=False
    )


def _create_store(results: str) -> Store:
    from pgfsbench.results.store import Store

    return Store(results)
