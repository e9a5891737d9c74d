"""Device models: emulated disks that behave like disks (seek, rotation, a write cache,
per-operation latency), not only caps (pure data and arithmetic).

A storage asks for one with `device = { size = "4G", model = "hdd-7200" }`: pgfsbench
starts `pgfsbench-disk` (native/diskmodel, Go) which serves the device as a file on a FUSE
mount, and attaches the loop device to that file; every block request of the filesystem
under test reaches the model, which answers when the emulated device would have.

Each figure says where it comes from; "assumed" marks the ones no source gives. Throttling
(`limits`, storage/limits.py) stays for what it is good at: caps without a model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from pgfsbench.spec.profiles import GIB, PROFILES

MIB = 1 << 20

HGST_7K4000 = (
    "HGST Ultrastar 7K4000 specification, 4.4.1.1: average seek 8.2 ms typical (read and "
    "write, including settling)"
)
HITACHI_7K320 = (
    "Hitachi Travelstar 7K320 specification, 4.4.2: single track 1.0 ms read / 1.1 ms "
    "write, full stroke 20 ms read / 22 ms write, 7200 rpm: 8.3 ms a revolution"
)
HITACHI_5K320 = (
    "Hitachi Travelstar 5K320 specification, 4.4.2: average seek 12 ms read / 13 ms write, "
    "single track 1.0 / 1.1 ms, full stroke 20 / 21 ms, 5400 rpm: 11.1 ms a revolution"
)
ZONES = (
    "the inner zone at about half the outer zone's rate: Hitachi Deskstar 7K500 "
    "specification, table 10 (zone 0 76.3 MB/s, zone 29 36.5 MB/s)"
)
RUEMMLER = (
    "seek curve: Ruemmler and Wilkes, 'An introduction to disk drive modeling', IEEE "
    "Computer 27(3), 1994 (square root for short seeks, linear for long ones)"
)
SAMSUNG_870 = (
    "Samsung 870 EVO data sheet: random 4 KB QD1 13,000 read / 36,000 write IOPS, QD32 "
    "98,000 / 88,000, sequential 560 / 530 MB/s"
)
INTEL_P4500 = (
    "Lenovo Press product guide 'Intel P4500 Entry NVMe PCIe3 SSDs' (4XB7A08539), 2.0 TB "
    "drive: 4 KB random 490,000 read / 38,000 write IOPS, sequential 3.2 / 1.05 GB/s, "
    "random access latency 85 us read / 20 us write, sequential 10 / 13 us"
)
AWS_EBS = "https://docs.aws.amazon.com/ebs/latest/userguide/ebs-volume-types.html"
AWS_GP2 = "https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html"
ALIBABA_ESSD = "https://www.alibabacloud.com/help/en/ecs/user-guide/essds"


@dataclass(frozen=True)
class DeviceModel:
    """A named emulated device: the daemon's parameters and where each comes from."""

    name: str
    title: str
    kind: str  # zero, hdd, ssd, cloud
    params: Mapping[str, float | int | bool]
    sources: tuple[str, ...]
    assumed: tuple[str, ...] = ()  # the figures no source gives
    profile: str | None = None  # cloud: the caps' formula (spec/profiles.py)
    extra: Mapping[str, float] = field(default_factory=dict)


def _hdd(rpm: int, t2t: float, avg: float, full: float, outer: float) -> dict[str, float]:
    return {
        "rpm": rpm,
        "track_to_track_ms": t2t,
        "average_seek_ms": avg,
        "full_stroke_ms": full,
        "outer_mbps": outer,
        "inner_mbps": outer / 2,
        "drive_bytes": float(1 << 40),
        "write_cache": True,
        "write_cache_bytes": 64 * MIB,
        "queue_depth": 32,
        "interface_mbps": 550.0,
        "command_overhead_ms": 0.05,
        "read_ahead_bytes": 1 * MIB,
    }


def _cloud(read_ms: float, write_ms: float, unit_kib: int) -> dict[str, float]:
    return {
        "read_ms": read_ms,
        "write_ms": write_ms,
        "io_unit_bytes": unit_kib * 1024,
        "burst_seconds": 0.1,
    }


HDD_ASSUMED = (
    "a 1 TiB drive (the device is its outer part; `drive` changes it)",
    "64 MiB write cache, on (`write_cache = false` turns it off)",
    "1 MiB read-ahead, 0.05 ms command overhead, a 550 MB/s SATA link",
)

MODELS: dict[str, DeviceModel] = {
    m.name: m
    for m in (
        DeviceModel(
            "zero",
            "no latency of its own (what is left is the emulation layer's cost)",
            "zero",
            {},
            ("bench/device_model.py measures the layer",),
        ),
        DeviceModel(
            "hdd-7200",
            "7200 rpm hard disk",
            "hdd",
            _hdd(7200, 1.0, 8.2, 20.0, 190.0),
            (HGST_7K4000, HITACHI_7K320, ZONES, RUEMMLER),
            (
                "190 MB/s at the outer zone (7200 rpm 3.5-inch drives publish 160-210 MB/s)",
                *HDD_ASSUMED,
            ),
        ),
        DeviceModel(
            "hdd-5400",
            "5400 rpm hard disk",
            "hdd",
            _hdd(5400, 1.0, 12.0, 20.0, 140.0),
            (HITACHI_5K320, ZONES, RUEMMLER),
            ("140 MB/s at the outer zone", *HDD_ASSUMED),
        ),
        DeviceModel(
            "sata-ssd",
            "SATA SSD",
            "ssd",
            {
                "read_us": 77.0,  # 1 / 13,000 IOPS at QD1
                "write_us": 28.0,  # 1 / 36,000
                "channels": 8,  # 98,000 IOPS at QD32 x 77 us = 7.5 in parallel
                "read_mbps": 560.0,
                "write_mbps": 530.0,
                "flush_us": 500.0,
            },
            (SAMSUNG_870,),
            ("a flush takes 0.5 ms (a consumer drive without power-loss protection)",),
        ),
        DeviceModel(
            "nvme-ssd",
            "data-center NVMe SSD (PCIe 3.0 x4)",
            "ssd",
            {
                "read_us": 85.0,  # random read latency (typical)
                "write_us": 20.0,  # random write latency: into the drive's protected cache
                "channels": 42,  # 490,000 IOPS x 85 us = 41.7 reads in flight
                "read_mbps": 3200.0,
                "write_mbps": 1050.0,
                "flush_us": 0.0,
            },
            (INTEL_P4500,),
            (
                "a flush costs nothing of its own: the cache is protected against power loss "
                "(Intel's data-center drives have it; assumed, not in the guide)",
                "steady-state random writes of a full drive (38,000 IOPS: garbage collection) "
                "are not modelled: writes run at their latency up to the link's 1.05 GB/s",
            ),
        ),
        DeviceModel(
            "gp2",
            "AWS EBS gp2 with burst credits",
            "cloud",
            _cloud(0.8, 1.0, 256),
            (AWS_GP2, AWS_EBS),
            ("round trip 0.8 ms read / 1 ms write (AWS: 'single-digit millisecond')",),
            profile="gp2",
            extra={"credit_ios": 5.4e6, "burst_iops": 3000.0},
        ),
        DeviceModel(
            "gp3",
            "AWS EBS gp3",
            "cloud",
            _cloud(0.8, 1.0, 256),
            (AWS_GP2, AWS_EBS),
            ("round trip 0.8 ms read / 1 ms write (AWS: 'single-digit millisecond')",),
            profile="gp3",
        ),
        DeviceModel(
            "io2",
            "AWS EBS io2",
            "cloud",
            _cloud(0.5, 0.5, 256),
            (AWS_EBS,),
            ("round trip 0.5 ms (AWS: 'sub-millisecond' for io2 Block Express)",),
            profile="io2",
        ),
        *(
            DeviceModel(
                f"essd-{level}",
                f"Alibaba Cloud ESSD {level.upper()}",
                "cloud",
                _cloud(rtt, rtt, 16),
                (ALIBABA_ESSD, "IOPS counted per 16 KiB"),
                (f"round trip {rtt} ms (Alibaba gives about 0.2 ms for PL1 and above)",),
                profile=f"essd-{level}",
            )
            for level, rtt in (("pl0", 0.3), ("pl1", 0.2), ("pl2", 0.2), ("pl3", 0.2))
        ),
        *(
            DeviceModel(
                name,
                PROFILES[name].title,
                "cloud",
                _cloud(rtt, rtt, 256),
                (PROFILES[name].source,),
                (f"round trip {rtt} ms, IOPS counted per 256 KiB",),
                profile=name,
            )
            for name, rtt in (("pd-balanced", 1.0), ("pd-ssd", 0.5), ("azure-premium", 2.0))
        ),
    )
}


@dataclass(frozen=True)
class ResolvedModel:
    """What one device runs: the daemon's parameters and a line for the reports."""

    name: str
    params: dict[str, float | int | bool | str]
    text: str  # "hdd-7200 (7200 rpm hard disk, write cache on)"

    def json(self) -> str:
        return json.dumps(self.params, sort_keys=True)


def resolve_model(
    name: str,
    size_bytes: int,
    *,
    write_cache: bool | None = None,
    drive_bytes: int | None = None,
) -> ResolvedModel:
    """A named model for a device of ``size_bytes``: an HDD is the outer part of a drive of
    ``drive_bytes`` (default 1 TiB); a cloud volume's caps follow its size, as its
    provider's formula says."""
    m = MODELS[name]
    params: dict[str, float | int | bool | str] = {"kind": m.kind, **m.params}
    notes = []
    if m.kind == "hdd":
        if drive_bytes is not None:
            params["drive_bytes"] = float(max(drive_bytes, size_bytes))
        if write_cache is not None:
            params["write_cache"] = write_cache
        notes.append("write cache " + ("on" if params["write_cache"] else "off"))
    if m.profile is not None:
        capacity = drive_bytes or size_bytes
        caps = PROFILES[m.profile].figures(capacity / GIB)
        iops = float(min(caps.read_iops or 0, caps.write_iops or 0) or 1e9)
        mbps = float(min(caps.read_mbps or 0, caps.write_mbps or 0) or 1e6)
        params.update(iops=iops, mbps=mbps, capacity_bytes=float(capacity))
        if "credit_ios" in m.extra:  # gp2: bursts to 3,000 IOPS while credits last
            params.update(
                baseline_iops=iops,
                credit_ios=m.extra["credit_ios"],
                iops=max(iops, m.extra["burst_iops"]),
            )
        notes.append(f"{capacity / GIB:,.0f} GiB: {iops:,.0f} IOPS, {mbps:,.0f} MB/s")
    text = f"{name} ({m.title}" + "".join(f", {n}" for n in notes) + ")"
    return ResolvedModel(name, params, text)
