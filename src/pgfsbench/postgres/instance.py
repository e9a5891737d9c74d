"""A PostgreSQL instance on provisioned storage: initdb, configuration, start, stop.

It listens on a private unix socket only (listen_addresses = ''). Command lines and the
configuration file are built by pure functions; `Instance` runs them through the runner.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.postgres.ipc import data_dir_identity, postmaster_orphans, release_shared_memory
from pgfsbench.postgres.template import Templates, template_key
from pgfsbench.spec import InitdbOptions, Scalar
from pgfsbench.system.actions import make_dir
from pgfsbench.system.bounds import own_directory_name
from pgfsbench.system.cpus import pin_process
from pgfsbench.system.errors import CommandError, InstanceError, PgfsbenchError, TimeoutExpired
from pgfsbench.system.held import Held, Owner
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import (
    Runner,
    command_line,
    process_alive,
    process_start_time,
    process_state,
)
from pgfsbench.system.trust import inside, open_written_by_others, read_text_nofollow
from pgfsbench.system.wait import wait_until

if TYPE_CHECKING:
    import psycopg  # imported where used: a run imports it while its storage is made

SUPERUSER = "postgres"
# every connection of a workload says so (libpq's application_name): the samplers tell the
# workload's backends from a connection from outside it (a lock holder in psql, say) by it
WORKLOAD_APPLICATION = "pgfsbench workload"
PORT = 5432
CONF_NAME = "pgfsbench.conf"

# Settings pgfsbench needs for its own measurements; the spec's settings come after them.
BASE_SETTINGS: dict[str, Scalar] = {
    "listen_addresses": "",
    "log_checkpoints": True,
    "log_line_prefix": "%m [%p] ",
    "log_timezone": "UTC",
    "lc_messages": "C",
    "logging_collector": False,
    "log_autovacuum_min_duration": 0,
    "log_lock_waits": True,
    "track_io_timing": True,
}
SINCE_VERSION: dict[str, tuple[int, Scalar]] = {"track_wal_io_timing": (14, True)}


def sql(name: str) -> str:
    """A query from postgres/sql/NAME.sql."""
    return (resources.files("pgfsbench.postgres") / "sql" / f"{name}.sql").read_text()


def initdb_argv(
    binaries: Binaries, pgdata: Path, waldir: Path | None, options: InitdbOptions
) -> list[str]:
    argv = [
        binaries.tool("initdb"),
        "--pgdata",
        str(pgdata),
        "--username",
        SUPERUSER,
        "--auth-local",
        "trust",
        "--auth-host",
        "reject",
        "--encoding",
        "UTF8",
        "--locale",
        options.locale,
        "--no-instructions",
        # no fsync of each file: the cluster is flushed with its filesystem before anything
        # is measured (the settle after the load), and a run that fails before is discarded
        "--no-sync",
    ]
    if waldir is not None:
        argv += ["--waldir", str(waldir)]
    if options.wal_segsize is not None:
        argv += ["--wal-segsize", str(options.wal_segsize)]
    if options.data_checksums:
        argv.append("--data-checksums")
    elif binaries.major >= 18:  # 18 turned checksums on by default: keep one default for all
        argv.append("--no-data-checksums")
    return argv + list(options.extra_args)


def conf_value(value: Scalar) -> str:
    """A value as postgresql.conf reads it: quoted, with quotes and backslashes escaped.
    A control character (a newline could start a line of its own) is refused."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InstanceError(f"refusing a configuration value with a control character: {text!r}")
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def render_conf(
    socket_dir: Path, port: int, settings: Mapping[str, Scalar], major: int = 15
) -> str:
    lines = [
        "# written by pgfsbench: its own settings first, then the spec's",
        f"unix_socket_directories = {conf_value(str(socket_dir))}",
        f"port = {port}",
    ]
    own = dict(BASE_SETTINGS)
    own.update({k: v for k, (since, v) in SINCE_VERSION.items() if major >= since})
    for name in settings:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) or name.lower() in (
            "listen_addresses",
            "port",
            "unix_socket_directories",
        ):
            raise InstanceError(f"refusing setting name {name!r}")
    merged: dict[str, Scalar] = {**own, **settings}
    lines += [f"{k} = {conf_value(v)}" for k, v in merged.items()]
    return "\n".join(lines) + "\n"


def pg_ctl_start_argv(binaries: Binaries, pgdata: Path, log: Path, timeout: float) -> list[str]:
    return [
        binaries.tool("pg_ctl"),
        "start",
        "--pgdata",
        str(pgdata),
        "--log",
        str(log),
        "--wait",
        "--timeout",
        str(int(timeout)),
        "--silent",
    ]


def pg_ctl_stop_argv(
    binaries: Binaries | str, pgdata: Path, mode: str, timeout: float
) -> list[str]:
    tool = binaries.tool("pg_ctl") if isinstance(binaries, Binaries) else f"{binaries}/pg_ctl"
    return [
        tool,
        "stop",
        "--pgdata",
        str(pgdata),
        "--mode",
        mode,
        "--wait",
        "--timeout",
        str(int(timeout)),
        "--silent",
    ]


@dataclass
class Instance:
    binaries: Binaries
    pgdata: Path
    waldir: Path | None
    socket_dir: Path
    log_path: Path
    os_user: str | None  # None: run as the current user
    port: int = PORT
    pid: int | None = None  # the postmaster, once started
    # the CPUs the server runs on (defaults.server_cpus): the postmaster and the processes
    # it has at its start are put there; all it forks later inherits them
    cpus: frozenset[int] | None = None

    def conninfo(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={self.port} user={SUPERUSER} dbname={dbname}"

    def connect(
        self, dbname: str = "postgres", statement_timeout_s: float = 600
    ) -> psycopg.Connection[Any]:
        """Our own connections never wait for ever: a server whose storage stopped
        accepting writes must not hold pgfsbench up."""
        import psycopg

        return psycopg.connect(
            self.conninfo(dbname),
            autocommit=True,
            connect_timeout=10,
            options=f"-c statement_timeout={int(statement_timeout_s * 1000)}",
            application_name="pgfsbench",
        )

    def init(
        self,
        journal: Journal,
        runner: Runner,
        options: InitdbOptions,
        templates: Templates | None = None,
        source: str | None = None,
    ) -> str:
        """Make the cluster: a copy of the template of the same binaries, options and host
        when ``templates`` has one, else initdb (kept as the template for the next). With
        ``source``, a copy of that template of ``templates`` (a workload's own data, as a
        capture's), never initdb."""
        # initdb's own server (postgres --boot, then --single) makes shared memory too, and
        # a run killed during initdb leaves it. It is found by the data directory's device
        # and inode, so the directory is made here (initdb takes an empty one, and then
        # empties it rather than removing it when it fails) and its identity journaled.
        owner = Owner.of(self.os_user)
        # made here, root's and 0700 until it holds a cluster: the server's user (shared
        # with the distribution's PostgreSQL) can plant nothing in it that root would
        # then write through (system/held.py)
        with (
            Held.open(self.pgdata.parent) as parent,
            parent.ensure_dir(self.pgdata.name, 0o700) as pgdata,
        ):
            identity = data_dir_identity(self.pgdata)
            if identity is not None and owner is not None:
                # the server's segments are its user's: the directory is handed over below
                identity = (identity[0], identity[1], owner.uid)
            journal.record(
                f"initdb {self.pgdata}",
                Undo(
                    "release_server_memory",
                    {"pgdata": str(self.pgdata), "identity": list(identity) if identity else None},
                ),
            )
            argv = initdb_argv(self.binaries, self.pgdata, self.waldir, options)
            key = template_key(self.binaries, argv, self.pgdata, self.waldir, self.os_user)
            note = ""
            if source is not None:
                given = templates.find(source) if templates is not None else None
                if given is None or templates is None:
                    raise InstanceError(f"the data template {source} is not there")
                output = templates.copy_into(given, pgdata, self.waldir, owner)
                pgdata.hand_to(owner, 0o700)
                return output
            if templates is not None and (found := templates.find(key)) is not None:
                # commands.sh says what the copy stands for, and how to make it without one
                runner.transcript.append(
                    f"# a copy of the initdb template {found.name}, made by: "
                    + shlex.join(
                        argv
                        if self.os_user is None
                        else ["runuser", "-u", self.os_user, "--", *argv]
                    )
                )
                try:
                    output = templates.copy_into(found, pgdata, self.waldir, owner)
                except (PgfsbenchError, OSError) as exc:
                    # a filesystem that refuses the copy (owners, modes) may still take
                    # initdb's own files: what the copy made goes, and initdb runs
                    templates.uncopy(found, pgdata, self.waldir)
                    note = f"copying the initdb template {found.name} failed ({exc}); ran initdb\n"
                    runner.transcript.append("# " + note.strip())
                else:
                    pgdata.hand_to(owner, 0o700)
                    return output
            pgdata.hand_to(owner, 0o700)
        try:
            done = runner.run(argv, timeout=600, user=self.os_user)
        except CommandError as exc:
            raise InstanceError(f"initdb failed: {exc}") from None
        output = note + done.stdout + done.stderr
        if templates is not None:
            with contextlib.suppress(PgfsbenchError, OSError):  # the next cell runs initdb
                templates.save(key, self.pgdata, self.waldir, output)
        return output

    def configure(self, settings: Mapping[str, Scalar]) -> Path:
        """pgfsbench's settings file, and its include in postgresql.conf, written beneath
        the held data directory (the server's user's: never by path)."""
        owner = Owner.of(self.os_user)
        with Held.open(self.pgdata) as pgdata:
            text = render_conf(self.socket_dir, self.port, settings, self.binaries.major)
            pgdata.write(CONF_NAME, text, 0o600, owner)
            pgdata.append("postgresql.conf", f"\ninclude '{CONF_NAME}'\n", owner)
        return self.pgdata / CONF_NAME

    def start(self, journal: Journal, runner: Runner, timeout: float) -> int:
        journal.record(
            f"start PostgreSQL on {self.pgdata}",
            Undo(
                "stop_instance",
                {
                    "bindir": str(self.binaries.bindir),
                    "pgdata": str(self.pgdata),
                    "user": self.os_user,
                },
            ),
        )
        try:
            runner.run(
                pg_ctl_start_argv(self.binaries, self.pgdata, self.log_path, timeout),
                timeout=timeout + 30,
                user=self.os_user,
            )
        except CommandError:
            raise InstanceError(
                f"PostgreSQL did not start: {startup_failure(self.log_path)}"
            ) from None
        pid = postmaster_pid(self.pgdata)
        if pid is None:
            raise InstanceError("PostgreSQL started but left no postmaster.pid")
        # postmaster.pid is the server user's file: the pid in it is acted on (the memory
        # cgroup, signals) only when it is this data directory's postmaster, of that user
        if not postmaster_of(pid, self.pgdata, self.os_user):
            raise InstanceError(
                f"postmaster.pid names pid {pid}, which is not this data directory's server"
            )
        self.pid = pid
        if self.cpus is not None:
            for server_pid in [pid, *(p for p, _ in children_of(pid))]:
                pin_process(server_pid, self.cpus)
        wait_until(
            self._accepts, timeout=timeout, interval=0.2, what="PostgreSQL to accept connections"
        )
        return pid

    def _accepts(self) -> bool:
        import psycopg

        try:
            with self.connect():
                return True
        except psycopg.OperationalError:
            return False

    def shared_memory_huge_pages(self, runner: Runner) -> int:
        """How many huge pages this configured (stopped) server needs (PostgreSQL 15+)."""
        if self.binaries.major < 15:
            raise InstanceError(
                "huge_pages sizing needs PostgreSQL 15 or later (shared_memory_size_in_huge_pages)"
            )
        try:
            done = runner.run(
                [
                    self.binaries.tool("postgres"),
                    "-D",
                    str(self.pgdata),
                    "-C",
                    "shared_memory_size_in_huge_pages",
                ],
                timeout=120,
                user=self.os_user,
            )
        except CommandError as exc:
            raise InstanceError(f"postgres -C shared_memory_size_in_huge_pages: {exc}") from None
        try:
            return int(done.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise InstanceError(
                f"postgres -C shared_memory_size_in_huge_pages said {done.stdout.strip()!r}"
            ) from None

    def alive(self) -> bool | None:
        """Is the postmaster we started still there (None: it never started)?"""
        if self.pid is None:
            return None
        return is_our_postmaster(self.pid, self.pgdata)

    def stop(self, runner: Runner, timeout: float = 60, immediate: bool = False) -> None:
        stop_instance(
            runner, str(self.binaries.bindir), self.pgdata, self.os_user, timeout, immediate
        )

    def create_database(self, name: str) -> None:
        with self.connect() as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
            if not exists:
                from psycopg import sql as psql

                conn.execute(psql.SQL("CREATE DATABASE {}").format(psql.Identifier(name)))

    def checkpoint(self) -> None:
        with self.connect() as conn:
            conn.execute("CHECKPOINT")

    def changed_settings(self) -> list[dict[str, object]]:
        from psycopg.rows import dict_row

        with self.connect() as conn, conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(sql("changed_settings")).fetchall())


_REASON_RE = re.compile(r"(FATAL|PANIC|ERROR):|invalid value|could not|unrecognized")
# what a bad configuration file says before its FATAL "contains errors"
_SETTING_RE = re.compile(
    r"outside the valid range|invalid value for parameter|unrecognized "
    r"configuration parameter|cannot be changed|syntax error in file|"
    r"requires a (Boolean|numeric|integer) value"
)


def startup_failure(path: Path) -> str:
    """The server log line that says why the server did not start (not just the last one)."""
    try:
        lines = [ln for ln in read_text_nofollow(path).splitlines() if ln.strip()]
    except OSError:
        return "no server log was written"
    if not lines:
        return "the server log is empty"

    def bare(line: str) -> str:  # drop the "2026-01-01 00:00:00.000 UTC [123] " prefix
        return re.sub(r"^\S+ \S+ \S+ \[\d+\] ", "", line)

    settings = list(dict.fromkeys(bare(ln) for ln in lines if _SETTING_RE.search(ln)))
    if settings:
        return "; ".join(settings[:3])[:400]
    reasons = [ln for ln in lines if _REASON_RE.search(ln)]
    return bare(reasons[0] if reasons else lines[-1])[:300]


def postmaster_pid(pgdata: Path) -> int | None:
    """The pid on postmaster.pid's first line; negative for a standalone backend (initdb's,
    or ``postgres --single``), which writes its pid so."""
    # the server's user writes it: never through a link, never a FIFO (which would hang
    # teardown and cleanup), a few lines at most
    try:
        with open_written_by_others(pgdata / "postmaster.pid") as fh:
            first = fh.read(POSTMASTER_PID_BYTES).decode(errors="replace").splitlines()[0]
        return int(first)
    except (OSError, ValueError, IndexError):
        return None


POSTMASTER_PID_BYTES = 4096  # its lines: pid, data directory, start, port, socket, ...


def postmaster_of(pid: int, pgdata: Path, os_user: str | None) -> bool:
    """Is ``pid`` (read from postmaster.pid, the server user's file) this data directory's
    postmaster, run by ``os_user``? A forged pid (sshd's, say) must never be signalled or
    moved into a memory cgroup."""
    owner = Owner.of(os_user)
    return is_our_postmaster(pid, pgdata) and (owner is None or process_uid(pid) == owner.uid)


def process_uid(pid: int) -> int | None:
    """The real uid of a process (None: it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_our_postmaster(pid: int, pgdata: Path) -> bool:
    """The process is a postgres whose working directory is this data directory.

    Its exe and cwd links need CAP_SYS_PTRACE for another user's process, which root
    has on a host and not in a container (a pod's default capabilities): there, a
    process that is there but whose links cannot be read is judged by what anyone may
    read, its name and its command line (`postgres -D <pgdata>`, as pg_ctl starts it)."""
    try:
        exe = Path(os.readlink(f"/proc/{pid}/exe")).name
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except PermissionError:
        return _postmaster_by_command_line(pid, pgdata)
    except OSError:
        return False
    return exe in ("postgres", "postmaster") and os.path.realpath(pgdata) == cwd


def _postmaster_by_command_line(pid: int, pgdata: Path) -> bool:
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    wanted = {str(pgdata).encode(), os.path.realpath(pgdata).encode()}
    return comm in ("postgres", "postmaster") and any(a in wanted for a in argv)


def children_of(pid: int) -> list[tuple[int, int | None]]:
    """(pid, start time) of a process's children (the postmaster's server processes)."""
    found: list[tuple[int, int | None]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append((int(entry.name), int(fields[19])))
    return found


def stuck(pids: list[int], samples: int = 3, interval: float = 0.3) -> list[int]:
    """Processes that stay in uninterruptible sleep (D) over a few samples: stuck in the
    kernel, most often on a filesystem that accepts no writes (frozen, or a dead device)."""
    found = set(pids)
    for i in range(samples):
        found = {p for p in found if process_state(p) == "D"}
        if not found:
            return []
        if i < samples - 1:
            time.sleep(interval)  # a sampling window, not a wait for a state
    return sorted(found)


def stop_instance(
    runner: Runner,
    bindir: str,
    pgdata: Path,
    user: str | None,
    timeout: float = 60,
    immediate: bool = False,
) -> None:
    """fast (unless ``immediate``), then immediate, then SIGKILL of the verified postmaster
    and of the server processes it leaves; idempotent, bounded by deadlines.

    A server stuck in the kernel (its filesystem accepts no writes) cannot shut down and
    cannot die until the kernel lets it go: it is sent SIGKILL, which it receives then, and
    this fails at once saying so rather than waiting for it."""
    pid = postmaster_pid(pgdata)
    if pid is None:
        return  # never started, or it exited and removed its postmaster.pid
    if pid > 0 and is_our_postmaster(pid, pgdata):
        _stop_postmaster(runner, bindir, pgdata, pid, user, timeout, immediate)
    release_after_death(pgdata)


def release_after_death(pgdata: Path, identity: tuple[int, int, int] | None = None) -> list[str]:
    """After the server of ``pgdata`` died without exiting (a postmaster killed, or
    SIGKILLed by the stop; initdb's standalone server killed with it): end the server
    processes it left, then release the shared memory they held (found by the data
    directory's device, inode and owner, ``identity`` if it may be gone). Nothing
    while the postmaster named in postmaster.pid still runs; what was released, one line
    each."""
    pid = postmaster_pid(pgdata)
    if pid is not None and pid > 0 and is_our_postmaster(pid, pgdata):
        return []
    orphans = [(p, process_start_time(p)) for p in postmaster_orphans(pgdata, pid or 0)]
    for p, start in orphans:
        if process_alive(p, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGKILL)
    blocked = stuck([p for p, start in orphans if process_alive(p, start)])
    if blocked:  # they hold the shared memory until they die: this step stays journaled
        raise InstanceError(
            f"server processes of {pgdata} are stuck in the kernel (pids "
            f"{', '.join(map(str, blocked[:8]))} in state D) and still hold its shared "
            "memory; sent SIGKILL: `pgfsbench cleanup` releases it once they are gone"
        )
    wait_until(
        lambda: not any(process_alive(p, s) for p, s in orphans),
        timeout=30,
        interval=0.1,
        what="the server processes of a dead postmaster to exit",
    )
    return release_shared_memory(pgdata, identity)


def _stop_postmaster(
    runner: Runner,
    bindir: str,
    pgdata: Path,
    pid: int,
    user: str | None,
    timeout: float,
    immediate: bool,
) -> None:
    children = children_of(pid)
    everyone = [pid] + [c for c, _ in children]

    def kill_all() -> None:
        for p, start in [(pid, None), *children]:
            if process_alive(p, start):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(p, signal.SIGKILL)

    def give_up_if_stuck() -> None:
        blocked = stuck(everyone)
        if blocked:
            kill_all()
            raise InstanceError(
                f"PostgreSQL on {pgdata} is stuck in the kernel (pids "
                f"{', '.join(map(str, blocked[:8]))} in state D: its filesystem accepts no "
                "writes); sent SIGKILL, which they receive once it does"
            )

    give_up_if_stuck()
    started = process_start_time(pid)
    for mode in ("immediate",) if immediate else ("fast", "immediate"):
        if _shut_down(runner, bindir, pgdata, (pid, started), user, mode, timeout):
            break
        give_up_if_stuck()
    if is_our_postmaster(pid, pgdata):
        os.kill(pid, signal.SIGKILL)
        try:
            wait_until(lambda: not process_alive(pid, None), timeout=30, what="postmaster to exit")
        except TimeoutExpired:
            give_up_if_stuck()
            raise
    kill_all()


# PostgreSQL's "Shutting Down the Server" (server-shutdown.html): the signal of each mode
SHUTDOWN_SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}


def _shut_down(
    runner: Runner,
    bindir: str,
    pgdata: Path,
    postmaster: tuple[int, int | None],
    user: str | None,
    mode: str,
    timeout: float,
) -> bool:
    """What `pg_ctl stop --mode MODE --wait` does (the mode's signal to the postmaster, then
    wait for it to exit), looking every 10 ms where pg_ctl looks every 100: a stop no
    longer waits up to a tenth of a second after the server has gone. Through pg_ctl when
    the signal cannot be sent (a server of another user). The run's commands.sh shows the
    pg_ctl command that does the same. True once the postmaster has exited (a zombie
    waiting for its parent has)."""
    pid, started = postmaster

    def exited() -> bool:
        return not process_alive(pid, started) or process_state(pid) == "Z"

    argv = pg_ctl_stop_argv(bindir, pgdata, mode, timeout)
    try:
        os.kill(pid, SHUTDOWN_SIGNALS[mode])
    except ProcessLookupError:
        return True
    except PermissionError:
        runner.run(argv, timeout=timeout + 30, user=user, check=False)
        return exited()
    runner.transcript.append(
        f"{command_line(argv, user)}  # pgfsbench sent {SHUTDOWN_SIGNALS[mode].name} to pid "
        f"{pid} itself"
    )
    with contextlib.suppress(TimeoutExpired):
        wait_until(exited, timeout=timeout, interval=0.01, what="the postmaster to exit")
    return exited()


def data_directory(args: dict[str, object], scope: Scope) -> str | None:
    """A data directory of the run: in the work directory, or in the directory the run
    made on a filesystem the user named (fs = "existing")."""
    pgdata = str(args["pgdata"])
    user = args.get("user")
    if user not in (None, SUPERUSER):
        return f"{user} is not the OS user pgfsbench runs PostgreSQL as"
    if inside(pgdata, scope.workdir):
        return None
    parent = str(Path(pgdata).parent)
    if own_directory_name(parent, scope) and Path(pgdata).name == "pgdata":
        return None
    return f"{pgdata} is not a data directory of the run (not in {scope.workdir})"


@undo_action("release_server_memory", bound=data_directory)
def _release_server_memory(runner: Runner, args: dict[str, Any]) -> None:
    identity = args.get("identity")
    release_after_death(
        Path(args["pgdata"]),
        (int(identity[0]), int(identity[1]), int(identity[2])) if identity else None,
    )


@undo_action("stop_instance", bound=data_directory)
def _stop_instance(runner: Runner, args: dict[str, Any]) -> None:
    stop_instance(runner, args["bindir"], Path(args["pgdata"]), args.get("user"))


def socket_dir(journal: Journal, celldir: Path, owner: str | None) -> Path:
    """A private (0700) directory for the server's unix socket; short enough for sun_path."""
    candidate = celldir / "sock"
    if len(str(candidate / ".s.PGSQL.5432.lock")) > 100:
        # made anew (never adopted: a name someone took first fails the mkdir); its undo
        # is bound to this pattern (system/bounds.SHORT_SOCKET_DIR)
        candidate = Path("/tmp") / f"pgfsb-{secrets.token_hex(4)}"
    return make_dir(journal, candidate, owner=owner, mode=0o700)
