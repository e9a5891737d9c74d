"""Device limits for real: a loop device capped at 200 write IOPS measures ~200 in fio and
drops TPS; the caps are read back from the kernel during a run and found gone after a normal
end, after SIGTERM and after SIGKILL + cleanup; a checkpoint on a bandwidth-capped device is
found as a stall attributed to the checkpoint (seed 002's story, small)."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from pgfsbench.storage.limits import V1_FILES, detect, parse_v1
from tests.func.conftest import (
    kill,
    pgfsbench,
    runs_of,
    show,
    start,
    wait_for,
    wait_measuring,
    write_spec,
)

MECH = detect()
# Not `exclusive`: what these tests assert (a cap measured, a capped run far slower, a
# checkpoint's stall at the cap) holds with other tests running beside; their CPU does not
# raise a capped device's IOPS. They look at every loop device's caps: the tests marked
# `caps` take turns (tests/func/conftest.py); the ZFS pool's roles capped: test_zfs.py.
NO_CAPS = MECH is None or MECH.kind != "cgroup-v1-blkio"
pytestmark = [
    pytest.mark.caps,
    pytest.mark.skipif(NO_CAPS, reason="needs cgroup v1 blkio throttling"),
]


def caps() -> dict[str, dict[str, int]]:
    """Every throttle rule the kernel holds now, by file."""
    assert MECH is not None
    return {name: parse_v1((MECH.root / name).read_text()) for name in V1_FILES.values()}


def no_loop_caps() -> bool:
    return all(not any(dev.startswith("7:") for dev in rules) for rules in caps().values())


def test_a_capped_device_measures_its_cap_and_slows_postgresql(base: Path) -> None:
    assert no_loop_caps()
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 4
threads = 2
duration = "5s"
warmup = "1s"
repetitions = 1
ceiling_seconds = 1
[storage.ext4]
fs = "ext4"
device = "loop:1G"
[storage.ext4-200iops]
fs = "ext4"
device = "loop:1G"
ceiling = true
limits = { write_iops = 200 }
""",
    )
    plan = json.loads(pgfsbench("plan", str(spec), "--json").stdout)
    assert plan["device_limits"] == {"ext4-200iops": ["data: - read / 200 write IOPS"]}
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    assert no_loop_caps()  # restored after a normal end
    free, capped = (show(results, r["run_id"]) for r in runs_of(results))
    fio = capped["metrics"]["ceiling"]["fio"]
    assert abs(fio["write_iops"] - 200) <= 30, fio
    assert capped["tps"] < free["tps"] / 3
    (entry,) = capped["storage_details"]["device_limits"]
    assert entry["role"] == "data" and entry["write_iops"] == 200
    assert entry["mechanism"].startswith("cgroup v1 blkio")
    summary = pgfsbench("results", "summary", "--results", str(results)).stdout
    assert "emulated devices" in " ".join(summary.split())


def signal_when_capped(
    spec: Path,
    results: Path,
    workdir: Path,
    sig: signal.Signals,
    seen: list[dict[str, dict[str, int]]],
    devices: int = 1,
) -> tuple[int, str, str]:
    """Start `run`; once the kernel holds the caps of ``devices`` loop devices (they are
    set before initdb and the load), note them and send ``sig``: no waiting for a load
    slowed down by the caps themselves."""
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(workdir))
    try:

        def capped() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"run ended early: {proc.communicate()}")
            # every kind of rule the profiles set, for every device (the engine writes them
            # one file after another: iops first, bytes after)
            now = caps()
            return all(
                sum(1 for d in now[f"blkio.throttle.{kind}_device"] if d.startswith("7:"))
                >= devices
                for kind in ("write_iops", "write_bps")
            )

        wait_for(capped, 180, "the caps to be set")
        seen.append(caps())
        return kill(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


def test_caps_are_gone_after_sigterm_and_after_sigkill_and_cleanup(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "120s"
warmup = "0s"
repetitions = 1
[storage.hdd]
fs = "xfs"
device = "loop:512M"
limits = { profile = "hdd-7200" }
""",
    )
    seen: list[dict[str, dict[str, int]]] = []
    code, _, err = signal_when_capped(spec, base / "r.sqlite", base / "work", signal.SIGTERM, seen)
    assert code == 130, err
    loop_rules = {
        name: {d: v for d, v in rules.items() if d.startswith("7:")}
        for name, rules in seen[0].items()
    }
    assert set(loop_rules["blkio.throttle.write_iops_device"].values()) == {78}
    assert set(loop_rules["blkio.throttle.write_bps_device"].values()) == {150_000_000}
    assert no_loop_caps()


def test_a_checkpoint_on_a_capped_device_is_a_stall_attributed_to_it(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 4
clients = 8
threads = 2
duration = "20s"
warmup = "1s"
repetitions = 1
[storage.slow]
fs = "ext4"
device = "loop:1G"
limits = { write_mbps = 12, write_iops = 600 }
[postgres.heavy.settings]
shared_buffers = "256MB"
checkpoint_timeout = "1h"
max_wal_size = "4GB"
checkpoint_flush_after = 0
[workload.updates]
builtin = "simple-update"
""",
    )
    results = base / "r.sqlite"
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    errors: list[BaseException] = []

    def force_checkpoint() -> None:
        try:
            time.sleep(8)  # 8 s of updates dirty thousands of buffers
            sock = base / "work" / "cells" / "run-1" / "sock"
            subprocess.run(
                ["psql", "-h", str(sock), "-U", "postgres", "-c", "CHECKPOINT", "pgbench"],
                check=True,
                capture_output=True,
                timeout=120,
            )
        except BaseException as exc:
            errors.append(exc)

    try:
        wait_measuring(proc, 300)
        thread = threading.Thread(target=force_checkpoint)
        thread.start()
        _, err = proc.communicate(timeout=400)
        thread.join()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    assert proc.returncode == 6 or proc.returncode == 0, err  # 1 repetition: no verdict
    assert not errors
    (run,) = runs_of(results)
    detail = show(results, run["run_id"])
    # the one the test forced in the measured phase (the load's own, a write-out before
    # the warm-up, may end inside the second kept before it)
    forced = [
        c
        for c in detail["checkpoints"]
        if c["reason"].startswith("immediate") and (c["started_s"] or 0) > 0
    ]
    assert forced, detail["checkpoints"]
    start_s, end_s = forced[0]["started_s"], forced[0]["ended_s"]
    overlapping = [
        s for s in detail["stalls"] if s["start_s"] <= end_s + 1 and s["end_s"] >= start_s - 1
    ]
    assert overlapping, (detail["stalls"], forced)
    # the checkpoint is named, as the cause or with it (new WAL segments zero-filled at
    # the cap are the same story), never a frozen filesystem or a lock
    assert all("checkpoint" in [s["cause"], *s["contributing"]] for s in overlapping), overlapping
    assert any(
        "device's limit" in e and ("cap 12 MB/s" in e or "cap 600 IOPS" in e)
        for s in overlapping
        for e in s["evidence"]
    ), overlapping
    # the window's record: a requested checkpoint inside a window of a given duration (its
    # stratum: one with a checkpoint), said as what the run measures
    window = detail["metrics"]["window"]
    assert window["kind"] == "duration" and window["stratum"] == "1+", window
    assert window["requested"] >= 1 and window["estimand"] == "a 20 s window", window
