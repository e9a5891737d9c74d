"""Generic, journaled actions of the bottom layer: files we created, values we changed,
processes we started. Each has a registered undo that is safe to run twice."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from pgfsbench.system.bounds import kernel_value, process_group, removable_path
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held, Owner, new_dir
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.mountinfo import mounts_under
from pgfsbench.system.runner import Runner, process_alive, signal_process_group
from pgfsbench.system.trust import boot_id
from pgfsbench.system.wait import wait_until


def make_dir(journal: Journal, path: Path, *, owner: str | None = None, mode: int = 0o755) -> Path:
    """Create a directory that pgfsbench owns (removed on undo, with what is inside)."""
    journal.record(f"mkdir {path}", Undo("remove_path", {"path": str(path)}))
    new_dir(path, mode, Owner.of(owner))
    return path


def write_value(journal: Journal, path: Path, value: str, *, what: str) -> str:
    """Write a kernel tunable (/proc/sys, /sys) after journaling its current value."""
    old = path.read_text().strip()
    journal.record(
        f"{what}: {old} -> {value}", Undo("restore_value", {"path": str(path), "value": old})
    )
    path.write_text(value + "\n")
    return old


def watch_process_group(journal: Journal, pid: int, start_time: int | None, what: str) -> None:
    """Journal a child we started, so cleanup can end its whole tree after a SIGKILL of ours."""
    journal.record(
        what,
        Undo("kill_process_group", {"pid": pid, "start_time": start_time, "boot_id": boot_id()}),
    )


@undo_action("remove_path", bound=removable_path)
def _remove_path(runner: Runner, args: dict[str, Any]) -> None:
    path = Path(args["path"])
    inside = mounts_under(path)
    if inside:
        # never delete across a mount point: it would erase (or, frozen, hang in) that fs
        raise PgfsbenchError(f"not removing {path}: {inside[0].target} is still mounted inside it")
    # by its held parent: a link anywhere on the way that another user could have put
    # there is refused, and the last name is removed, never followed
    try:
        parent = Held.open(path.parent)
    except FileNotFoundError:
        return
    with parent:
        parent.remove(path.name)


@undo_action("restore_value", bound=kernel_value)
def _restore_value(runner: Runner, args: dict[str, Any]) -> None:
    path = Path(args["path"])
    value = str(args["value"])
    # THP and similar files show the choice as "always [madvise] never"
    if "[" in value:
        value = value[value.index("[") + 1 : value.index("]")]
    if path.read_text().strip() != args["value"]:
        path.write_text(value + "\n")


@undo_action("kill_process_group", bound=process_group)
def _kill_process_group(runner: Runner, args: dict[str, Any]) -> None:
    pid = int(args["pid"])
    start = args.get("start_time")
    if args.get("boot_id") not in (None, boot_id()):
        return  # started on another boot: gone with it, and its pid is someone else's now
    if not process_alive(pid, start):
        return
    signal_process_group(pid, start, signal.SIGTERM)
    try:
        wait_until(lambda: not process_alive(pid, start), timeout=5, what=f"pid {pid} to exit")
    except Exception:
        signal_process_group(pid, start, signal.SIGKILL)
