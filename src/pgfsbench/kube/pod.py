"""Inside the pod: the same engine as on a host, for the runs of its task, then their
results and artifacts sent back (kube/bundle.py).

The task (kube/task.py: the runs as the controller planned them, each with its uuid, and
the spec's text) is a file of the Job's ConfigMap, mounted read-only; the claims are
mounted at the paths the pvc driver reads. The results go into a SQLite file of the pod's
own; the controller takes its runs into its store by uuid.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from pgfsbench.kube import bundle, manifests
from pgfsbench.kube.task import TASK_DIR, TASK_FILE, Task, version_problem
from pgfsbench.spec.cluster import POD_DATA_MOUNT
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held, make_dirs, write_file

TASK_PATH = Path(TASK_DIR) / TASK_FILE
RESULTS_NAME = "results.db"
ARTIFACTS_NAME = "results-artifacts"  # beside the results file (results/store)


def own_home() -> Path:
    """This pod's directory: its user's in the image (kube/manifests.pod_home)."""
    return Path(manifests.pod_home(os.geteuid()))


def pod_artifacts(home: Path) -> Path:
    """Where the pod's store keeps its runs' artifacts."""
    return home / ARTIFACTS_NAME


# root's (a privileged pod): what tests of hostile bundles name
POD_ARTIFACTS = pod_artifacts(Path(manifests.pod_home(0)))

__all__ = [
    "POD_ARTIFACTS",
    "TASK_PATH",
    "Task",
    "emit_saved",
    "own_home",
    "pod_artifacts",
    "run_task",
]


def run_task(
    home: Path,
    emit: Callable[[str], None],
    run: Callable[[Task, Path, Path, str], None],
    task_path: Path = TASK_PATH,
    bundle_path: Path = Path(POD_DATA_MOUNT) / bundle.BUNDLE_NAME,
) -> int:
    """Run the task at ``task_path`` with ``run(task, spec, workdir, results)``, then pack
    what it left and ``emit`` the bundle's lines (and keep it at ``bundle_path``, on the
    claim). Returns the exit status: 0 when a bundle was sent, whatever the runs'
    statuses (they are in it); 2 when the task is refused before anything ran."""
    from pgfsbench import __version__
    from pgfsbench.results.store import HEAD_REVISION

    try:
        task = Task.parse(task_path.read_text())
    except (OSError, ValueError) as exc:
        print(f"pgfsbench pod: refused: {exc}", file=sys.stderr)
        return 2
    problem = version_problem(task, __version__, HEAD_REVISION)
    if problem is not None:
        print(f"pgfsbench pod: refused: {problem}", file=sys.stderr)
        return 2
    make_dirs(home)
    if os.geteuid() == 0:  # open to the postgres user on its way to the work directory
        with Held.open(home) as held:
            held.hand_to(None, 0o755)
    spec = home / (Path(task.spec_name).name or "spec.toml")
    write_file(spec, task.spec_text, 0o600)
    results = home / RESULTS_NAME
    status = 0
    try:
        run(task, spec, home / "work", str(results))
    except SystemExit as exc:  # the CLI's own error boundary, already printed
        status = int(exc.code or 0) if isinstance(exc.code, int) else 1
    if not results.is_file():
        print("pgfsbench pod: no results were written", file=sys.stderr)
        return status or 1
    try:
        data = bundle.pack(results, pod_artifacts(home))
    except bundle.TooLarge as exc:
        # said here, before anything is kept or printed (the controller would refuse it)
        print(f"pgfsbench pod: the bundle cannot go back: {exc}", file=sys.stderr)
        return status or 1
    # first on the claim, which outlives this pod until the controller has the bundle
    try:
        write_file(bundle_path, data, 0o600)
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
        with path.open("rb") as fh:
            data = fh.read(bundle.MAX_BUNDLE_BYTES + 1)
    except OSError as exc:
        print(f"pgfsbench pod: no bundle on the claim: {exc}", file=sys.stderr)
        return 1
    if len(data) > bundle.MAX_BUNDLE_BYTES:
        print(
            f"pgfsbench pod: the bundle on the claim is over {bundle.MAX_BUNDLE_BYTES >> 20} MiB",
            file=sys.stderr,
        )
        return 1
    for line in bundle.frame(data):
        emit(line)
    return 0
