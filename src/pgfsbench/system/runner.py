"""The one command runner: argv lists only, captured output, a timeout on every call.

Every child is started in its own session (process group), so that a Ctrl-C in the
terminal reaches pgfsbench only, and pgfsbench decides what to stop and in which order.
Long children (pgbench, sysbench, postgres helpers) are `Child` objects whose whole
process tree is ended by pid when cancelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pgfsbench.system.errors import CommandError, PgfsbenchError, Stalled
from pgfsbench.system.held import make_dirs, open_log_file, open_new_file, write_file
from pgfsbench.system.signals import signals_held
from pgfsbench.system.trust import read_trusted, trusted_uids

# Parsers of tool output expect the C locale's English messages.
BASE_ENV = {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "LANGUAGE": ""}


@dataclass(frozen=True)
class Completed:
    """A finished command: what ran, how it ended and what it printed."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


# Secrets of pgfsbench's own connections (the results store's password, libpq's password
# and service files, an SSL key's passphrase) reach no child: the server runs as the
# `postgres` OS user, whom any database superuser can act as, and reads its environment
# in /proc. The store connects in this process and keeps them; children are given their
# connections on their command lines.
SECRET_ENV = frozenset(
    {"PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE", "PGSSLPASSWORD", "PGSSLKEY", "PGFSBENCH_RESULTS"}
)
_SECRET_WORDS = ("PASSWORD", "PASSWD", "SECRET", "TOKEN", "CREDENTIAL", "PRIVATE_KEY", "API_KEY")


def is_secret_env(name: str) -> bool:
    """Is an environment variable one that no child may inherit?"""
    upper = name.upper()
    return upper in SECRET_ENV or any(word in upper for word in _SECRET_WORDS)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: ours without secrets, in the C locale."""
    env = {k: v for k, v in os.environ.items() if not is_secret_env(k)}
    env.update(BASE_ENV)
    if extra:
        env.update(extra)
    return env


def command_line(argv: Sequence[str], user: str | int | None = None) -> str:
    """A command as a transcript (a run's commands.sh) shows it, run as ``user``."""
    line = shlex.join(argv)
    if isinstance(user, int):
        return f"setpriv --reuid={user} --regid={user} --clear-groups -- {line}"
    return f"runuser -u {user} -- {line}" if user else line


def identity(user: str | int | None) -> tuple[int | None, int | None, list[int] | None]:
    """Popen's arguments that make a child ``user`` whole: its uid, its primary group and
    its own supplementary groups (Popen's ``user=`` alone keeps root's group and groups).
    An int is a uid with no account (an unprivileged uid of pgfsbench's own): its gid is
    the same number, and it has no other group."""
    if user is None:
        return None, None, None
    if isinstance(user, int):
        return user, user, []
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid, os.getgrouplist(user, entry.pw_gid)


@dataclass
class Runner:
    """Runs external commands; keeps a transcript of what it ran (for the run's artifacts)."""

    transcript: list[str] = field(default_factory=list)
    on_command: Callable[[str], None] | None = None
    # Where every live child is listed (pid, start time, argv) while it runs, so that
    # `pgfsbench cleanup` can end what a SIGKILLed pgfsbench left running (an initdb or a
    # load writing into a mount that must be unmounted): see `ChildRegistry`.
    registry: ChildRegistry | None = None

    def _note(self, argv: Sequence[str], user: str | int | None) -> None:
        line = command_line(argv, user)
        self.transcript.append(line)
        if self.on_command:
            self.on_command(line)

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        check: bool = True,
        user: str | int | None = None,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        """Run a command to completion; raise CommandError on failure when ``check``."""
        self._note(argv, user)
        uid, gid, groups = identity(user)
        started = time.monotonic()
        proc: subprocess.Popen[str] | None = None
        entry: Path | None = None
        try:
            # a SIGINT or SIGTERM between the fork and the registry would leave the child
            # running, known to nobody: it waits, and then ends the child with the rest
            with signals_held():
                try:
                    proc = subprocess.Popen(
                        list(argv),
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                        text=True,
                        errors="replace",
                        user=uid,
                        group=gid,
                        extra_groups=groups,
                        cwd=str(cwd) if cwd is not None else ("/" if user is not None else None),
                        env=child_env(env),
                        start_new_session=True,
                    )
                except FileNotFoundError as exc:
                    raise CommandError(argv, 127, f"{argv[0]}: command not found") from exc
                except PermissionError as exc:
                    raise CommandError(argv, 126, f"{argv[0]}: {exc.strerror}") from exc
                entry = self.registry.add(proc.pid, argv) if self.registry else None
            stdout, stderr = proc.communicate(input=input_text, timeout=timeout)
        except subprocess.TimeoutExpired:
            assert proc is not None
            out, err = end_unresponsive(proc)
            raise CommandError(argv, None, err, out) from None
        except BaseException:
            if proc is not None:
                end_unresponsive(proc)
            raise
        finally:
            if entry is not None:
                entry.unlink(missing_ok=True)
        done = Completed(tuple(argv), proc.returncode, stdout, stderr, time.monotonic() - started)
        if check and proc.returncode != 0:
            raise CommandError(argv, proc.returncode, stderr, stdout)
        return done

    def start_daemon(self, argv: Sequence[str], *, log_path: Path) -> int:
        """Start a long-lived service in its own session, its output to ``log_path``; its
        pid. It is not listed among the children `cleanup` ends first: the caller journals
        how to stop it, in its place in the order of undoing (a disk under a mounted
        filesystem must outlive the unmount)."""
        self._note(argv, None)
        with os.fdopen(open_log_file(log_path, 0o644), "ab") as log:
            try:
                proc = subprocess.Popen(
                    list(argv),
                    stdout=log,
                    stderr=log,
                    stdin=subprocess.DEVNULL,
                    env=child_env(None),
                    start_new_session=True,
                )
            except FileNotFoundError as exc:
                raise CommandError(argv, 127, f"{argv[0]}: command not found") from exc
        return proc.pid

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout_path: Path,
        user: str | int | None = None,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        merge_stderr: bool = False,
        stdin_fd: int | None = None,
        stdout_mode: int = 0o644,
    ) -> Child:
        """Start a long child in its own process group; stdout to a file (made anew, root's,
        ``stdout_mode``), stderr streamed line by line (with ``merge_stderr``, both
        streamed, and the file left empty)."""
        self._note(argv, user)
        uid, gid, groups = identity(user)
        # through its held directory: it may be the server user's (pgbouncer's)
        out = os.fdopen(open_new_file(stdout_path, stdout_mode), "w")
        proc: subprocess.Popen[str] | None = None
        entry: Path | None = None
        try:
            with signals_held():  # as in `run`: a child is known before a signal acts
                proc = subprocess.Popen(
                    list(argv),
                    stdout=subprocess.PIPE if merge_stderr else out,
                    stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                    # a file root opened, read by the child as given (never by its path)
                    stdin=subprocess.DEVNULL if stdin_fd is None else stdin_fd,
                    text=True,
                    errors="replace",
                    bufsize=1,
                    user=uid,
                    group=gid,
                    extra_groups=groups,
                    cwd=str(cwd) if cwd is not None else ("/" if user is not None else None),
                    env=child_env(env),
                    start_new_session=True,
                )
                entry = self.registry.add(proc.pid, argv) if self.registry else None
        except FileNotFoundError as exc:
            out.close()
            raise CommandError(argv, 127, f"{argv[0]}: command not found") from exc
        except BaseException:
            if proc is not None:
                end_unresponsive(proc)
            if entry is not None:
                entry.unlink(missing_ok=True)
            out.close()
            raise
        return Child(tuple(argv), proc, out, entry)


ABANDONED: list[int] = []  # children that would not die (stuck in the kernel, state D)


def end_unresponsive(proc: subprocess.Popen[str], grace: float = 5.0) -> tuple[str, str]:
    """Kill a child's whole group and collect what it printed, without ever blocking for
    good: a process stuck in uninterruptible sleep (a write to a frozen filesystem) cannot
    die until the kernel lets it go, so after ``grace`` seconds it is left behind (its pid
    is remembered) rather than waited for."""
    signal_process_group(proc.pid, None, signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=grace)
        return out or "", err or ""
    except subprocess.TimeoutExpired:
        ABANDONED.append(proc.pid)
        return "", f"(pid {proc.pid} did not exit after SIGKILL: stuck in the kernel)"


class Child:
    """A long-running child in its own process group, ended as a whole tree."""

    def __init__(
        self,
        argv: tuple[str, ...],
        proc: subprocess.Popen[str],
        out: IO[str],
        entry: Path | None = None,
    ):
        self.argv = argv
        self.proc = proc
        self._out = out
        self._entry = entry
        self.pid = proc.pid
        self.start_time = process_start_time(proc.pid)
        # Popen.wait(timeout) polls waitpid with sleeps up to 50 ms: ~30 wake-ups a second
        # while pgbench runs, each costing tens of microseconds of CPU on a VM, taken from
        # the benchmark. A pidfd becomes readable when the child exits: one wake-up per
        # ``interval`` instead.
        self._pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self._pidfd = os.pidfd_open(proc.pid)
        self._stderr_lines: list[str] = []
        self._listeners: list[Callable[[str], None]] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def on_stderr_line(self, listener: Callable[[str], None]) -> None:
        self._listeners.append(listener)

    def _read_stderr(self) -> None:
        stream = self.proc.stderr if self.proc.stderr is not None else self.proc.stdout
        assert stream is not None
        for line in stream:
            self._stderr_lines.append(line)
            for listener in self._listeners:
                listener(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "".join(self._stderr_lines)

    def poll(self) -> int | None:
        return self.proc.poll()

    def _exit_code_within(self, seconds: float) -> int | None:
        """The child's exit code if it ends within ``seconds``, else None."""
        if self._pidfd is None:
            try:
                return self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                return None
        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return self.proc.wait() if poller.poll(max(0.0, seconds) * 1000) else None

    def wait(self, timeout: float) -> int:
        """Wait for the child; on deadline end its whole tree and raise CommandError."""
        code = self._exit_code_within(timeout)
        if code is None:
            self.kill_tree()
            self._finish()
            raise CommandError(self.argv, None, self.stderr) from None
        self._finish()
        return code

    def wait_watching(
        self, timeout: float, check: Callable[[], str | None], interval: float = 0.5
    ) -> int:
        """Wait like ``wait``, calling ``check`` every ``interval`` seconds; when it returns
        a reason, end the whole tree and raise Stalled with that reason."""
        deadline = time.monotonic() + timeout
        while True:
            code = self._exit_code_within(min(interval, max(0.0, deadline - time.monotonic())))
            if code is None:
                reason = check()
                if reason is not None:
                    self.kill_tree()
                    raise Stalled(reason) from None
                if time.monotonic() >= deadline:
                    self.kill_tree()
                    raise CommandError(self.argv, None, self.stderr) from None
                continue
            self._finish()
            return code

    def _finish(self) -> None:
        self._reader.join(timeout=5)
        self._out.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._entry is not None and self.proc.poll() is not None:
            self._entry.unlink(missing_ok=True)

    def kill_tree(self, grace: float = 3.0) -> None:
        """SIGTERM the child's process group, then SIGKILL what is left after ``grace``."""
        signal_process_group(self.pid, self.start_time, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            signal_process_group(self.pid, self.start_time, signal.SIGKILL)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                ABANDONED.append(self.pid)  # stuck in the kernel; never block on it
        # Grandchildren may outlive the leader; the group id is still the leader's pid.
        signal_process_group(self.pid, None, signal.SIGKILL)
        self._finish()


class ChildRegistry:
    """Files ``<dir>/<owner pid>-<owner start>/<child pid>`` naming the children a
    pgfsbench process has running now. A killed pgfsbench cannot end its children (each
    runs in its own session, so they outlive it); `pgfsbench cleanup` ends the groups listed
    under owners that are gone, by pid and start time (never a reused pid)."""

    def __init__(self, directory: Path):
        self.root = directory
        me = os.getpid()
        self.directory = directory / f"{me}-{process_start_time(me)}"

    def add(self, pid: int, argv: Sequence[str]) -> Path | None:
        entry = self.directory / str(pid)
        try:
            make_dirs(self.directory, 0o700)
            record = {"start_time": process_start_time(pid), "argv": shlex.join(argv)[:300]}
            write_file(entry, json.dumps(record))
        except (OSError, PgfsbenchError):
            return None  # a full or read-only disk must not stop the run; cleanup has less
        return entry

    def close(self) -> None:
        """Forget this process's list once nothing is left in it (children still listed,
        e.g. stuck in the kernel, stay listed for cleanup)."""
        with contextlib.suppress(OSError):
            self.directory.rmdir()
        with contextlib.suppress(OSError):
            self.root.rmdir()


def end_orphans(directory: Path) -> list[str]:
    """End the children listed by pgfsbench processes that are gone (see `ChildRegistry`);
    return what was ended. Lists of live owners (a run in progress) are left alone."""
    ended: list[str] = []
    if directory.is_symlink() or not directory.is_dir():
        return ended
    for owner in sorted(directory.iterdir()):
        pid_s, _, start_s = owner.name.partition("-")
        if not (pid_s.isdigit() and start_s.isdigit()):
            continue
        st = owner.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in trusted_uids():
            continue  # not a list pgfsbench made: nothing in it is believed
        if process_alive(int(pid_s), int(start_s)):
            continue
        for entry in sorted(owner.iterdir()):
            try:
                info = json.loads(read_trusted(entry))
            except (OSError, ValueError, PgfsbenchError):
                info = {}
            start = info.get("start_time") if isinstance(info, dict) else None
            # a child starts after the pgfsbench that lists it (never an older process)
            if entry.name.isdigit() and isinstance(start, int) and start >= int(start_s):
                pid = int(entry.name)
                if process_alive(pid, start):
                    end_group(pid, start)
                    ended.append(f"pid {pid}: {info.get('argv', '?')}")
            entry.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            owner.rmdir()
    return ended


def end_group(pid: int, start_time: int | None, grace: float = 5.0) -> None:
    """SIGTERM a group we started, SIGKILL it after ``grace`` seconds if its leader lives."""
    signal_process_group(pid, start_time, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and process_alive(pid, start_time):
        time.sleep(0.1)
    if process_alive(pid, start_time):
        signal_process_group(pid, start_time, signal.SIGKILL)


def process_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (identifies it across pid reuse)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields follow the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def process_state(pid: int) -> str | None:
    """R, S, D (uninterruptible: stuck in the kernel), Z... or None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[0]


def reap(pid: int) -> None:
    """Collect the exit status of a child of ours that ended (else it stays a zombie,
    which `process_alive` still sees)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def process_alive(pid: int, start_time: int | None) -> bool:
    current = process_start_time(pid)
    if current is None:
        return False
    return start_time is None or current == start_time


def signal_process_group(pgid: int, leader_start_time: int | None, sig: signal.Signals) -> None:
    """Signal a process group we created; if the leader is still there it must be ours."""
    if leader_start_time is not None and process_start_time(pgid) not in (None, leader_start_time):
        return  # the pid was reused by someone else's process: never signal it
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def query(
    argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None
) -> Completed | None:
    """A read-only question to a tool (its version, its build, its settings), through a
    runner of its own: nothing is journaled or kept in a run's transcript. None when the
    tool is absent, cannot be run, or does not answer within ``timeout``."""
    try:
        return Runner().run(argv, timeout=timeout, check=False, env=env)
    except CommandError:
        return None
