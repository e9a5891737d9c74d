"""Parsers of /proc files (pure), and rates between two snapshots."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CpuTimes:
    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return (
            self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
        )


def parse_stat(text: str) -> CpuTimes:
    """The aggregate 'cpu' line of /proc/stat (jiffies)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            v = [int(x) for x in line.split()[1:9]]
            return CpuTimes(*v)
    raise ValueError("no aggregate cpu line in /proc/stat")


def parse_process_cpu(text: str, ticks_per_s: int) -> float:
    """User + system CPU seconds of a process from its /proc/<pid>/stat line (the command
    name, in parentheses, may itself hold spaces and parentheses)."""
    fields = _stat_fields(text)
    # after the name: state is field 3 of the line, utime 14 and stime 15
    return (int(fields[11]) + int(fields[12])) / ticks_per_s


def parse_threads(text: str) -> int:
    """The number of threads (field 20) of a /proc/<pid>/stat line."""
    return int(_stat_fields(text)[17])


def parse_schedstat(text: str) -> float:
    """Seconds a task has run on a CPU, from /proc/<pid>/schedstat: its first field, in
    nanoseconds (exact, where /proc/<pid>/stat counts 10 ms clock ticks)."""
    return int(text.split()[0]) / 1e9


def _stat_fields(text: str) -> list[str]:
    return text[text.rindex(")") + 2 :].split()


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds a process has used so far; None when it is gone. A single-threaded
    process (a PostgreSQL backend) is read to the nanosecond from its schedstat: in clock
    ticks, a backend using 4 ms in a 2 s run reads as 0 or 10 ms. Otherwise (threads, or a
    kernel without schedstats) the ticks of all its threads."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    if parse_threads(text) == 1:
        try:
            return parse_schedstat(Path(f"/proc/{pid}/schedstat").read_text())
        except (OSError, ValueError, IndexError):
            pass
    return parse_process_cpu(text, os.sysconf("SC_CLK_TCK"))


def cpu_percentages(a: CpuTimes, b: CpuTimes) -> dict[str, float]:
    total = b.total - a.total
    if total <= 0:
        return {"user": 0.0, "system": 0.0, "iowait": 0.0, "idle": 0.0, "steal": 0.0}

    def pct(x: int, y: int) -> float:
        return round(100.0 * (y - x) / total, 2)

    return {
        "user": pct(a.user + a.nice, b.user + b.nice),
        "system": pct(a.system + a.irq + a.softirq, b.system + b.irq + b.softirq),
        "iowait": pct(a.iowait, b.iowait),
        "idle": pct(a.idle, b.idle),
        "steal": pct(a.steal, b.steal),  # taken by the hypervisor for other guests
    }


@dataclass(frozen=True)
class DiskCounters:
    reads: int
    sectors_read: int
    read_ms: int
    writes: int
    sectors_written: int
    write_ms: int
    io_ms: int  # time spent doing I/O (utilisation)
    flushes: int = 0
    flush_ms: int = 0
    in_flight: int = 0  # requests issued and not completed, now
    sectors_discarded: int = 0  # kernel >= 4.18


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """/proc/diskstats by device name (kernel >= 4.18 has discard and flush columns)."""
    result = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        flushes = int(f[18]) if len(f) >= 20 else 0
        flush_ms = int(f[19]) if len(f) >= 20 else 0
        result[f[2]] = DiskCounters(
            int(f[3]),
            int(f[5]),
            int(f[6]),
            int(f[7]),
            int(f[9]),
            int(f[10]),
            int(f[12]),
            flushes,
            flush_ms,
            int(f[11]),
            int(f[16]) if len(f) >= 18 else 0,
        )
    return result


def disk_rates(a: DiskCounters, b: DiskCounters, seconds: float) -> dict[str, float]:
    """MB/s, IOPS, average wait (ms per I/O) and utilisation (%) between two snapshots."""
    if seconds <= 0:
        seconds = 1.0
    reads, writes = b.reads - a.reads, b.writes - a.writes
    ios = reads + writes
    wait = (b.read_ms - a.read_ms) + (b.write_ms - a.write_ms)
    return {
        "read_mbps": round((b.sectors_read - a.sectors_read) * 512 / 1e6 / seconds, 3),
        "write_mbps": round((b.sectors_written - a.sectors_written) * 512 / 1e6 / seconds, 3),
        "read_iops": round(reads / seconds, 1),
        "write_iops": round(writes / seconds, 1),
        "await_ms": round(wait / ios, 3) if ios else 0.0,
        "util_pct": round(min(100.0, (b.io_ms - a.io_ms) / (10.0 * seconds)), 1),
        "flushes": float(b.flushes - a.flushes),
        "in_flight": float(b.in_flight),
    }


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo in kB."""
    result = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            result[name] = int(parts[0])
    return result


VMSTAT_RECLAIM = (
    "pgscan_kswapd",
    "pgscan_direct",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "allocstall_normal",
    "allocstall_movable",
    "pgmajfault",
    "nr_dirty",
    "nr_writeback",
    "pgpgout",
)


def parse_vmstat(text: str) -> dict[str, int]:
    result = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            result[parts[0]] = int(parts[1])
    return result


def underlying_devices(dev: str) -> list[str]:
    """A block device and what it stands on: loopN -> the disk holding its backing file,
    dm/md -> its slaves. Names as in /proc/diskstats."""
    name = Path(os.path.realpath(dev)).name
    found = [name]
    sys_dir = Path("/sys/class/block") / name
    backing = sys_dir / "loop" / "backing_file"
    if backing.exists():
        try:
            st = Path(backing.read_text().strip()).stat()
            node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
            # a file on a filesystem without a block device (an emulated disk's FUSE
            # mount, tmpfs) has no disk beneath it that /proc/diskstats would show
            if node.exists():
                found += underlying_devices(f"/dev/{node.resolve().name}")
        except OSError:
            pass
    slaves = sys_dir / "slaves"
    if slaves.is_dir():
        for s in sorted(slaves.iterdir()):
            found += underlying_devices(f"/dev/{s.name}")
    return list(dict.fromkeys(found))


def device_facts(name: str) -> dict[str, str]:
    """Model, size, rotational, scheduler and read-ahead of a block device from sysfs."""
    sys_dir = Path("/sys/class/block") / name
    queue = sys_dir / "queue"
    if not queue.exists():  # a partition: its queue is its parent's
        queue = sys_dir.resolve().parent / "queue"
    facts: dict[str, str] = {}
    for key, path in (
        ("size_sectors", sys_dir / "size"),
        ("model", sys_dir / "device" / "model"),
        ("rotational", queue / "rotational"),
        ("scheduler", queue / "scheduler"),
        ("read_ahead_kb", queue / "read_ahead_kb"),
        ("logical_block_size", queue / "logical_block_size"),
        ("physical_block_size", queue / "physical_block_size"),
        ("write_cache", queue / "write_cache"),
    ):
        try:
            facts[key] = path.read_text().strip()
        except OSError:
            continue
    return facts
