"""The commands a pod of a cluster run runs (hidden: the Job's manifest calls them)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import typer

from pgfsbench.cli import app
from pgfsbench.report.inert import plain_console


def _emit(line: str) -> None:
    print(line, flush=True)


@app.command("pod-run", hidden=True)
def pod_run_cmd() -> None:
    """Run the task of this pod's environment, then print its results bundle."""
    from pgfsbench.cli.run import run_spec
    from pgfsbench.kube.pod import POD_HOME, run_task
    from pgfsbench.spec import load_spec
    from pgfsbench.system.errors import PgfsbenchError

    console = plain_console(width=120)

    def run(spec: Path, sets: list[str], cell: str, workdir: Path, results: str) -> None:
        loaded = load_spec(spec, sets)
        # here is where the cluster's cells run: the engine, not another campaign of Jobs
        loaded = dataclasses.replace(
            loaded, spec=loaded.spec.model_copy(update={"kubernetes": None})
        )
        try:
            run_spec(
                loaded,
                results,
                workdir,
                [],
                False,
                console,
                [cell],
                host=os.environ.get("PGFSBENCH_NODE") or None,
            )
        except PgfsbenchError as exc:  # said here, and the bundle still goes back
            console.print(f"pgfsbench: error: {exc}", markup=False, highlight=False)
            raise SystemExit(exc.exit_code) from None

    raise typer.Exit(run_task(POD_HOME, _emit, run))


@app.command("pod-bundle", hidden=True)
def pod_bundle_cmd() -> None:
    """Print again the bundle an earlier pod left on this claim."""
    from pgfsbench.kube.pod import emit_saved

    raise typer.Exit(emit_saved(_emit))
