"""What one Job runs, as the controller planned it: a versioned JSON document the Job's
ConfigMap carries to its pod (pure).

The pod never plans: the runs come planned, each with its uuid (the controller's run row),
its repetition number, its scale made a number by the controller (a scale relative to
memory is the pod's memory limit on both ends), and, for a rate given as a share of the
maximum ("75%"), the maximum the campaign has measured so far (the median of the same
cell's unthrottled runs: one experiment, as on a host). The spec's text comes along for
the cells' configuration. The pod refuses a document format or a results schema it does
not know before anything runs (kube/pod.py); the controller reads the bundle with its own
schema and takes back only the runs whose uuids it gave (cluster/campaign.paired).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# the document's format: a pod reads only this one (a newer controller names a newer one)
TASK_FORMAT = "pgfsbench.task/2"
TASK_FILE = "task.json"  # its key in the ConfigMap, its file name in the pod
TASK_DIR = "/etc/pgfsbench-task"  # where the pod mounts the ConfigMap (read-only)


@dataclass(frozen=True)
class TaskRun:
    """One planned run of the task."""

    uuid: str  # the controller's run row: the pod's run carries it back
    cell: str
    repetition: int  # the campaign's numbering
    scale: int  # resolved by the controller
    scale_basis: Mapping[str, Any] | None = None  # how ("fits_ram": the pod's memory limit)
    # rate "N%": the campaign's maximum of this cell so far (tps) and where it came from;
    # None: the pod measures it before the run (no unthrottled run of the cell yet)
    max_tps: float | None = None
    max_from: str = ""


@dataclass(frozen=True)
class Task:
    """The task of one Job: its runs (one cell), the spec, the campaign, the versions."""

    campaign: str  # the controller's campaign uuid
    spec_name: str  # the spec's file name, as the controller loaded it
    spec_text: str  # the spec as run (the file, or with --set the spec the plan made)
    runs: tuple[TaskRun, ...]
    version: str = ""  # the controller's pgfsbench
    schema: str = ""  # the controller's results schema
    format: str = TASK_FORMAT
    host: str = ""  # the run's host as the controller stores it (k8s:CONTEXT)

    @property
    def cell(self) -> str:
        return self.runs[0].cell

    @property
    def repetitions(self) -> int:
        return len(self.runs)

    def text(self) -> str:
        data = asdict(self)
        data["runs"] = [asdict(r) for r in self.runs]
        return json.dumps(data, sort_keys=True, indent=1)

    @staticmethod
    def parse(text: str) -> Task:
        """The document, or ValueError saying what is wrong with it (its format first: a
        document of another format is refused whole, never half read)."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"the task is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("the task is not a JSON object")
        fmt = data.get("format")
        if fmt != TASK_FORMAT:
            raise ValueError(
                f"the task's format is {fmt!r}, this pgfsbench reads {TASK_FORMAT!r}: build "
                "the image from the controller's version (scripts/k8s/)"
            )
        try:
            runs = tuple(_run(r) for r in data["runs"])
            task = Task(
                campaign=str(data["campaign"]),
                spec_name=str(data["spec_name"]),
                spec_text=str(data["spec_text"]),
                runs=runs,
                version=str(data.get("version", "")),
                schema=str(data.get("schema", "")),
                host=str(data.get("host", "")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the task is incomplete: {exc.__class__.__name__}: {exc}") from None
        if not runs:
            raise ValueError("the task has no runs")
        if len({r.cell for r in runs}) != 1:
            raise ValueError("the task's runs are not of one cell")
        if len({r.uuid for r in runs}) != len(runs):
            raise ValueError("two runs of the task have one uuid")
        return task


def _run(data: Any) -> TaskRun:
    if not isinstance(data, dict):
        raise TypeError("a run is not an object")
    basis = data.get("scale_basis")
    max_tps = data.get("max_tps")
    scale = int(data["scale"])
    if scale < 1:
        raise ValueError(f"scale {scale}")
    return TaskRun(
        uuid=str(data["uuid"]),
        cell=str(data["cell"]),
        repetition=int(data["repetition"]),
        scale=scale,
        scale_basis=dict(basis) if isinstance(basis, dict) else None,
        max_tps=float(max_tps) if max_tps is not None else None,
        max_from=str(data.get("max_from", "")),
    )


def version_problem(task: Task, version: str, schema: str) -> str | None:
    """Why this pod's pgfsbench must not run the task (None: it may): another version or
    another results schema than the controller's. The pod derives its cell from the spec's
    text again, and another version may derive another cell than the one the controller's
    store keeps: a run would be stored under a configuration it did not run."""
    if task.schema and task.schema != schema:
        return (
            f"the image's pgfsbench {version} writes results schema {schema}, the "
            f"controller's pgfsbench {task.version or '?'} reads {task.schema}: build the "
            "image from the controller's version (scripts/k8s/)"
        )
    if task.version and task.version != version:
        return (
            f"the image's pgfsbench is {version}, the controller's {task.version}: a pod "
            "derives its cell from the spec again, and another version may derive another; "
            "build the image from the controller's version (scripts/k8s/)"
        )
    return None


def pins(task: Task) -> dict[str, tuple[int, dict[str, Any] | None]]:
    """The cell's scale as the controller resolved it (plan.make_plan's ``pinned``)."""
    first = task.runs[0]
    return {first.cell: (first.scale, dict(first.scale_basis) if first.scale_basis else None)}


def rate_max(task: Task) -> dict[str, tuple[float, str]]:
    """The maximum a rate "N%" of the cell is a share of, when the campaign had one."""
    out: dict[str, tuple[float, str]] = {}
    for r in task.runs:
        if r.max_tps is not None and r.max_tps > 0:
            out[r.cell] = (r.max_tps, r.max_from or "the campaign's unthrottled runs")
    return out
