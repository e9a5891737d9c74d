"""A program root starts as another user, from a checkout that user cannot reach (root's
home is 0700): root's copy of it runs instead, made once per content; a program another
user could have written is never copied for a child to run."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

from pgfsbench.system.reachable import CACHE_DIR, COPIES, can_execute, executable_for
from pgfsbench.system.runner import identity
from pgfsbench.system.trust import UntrustedPath


def as_postgres(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", str(program)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


@pytest.fixture
def closed(base: Path) -> Path:
    """A program of root's in a directory closed to others (as a checkout under /root),
    its content our own (``true`` with bytes of this test's after its end)."""
    closed = base / "home"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)
    program = closed / "prog"
    shutil.copyfile("/usr/bin/true", program)
    with program.open("ab") as f:
        f.write(secrets.token_bytes(32))
    program.chmod(0o755)
    return program


def test_a_program_out_of_the_users_reach_runs_from_roots_copy(closed: Path) -> None:
    uid, gid, groups = identity("postgres")
    assert uid is not None and gid is not None
    gids = [gid, *(groups or [])]
    assert not can_execute(closed, uid, gids)
    assert as_postgres(closed).returncode != 0  # as it failed before: Permission denied
    copy = executable_for(closed, "postgres")
    try:
        assert copy != closed and copy.parent.parent == CACHE_DIR / COPIES
        assert copy.read_bytes() == closed.read_bytes()
        st = copy.stat()
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o755
        assert can_execute(copy, uid, gids)
        assert as_postgres(copy).returncode == 0
        assert executable_for(closed, "postgres") == copy  # once per content
        # the same for an unprivileged uid of pgfsbench's own (the wire relay)
        assert executable_for(closed, 61_234) == copy
        # reachable: the program itself, no copy
        closed.parent.chmod(0o755)
        assert can_execute(closed, uid, gids)
        assert executable_for(closed, "postgres") == closed
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)


def test_a_program_another_user_could_have_written_is_not_copied(closed: Path) -> None:
    closed.chmod(0o777)  # anyone could have written it
    with pytest.raises(UntrustedPath, match="not root's alone"):
        executable_for(closed, "postgres")
    closed.chmod(0o755)
    os.chown(closed, 65534, 65534)  # nobody's
    with pytest.raises(UntrustedPath, match="not root's alone"):
        executable_for(closed, "postgres")
    assert not list((CACHE_DIR / COPIES).glob("*/prog"))
