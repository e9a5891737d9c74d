"""Device profiles: the IOPS and bandwidth of a kind of device, as published by its maker or
cloud, as a function of the device's capacity (pure data and arithmetic).

A profile is emulated by throttling (see storage/limits.py): it caps IOPS and bandwidth.
It cannot add latency: an HDD is emulated by its IOPS and bandwidth, not by its seek time,
and a cloud volume's network round trip is not there either.

Bandwidth is in MB/s (10^6 bytes/s) unless a source gives MiB/s, which is converted.
Cloud figures are the baseline a volume sustains (burst credits are not emulated).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GIB = 1 << 30
MIB_S = 1.048576  # MB/s per MiB/s


@dataclass(frozen=True)
class Figures:
    """Caps for one device (None: no cap)."""

    read_iops: int | None = None
    write_iops: int | None = None
    read_mbps: float | None = None
    write_mbps: float | None = None

    def is_unlimited(self) -> bool:
        return all(
            v is None for v in (self.read_iops, self.write_iops, self.read_mbps, self.write_mbps)
        )

    def describe(self) -> str:
        if self.is_unlimited():
            return "no limit"

        def pair(r: float | None, w: float | None, unit: str, fmt: str) -> str | None:
            if r is None and w is None:
                return None
            if r == w:
                return f"{format(r, fmt)} {unit}"
            return (
                f"{format(r, fmt) if r is not None else '-'} read / "
                f"{format(w, fmt) if w is not None else '-'} write {unit}"
            )

        small = min(v for v in (self.read_mbps, self.write_mbps, 1000.0) if v is not None)
        parts = [
            pair(self.read_iops, self.write_iops, "IOPS", ",d"),
            pair(self.read_mbps, self.write_mbps, "MB/s", ",.1f" if small < 100 else ",.0f"),
        ]
        return ", ".join(p for p in parts if p)


@dataclass(frozen=True)
class Profile:
    name: str
    title: str
    formula: str  # how the figures follow from the capacity, in the source's words
    source: str  # where the figures are published
    figures: Callable[[float], Figures]  # capacity in GiB -> caps
    capacity_matters: bool = True


def _hdd(seek_ms: float, rpm: int, mbps: float) -> Callable[[float], Figures]:
    iops = int(1000 / (seek_ms + 30_000 / rpm))  # one seek and half a turn per random I/O
    return lambda gib: Figures(iops, iops, mbps, mbps)


def _gp2(gib: float) -> Figures:
    iops = int(max(100, min(3 * gib, 16_000)))
    mibs = min(250.0, max(128.0, 0.75 * gib))  # 3 IOPS/GiB x 256 KiB, 128 to 250 MiB/s
    return Figures(iops, iops, round(mibs * MIB_S, 1), round(mibs * MIB_S, 1))


def _gp3(gib: float) -> Figures:
    return Figures(3000, 3000, round(125 * MIB_S, 1), round(125 * MIB_S, 1))


def _io2(gib: float) -> Figures:
    iops = int(min(500 * gib, 64_000))
    mibs = min(1000.0, iops * 16 / 1024)  # 16 KiB I/O
    return Figures(iops, iops, round(mibs * MIB_S, 1), round(mibs * MIB_S, 1))


def _gcp(
    per_gib_iops: float,
    base_iops: int,
    max_iops: int,
    per_gib_mibs: float,
    base_mibs: float,
    max_mibs: float,
) -> Callable[[float], Figures]:
    def figures(gib: float) -> Figures:
        iops = int(min(max(base_iops, per_gib_iops * gib), max_iops))
        mibs = min(max(base_mibs, per_gib_mibs * gib), max_mibs)
        return Figures(iops, iops, round(mibs * MIB_S, 1), round(mibs * MIB_S, 1))

    return figures


# Azure Premium SSD (v1) tiers: a disk gets the figures of the smallest tier it fits in
AZURE_P = (
    (4, "P1", 120, 25),
    (8, "P2", 120, 25),
    (16, "P3", 120, 25),
    (32, "P4", 120, 25),
    (64, "P6", 240, 50),
    (128, "P10", 500, 100),
    (256, "P15", 1100, 125),
    (512, "P20", 2300, 150),
    (1024, "P30", 5000, 200),
    (2048, "P40", 7500, 250),
    (4096, "P50", 7500, 250),
    (8192, "P60", 16000, 500),
    (16384, "P70", 18000, 750),
    (32767, "P80", 20000, 900),
)


def azure_tier(gib: float) -> tuple[str, int, int]:
    for size, name, iops, mbps in AZURE_P:
        if gib <= size:
            return name, iops, mbps
    size, name, iops, mbps = AZURE_P[-1]
    return name, iops, mbps


def _azure(gib: float) -> Figures:
    _, iops, mbps = azure_tier(gib)
    return Figures(iops, iops, float(mbps), float(mbps))


def _essd(
    per_gib: float, base: int, top: int, mb_base: float, mb_per_gib: float, mb_top: float
) -> Callable[[float], Figures]:
    def figures(gib: float) -> Figures:
        iops = int(min(base + per_gib * gib, top))
        mbps = min(mb_base + mb_per_gib * gib, mb_top)
        return Figures(iops, iops, mbps, mbps)

    return figures


ALIBABA = "https://www.alibabacloud.com/help/en/elastic-compute-service/latest/essds"
GCP = "https://cloud.google.com/compute/docs/disks/performance"
AWS = "https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html"

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "hdd-7200",
            "7200 rpm hard disk",
            "IOPS = 1000 / (average seek 8.5 ms + half a turn 4.17 ms) = 78; 150 MB/s "
            "sustained transfer",
            "seek and rotation: the usual 7200 rpm desktop drive datasheet (e.g. HGST Deskstar "
            "7K1000.C, 8.2 ms average read seek); transfer: 150 MB/s outer to inner average",
            _hdd(8.5, 7200, 150.0),
            capacity_matters=False,
        ),
        Profile(
            "hdd-5400",
            "5400 rpm hard disk",
            "IOPS = 1000 / (average seek 12 ms + half a turn 5.56 ms) = 56; 110 MB/s",
            "seek and rotation of 5400 rpm drives (e.g. WD Red 5400-class datasheets); "
            "transfer: 110 MB/s average",
            _hdd(12.0, 5400, 110.0),
            capacity_matters=False,
        ),
        Profile(
            "sata-ssd",
            "SATA SSD",
            "98,000 read / 88,000 write IOPS (4 KiB, QD32), 560 / 530 MB/s sequential",
            "Samsung 870 EVO datasheet (random 4 KB QD32, sequential 128 KB)",
            lambda gib: Figures(98_000, 88_000, 560.0, 530.0),
            capacity_matters=False,
        ),
        Profile(
            "nvme",
            "NVMe SSD (no limit: the loop device's own speed)",
            "no cap",
            "-",
            lambda gib: Figures(),
            capacity_matters=False,
        ),
        Profile(
            "gp2",
            "AWS EBS gp2 (baseline)",
            "IOPS = 3 x GiB, between 100 and 16,000; throughput = 3 IOPS/GiB x 256 KiB, "
            "128 MiB/s at least (burst credits not emulated), 250 MiB/s at most",
            AWS,
            _gp2,
        ),
        Profile(
            "gp3",
            "AWS EBS gp3 (baseline)",
            "3,000 IOPS and 125 MiB/s whatever the size (more is provisioned: override "
            "read_iops/write_iops/read_mbps/write_mbps, up to 16,000 IOPS and 1,000 MiB/s)",
            AWS,
            _gp3,
            capacity_matters=False,
        ),
        Profile(
            "io2",
            "AWS EBS io2 (at 500 IOPS per GiB)",
            "IOPS = min(500 x GiB, 64,000); throughput = IOPS x 16 KiB, at most 1,000 MiB/s",
            "https://docs.aws.amazon.com/ebs/latest/userguide/provisioned-iops.html",
            _io2,
        ),
        Profile(
            "pd-balanced",
            "GCP balanced persistent disk",
            "IOPS = max(3,000, 6 x GiB), at most 80,000; throughput = max(140, 0.28 x GiB) "
            "MiB/s, at most 1,200",
            GCP,
            _gcp(6, 3000, 80_000, 0.28, 140, 1200),
        ),
        Profile(
            "pd-ssd",
            "GCP SSD persistent disk",
            "IOPS = max(6,000, 30 x GiB), at most 100,000; throughput = max(240, 0.48 x GiB) "
            "MiB/s, at most 1,200",
            GCP,
            _gcp(30, 6000, 100_000, 0.48, 240, 1200),
        ),
        Profile(
            "azure-premium",
            "Azure Premium SSD (the tier the capacity falls in)",
            "tiers P1 (4 GiB, 120 IOPS, 25 MB/s) to P80 (32,767 GiB, 20,000 IOPS, 900 MB/s); "
            "e.g. P10 128 GiB 500 IOPS 100 MB/s, P30 1 TiB 5,000 IOPS 200 MB/s",
            "https://learn.microsoft.com/azure/virtual-machines/disks-types#premium-ssds",
            _azure,
        ),
        Profile(
            "essd-pl0",
            "Alibaba Cloud ESSD PL0",
            "IOPS = min(1,800 + 12 x GiB, 10,000); MB/s = min(100 + 0.25 x GiB, 180)",
            ALIBABA,
            _essd(12, 1800, 10_000, 100, 0.25, 180),
        ),
        Profile(
            "essd-pl1",
            "Alibaba Cloud ESSD PL1",
            "IOPS = min(1,800 + 50 x GiB, 50,000); MB/s = min(120 + 0.5 x GiB, 350)",
            ALIBABA,
            _essd(50, 1800, 50_000, 120, 0.5, 350),
        ),
        Profile(
            "essd-pl2",
            "Alibaba Cloud ESSD PL2",
            "IOPS = min(1,800 + 50 x GiB, 100,000); MB/s = min(120 + 0.5 x GiB, 750)",
            ALIBABA,
            _essd(50, 1800, 100_000, 120, 0.5, 750),
        ),
        Profile(
            "essd-pl3",
            "Alibaba Cloud ESSD PL3",
            "IOPS = min(1,800 + 50 x GiB, 1,000,000); MB/s = min(120 + 0.5 x GiB, 4,000)",
            ALIBABA,
            _essd(50, 1800, 1_000_000, 120, 0.5, 4000),
        ),
    )
}


@dataclass(frozen=True)
class Resolved:
    """The caps a device gets: the profile's at its capacity, with the spec's overrides."""

    figures: Figures
    profile: str | None
    capacity_gib: float | None
    text: str  # "essd-pl1 at 300 GiB: 16,800 IOPS, 270 MB/s"


def resolve(
    profile: str | None, capacity_bytes: int | None, overrides: Figures = Figures()
) -> Resolved:
    base = Figures()
    gib = None
    if profile is not None:
        p = PROFILES[profile]
        gib = (capacity_bytes / GIB) if capacity_bytes else None
        if p.capacity_matters and gib is None:
            raise ValueError(f"profile {profile} depends on the capacity: give capacity")
        base = p.figures(gib or 0.0)

    def pick(o: Any, b: Any) -> Any:
        return o if o is not None else b

    merged = Figures(
        pick(overrides.read_iops, base.read_iops),
        pick(overrides.write_iops, base.write_iops),
        pick(overrides.read_mbps, base.read_mbps),
        pick(overrides.write_mbps, base.write_mbps),
    )
    where = ""
    if profile is not None:
        where = profile + (
            f" at {math.floor(gib):,} GiB" if gib and PROFILES[profile].capacity_matters else ""
        )
        if merged != base:
            where += " (with overrides)"
        where += ": "
    return Resolved(merged, profile, gib, where + merged.describe())


# ---------------------------------------------------------------- prices

READ_ON = "2026-11-26"  # the day the pages below were read (stored copies, no live fetch)


@dataclass(frozen=True)
class Price:
    """What a cloud volume costs a month, in USD, as published for one region: capacity
    (per GiB, or the tier the capacity falls in), plus what is provisioned beyond what the
    capacity includes (IOPS, MB/s). Instances are not included: a volume's price only."""

    region: str
    source: str  # where it was read
    read: str = READ_ON
    per_gib_month: float | None = None
    tiers: tuple[tuple[float, str, float], ...] = ()  # (up to GiB, tier, USD a month)
    per_iops_month: float = 0.0  # beyond iops_included
    iops_included: float = 0.0
    iops_read_up_to: float = math.inf  # above this the source's next IOPS tier was not read
    per_mbps_month: float = 0.0  # beyond mbps_included (MB/s, as the source gives it)
    mbps_included: float = 0.0


@dataclass(frozen=True)
class VolumeCost:
    profile: str
    capacity_gib: float
    usd_month: float | None  # None: no price known (``why``)
    parts: tuple[str, ...] = ()  # "300 GiB x $0.08", "2,000 IOPS x $0.005"...
    why: str = ""
    source: str = ""
    read: str = ""
    region: str = ""

    def text(self) -> str:
        if self.usd_month is None:
            return f"{self.profile} {self.capacity_gib:,.0f} GiB: {self.why}"
        return (
            f"{self.profile} {self.capacity_gib:,.0f} GiB: ${self.usd_month:,.2f}/month "
            f"({' + '.join(self.parts)}; {self.region}, read {self.read})"
        )


_AWS_PRICES = (
    "AWS EBS pricing page (N. Virginia) as quoted in saisci.com, 'gp2 vs gp3 Cost "
    "Comparison - EBS Volumes' (2021-02-04), "
    "https://www.saisci.com/aws/gp2-vs-gp3-cost-comparison-ebs-volumes/"
)
PRICES: dict[str, Price] = {
    "gp2": Price("us-east-1", _AWS_PRICES, per_gib_month=0.10),
    "gp3": Price(
        "us-east-1",
        _AWS_PRICES,
        per_gib_month=0.08,
        per_iops_month=0.005,
        iops_included=3000,
        per_mbps_month=0.04,
        mbps_included=125 * MIB_S,  # "125 MB/s free": the baseline, 125 MiB/s
    ),
    "pd-ssd": Price(
        "US",
        "Google Cloud, 'Disk and image pricing' (cloud.google.com/compute/disks-image-pricing):"
        " 'a 200 GB SSD Persistent Disk volume would cost $34.00 for the whole month'",
        per_gib_month=0.17,
    ),
    "pd-balanced": Price(
        "US",
        "c3x.dev, 'GCP persistent disk types cost' (pd-balanced ~$0.10 per GB-month), "
        "https://c3x.dev/blog/gcp-persistent-disk-types-cost/",
        per_gib_month=0.10,
    ),
    "io2": Price(
        "us-east-1",
        "AWS's own agent toolkit, 'EBS Volume Optimization' (us-east-1, early 2026: 'io1 vs "
        "io2 Same price ($0.125/GB + $0.065/PIOPS)'), https://github.com/aws/"
        "agent-toolkit-for-aws (skills/core-skills/aws-billing-and-cost-management/"
        "references/ebs-optimization.md); awsnegotiations.com: the first 32,000 IOPS at one "
        "rate, above at a lower one (that rate not read)",
        per_gib_month=0.125,
        per_iops_month=0.065,
        iops_read_up_to=32_000,
    ),
    "azure-premium": Price(
        "US",
        "TechTarget, 'How does Azure Premium Storage billing work?' (P10 $19.71, P20 $73.22, "
        "P30 $135.17 a month; P30 again in lucidity.cloud, 2026-05); other tiers not read",
        tiers=((128, "P10", 19.71), (512, "P20", 73.22), (1024, "P30", 135.17)),
    ),
}
NO_PRICE = {
    "essd-pl0": "Alibaba Cloud's ESSD prices were not read (they vary by region)",
    "essd-pl1": "Alibaba Cloud's ESSD prices were not read (they vary by region)",
    "essd-pl2": "Alibaba Cloud's ESSD prices were not read (they vary by region)",
    "essd-pl3": "Alibaba Cloud's ESSD prices were not read (they vary by region)",
}


def volume_cost(
    profile: str,
    capacity_gib: float,
    iops: float | None,
    mbps: float | None,
    prices: dict[str, Price] | None = None,
) -> VolumeCost | None:
    """A capped volume's monthly price (None: not a cloud volume). ``iops``/``mbps``: what
    it is provisioned with (the profile's own figures unless overridden)."""
    table = PRICES if prices is None else {**PRICES, **prices}
    price = table.get(profile)
    if price is None:
        if profile in NO_PRICE:
            return VolumeCost(
                profile, capacity_gib, None, why=f"no price: {NO_PRICE[profile]}; --price-file"
            )
        return None
    parts: list[str] = []
    total = 0.0
    if price.tiers:
        tier = next((t for t in price.tiers if capacity_gib <= t[0]), None)
        if tier is None:
            return VolumeCost(
                profile,
                capacity_gib,
                None,
                why=f"no price for {capacity_gib:,.0f} GiB (tiers read up to "
                f"{price.tiers[-1][0]:,.0f} GiB); --price-file",
            )
        total += tier[2]
        parts.append(f"{tier[1]} ${tier[2]:,.2f}")
    if price.per_gib_month is not None:
        total += capacity_gib * price.per_gib_month
        parts.append(f"{capacity_gib:,.0f} GiB x ${price.per_gib_month:g}")
    if iops and iops > price.iops_read_up_to:
        return VolumeCost(
            profile,
            capacity_gib,
            None,
            why=f"no price for {iops:,.0f} IOPS (the rate was read up to "
            f"{price.iops_read_up_to:,.0f}; the next tier's was not); --price-file",
        )
    if price.per_iops_month and iops and iops > price.iops_included:
        extra = iops - price.iops_included
        total += extra * price.per_iops_month
        parts.append(f"{extra:,.0f} IOPS x ${price.per_iops_month:g}")
    if price.per_mbps_month and mbps and mbps > price.mbps_included + 0.05:
        extra = mbps - price.mbps_included
        total += extra * price.per_mbps_month
        parts.append(f"{extra:,.1f} MB/s x ${price.per_mbps_month:g}")
    return VolumeCost(
        profile,
        capacity_gib,
        round(total, 2),
        tuple(parts),
        source=price.source,
        read=price.read,
        region=price.region,
    )
