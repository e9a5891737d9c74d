"""pgfsbench results list | show | export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from pgfsbench.cli import app
from pgfsbench.report.terminal import runs_table
from pgfsbench.results.export import export_runs
from pgfsbench.results.store import LIST_KEYS, Store
from pgfsbench.system.errors import UsageError

results_app = typer.Typer(help="Read the results store.", no_args_is_help=True)
app.add_typer(results_app, name="results")

ResultsOpt = Annotated[str, typer.Option("--results", "-r",
                                         help="SQLite file or postgresql:// URL.")]


def open_store(results: str) -> Store:
    if "://" not in results and not Path(results).is_file():
        raise UsageError(f"{results}: no such results file")
    return Store(results)


@results_app.command("list")
def list_cmd(
    results: ResultsOpt = "pgfsbench.sqlite",
    campaign: Annotated[int | None, typer.Option(help="Only this campaign.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """One line per run (cell x repetition)."""
    store = open_store(results)
    runs = store.list_runs(campaign)
    if as_json:
        print(json.dumps([{k: r.get(k) for k in LIST_KEYS} for r in runs], indent=1))
        return
    Console().print(runs_table(runs))


@results_app.command("show")
def show_cmd(
    run_id: Annotated[int, typer.Argument(help="The run's id (see results list).")],
    results: ResultsOpt = "pgfsbench.sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
) -> None:
    """Everything stored about one run."""
    store = open_store(results)
    run = store.get_run(run_id)
    if as_json:
        print(json.dumps(run, indent=1, default=str))
        return
    from pgfsbench.report.terminal import run_detail

    Console().print(run_detail(run))


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
    results: ResultsOpt = "pgfsbench.sqlite",
    fmt: Annotated[str | None, typer.Option("--format", help="csv or parquet (default: from "
                                            "the file's extension).")] = None,
    series: Annotated[bool, typer.Option(help="Export the per-second series (long form) "
                                               "instead of one row per run.")] = False,
) -> None:
    """Write runs (or their per-second series) as CSV or Parquet for analysis elsewhere."""
    chosen = export_format(output, fmt)
    store = open_store(results)
    n = export_runs(store, output, chosen, series=series)
    Console().print(f"wrote {n} rows to {output}")


def campaign_ids(store: Store, campaigns: list[int] | None) -> list[int]:
    """The campaigns asked for (each must exist), or the latest one."""
    known = {int(c["id"]) for c in store.campaigns()}
    if campaigns:
        missing = [c for c in campaigns if c not in known]
        if missing:
            raise UsageError(f"no campaign {missing[0]} in {store.target} (there are: "
                             f"{', '.join(map(str, sorted(known))) or 'none'})")
        return list(campaigns)
    latest = store.latest_campaign_id()
    if latest is None:
        raise UsageError(f"{store.target} holds no campaign yet")
    return [latest]


@app.command("report")
def report_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path(
        "pgfsbench-report.html"),
    results: ResultsOpt = "pgfsbench.sqlite",
    campaign: Annotated[list[int] | None, typer.Option(
        help="Campaign id (repeatable; default: the latest).")] = None,
) -> None:
    """Write the self-contained HTML report (tables and charts) of campaigns."""
    from pgfsbench.report.html import write_report

    store = open_store(results)
    write_report(store, output, campaign_ids=campaign_ids(store, campaign))
    Console().print(f"HTML report: {output.resolve()}")
