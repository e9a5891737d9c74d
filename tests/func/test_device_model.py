"""Emulated disks: a device model under the loop device answers every block request of the
filesystem under test (pgfsbench-disk over FUSE). The same ext4 on a zero-latency model and
on a 7200 rpm disk: random writes with fsync pay the platter, sequential writes run at the
model's media rate; a run records its model; SIGKILL then cleanup leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.spec.models import EmulatedDevice
from pgfsbench.storage import devices
from pgfsbench.storage.devices import DeviceFactory
from pgfsbench.storage.mounts import mount
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from tests.func.conftest import (
    leftovers,
    pgfsbench,
    runs_of,
    show,
    signal_mid_measurement,
    write_spec,
)

# the tests that time the disks, or switch io_uring on for the host, are `exclusive`: they
# run alone (scripts/test.sh); what a run records of its models, and its cleanup after a
# SIGKILL, holds beside others


@contextmanager
def ext4_on(base: Path, name: str, device: EmulatedDevice) -> Iterator[tuple[Path, Any]]:
    """ext4 on an emulated disk, made and mounted as a storage is (journaled, undone)."""
    runner = Runner()
    journal = Journal.create(base / name, runner)  # its work directory: what it makes
    try:
        with journal.scope():
            dev = DeviceFactory(journal, runner, base / name).get(device, "data")
            runner.run(["mkfs.ext4", "-q", dev.path], timeout=300)
            mount(journal, runner, dev.path, base / name / "mnt", "ext4", [])
            yield base / name / "mnt", dev
    finally:
        journal.close()


def fio(path: Path, seconds: int, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            "fio",
            "--name=j",
            f"--filename={path}",
            "--time_based",
            f"--runtime={seconds}",
            "--output-format=json",
            *args,
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    write: dict[str, Any] = json.loads(out)["jobs"][0]["write"]
    return write


@pytest.mark.exclusive
def test_a_traced_disk_writes_each_request_it_served(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PGFSBENCH_DISK_TRACE: one line a request (arrival, op, offset, bytes, completion)."""
    monkeypatch.setenv("PGFSBENCH_DISK_TRACE", str(base / "trace"))
    with ext4_on(base, "traced", EmulatedDevice(size="256M", model="hdd-7200")) as (mnt, _):
        fio(mnt / "f", 1, "--size=8M", "--rw=randwrite", "--bs=8k", "--fsync=1")
    (trace,) = base.glob("trace.*")  # named by the daemon's pid, closed when it ended
    rows = [tuple(float(x) for x in line.split()) for line in trace.read_text().splitlines()]
    assert rows and all(len(r) == 5 and r[4] >= r[0] for r in rows)
    ops = {int(r[1]) for r in rows}
    assert {1, 2} <= ops  # writes and the flushes of the fsyncs
    assert all(r[2] >= 0 and r[2] + r[3] <= 256 << 20 for r in rows)
    # the model made the flushes wait for the platter: not free, as with caps only
    flushes = [r[4] - r[0] for r in rows if int(r[1]) == 2]
    assert sorted(flushes)[len(flushes) // 2] > 0.001


@pytest.mark.exclusive
def test_the_platter_is_paid_for_random_fsyncs_and_streams_at_the_media_rate(
    base: Path,
) -> None:
    random_fsync = ("--size=128M", "--rw=randwrite", "--bs=8k", "--fsync=1", "--ioengine=psync")
    with ext4_on(base, "zero", EmulatedDevice(size="2G", model="zero")) as (mnt, _):
        fast = fio(mnt / "f", 3, *random_fsync)["iops"]
    with ext4_on(base, "hdd", EmulatedDevice(size="2G", model="hdd-7200")) as (mnt, dev):
        slow = fio(mnt / "f", 3, *random_fsync)["iops"]
        stream = fio(
            mnt / "s",
            4,
            "--size=1500M",
            "--rw=write",
            "--bs=1M",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=4",
            "--ramp_time=1",  # once the write cache is full: the platter's pace
        )
        media = float(dev.details["device_model_params"]["outer_mbps"])
        # the device is the outer edge of the drive: the outer zone's rate
        assert 0.8 * media <= stream["bw_bytes"] / 1e6 <= 1.2 * media, (stream["bw_bytes"], media)
        stats_path = Path(dev.details["device_model_stats"])
        stats = [json.loads(x) for x in stats_path.read_text().split()]
        assert stats[-1]["flushes"] > 0 and stats[-1]["model_wait_s"] > 1
        # the daemon runs as the run records, and the host answered when the model said
        # (what it lost, and why, is counted)
        pid = int(stats_path.with_name(stats_path.name.replace(".stats.jsonl", ".pid")).read_text())
        fifo = os.sched_getscheduler(pid) == os.SCHED_FIFO
        assert fifo == dev.details["device_model_priority"].startswith("SCHED_FIFO")
        parts = sum(stats[-1][k] for k in ("io_s", "model_s", "oversleep_s"))
        # the lateness split by where it was spent: the parts are the lateness
        assert abs(parts - stats[-1]["late_s"]) <= 1e-3 + 1e-6 * stats[-1]["late_s"], stats[-1]
        if fifo:
            assert stats[-1]["late_s"] <= 0.1 * stats[-1]["model_wait_s"], stats[-1]
    print(
        f"zero {fast:,.0f} / hdd-7200 {slow:,.0f} fsynced 8 KiB writes a second; sequential "
        f"{stream['bw_bytes'] / 1e6:,.1f} MB/s for a media rate of {media:g}"
    )
    assert slow * 20 <= fast, (fast, slow)


@pytest.mark.exclusive
@pytest.mark.skipif(
    not devices.FUSE_URING_PARAM.exists(),
    reason="this kernel has no FUSE over io_uring (Linux 6.14 and later)",
)
def test_over_io_uring_the_same_disk_serves_and_the_kernels_switch_is_put_back(
    base: Path,
) -> None:
    """transport = "io_uring": the daemon's requests come by the ring; fuse's enable_uring
    is on only while it mounts (journaled, so a killed run's cleanup puts it back), and the
    data written and fsynced is read back whole."""
    switch = devices.FUSE_URING_PARAM
    before = switch.read_text().strip()
    runner = Runner()
    journal = Journal.create(base / "ring", runner)
    try:
        with journal.scope():
            spec = EmulatedDevice(size="512M", model="sata-ssd", transport="io_uring")
            dev = DeviceFactory(journal, runner, base / "ring").get(spec, "data")
            assert dev.details["device_model_transport"] == "io_uring"
            assert switch.read_text().strip() == before
            if before in ("N", "0"):
                (step,) = [
                    s
                    for s in journal.pending()
                    if s.undo.kind == "restore_value" and s.undo.args["path"] == str(switch)
                ]
                assert step.undo.args["value"] == before
            runner.run(["mkfs.ext4", "-q", dev.path], timeout=300)
            mount(journal, runner, dev.path, base / "ring" / "mnt", "ext4", [])
            verify = subprocess.run(
                [
                    *("fio", "--name=v", f"--filename={base / 'ring' / 'mnt' / 'f'}"),
                    *("--size=32M", "--rw=randwrite", "--bs=8k", "--ioengine=libaio"),
                    *("--iodepth=16", "--direct=1", "--fsync=8", "--verify=crc32c"),
                    "--verify_state_save=0",
                    "--output-format=json",
                ],
                capture_output=True,
                text=True,
            )
            assert verify.returncode == 0, verify.stdout + verify.stderr
            stats = [
                json.loads(x) for x in Path(dev.details["device_model_stats"]).read_text().split()
            ]
            assert stats[-1]["transport"] == "io_uring" and stats[-1]["writes"] > 0
            assert stats[-1]["flushes"] > 0 and stats[-1]["errors"] == 0
    finally:
        journal.close()
    assert switch.read_text().strip() == before
    assert leftovers(base) == []


SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "{duration}"
warmup = "0s"
repetitions = 1
[storage.ssd]
fs = "xfs"
device = {{ size = "1G", model = "sata-ssd" }}
[storage.ssd.wal]
fs = "ext4"
device = {{ size = "512M", model = "hdd-7200", write_cache = false }}
"""


def test_a_run_records_its_models_and_sigkill_then_cleanup_leaves_nothing(base: Path) -> None:
    spec = write_spec(base / "s.toml", SPEC.format(duration="3s"))
    pgfsbench("run", str(spec), "--results", str(base / "r.sqlite"), "--workdir", str(base / "w"))
    (run,) = runs_of(base / "r.sqlite")
    shown = show(base / "r.sqlite", run["run_id"])
    details = shown["storage_details"]
    # the emulated disks' daemons' CPU during the measured phase
    assert shown["metrics"]["cpu"]["daemons_cpus"]["pgfsbench-disk"] > 0
    assert details["data"]["device_model"] == "sata-ssd"
    assert details["data"]["device_model_transport"] == "/dev/fuse"
    assert details["wal"]["device_model_params"]["write_cache"] is False
    assert "write cache off" in details["wal"]["device_model_text"]
    assert "pgfsbench-disk" in details["service_processes"]
    assert leftovers(base) == []
    # killed mid-measurement: the daemons, their mounts and the loop devices stay until
    # cleanup, which undoes them in order (the filesystems first, the disks last)
    spec = write_spec(base / "k.toml", SPEC.format(duration="120s"))
    code, _, _ = signal_mid_measurement(spec, base / "k.sqlite", base / "work", signal.SIGKILL)
    assert code == -signal.SIGKILL
    left = leftovers(base)
    assert any("pgfsbench-disk" in x for x in left) and any("mount" in x for x in left), left
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert leftovers(base) == []
