"""What an unprivileged OS user may do with a path (checked by mode bits, not by root's
own access, which sees everything)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path


def _ids(user: str) -> tuple[int, set[int]]:
    entry = pwd.getpwnam(user)
    groups = {g.gr_gid for g in grp.getgrall() if user in g.gr_mem} | {entry.pw_gid}
    return entry.pw_uid, groups


def _allowed(st: os.stat_result, uid: int, gids: set[int], bits: tuple[int, int, int]) -> bool:
    owner, group, other = bits
    if uid == 0:
        return True
    if st.st_uid == uid:
        return bool(st.st_mode & owner)
    if st.st_gid in gids:
        return bool(st.st_mode & group)
    return bool(st.st_mode & other)


_X = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)
_R = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)


def first_unreachable(path: Path, user: str) -> Path | None:
    """The first directory on the way to ``path`` that ``user`` cannot enter (None: all)."""
    uid, gids = _ids(user)
    real = Path(os.path.realpath(path))
    for parent in reversed([real, *real.parents] if real.is_dir() else list(real.parents)):
        try:
            st = parent.stat()
        except OSError:
            continue
        if not _allowed(st, uid, gids, _X):
            return parent
    return None


def readable_by(path: Path, user: str) -> str | None:
    """None when ``user`` can read the file at ``path``, else the reason why not."""
    real = Path(os.path.realpath(path))
    if not real.is_file():
        return f"{path} is not a file" if real.exists() else f"{path} does not exist"
    blocked = first_unreachable(real, user)
    if blocked is not None:
        return f"the {user} OS user cannot enter {blocked}"
    uid, gids = _ids(user)
    if not _allowed(real.stat(), uid, gids, _R):
        return f"the {user} OS user cannot read {path}"
    return None
