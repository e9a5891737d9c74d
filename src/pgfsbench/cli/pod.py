"""The commands a pod of a cluster run runs (hidden: the Job's manifest calls them)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated

import typer

from pgfsbench.cli import app
from pgfsbench.report.inert import plain_console


def _emit(line: str) -> None:
    print(line, flush=True)


@app.command("pod-run", hidden=True)
def pod_run_cmd(
    home: Annotated[
        Path | None, typer.Option(help="The pod's own directory [/var/lib/pgfsbench/UID].")
    ] = None,
    task_file: Annotated[
        Path | None, typer.Option("--task", help="The task (the Job's ConfigMap, mounted).")
    ] = None,
    bundle_file: Annotated[
        Path | None, typer.Option("--bundle", help="Where the bundle is kept (the claim).")
    ] = None,
) -> None:
    """Run the planned runs of this pod's task, then print its results bundle."""
    from pgfsbench.cli.run import run_spec
    from pgfsbench.kube.bundle import BUNDLE_NAME
    from pgfsbench.kube.pod import TASK_PATH, own_home, run_task
    from pgfsbench.kube.task import Task, pins, rate_max
    from pgfsbench.plan import PlannedRun, make_plan
    from pgfsbench.spec import load_spec
    from pgfsbench.spec.cluster import POD_DATA_MOUNT
    from pgfsbench.system.errors import PgfsbenchError

    console = plain_console(width=120)

    def run(task: Task, spec: Path, workdir: Path, results: str) -> None:
        try:
            loaded = load_spec(spec)
            # here is where the cluster's cells run: the engine, not another campaign of
            # Jobs, and the runs as the controller planned them (no repetitions of its own)
            d = loaded.spec.defaults.model_copy(update={"repetitions": task.repetitions})
            loaded = dataclasses.replace(
                loaded,
                spec=loaded.spec.model_copy(update={"kubernetes": None, "defaults": d}),
            )
            base = make_plan(loaded, workdir, pinned=pins(task))
            (cell,) = base.cells
            plan = dataclasses.replace(
                base,
                runs=[PlannedRun(i, cell, r.repetition, r.uuid) for i, r in enumerate(task.runs)],
                repetitions=task.repetitions,
                auto=None,
                rate_max=rate_max(task),
            )
            run_spec(
                loaded,
                results,
                workdir,
                [],
                False,
                console,
                host=task.host or os.environ.get("PGFSBENCH_NODE") or None,
                plan=plan,
            )
        except PgfsbenchError as exc:  # said here, and the bundle still goes back
            console.print(f"pgfsbench: error: {exc}", markup=False, highlight=False)
            raise SystemExit(exc.exit_code) from None

    raise typer.Exit(
        run_task(
            home or own_home(),
            _emit,
            run,
            task_file or TASK_PATH,
            bundle_file or Path(POD_DATA_MOUNT) / BUNDLE_NAME,
        )
    )


@app.command("pod-bundle", hidden=True)
def pod_bundle_cmd() -> None:
    """Print again the bundle an earlier pod left on this claim."""
    from pgfsbench.kube.pod import emit_saved

    raise typer.Exit(emit_saved(_emit))
