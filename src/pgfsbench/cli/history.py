"""pgfsbench history."""

from __future__ import annotations

import datetime as dt
import fnmatch
import json
from typing import Annotated

import typer

from pgfsbench.cli import app
from pgfsbench.cli.results import DEFAULT_RESULTS, HostOpt, ResultsOpt, open_store
from pgfsbench.report.inert import plain_console
from pgfsbench.system.errors import UsageError


def parse_since(text: str | None) -> dt.datetime | None:
    """A date (2026-11-02) or an ISO timestamp, in UTC unless it says otherwise."""
    if text is None:
        return None
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(f"--since {text!r}: a date (2026-11-02) or an ISO timestamp") from exc
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


@app.command("history")
def history_cmd(
    results: ResultsOpt = DEFAULT_RESULTS,
    host: HostOpt = None,
    cell: Annotated[
        list[str] | None,
        typer.Option("--cell", help="Only cells matching this name or glob (repeatable)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Only runs started on or after this date.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
) -> None:
    """Change points over time in each series of comparable runs (same host, cell, workload,
    scale and clients) in throughput, p99 latency and load time, and at each one what
    changed in the recorded environment; and, for each pair of cells several campaigns
    compared, whether those campaigns agree (Cochran's Q, tau, random effects)."""
    from pgfsbench.analysis.agreement import agreements
    from pgfsbench.analysis.history import history
    from pgfsbench.analysis.summary import summarise
    from pgfsbench.report.terminal import history_lines

    patterns = cell or []
    store = open_store(results)
    found = history(
        store.list_runs(status="ok"),
        host=host,
        cell=(lambda c: any(fnmatch.fnmatchcase(c, p) for p in patterns)) if patterns else None,
        since=parse_since(since),
    )
    campaigns = {
        c.id: (
            str(c.started_at or ""),
            str(c.host or ""),
            summarise(
                r
                for r in store.list_runs(c.id)
                if (host is None or r.host == host)
                and (not patterns or any(fnmatch.fnmatchcase(r.cell, p) for p in patterns))
            ),
        )
        for c in store.campaigns()
    }
    agreed = agreements(campaigns)
    if as_json:
        print(json.dumps([h.as_dict() for h in found], indent=1, default=str))
        return
    console = plain_console()
    if not found and not agreed:
        console.print("no ok runs match")
        return
    for line in history_lines(found):
        console.print(line)
    if agreed:
        console.print("Campaigns of the same cells", style="bold")
        for a in agreed:
            console.print(f"  {a.group}: {a.words()}", markup=False, highlight=False)
