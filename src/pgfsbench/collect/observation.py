"""Everything watched during one run: samplers started before the warm-up, the measured
phase's start marked, and at the end the per-second series, WAL figures and checkpoints."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.collect.checkpoints import parse_checkpoints, running_checkpoint
from pgfsbench.collect.host import HostLoad, load_between
from pgfsbench.collect.pooler import PoolerSampler, pooler_series
from pgfsbench.collect.processes import ProcessSampler, process_series
from pgfsbench.collect.procfs import device_facts, underlying_devices
from pgfsbench.collect.samplers import (
    BLKIO_CAPS,
    Job,
    OsSampler,
    PgSampler,
    PgSamples,
    Series,
    Ticker,
    counter_delta,
    os_series,
    pg_series,
)
from pgfsbench.system.trust import read_text_nofollow

# what the server log says of a completed checkpoint (a running one has none of them yet)
CHECKPOINT_FIGURES = (
    "buffers",
    "write_s",
    "sync_s",
    "total_s",
    "wal_added",
    "wal_removed",
    "wal_recycled",
    "distance_kb",
)


@dataclass
class ObservationResult:
    series: Series = field(default_factory=dict)
    wal_bytes: int | None = None
    wal_fpi: int | None = None
    wal_records: int | None = None
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    # the server's log was read: without it, no checkpoint listed is not "none happened"
    checkpoints_read: bool = True
    metrics: dict[str, Any] = field(default_factory=dict)
    measured_start: float | None = None


def device_numbers(names: list[str], sys_block: Path = Path("/sys/class/block")) -> dict[str, str]:
    """ "major:minor" -> name of each device (how blkio names them)."""
    out = {}
    for name in names:
        with contextlib.suppress(OSError):
            out[(sys_block / name / "dev").read_text().strip()] = name
    return out


def devices_under_test(block_devices: tuple[str, ...]) -> list[str]:
    """The devices a storage stands on, with what they stand on (loop -> disk), once each."""
    names: list[str] = []
    for dev in block_devices:
        names += underlying_devices(dev)
    return list(dict.fromkeys(names))


class Observation:
    def __init__(
        self,
        conninfo: str,
        major: int,
        block_devices: tuple[str, ...],
        server_log: Path,
        *,
        enabled: bool = True,
        wait_hz: float = 10.0,
        pooler: PoolerSampler | None = None,
        batch: bool = True,
        own: tuple[int, ...] = (),
        own_comms: tuple[str, ...] = (),
        mounts: dict[str, str] | None = None,
        memory_cgroup: Path | None = None,
        own_cgroup: dict[str, Path] | None = None,
        own_group: Callable[[], float | None] | None = None,
    ):
        """``own``: the roots of the benchmark's own processes (pgfsbench, the
        postmaster), ``own_comms`` the daemons serving the storage; ``mounts``: mountpoint
        -> role of the volumes under test; ``memory_cgroup``: PostgreSQL's, if limited;
        ``own_cgroup``: the container's own cgroup files, in a pod; ``own_group``: the
        CPU seconds of the benchmark's own cgroup (kernel.CpuGroup), if it has one."""
        self.enabled = enabled
        self.devices = devices_under_test(block_devices)
        # the loop/pool devices themselves are what is under test; the disks beneath
        # are shown separately (disk.<name>.*) but not added to the totals twice
        self.top_devices = [
            d for d in self.devices if any(Path(b).name == d for b in block_devices)
        ] or self.devices
        self.server_log = server_log
        per_second = max(1, round(wait_hz))
        self.batch = batch
        self.pg = (
            PgSampler(conninfo, major, counters_every=per_second, batch=batch) if enabled else None
        )
        self.os = OsSampler(memory_cgroup=memory_cgroup, own_cgroup=own_cgroup) if enabled else None
        self.procs = (
            ProcessSampler((os.getpid(), *own), dict(mounts or {}), own_comms, own_group)
            if enabled
            else None
        )
        self.pooler = pooler if enabled else None
        # one thread for the PostgreSQL and OS samplers: the wait events at each tick, the
        # counters and /proc once a second (the pooler has its own: its console may hang)
        self._pg_job = Job("pg", 1, self.pg.tick) if self.pg else None
        self._ticker = Ticker(
            "observer",
            1.0 / wait_hz,
            [
                *([self._pg_job] if self._pg_job else []),
                *([Job("os", per_second, self.os.tick)] if self.os else []),
                *([Job("processes", per_second, self._procs_tick)] if self.procs else []),
            ],
            batch=batch,
        )
        self.start_counters: dict[str, Any] | None = None
        self.measured_start: float | None = None
        self._cpu_at_start = 0.0
        self._backend_cpu_at_start: float | None = None

    def _procs_tick(self) -> None:
        assert self.procs is not None
        self.procs.tick(time.time())

    def start(self) -> None:
        if self.pg:
            self.pg.open()
        if self.os:
            self.os.tick()  # the first sample now: each second's rates need the one before
        if self.procs:
            self._procs_tick()
        if self._ticker.jobs:
            self._ticker.start()
        if self.pooler:
            self.pooler.start()

    def mark_measured_start(self) -> float:
        if self.pg:
            with contextlib.suppress(Exception):
                self.start_counters = self.pg.snapshot()
        self.measured_start = time.time()
        self._cpu_at_start = self.cpu_seconds()
        self._backend_cpu_at_start = self.pg.backend_cpu_seconds() if self.pg else None
        return self.measured_start

    def outside_load(self, since: float) -> HostLoad | None:
        """How busy the host was outside the benchmark since ``since`` (wall clock): the
        CPU its other processes used, as a share of the machine, and the steal; None
        without two seconds of samples. What a busy-host check sleeps a second to learn,
        read from the warm-up instead."""
        if self.procs is None or self.os is None:
            return None
        procs = [s for s in list(self.procs.seconds) if s.t > since]
        stats = [s for s in list(self.os.samples) if s.t >= since]
        if len(procs) < 2 or len(stats) < 2:
            return None
        cpus = os.cpu_count() or 1
        busy = sum(p.outside_cpu_pct for p in procs) / len(procs) / cpus
        return load_between(stats[0].stat, stats[-1].stat, busy, stats[-1].t - stats[0].t)

    def latest(self) -> dict[str, float | dict[str, float]]:
        """The samplers' last second, as the run's series will have it (CPU, the devices,
        dirty memory, PostgreSQL's counters as rates, the backends by wait event): a live
        view for whoever asks while the run goes on, parsed from the last samples only
        when asked (the samplers' thread keeps appending meanwhile)."""
        out: dict[str, float | dict[str, float]] = {}
        series: Series = {}
        if self.os is not None:
            last = self.os.samples[-2:]
            if len(last) == 2:
                series.update(
                    os_series(last, last[0].t, self.devices, device_numbers(self.devices))
                )
        if self.pg is not None:
            pg = self.pg.samples
            recent = PgSamples(counters=pg.counters[-2:], raw_waits=pg.raw_waits[-20:])
            if recent.raw_waits:
                # the waits of the last whole second of samples
                end = recent.raw_waits[-1][0]
                recent.raw_waits = [w for w in recent.raw_waits if w[0] > end - 1.0]
                series.update(pg_series(recent, recent.raw_waits[0][0]))
            elif len(recent.counters) == 2:
                series.update(pg_series(recent, float(recent.counters[0]["t"])))
        for name, (_t0, values) in series.items():
            value = next((v for v in reversed(values) if v is not None), None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[name] = float(value)
            elif isinstance(value, dict) and name == "waits":
                out[name] = {str(k): float(v) for k, v in value.items()}
        return out

    def cpu_seconds(self) -> float:
        """CPU time the samplers have used so far (their threads only, wake-ups included)."""
        return self._ticker.cpu_seconds + (self.pooler.cpu_seconds if self.pooler else 0.0)

    def _sched(self) -> dict[str, str]:
        """How the observer was scheduled: its thread and its backend (SCHED_BATCH, or
        why not)."""
        if not self._ticker.jobs:  # not watched: no observer to schedule
            return {}
        if not self.batch:
            return {"policy": "normal"}
        out = {"policy": "batch", "thread": self._ticker.sched_error or "batch"}
        if self.pg is not None and self.pg.backend_sched is not None:
            out["backend"] = self.pg.backend_sched
        return out

    def finish(self) -> ObservationResult:
        start = self.measured_start or time.time()
        result = ObservationResult(measured_start=start)
        measured_s = max(1e-6, time.time() - start)
        sampler_cpu = self.cpu_seconds() - self._cpu_at_start
        result.metrics["observer"] = {
            "sampler_cpu_s": round(sampler_cpu, 4),
            "sampler_cpu_pct_of_a_core": round(100 * sampler_cpu / measured_s, 3),
            **({"sched": sched} if (sched := self._sched()) else {}),
        }
        backend_end = self.pg.backend_cpu_seconds() if self.pg else None
        if backend_end is not None and self._backend_cpu_at_start is not None:
            # the server's side of the sampler's queries (10 ms clock ticks)
            backend = backend_end - self._backend_cpu_at_start
            result.metrics["observer"].update(
                {
                    "sampler_backend_cpu_s": round(backend, 3),
                    "sampler_backend_cpu_pct_of_a_core": round(100 * backend / measured_s, 3),
                    "observer_cpu_pct_of_a_core": round(
                        100 * (sampler_cpu + backend) / measured_s, 3
                    ),
                }
            )
        if self.pooler:
            pooler_samples = self.pooler.stop()
            figures = pooler_series(pooler_samples, start)
            result.series.update(figures.series)
            result.metrics["pooler"] = {**figures.totals, "errors": self.pooler.errors}
        end_counters = None
        self._ticker.stop()
        if self.pg:
            with contextlib.suppress(Exception):
                end_counters = self.pg.snapshot()
            with contextlib.suppress(Exception):
                result.metrics["stat_io"] = self.pg.stat_io()
            samples = self.pg.close(self._pg_job.errors if self._pg_job else [])
            result.series.update(pg_series(samples, start))
            result.metrics["pg_sampler_errors"] = samples.errors
            if self.pg.behind:
                result.metrics["pg_sampler_behind"] = self.pg.behind
        if self.os:
            self._finish_os(result, start)
        if self.procs:
            result.series.update(process_series(self.procs.close(), start))
            errors = [e for j in self._ticker.jobs if j.name == "processes" for e in j.errors]
            if errors:
                result.metrics["process_sampler_errors"] = errors
        a, b = self.start_counters, end_counters
        result.wal_bytes = counter_delta(a, b, "wal_lsn")
        result.wal_fpi = counter_delta(a, b, "wal_fpi")
        result.wal_records = counter_delta(a, b, "wal_records")
        if result.wal_records:
            result.metrics["wal_fpi_share"] = round((result.wal_fpi or 0) / result.wal_records, 4)
        if a and b:
            result.metrics["counters"] = {
                k: counter_delta(a, b, k) for k in b if k != "t" and isinstance(b[k], int | float)
            }
        found = self._checkpoints(start)
        result.checkpoints_read = found is not None
        result.checkpoints.extend(found or [])
        return result

    def _finish_os(self, result: ObservationResult, start: float) -> None:
        """The block devices' series (and their totals over the devices under test), the
        caps in effect each second, the devices' facts and which lie beneath which."""
        assert self.os is not None
        series = os_series(self.os.close(), start, self.devices, device_numbers(self.devices))
        # totals over the devices under test only (not the disk beneath a loop again)
        for k in ("read_mbps", "write_mbps", "read_iops", "write_iops"):
            parts = [series[f"disk.{d}.{k}"] for d in self.top_devices if f"disk.{d}.{k}" in series]
            if parts:
                t0 = parts[0][0]
                summed = [
                    round(sum(v for v in vals if v is not None), 3)
                    for vals in zip(*(p[1] for p in parts), strict=False)
                ]
                series[f"disk_{k}"] = (t0, summed)
        # the limits in effect on them, each second: a second where one of them has
        # none has no total limit
        for _, (name, _) in BLKIO_CAPS.items():
            parts = [
                series[f"disk.{d}.{name}"] for d in self.top_devices if f"disk.{d}.{name}" in series
            ]
            if parts and len(parts) == len(self.top_devices):
                columns = zip(*(p[1] for p in parts), strict=False)
                series[name] = (
                    parts[0][0],
                    [
                        None if any(v is None for v in vals) else round(sum(vals), 6)
                        for vals in columns
                    ],
                )
        result.series.update(series)
        result.metrics["devices"] = {d: device_facts(d) for d in self.devices}
        # which devices are the storage under test and which hold them (a loop
        # device's file on the host's disk): the analysis weighs the disk beneath too
        result.metrics["block_stack"] = {
            "under_test": self.top_devices,
            "beneath": [d for d in self.devices if d not in self.top_devices],
        }

    def _checkpoints(self, start: float) -> list[dict[str, Any]] | None:
        """The server log's checkpoints, their times from the measured phase's start; one
        still running when the run ended has no end and no figures (None). None: the log
        could not be read."""
        found: list[dict[str, Any]] = []
        try:
            log = read_text_nofollow(self.server_log)  # the postgres user's file
        except OSError:
            return None
        for cp in parse_checkpoints(log):
            found.append(
                {
                    "started_s": None if cp.started is None else round(cp.started - start, 3),
                    "ended_s": round(cp.ended - start, 3),
                    "reason": cp.reason,
                    "buffers": cp.buffers,
                    "write_s": cp.write_s,
                    "sync_s": cp.sync_s,
                    "total_s": cp.total_s,
                    "wal_added": cp.wal_added,
                    "wal_removed": cp.wal_removed,
                    "wal_recycled": cp.wal_recycled,
                    "distance_kb": cp.distance_kb,
                }
            )
        running = running_checkpoint(log)
        if running is not None:
            found.append(
                {
                    **dict.fromkeys(CHECKPOINT_FIGURES),
                    "started_s": round(running[0] - start, 3),
                    "ended_s": None,
                    "reason": running[1],
                }
            )
        return found
