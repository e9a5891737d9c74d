"""The host's processes, once a second: who else uses the CPU and the disks, and who is
stuck in the kernel (uninterruptible sleep) and where.

Two questions a stall's diagnosis cannot answer from PostgreSQL alone:

- *Is something outside the benchmark taking the machine?* Every process that is not the
  benchmark's own (pgfsbench and what it started, the postmaster and its children, the
  storage's own daemon) is counted: its CPU ticks and the bytes it read and wrote
  (/proc/PID/io), so a CPU hog or a writer on the same disk is named with its command.
- *Is a process stuck in the kernel, and on which filesystem?* A process in state D (a
  frozen filesystem, a device that does not complete I/O, direct reclaim) is recorded with
  its wait channel (the kernel function it sleeps in) and the file its system call is on
  (the syscall's file descriptor, else its working directory), mapped to the volume under
  test that holds it. A heavyweight-lock wait never looks like that: it sleeps
  interruptibly on a latch.

The sampler keeps each process's /proc/PID/stat open and reads it again from its start
(a few microseconds a process); /proc/PID/io is read only for processes outside the
benchmark. Each tick turns into one compact ``ProcessSecond``, so memory does not grow with
the number of processes, only with the run's length. Parsers are pure.
"""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.collect.procfs import parse_stat

PF_KTHREAD = 0x00200000  # a kernel thread (flags, field 9 of /proc/PID/stat)
TOP = 3  # outside processes kept per second, by CPU and by I/O
MIN_TOP_CPU_PCT = 2.0  # below this share of a CPU, a process is not worth naming
MIN_TOP_IO_MBPS = 1.0
# CPU the table did not see (processes born and gone between two ticks, the last moments of
# one that ended) counts as outside work above this share of a CPU: the host's tick-sampled
# totals and the processes' own differ by up to some 10% of a CPU a second on a quiet host
# (measured here: 22-40 ticks of the host against 26-41 of the processes, second by second)
UNSEEN_FLOOR_PCT = 15.0
MIN_UNSEEN_INTERVAL_S = 0.5  # and only over an interval at least this long

# system calls whose first argument is the file descriptor they act on (x86_64, aarch64)
_FD_SYSCALLS = {
    "x86_64": {
        0: "read",
        1: "write",
        17: "pread64",
        18: "pwrite64",
        19: "readv",
        20: "writev",
        74: "fsync",
        75: "fdatasync",
        77: "ftruncate",
        277: "sync_file_range",
        285: "fallocate",
        295: "preadv",
        296: "pwritev",
        326: "copy_file_range",
        327: "preadv2",
        328: "pwritev2",
        221: "fadvise64",
    },
    "aarch64": {
        63: "read",
        64: "write",
        67: "pread64",
        68: "pwrite64",
        65: "readv",
        66: "writev",
        82: "fsync",
        83: "fdatasync",
        46: "ftruncate",
        84: "sync_file_range",
        47: "fallocate",
        69: "preadv",
        70: "pwritev",
        285: "copy_file_range",
        286: "preadv2",
        287: "pwritev2",
        223: "fadvise64",
    },
}


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/PID/stat a sampler needs."""

    pid: int
    comm: str
    state: str
    ppid: int
    flags: int
    cpu_ticks: int  # utime + stime
    starttime: int  # clock ticks after boot: tells a reused pid from the old process

    @property
    def kernel_thread(self) -> bool:
        return bool(self.flags & PF_KTHREAD)


def parse_proc_stat(text: bytes) -> ProcStat:
    """/proc/PID/stat (the command name, in parentheses, may hold spaces and parentheses)."""
    open_at, close_at = text.index(b"("), text.rindex(b")")
    f = text[close_at + 2 :].split()
    return ProcStat(
        pid=int(text[:open_at]),
        comm=text[open_at + 1 : close_at].decode(errors="replace"),
        state=f[0].decode(),
        ppid=int(f[1]),
        flags=int(f[6]),
        cpu_ticks=int(f[11]) + int(f[12]),
        starttime=int(f[19]),
    )


def parse_proc_io(text: bytes) -> tuple[int, int]:
    """(read_bytes, write_bytes) of /proc/PID/io: what the process made the storage layer
    read and write (page cache writes count when they are dirtied)."""
    read = write = 0
    for line in text.splitlines():
        name, _, value = line.partition(b":")
        if name == b"read_bytes":
            read = int(value)
        elif name == b"write_bytes":
            write = int(value)
    return read, write


def parse_syscall(text: str, machine: str | None = None) -> tuple[str, int | None]:
    """/proc/PID/syscall: (the call's name, its file descriptor) for calls that act on
    one; ("running", None) or (the number, None) otherwise."""
    parts = text.split()
    if not parts or not parts[0].lstrip("-").isdigit():
        return (parts[0] if parts else "?"), None
    nr = int(parts[0])
    table = _FD_SYSCALLS.get(machine or platform.machine(), {})
    name = table.get(nr)
    if name is None or len(parts) < 2:
        return f"syscall {nr}", None
    try:
        return name, int(parts[1], 16)
    except ValueError:
        return name, None


def where_is(path: str | None, mounts: Mapping[str, str]) -> str:
    """The volume under test that holds ``path`` (its role), by longest mountpoint; else
    "elsewhere" (or "unknown" without a path)."""
    if not path:
        return "unknown"
    best, role = "", "elsewhere"
    for mountpoint, r in mounts.items():
        mp = mountpoint.rstrip("/")
        if (path == mp or path.startswith(mp + "/")) and len(mp) > len(best):
            best, role = mp, r
    return role


@dataclass(frozen=True)
class Blocked:
    """A process found in uninterruptible sleep (or stopped: its wait channel "stopped")."""

    pid: int
    comm: str
    own: bool  # part of the benchmark
    wchan: str  # the kernel function it sleeps in
    syscall: str
    where: str  # the volume under test its file is on (data, wal, ...), or "elsewhere"

    def key(self) -> str:
        return f"{'benchmark' if self.own else 'outside'}|{self.wchan}|{self.where}|{self.comm}"


@dataclass(frozen=True)
class TopProcess:
    pid: int
    comm: str
    cmdline: str
    cpu_pct: float  # % of one CPU over the second
    read_mbps: float
    write_mbps: float

    def as_list(self) -> list[object]:
        return [self.pid, self.comm, self.cmdline, self.cpu_pct, self.read_mbps, self.write_mbps]


@dataclass(frozen=True)
class ProcessSecond:
    """One tick of the process table, relative to the tick before."""

    t: float
    own_cpu_pct: float  # the benchmark's processes, % of one CPU
    outside_cpu_pct: float  # every other user-space process
    outside_read_mbps: float
    outside_write_mbps: float
    top: tuple[TopProcess, ...]
    blocked: tuple[Blocked, ...]
    # the benchmark's own processes that used the most CPU (a backend of a session from
    # outside the workload, autovacuum, the checkpointer...)
    own_top: tuple[TopProcess, ...] = ()
    # CPU of outside processes the table did not see (born and gone between two ticks): the
    # host's total minus every process seen and the benchmark's cgroup; None without the
    # cgroup (the benchmark's own short-lived processes would be counted as outside)
    unseen_cpu_pct: float | None = None


@dataclass
class _Known:
    starttime: int
    cpu_ticks: int
    ppid: int = 0
    comm: str = ""
    io: tuple[int, int] | None = None
    stat_fd: int = -1
    io_fd: int = -1
    cmdline: str | None = None


def descendants(parents: Mapping[int, int], roots: Iterable[int]) -> set[int]:
    """The roots and every process below them (pid -> ppid)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out: set[int] = set()
    todo = [r for r in roots if r in parents]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo += children.get(pid, [])
    return out


@dataclass
class ProcessSampler:
    """The process table once a second (driven by a Ticker)."""

    roots: tuple[int, ...]  # the benchmark's own: pgfsbench, the postmaster...
    mounts: dict[str, str]  # mountpoint -> role of the volumes under test
    own_comms: tuple[str, ...] = ()  # daemons serving the storage (zfs-fuse)
    # the CPU seconds of the benchmark's own cgroup (kernel.CpuGroup), if it has one
    own_group: Callable[[], float | None] | None = None
    proc: Path = Path("/proc")
    seconds: list[ProcessSecond] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _known: dict[int, _Known] = field(default_factory=dict)
    _last_t: float | None = None
    _last_host: int | None = None  # the host's busy ticks at the last tick
    _last_group: float | None = None
    _ticks_per_s: int = field(default_factory=lambda: os.sysconf("SC_CLK_TCK"))
    _machine: str = field(default_factory=platform.machine)

    def tick(self, now: float) -> None:
        stats = self._read_stats()
        parents = {s.pid: s.ppid for s in stats}
        # a child reaped since the last tick: the kernel adds its whole I/O to its parent's
        # (as it does its CPU to cutime), which counted once already while it ran
        # (and its own reaped children's, so a tree that ended between two ticks is
        # credited to its nearest ancestor still alive)
        # What the last readings do not cover (the I/O of a child's last second) still
        # lands on the ancestor: that tick's I/O is put down to the child that ended.
        reaped: dict[int, tuple[int, int]] = {}
        ended: dict[int, tuple[int, _Known]] = {}  # ancestor -> the busiest child that ended
        for pid, k in self._known.items():
            if pid in parents or k.io is None:
                continue
            ancestor, hops = k.ppid, 0
            while ancestor not in parents and ancestor in self._known and hops < 64:
                ancestor, hops = self._known[ancestor].ppid, hops + 1
            r, w = reaped.get(ancestor, (0, 0))
            reaped[ancestor] = (r + k.io[0], w + k.io[1])
            if ancestor not in ended or sum(k.io) > sum(ended[ancestor][1].io or (0, 0)):
                ended[ancestor] = (pid, k)
        own = descendants(parents, self.roots)
        own |= {s.pid for s in stats if s.comm in self.own_comms}
        own = descendants(parents, own)
        dt = None if self._last_t is None else max(1e-3, now - self._last_t)
        host, group = self._host_ticks(), self.own_group() if self.own_group else None
        own_ticks = out_ticks = kernel_ticks = 0
        out_read = out_write = 0
        usage: list[tuple[int, str, int, int, int]] = []  # pid, comm, ticks, read, write
        own_usage: list[tuple[int, str, int, int, int]] = []
        blocked: list[Blocked] = []
        for s in stats:
            k = self._known[s.pid]
            d_ticks = max(0, s.cpu_ticks - k.cpu_ticks)
            k.cpu_ticks = s.cpu_ticks
            if s.state in ("D", "T", "t"):
                blocked.append(self._blocked(s, s.pid in own))
            if s.kernel_thread:
                kernel_ticks += d_ticks
                continue
            if s.pid in own:
                own_ticks += d_ticks
                if d_ticks:
                    own_usage.append((s.pid, s.comm, d_ticks, 0, 0))
                continue
            io = self._read_io(s.pid, k)
            d_read = d_write = 0
            if io is not None:
                if k.io is not None:
                    folded = reaped.get(s.pid, (0, 0))
                    d_read = max(0, io[0] - k.io[0] - folded[0])
                    d_write = max(0, io[1] - k.io[1] - folded[1])
                k.io = io
            out_ticks += d_ticks
            out_read += d_read
            out_write += d_write
            if s.pid in ended and (d_read or d_write):
                child_pid, child = ended[s.pid]
                usage.append((child_pid, child.comm, 0, d_read, d_write))
                d_read = d_write = 0
            if d_ticks or d_read or d_write:
                usage.append((s.pid, s.comm, d_ticks, d_read, d_write))
        unseen = self._unseen(host, group, own_ticks + out_ticks + kernel_ticks, own_ticks)
        if dt is not None:  # the first tick only sets the counters
            # the host's times are counted in whole ticks: over a short interval (the
            # ticker's first beat right after the start) a few ticks would read as CPUs
            unseen_pct = (
                None
                if unseen is None or dt < MIN_UNSEEN_INTERVAL_S
                else 100 * unseen / self._ticks_per_s / dt
            )
            extra = unseen_pct if unseen_pct is not None and unseen_pct > UNSEEN_FLOOR_PCT else 0
            self.seconds.append(
                ProcessSecond(
                    t=now,
                    own_cpu_pct=round(100 * own_ticks / self._ticks_per_s / dt, 1),
                    outside_cpu_pct=round(100 * out_ticks / self._ticks_per_s / dt + extra, 1),
                    unseen_cpu_pct=None if unseen_pct is None else round(unseen_pct, 1),
                    outside_read_mbps=round(out_read / 1e6 / dt, 3),
                    outside_write_mbps=round(out_write / 1e6 / dt, 3),
                    top=self._top(usage, dt),
                    blocked=tuple(blocked),
                    own_top=self._top(own_usage, dt),
                )
            )
        self._forget({s.pid for s in stats})
        self._last_t = now

    def _host_ticks(self) -> int | None:
        """The host's user, nice and system ticks so far (what processes are charged)."""
        try:
            t = parse_stat((self.proc / "stat").read_text())
        except (OSError, ValueError, IndexError):
            return None
        return t.user + t.nice + t.system

    def _unseen(
        self, host: int | None, group: float | None, seen: int, own_seen: int
    ) -> float | None:
        """Ticks of outside processes the table did not see since the last tick: the
        host's minus every process's seen and the benchmark's unseen (its cgroup's minus
        what the table saw of it). None at the first tick or without the cgroup."""
        last_host, last_group = self._last_host, self._last_group
        self._last_host, self._last_group = host, group
        if None in (host, group, last_host, last_group):
            return None
        assert host is not None and group is not None
        assert last_host is not None and last_group is not None
        own_unseen = max(0.0, (group - last_group) * self._ticks_per_s - own_seen)
        return max(0.0, host - last_host - seen - own_unseen)

    def _read_stats(self) -> list[ProcStat]:
        out = []
        for name in os.listdir(self.proc):  # noqa: PTH208 (names only, no Path objects)
            if not name.isdigit():
                continue
            pid = int(name)
            k = self._known.get(pid)
            try:
                if k is None:
                    fd = os.open(self.proc / name / "stat", os.O_RDONLY)
                    try:
                        s = parse_proc_stat(os.pread(fd, 4096, 0))
                    except (OSError, ValueError, IndexError):
                        os.close(fd)
                        raise
                    # a process born since the last tick counts from 0; at the first
                    # tick, what every process used before is not this run's
                    born = self._last_t is not None
                    self._known[pid] = _Known(
                        s.starttime,
                        0 if born else s.cpu_ticks,
                        s.ppid,
                        s.comm,
                        io=(0, 0) if born else None,
                        stat_fd=fd,
                    )
                else:
                    s = parse_proc_stat(os.pread(k.stat_fd, 4096, 0))
                    if s.starttime != k.starttime:  # the pid was reused: a new process
                        self._close(k)
                        del self._known[pid]
                        continue  # counted from the next tick
            except (OSError, ValueError, IndexError):
                continue  # gone between the listing and the read
            out.append(s)
        return out

    def _read_io(self, pid: int, k: _Known) -> tuple[int, int] | None:
        try:
            if k.io_fd < 0:
                k.io_fd = os.open(self.proc / str(pid) / "io", os.O_RDONLY)
            return parse_proc_io(os.pread(k.io_fd, 4096, 0))
        except OSError:
            return None

    def _blocked(self, s: ProcStat, own: bool) -> Blocked:
        base = self.proc / str(s.pid)
        wchan = syscall = "?"
        path: str | None = None
        with contextlib.suppress(OSError):
            wchan = (base / "wchan").read_text().strip() or "?"
        if s.state in ("T", "t"):  # stopped by a signal (SIGSTOP) or a debugger
            wchan = "stopped"
        elif wchan == "0":  # running again by the time it was read
            wchan = "?"
        with contextlib.suppress(OSError):
            syscall, fd = parse_syscall((base / "syscall").read_text(), self._machine)
            if fd is not None:
                path = os.readlink(base / "fd" / str(fd))
        if path is None or not path.startswith("/"):
            with contextlib.suppress(OSError):
                path = os.readlink(base / "cwd")
        return Blocked(s.pid, s.comm, own, wchan, syscall, where_is(path, self.mounts))

    def _top(
        self, usage: list[tuple[int, str, int, int, int]], dt: float
    ) -> tuple[TopProcess, ...]:
        by_cpu = sorted(usage, key=lambda u: -u[2])[:TOP]
        by_io = sorted(usage, key=lambda u: -(u[3] + u[4]))[:TOP]
        chosen: dict[int, TopProcess] = {}
        for pid, comm, ticks, read, write in [*by_cpu, *by_io]:
            cpu = 100 * ticks / self._ticks_per_s / dt
            rmb, wmb = read / 1e6 / dt, write / 1e6 / dt
            if pid in chosen or (cpu < MIN_TOP_CPU_PCT and rmb + wmb < MIN_TOP_IO_MBPS):
                continue
            chosen[pid] = TopProcess(
                pid, comm, self._cmdline(pid), round(cpu, 1), round(rmb, 3), round(wmb, 3)
            )
        return tuple(chosen.values())

    def _cmdline(self, pid: int) -> str:
        k = self._known.get(pid)
        if k is not None and k.cmdline is not None:
            return k.cmdline
        try:
            raw = (self.proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            raw = b""
        text = raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160]
        if k is not None:
            k.cmdline = text
        return text

    def _forget(self, alive: set[int]) -> None:
        for pid in [p for p in self._known if p not in alive]:
            self._close(self._known.pop(pid))

    @staticmethod
    def _close(k: _Known) -> None:
        for fd in (k.stat_fd, k.io_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        k.stat_fd = k.io_fd = -1

    def close(self) -> list[ProcessSecond]:
        for k in self._known.values():
            self._close(k)
        self._known.clear()
        return self.seconds


def process_series(
    seconds: list[ProcessSecond], start: float
) -> dict[str, tuple[float, list[object]]]:
    """Per-second series aligned on the measured phase's start: the benchmark's and the
    outside processes' CPU, the outside processes' I/O, the top outside processes and the
    processes in uninterruptible sleep (counted by who, wait channel and volume)."""
    if not seconds:
        return {}
    offsets = [round(s.t - start) for s in seconds]
    first, last = min(offsets), max(offsets)
    n = last - first + 1

    def dense(values: Sequence[object]) -> tuple[float, list[object]]:
        out: list[object] = [None] * n
        for off, v in zip(offsets, values, strict=True):
            out[off - first] = v
        return float(first), out

    blocked: list[dict[str, int]] = []
    for s in seconds:
        counts: dict[str, int] = {}
        for b in s.blocked:
            counts[b.key()] = counts.get(b.key(), 0) + 1
        blocked.append(counts)
    return {
        "own_cpu_pct": dense([s.own_cpu_pct for s in seconds]),
        "outside_cpu_pct": dense([s.outside_cpu_pct for s in seconds]),
        "unseen_cpu_pct": dense([s.unseen_cpu_pct for s in seconds]),
        "outside_read_mbps": dense([s.outside_read_mbps for s in seconds]),
        "outside_write_mbps": dense([s.outside_write_mbps for s in seconds]),
        "outside_top": dense([[p.as_list() for p in s.top] for s in seconds]),
        "own_top": dense([[p.as_list() for p in s.own_top] for s in seconds]),
        "blocked": dense(blocked),
    }
