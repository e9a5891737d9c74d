"""`pgfsbench cleanup`: undo what interrupted or killed runs left in a work directory."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

# Importing these registers their undo actions with the journal.
from pgfsbench import kernel  # noqa: F401
from pgfsbench.kube import undo as cluster_undo  # noqa: F401
from pgfsbench.postgres import instance  # noqa: F401
from pgfsbench.storage import devices, limits, lvm, md, mounts, snapshots, zfs  # noqa: F401
from pgfsbench.system import actions  # noqa: F401
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.journal import LeftoverJournal, leftover_journals, undo_leftover
from pgfsbench.system.runner import Runner, end_orphans
from pgfsbench.system.trust import check_workdir_trusted
from pgfsbench.workloads import capture as capture_undo  # noqa: F401


@dataclass
class CleanupReport:
    journals: int = 0
    steps_undone: int = 0
    still_running: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    runs_marked_aborted: int = 0
    undone: list[str] = field(default_factory=list)
    # journals nothing was undone of, and why (not root's, or naming what is not ours)
    refused: list[str] = field(default_factory=list)


def cleanup(workdir: Path, runner: Runner | None = None) -> CleanupReport:
    """Undo what killed runs left in ``workdir``: refused whole (UntrustedPath) when
    someone other than root could have written there, and journal by journal when one
    was not written by root or names what pgfsbench cannot have done."""
    check_workdir_trusted(workdir)
    runner = runner or Runner()
    report = CleanupReport()
    # first the children a killed pgfsbench left running (an initdb, a load, a pg_dump):
    # they keep the mounts busy that the journals are about to unmount
    report.undone += [f"ended {what}" for what in end_orphans(children_dir(workdir))]
    for journal in leftover_journals(workdir):
        if journal.refused is not None:
            report.refused.append(f"{journal.path.name}: {journal.refused}")
            continue
        if journal.locked:
            report.still_running.append(
                f"{journal.path.name} belongs to a run still in progress "
                f"(pid {journal.meta.get('pid')}); not touched"
            )
            continue
        report.journals += 1
        failures = undo_leftover(runner, journal)
        failed_seqs = {f.step.seq for f in failures}
        for step in reversed(journal.steps):  # the order they were undone in
            if step.seq not in failed_seqs:
                report.undone.append(step.what)
        report.steps_undone += len(journal.steps) - len(failures)
        report.failures += [f"{f.step.what}: {f.error}" for f in failures]
        report.runs_marked_aborted += _mark_runs_aborted(journal)
    return report


def children_dir(workdir: Path) -> Path:
    """Where the pgfsbench processes working in ``workdir`` list their live children."""
    return workdir / "children"


def _mark_runs_aborted(journal: LeftoverJournal) -> int:
    """Runs and the campaign the dead process left as 'running' in its results store
    become 'aborted'."""
    target = journal.meta.get("results")
    run_ids = [int(str(n["run_id"])) for n in journal.notes if "run_id" in n]
    campaigns = [int(str(n["campaign_id"])) for n in journal.notes if "campaign_id" in n]
    if not target or not (run_ids or campaigns):
        return 0
    from pgfsbench.results.store import Store

    with contextlib.suppress(PgfsbenchError, OSError, Exception):
        store = Store(str(target))
        try:
            for campaign_id in campaigns:
                store.mark_campaign_aborted(campaign_id)
            return store.mark_aborted(
                run_ids, "the pgfsbench process was killed; undone by pgfsbench cleanup"
            )
        finally:
            store.close()
    return 0
