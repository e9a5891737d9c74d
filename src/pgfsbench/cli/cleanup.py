"""pgfsbench cleanup."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from pgfsbench.cli import app
from pgfsbench.report.inert import plain_console
from pgfsbench.system.errors import NeedsRootError, PgfsbenchError
from pgfsbench.system.paths import DEFAULT_WORKDIR
from pgfsbench.system.trust import UntrustedPath, check_workdir_trusted


@app.command("cleanup")
def cleanup_cmd(
    workdir: Annotated[Path, typer.Option(help="The work directory of the interrupted run.")] = (
        DEFAULT_WORKDIR
    ),
) -> None:
    """Undo whatever an interrupted or killed run left (mounts, loop devices, servers, sysctls)."""
    import os

    from pgfsbench.cleanup import cleanup
    from pgfsbench.system.hostlock import host_lock

    console = plain_console()
    check_workdir_trusted(workdir)  # before anything in it is read
    if not workdir.is_dir():
        console.print(f"nothing to clean up: {workdir} does not exist")
        return
    if os.geteuid() != 0 and any((workdir / "journal").glob("*.jsonl")):
        raise NeedsRootError("undoing mounts, loop devices and sysctls needs root")
    # a campaign running now would see its kernel settings restored under it: refused
    with host_lock("pgfsbench cleanup", workdir):
        report = cleanup(workdir)
    for line in report.refused:
        console.print(f"[red]refused[/]: {escape(line)}", highlight=False, markup=True)
    for line in report.still_running:
        console.print(f"[yellow]skipped[/]: {escape(line)}", markup=True)
    for what in report.undone:
        console.print(f"undone: {what}", markup=False)
    console.print(
        f"{report.journals} journal(s), {report.steps_undone} step(s) undone, "
        f"{report.runs_marked_aborted} run(s) marked aborted"
    )
    if report.failures:
        raise PgfsbenchError("could not undo: " + "; ".join(report.failures))
    if report.refused:
        raise UntrustedPath(
            f"{len(report.refused)} journal(s) refused and left as they are: nothing in them "
            "was undone (remove them once you have checked what they name)"
        )
