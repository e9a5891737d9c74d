"""A uid of pgfsbench's own, with no account and no rights, for children that act at
another principal's word.

A client tool run against a server pgfsbench does not own (``pg_basebackup`` at capture)
writes what that server sends, where it says, with the modes it gives: run as root, a
server's ``pg_tblspc`` link made root create directories anywhere and a set-uid copy of a
shell. The rule (docs/safety.md): no child of root writes where, or what, another principal
names. Such a child runs as a uid nobody else uses (no account, no group, no supplementary
group; systemd's range for dynamic users, by convention no account's), in a directory that
uid owns inside root's, and pgfsbench takes its output in through held descriptors.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import random
from pathlib import Path

from pgfsbench.system.errors import CapabilityError

# systemd's range for dynamic users (systemd.exec(5), DynamicUser=): no account is made
# in it by useradd, so a uid there with no account and no process is nobody's
UID_RANGE = range(61184, 65520)


def _running_uids() -> set[int]:
    uids: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    uids.update(int(x) for x in line.split()[1:])
                    break
    return uids


def free_uid() -> int:
    """A uid (equal to its gid) that no account, no group and no process has."""
    taken = {p.pw_uid for p in pwd.getpwall()} | {g.gr_gid for g in grp.getgrall()}
    taken |= _running_uids()
    free = [u for u in UID_RANGE if u not in taken]
    if not free:
        raise CapabilityError(
            f"no free uid in {UID_RANGE.start}-{UID_RANGE.stop - 1} for an unprivileged child"
        )
    return random.SystemRandom().choice(free)


def processes_of(uid: int) -> list[int]:
    """The pids running as ``uid`` (real, effective, saved or filesystem)."""
    found: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("Uid:"):
                    if uid in {int(x) for x in line.split()[1:]}:
                        found.append(int(entry.name))
                    break
    return found
