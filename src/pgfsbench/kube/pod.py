"""Inside the pod: the same engine as on a host, for the cell and repetitions of its task,
then its results and artifacts sent back (kube/bundle.py).

The Job's manifest gives the spec (gzip + base64) and the task (JSON: the cell, how many
repetitions, the campaign) in the environment; the claims are mounted at the paths the pvc
driver reads. The results go into a SQLite file of the pod's own; the controller imports
its runs into its store under its own run ids.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from pgfsbench.kube import bundle
from pgfsbench.kube.manifests import SPEC_ENV, TASK_ENV, unpacked_spec
from pgfsbench.spec.cluster import POD_DATA_MOUNT
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held, make_dirs, write_file

POD_HOME = Path("/var/lib/pgfsbench")
RESULTS_NAME = "results.db"
# where the pod's store keeps its runs' artifacts (results/store: beside the file)
POD_ARTIFACTS = POD_HOME / "results-artifacts"


@dataclass(frozen=True)
class Task:
    """What one Job runs."""

    cell: str
    repetitions: int
    campaign: str  # the controller's campaign uuid
    spec_name: str  # the spec's file name, as the controller loaded it
    first_repetition: int = 1
    # the controller's pgfsbench and results schema: the pod refuses to run for another
    # schema (its results could not be read back), and says both versions
    version: str = ""
    schema: str = ""

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def parse(text: str) -> Task:
        data = json.loads(text)
        return Task(
            cell=str(data["cell"]),
            repetitions=int(data["repetitions"]),
            campaign=str(data["campaign"]),
            spec_name=str(data["spec_name"]),
            first_repetition=int(data.get("first_repetition", 1)),
            version=str(data.get("version", "")),
            schema=str(data.get("schema", "")),
        )


def version_problem(task: Task, version: str, schema: str) -> str | None:
    """Why this pod's pgfsbench must not run the task (None: it may): another results
    schema than the controller's. Another version with the same schema runs, said."""
    if task.schema and task.schema != schema:
        return (
            f"the image's pgfsbench {version} writes results schema {schema}, the "
            f"controller's pgfsbench {task.version or '?'} reads {task.schema}: build the "
            "image from the controller's version (scripts/k8s/)"
        )
    return None


def pod_sets(task: Task) -> list[str]:
    """The overrides that make the spec this task: its repetitions, in the order given."""
    return [f"defaults.repetitions={task.repetitions}", "defaults.order=sequential"]


def run_task(
    home: Path,
    emit: Callable[[str], None],
    run: Callable[[Path, list[str], str, Path, str], None],
) -> int:
    """Run the task of this pod's environment with ``run(spec, sets, cell, workdir,
    results)``, then pack what it left and ``emit`` the bundle's lines. Returns the exit
    status: 0 when a bundle was sent, whatever the runs' statuses (they are in it)."""
    task = Task.parse(os.environ[TASK_ENV])
    from pgfsbench import __version__
    from pgfsbench.results.store import HEAD_REVISION

    problem = version_problem(task, __version__, HEAD_REVISION)
    if problem is not None:
        print(f"pgfsbench pod: refused: {problem}", file=sys.stderr)
        return 2
    if task.version and task.version != __version__:
        print(
            f"pgfsbench pod: the image's pgfsbench {__version__}, the controller's "
            f"{task.version} (the same results schema {HEAD_REVISION})",
            file=sys.stderr,
        )
    # root's, and open to the postgres user on its way to the work directory
    make_dirs(home)
    with Held.open(home) as held:
        held.hand_to(None, 0o755)
    spec = home / (Path(task.spec_name).name or "spec.toml")
    write_file(spec, unpacked_spec(os.environ[SPEC_ENV]), 0o600)
    results = home / RESULTS_NAME
    status = 0
    try:
        run(spec, pod_sets(task), task.cell, home / "work", str(results))
    except SystemExit as exc:  # the CLI's own error boundary, already printed
        status = int(exc.code or 0) if isinstance(exc.code, int) else 1
    if not results.is_file():
        print("pgfsbench pod: no results were written", file=sys.stderr)
        return status or 1
    data = bundle.pack(results, home / POD_ARTIFACTS.name)
    # first on the claim, which outlives this pod until the controller has the bundle
    target = Path(POD_DATA_MOUNT) / bundle.BUNDLE_NAME
    try:
        write_file(target, data, 0o600)
    except (OSError, PgfsbenchError) as exc:
        print(f"pgfsbench pod: could not keep the bundle on the claim: {exc}", file=sys.stderr)
    for line in bundle.frame(data):
        emit(line)
    return 0


def emit_saved(
    emit: Callable[[str], None], path: Path = Path(POD_DATA_MOUNT) / bundle.BUNDLE_NAME
) -> int:
    """A second pod on the claim: the bundle the first left there, framed again."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        print(f"pgfsbench pod: no bundle on the claim: {exc}", file=sys.stderr)
        return 1
    for line in bundle.frame(data):
        emit(line)
    return 0
