"""Mounting and unmounting, journaled; effective options read back from the kernel."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pgfsbench.system.bounds import own_directory_name
from pgfsbench.system.errors import CommandError, ProvisionError, TimeoutExpired
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.mountinfo import MountInfo, holders, mount_table
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import inside
from pgfsbench.system.wait import wait_until

# how long an unmount waits for the last users of a filesystem to leave (a server's
# processes ending after its stop, a sampler closing its files): seconds in practice
USERS_LEAVE_S = 20.0
# users still there after this long: is the filesystem frozen? Its users would wait for
# the thaw, not leave, and the wait would only delay saying so
USERS_FROZEN_AFTER_S = 2.0


def mount_at(target: Path) -> MountInfo | None:
    """The mount whose target is exactly ``target`` (the last one, if stacked)."""
    found = None
    for entry in mount_table():
        if entry.target == str(target):
            found = entry
    return found


def mount_of(path: Path) -> MountInfo:
    """The mount that contains ``path`` (longest matching target)."""
    real = os.path.realpath(path)
    best: MountInfo | None = None
    for entry in mount_table():
        t = entry.target
        if (real == t or real.startswith(t.rstrip("/") + "/")) and (
            best is None or len(t) >= len(best.target)
        ):
            best = entry
    assert best is not None  # "/" contains everything
    return best


def mount(
    journal: Journal, runner: Runner, source: str, target: Path, fstype: str, options: list[str]
) -> MountInfo:
    target.mkdir(parents=True, exist_ok=True)
    argv = ["mount", "-t", fstype]
    if options:
        argv += ["-o", ",".join(options)]
    argv += [source, str(target)]
    journal.record(f"mount {source} on {target}", Undo("umount", {"target": str(target)}))
    runner.run(argv, timeout=120)
    info = mount_at(target)
    if info is None:
        raise CommandError(argv, 0, f"{target} is not a mount point after mount")
    return info


def frozen(runner: Runner, target: Path) -> bool:
    """Is the filesystem at ``target`` frozen (fsfreeze)? Asked by freezing it: the kernel
    answers EBUSY when it already is; when it was not, it is thawed at once (that freeze
    was ours). Only called when no process holds the filesystem, so no writer can make
    the freeze wait. Filesystems that cannot be frozen (tmpfs, FUSE) are not frozen."""
    done = runner.run(["fsfreeze", "--freeze", str(target)], timeout=120, check=False)
    if done.returncode == 0:
        runner.run(["fsfreeze", "--unfreeze", str(target)], timeout=120, check=False)
        return False
    return "busy" in done.stderr.lower()


def mount_of_run(args: dict[str, object], scope: Scope) -> str | None:
    """Only what the run mounted: in its work directory, or in the directory it made on a
    filesystem the user named."""
    target = str(args["target"])
    if ".." in Path(target).parts:  # refused as written: '..' after a link goes elsewhere
        return f"{target} goes through '..'"
    if inside(target, scope.workdir) or any(
        own_directory_name(str(p), scope) for p in Path(target).parents
    ):
        return None
    return f"{target} is not a mount point inside the work directory {scope.workdir}"


@undo_action("umount", bound=mount_of_run)
def _umount(runner: Runner, args: dict[str, object]) -> None:
    """Unmount, waiting while the last users leave. Never a frozen filesystem, and never
    lazily while someone still uses it: either would strand it (an unmounted frozen
    filesystem keeps its device busy, with no path left to thaw it through)."""
    target = Path(str(args["target"]))
    since = time.monotonic()
    asked = False

    def unused_or_frozen() -> str | None:
        # users of a frozen filesystem never leave (they sleep until it thaws): asked once
        # they have stayed a while, so a frozen one is said at once, not after the timeout
        nonlocal asked
        if mount_at(target) is None or not holders(target):
            return "unused"
        if not asked and time.monotonic() - since >= USERS_FROZEN_AFTER_S:
            asked = True
            if frozen(runner, target):
                return "frozen"
        return None

    try:
        state = wait_until(
            unused_or_frozen,
            timeout=USERS_LEAVE_S,
            interval=0.25,
            what=f"the users of {target} to leave",
        )
    except TimeoutExpired:
        users = holders(target)
        raise ProvisionError(
            f"{target} is still in use by {', '.join(map(str, users[:5]))}; left mounted "
            "(if its filesystem is frozen, thaw it with `fsfreeze -u`), then run "
            "`pgfsbench cleanup`"
        ) from None
    if state == "frozen":
        users = holders(target)
        raise ProvisionError(
            f"{target} is frozen and still in use by {', '.join(map(str, users[:5]))}; "
            f"left mounted: thaw it (`fsfreeze -u {target}`), then run `pgfsbench cleanup`"
        )
    if mount_at(target) is None:
        return
    if frozen(runner, target):
        raise ProvisionError(
            f"{target} is frozen; left mounted: unmounting it would keep its "
            f"device busy for good. Thaw it (`fsfreeze -u {target}`), then "
            "run `pgfsbench cleanup`"
        )

    def unmounted() -> bool:
        if mount_at(target) is None:
            return True
        runner.run(["umount", str(target)], timeout=60, check=False)
        return mount_at(target) is None

    try:
        wait_until(unmounted, timeout=20, interval=1.0, what=f"{target} to unmount")
    except TimeoutExpired:
        # nobody holds it and it is not frozen (a kernel reference): detach it so the
        # device can be released
        runner.run(["umount", "--lazy", str(target)], timeout=60)
