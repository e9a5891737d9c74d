"""pgbouncer in front of the instance: its configuration (pure), its start as a journaled
child on a private unix socket (no TCP: listen_addr is never set), and its admin console.

The workload connects through it; pgfsbench's samplers connect to PostgreSQL directly, and
read pgbouncer's own SHOW STATS / SHOW POOLS every second (a client's wait for a server
connection is the pooler's own latency).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import Cell, Pooler, Scalar
from pgfsbench.system.actions import make_dir, watch_process_group
from pgfsbench.system.errors import CapabilityError, InstanceError
from pgfsbench.system.held import Held, Owner
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Child, Runner
from pgfsbench.system.trust import read_text_nofollow
from pgfsbench.system.wait import wait_until

PORT = 6432
BINARY = "pgbouncer"


def _ini(value: Scalar) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    if any(ord(c) < 32 for c in text):
        raise InstanceError(f"refusing a pgbouncer value with a control character: {text!r}")
    return text


def render_ini(
    pooler: Pooler, directory: Path, socket_dir: Path, pg_socket: Path, pg_port: int, user: str
) -> str:
    """pgbouncer.ini: every database of the instance, through its unix socket."""
    lines = [
        "; written by pgfsbench: unix socket only (no listen_addr)",
        "[databases]",
        f"* = host={pg_socket} port={pg_port}",
        "",
        "[pgbouncer]",
        f"unix_socket_dir = {socket_dir}",
        f"listen_port = {PORT}",
        "auth_type = trust",
        f"auth_file = {directory / 'userlist.txt'}",
        f"admin_users = {user}",
        f"stats_users = {user}",
        f"pidfile = {directory / 'pgbouncer.pid'}",
        f"logfile = {directory / 'pgbouncer.log'}",
        f"pool_mode = {pooler.pool_mode}",
        f"default_pool_size = {pooler.default_pool_size}",
        f"max_client_conn = {pooler.max_client_conn}",
        "stats_period = 1",  # SHOW STATS totals refreshed every second, not every 60
        "ignore_startup_parameters = extra_float_digits,options,application_name",
    ]
    lines += [f"{k} = {_ini(v)}" for k, v in pooler.settings.items()]
    return "\n".join(lines) + "\n"


# pgbouncer keeps server-side prepared statements across a transaction pooler from 1.21
# (max_prepared_statements, 0 by default), on by default from 1.24 (200)
PREPARED_SINCE = (1, 21)
PREPARED_DEFAULT_SINCE = (1, 24)
PREPARED_DEFAULT = 200


def version_number(text: str) -> tuple[int, ...] | None:
    """'PgBouncer 1.18.0' (what `pgbouncer --version` prints first) -> (1, 18, 0)."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def prepared_statements_lost(pooler: Pooler, version: str) -> str | None:
    """Why server-side prepared statements do not survive this pooler (None: they do). In
    session mode a client keeps its server connection; in transaction and statement mode
    the next transaction may run on another one, where the statement was never prepared,
    unless pgbouncer tracks them itself (1.21+, max_prepared_statements above 0)."""
    if pooler.pool_mode == "session":
        return None
    number = version_number(version)
    if number is None or number < PREPARED_SINCE:
        name = (
            f"pgbouncer {'.'.join(map(str, number))}"
            if number
            else f"pgbouncer of unknown version ({version!r})"
        )
        return (
            f"{name} in {pooler.pool_mode} mode does not keep server-side prepared "
            "statements (1.21 and later do, with max_prepared_statements)"
        )
    default = PREPARED_DEFAULT if number >= PREPARED_DEFAULT_SINCE else 0
    raw = pooler.settings.get("max_prepared_statements", default)
    try:
        kept = int(str(raw))
    except ValueError:
        kept = default
    if kept <= 0:
        return (
            f"pgbouncer in {pooler.pool_mode} mode with max_prepared_statements = {kept} "
            "does not keep server-side prepared statements"
        )
    return None


def problems(cell: Cell, version: str) -> list[str]:
    """What cannot run through this cell's pooler, said before anything is touched."""
    pooler = cell.postgres.pooler
    if pooler is None or cell.workload.tool != "pgbench" or cell.workload.protocol != "prepared":
        return []
    why = prepared_statements_lost(pooler, version)
    if why is None:
        return []
    return [
        f"{cell.id}: pgbench -M prepared through the pooler of postgres "
        f"{cell.postgres_name}: {why}, so its statements would be missing on the next "
        'server connection; use protocol = "extended" (or "simple"), pool_mode = '
        '"session", or a pgbouncer that keeps them'
    ]


@dataclass
class Bouncer:
    child: Child
    directory: Path
    socket_dir: Path
    version: str

    def conninfo(self, user: str) -> str:
        return f"host={self.socket_dir} port={PORT} user={user} dbname=pgbouncer"


def version(runner: Runner) -> str:
    if shutil.which(BINARY) is None:
        raise CapabilityError("pgbouncer is not installed (Debian package pgbouncer)")
    done = runner.run([BINARY, "--version"], timeout=30, check=False)
    return (
        (done.stdout or done.stderr).strip().splitlines()[0]
        if (done.stdout or done.stderr)
        else "?"
    )


def start(
    journal: Journal,
    runner: Runner,
    pooler: Pooler,
    celldir: Path,
    pg_socket: Path,
    pg_port: int,
    user: str,
    os_user: str | None,
) -> Bouncer:
    """Start pgbouncer as the PostgreSQL OS user, in its own process group (journaled)."""
    ver = version(runner)
    directory = make_dir(journal, celldir / "pgbouncer", owner=os_user, mode=0o755)
    socket_dir = make_dir(journal, celldir / "pgbsock", owner=os_user, mode=0o700)
    ini = directory / "pgbouncer.ini"
    # the directory is the server user's: its files are made beneath it held, never by path
    owner = Owner.of(os_user)
    with Held.open(directory) as held:
        held.write("userlist.txt", f'"{user}" ""\n', 0o600, owner)
        held.write(
            ini.name,
            render_ini(pooler, directory, socket_dir, pg_socket, pg_port, user),
            0o600,
            owner,
        )
    child = runner.spawn(
        [BINARY, str(ini)], stdout_path=directory / "stdout.txt", user=os_user, cwd=directory
    )
    watch_process_group(journal, child.pid, child.start_time, f"pgbouncer pid {child.pid}")
    bouncer = Bouncer(child, directory, socket_dir, ver)

    import psycopg

    def answers() -> bool:
        if child.poll() is not None:
            raise InstanceError(f"pgbouncer exited {child.poll()}: {log_tail(directory)}")
        try:
            console(bouncer, user, "SHOW VERSION")
        except psycopg.Error:
            return False
        return True

    wait_until(answers, timeout=30, interval=0.2, what="pgbouncer to answer")
    return bouncer


def log_tail(directory: Path, lines: int = 3) -> str:
    try:
        text = read_text_nofollow(directory / "pgbouncer.log")
    except OSError:
        return "no log"
    return " | ".join(text.strip().splitlines()[-lines:])


def console(bouncer: Bouncer, user: str, command: str) -> list[dict[str, object]]:
    """A command of pgbouncer's admin console (simple query protocol only)."""
    import psycopg

    with psycopg.connect(bouncer.conninfo(user), autocommit=True, connect_timeout=5) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute(command)
        cols = [c.name for c in cur.description or []]
        return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def stop(bouncer: Bouncer) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        bouncer.child.kill_tree(grace=5)
