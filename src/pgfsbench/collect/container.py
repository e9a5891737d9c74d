"""What a container can see of itself: its own cgroup's CPU (use and throttling by its CPU
limit), memory, I/O and pressure, cgroup v1 or v2 (pure parsers, and the files to read).

In a pod, /proc/stat, /proc/meminfo and the pressure files are the node's, shared with
every other pod; the container's cgroup is its own. runc mounts the container's own
cgroup directories at /sys/fs/cgroup: v1 one per controller (cpu, cpuacct, memory,
blkio), v2 one directory with every controller's files. A CPU limit shows here and only
here: a container throttled by its quota is idle to the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")

# name in a sample -> file, per cgroup version (the first that exists of each is read)
V1_FILES = {
    "cg_cpu_stat": ("cpu/cpu.stat", "cpu,cpuacct/cpu.stat"),
    "cg_cpu_usage": ("cpuacct/cpuacct.usage", "cpu,cpuacct/cpuacct.usage"),
    "cg_memory_usage": ("memory/memory.usage_in_bytes",),
    "cg_memory_limit": ("memory/memory.limit_in_bytes",),
    "cg_io": (
        "blkio/blkio.throttle.io_service_bytes_recursive",
        "blkio/blkio.throttle.io_service_bytes",
    ),
}
V2_FILES = {
    "cg_cpu_stat": ("cpu.stat",),
    "cg_memory_usage": ("memory.current",),
    "cg_memory_limit": ("memory.max",),
    "cg_io": ("io.stat",),
    "cg_pressure_cpu": ("cpu.pressure",),
    "cg_pressure_io": ("io.pressure",),
    "cg_pressure_memory": ("memory.pressure",),
}
# series names and units (analysis/series.py lists them with the others)
SERIES = {
    "cg_cpu_pct": "% of a CPU",
    "cg_throttled_pct": "%",
    "cg_memory_mb": "MB",
    "cg_read_mbps": "MB/s",
    "cg_write_mbps": "MB/s",
    "cg_psi_cpu_some_pct": "%",
    "cg_psi_io_some_pct": "%",
    "cg_psi_memory_some_pct": "%",
}
# a limit this large is no limit (v1 writes the page-rounded maximum of a 64-bit value)
NO_LIMIT = 1 << 62


def cgroup_files(root: Path = CGROUP_ROOT) -> dict[str, Path]:
    """The container's own cgroup files that exist here, by their sample name."""
    table = V2_FILES if (root / "cgroup.controllers").exists() else V1_FILES
    out: dict[str, Path] = {}
    for name, candidates in table.items():
        for rel in candidates:
            path = root / rel
            if path.is_file():
                out[name] = path
                break
    return out


def parse_keyed(text: str) -> dict[str, int]:
    """Lines of "key value" (cpu.stat, memory.stat)."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def cpu_used_ns(stat: str, usage: str | None) -> int | None:
    """CPU time the group used: v2 cpu.stat usage_usec, v1 cpuacct.usage (ns)."""
    keyed = parse_keyed(stat)
    if "usage_usec" in keyed:
        return keyed["usage_usec"] * 1000
    if usage is not None and usage.strip().isdigit():
        return int(usage)
    return None


def throttled_ns(stat: str) -> int | None:
    """Time the group's tasks waited for its CPU quota: v1 throttled_time (ns), v2
    throttled_usec."""
    keyed = parse_keyed(stat)
    if "throttled_usec" in keyed:
        return keyed["throttled_usec"] * 1000
    return keyed.get("throttled_time")


def io_bytes(text: str) -> tuple[int, int]:
    """Bytes read and written by the group, all devices: v2 io.stat ("8:0 rbytes=..
    wbytes=.."), v1 io_service_bytes ("8:0 Read N", "8:0 Write N", "Total N")."""
    read = written = 0
    for line in text.splitlines():
        parts = line.split()
        if any(p.startswith("rbytes=") for p in parts):
            for p in parts[1:]:
                key, _, value = p.partition("=")
                if key == "rbytes" and value.isdigit():
                    read += int(value)
                elif key == "wbytes" and value.isdigit():
                    written += int(value)
        elif len(parts) == 3 and parts[2].isdigit():
            if parts[1] == "Read":
                read += int(parts[2])
            elif parts[1] == "Write":
                written += int(parts[2])
    return read, written


def _some_total(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("some "):
            for part in line.split()[1:]:
                key, _, value = part.partition("=")
                if key == "total" and value.isdigit():
                    return int(value)
    return None


def rates(a: Mapping[str, str], b: Mapping[str, str], dt: float) -> dict[str, float]:
    """Per-second figures of the group between two samples (only those both have)."""
    out: dict[str, float] = {}
    if dt <= 0:
        return out
    stat_a, stat_b = a.get("cg_cpu_stat", ""), b.get("cg_cpu_stat", "")
    used_a = cpu_used_ns(stat_a, a.get("cg_cpu_usage"))
    used_b = cpu_used_ns(stat_b, b.get("cg_cpu_usage"))
    if used_a is not None and used_b is not None:
        out["cg_cpu_pct"] = round(max(0, used_b - used_a) / 1e9 / dt * 100, 1)
    thr_a, thr_b = throttled_ns(stat_a), throttled_ns(stat_b)
    if thr_a is not None and thr_b is not None:
        out["cg_throttled_pct"] = round(min(100.0, max(0, thr_b - thr_a) / 1e9 / dt * 100), 1)
    usage = b.get("cg_memory_usage", "").strip()
    if usage.isdigit():
        out["cg_memory_mb"] = round(int(usage) / 1e6, 1)
    if "cg_io" in a and "cg_io" in b:
        (ra, wa), (rb, wb) = io_bytes(a["cg_io"]), io_bytes(b["cg_io"])
        out["cg_read_mbps"] = round(max(0, rb - ra) / 1e6 / dt, 3)
        out["cg_write_mbps"] = round(max(0, wb - wa) / 1e6 / dt, 3)
    for kind in ("cpu", "io", "memory"):
        pa = _some_total(a.get(f"cg_pressure_{kind}", ""))
        pb = _some_total(b.get(f"cg_pressure_{kind}", ""))
        if pa is not None and pb is not None:
            out[f"cg_psi_{kind}_some_pct"] = round(min(100.0, max(0, pb - pa) / 1e4 / dt), 2)
    return out


def limits(sample: Mapping[str, str]) -> dict[str, object]:
    """The group's memory limit as read (None: no limit), for the run's environment."""
    text = sample.get("cg_memory_limit", "").strip()
    if text.isdigit() and int(text) < NO_LIMIT:
        return {"memory_limit_bytes": int(text)}
    return {"memory_limit_bytes": None} if text else {}
