"""The plan: the expanded matrix in execution order, with disk and time estimates.

Making a plan touches nothing; `pgfsbench plan` prints it and `run` executes it.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.spec import (
    Cell,
    ExistingStorage,
    LoadedSpec,
    TmpfsStorage,
    ZfsStorage,
    expand,
)
from pgfsbench.storage import needs_root
from pgfsbench.system.errors import UsageError
from pgfsbench.units import human_bytes, parse_duration, parse_size

# pgbench data is about 15 MB per scale unit (pgbench-tools sizes its grid the same way);
# indexes, free space and WAL during the load take it to roughly twice that.
BYTES_PER_SCALE = 16 * 1024 * 1024
LOAD_SECONDS_PER_SCALE = 0.6  # client-side generation on a small machine, measured here
SETUP_SECONDS = 8.0  # losetup, mkfs, mount, initdb, start, stop, unmount


@dataclass(frozen=True)
class PlannedRun:
    index: int
    cell: Cell
    repetition: int  # 1-based


@dataclass(frozen=True)
class Plan:
    cells: list[Cell]
    runs: list[PlannedRun]
    scale: int
    repetitions: int
    load_per: str
    estimated_seconds: float
    loop_bytes_per_cell: dict[str, int]
    real_devices: list[str]
    needs_root: bool
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "cells": [c.id for c in self.cells],
            "runs": len(self.runs),
            "scale": self.scale,
            "repetitions": self.repetitions,
            "load_per": self.load_per,
            "estimated_seconds": round(self.estimated_seconds),
            "peak_loop_bytes": max(self.loop_bytes_per_cell.values(), default=0),
            "real_devices": self.real_devices,
            "needs_root": self.needs_root,
            "warnings": self.warnings,
        }


def cell_devices(cell: Cell) -> list[str]:
    """Every device string (loop:SIZE or /dev/...) a cell's storage asks for."""
    s = cell.storage
    devices: list[str] = []
    if isinstance(s, ZfsStorage):
        devices += s.pool.devices + s.pool.log + s.pool.cache
    elif not isinstance(s, TmpfsStorage | ExistingStorage):
        devices.append(s.device)
    wal = getattr(s, "wal", None)
    if wal is not None and hasattr(wal, "device") and wal.fs != "tmpfs":
        devices.append(wal.device)
    return devices


def data_capacity(cell: Cell) -> int | None:
    """Usable bytes for the data directory, when known from the spec."""
    s = cell.storage
    if isinstance(s, TmpfsStorage):
        return parse_size(s.size)
    if isinstance(s, ExistingStorage):
        return None
    if isinstance(s, ZfsStorage):
        sizes = [parse_size(d[5:]) for d in s.pool.devices if d.startswith("loop:")]
        if len(sizes) != len(s.pool.devices):
            return None
        smallest = min(sizes)
        data_disks = {"single": 1, "stripe": len(sizes), "mirror": 1,
                      "raidz1": len(sizes) - 1, "raidz2": len(sizes) - 2,
                      "raidz3": len(sizes) - 3}[s.pool.layout]
        return smallest * data_disks
    return parse_size(s.device[5:]) if s.device.startswith("loop:") else None


def make_plan(loaded: LoadedSpec, workdir: Path | None = None,
              only: Sequence[str] = ()) -> Plan:
    """The runs in execution order; ``only`` keeps the cells whose id matches a glob."""
    spec = loaded.spec
    d = spec.defaults
    cells = expand(spec)
    if only:
        cells = [c for c in cells if any(fnmatch.fnmatchcase(c.id, p) for p in only)]
        if not cells:
            raise UsageError(f"--only {', '.join(only)}: no cell matches (cells are named "
                             "storage/postgres/kernel/workload)")
    reps = d.repetitions
    if d.order == "interleaved" and d.load_per == "repetition":
        # repetition-major: every cell once, then again, so drift hits all cells alike
        pairs = [(c, r) for r in range(1, reps + 1) for c in cells]
    else:
        pairs = [(c, r) for c in cells for r in range(1, reps + 1)]
    runs = [PlannedRun(i, c, r) for i, (c, r) in enumerate(pairs)]

    load_s = d.scale * LOAD_SECONDS_PER_SCALE
    loads = len(runs) if d.load_per == "repetition" else len(cells)
    provisions = loads
    est = provisions * SETUP_SECONDS + loads * load_s + sum(
        r.cell.workload.warmup_s + r.cell.workload.duration_s + 2 for r in runs)

    loop_bytes: dict[str, int] = {}
    real: list[str] = []
    warnings: list[str] = []
    need = d.scale * BYTES_PER_SCALE * 2
    for cell in cells:
        devs = cell_devices(cell)
        loop_bytes[cell.id] = sum(parse_size(x[5:]) for x in devs if x.startswith("loop:"))
        real += [x for x in devs if x.startswith("/dev/") and x not in real]
        cap = data_capacity(cell)
        if cap is not None and cap < need:
            warnings.append(f"{cell.storage_name}: {human_bytes(cap)} may be too small for "
                            f"scale {d.scale} (about {human_bytes(need)} needed)")
    warnings = list(dict.fromkeys(warnings))
    if workdir is not None:
        probe = workdir if workdir.exists() else workdir.parent
        while not probe.exists():
            probe = probe.parent
        free = shutil.disk_usage(probe).free
        peak = max(loop_bytes.values(), default=0)
        # loop files are sparse: they grow with what is written, up to their size
        if peak and free < min(peak, need * 2):
            warnings.append(f"only {human_bytes(free)} free under {probe} for loop files of up "
                            f"to {human_bytes(peak)}")
    parse_duration(d.startup_timeout)
    return Plan(cells, runs, d.scale, reps, d.load_per, est, loop_bytes, real,
                any(needs_root(c.fs) for c in cells), warnings)


def is_root() -> bool:
    return os.geteuid() == 0
