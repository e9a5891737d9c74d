"""Acting as another user for one system call's worth of work, inside this process: the
effective uid and gid switched and switched back (the saved uid stays root's). For what
only that user may do and that gives nothing of root's away: a connection to a server
that authenticates local users by their uid (PostgreSQL's peer authentication), made as
the OS user that runs the server, the principal that already holds all of its data.
Single-threaded callers only (the switch is the process's)."""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


def socket_owner(path: str) -> Account | None:
    """The account owning a unix socket (the server that made it), or None: not a socket,
    root's, or an owner with no account."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid == 0:
        return None
    try:
        entry = pwd.getpwuid(st.st_uid)
    except KeyError:
        return None
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid)


@contextlib.contextmanager
def acting_as(account: Account) -> Iterator[None]:
    """The effective uid and gid of ``account`` inside the block (root's before and after)."""
    if os.geteuid() != 0:
        raise PermissionError("only root acts as another user")
    groups = os.getgroups()
    os.setgroups([account.gid])
    os.setegid(account.gid)
    os.seteuid(account.uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)
