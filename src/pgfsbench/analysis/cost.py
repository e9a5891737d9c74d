"""What a transaction costs on a cloud volume: a capped cell's monthly volume price and its
price per 1,000 TPS sustained (pure).

The volumes are those a run capped to a cloud profile (`limits = { profile = "gp3" }`) or
emulated with a cloud model (`device = { model = "gp3" }`), at the capacity and with the
IOPS and MB/s they were given; their prices are `storage.profiles.PRICES` (each with its
source and the day it was read) or the user's (`--price-file`). The instance the database
runs on is not included: a volume's price only. A volume without a known price makes the
cell's cost unknown, and says why.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.results.records import StoredRun
from pgfsbench.spec.profiles import GIB, PRICES, Price, VolumeCost, volume_cost

INSTANCE_NOTE = "volume prices only: the instance is not included"


@dataclass(frozen=True)
class RunCost:
    volumes: tuple[VolumeCost, ...]

    @property
    def usd_month(self) -> float | None:
        if not self.volumes or any(v.usd_month is None for v in self.volumes):
            return None
        return round(sum(v.usd_month or 0.0 for v in self.volumes), 2)

    @property
    def why(self) -> str:
        return "; ".join(v.why for v in self.volumes if v.usd_month is None)

    def per_1000_tps(self, tps: float | None) -> float | None:
        """Dollars a month per 1,000 TPS the cell sustained."""
        usd = self.usd_month
        if usd is None or not tps or tps <= 0:
            return None
        return round(usd / (tps / 1000.0), 2)

    def text(self) -> str:
        return "; ".join(v.text() for v in self.volumes)


def _figure(entry: Mapping[str, object], *keys: str) -> float | None:
    found = [float(v) for k in keys if isinstance(v := entry.get(k), int | float)]
    return max(found) if found else None


def run_cost(run: StoredRun, prices: Mapping[str, Price] | None = None) -> RunCost | None:
    """The monthly price of a run's capped cloud volumes (None: none is a cloud volume)."""
    table = dict(prices) if prices is not None else None
    volumes: list[VolumeCost] = []
    for entry in run.storage_details.get("device_limits") or []:
        if not isinstance(entry, Mapping) or not entry.get("profile"):
            continue
        gib = entry.get("capacity_gib")
        if not isinstance(gib, int | float):
            continue
        iops = _figure(entry, "read_iops", "write_iops")
        bps = _figure(entry, "read_bps", "write_bps")
        cost = volume_cost(
            str(entry["profile"]),
            float(gib),
            iops,
            bps / 1e6 if bps is not None else None,
            table,
        )
        if cost is not None:
            volumes.append(cost)
    for dev in (run.storage_details.get("emulated_devices") or {}).values():
        if not isinstance(dev, Mapping):
            continue
        params = dev.get("device_model_params") or {}
        capacity = params.get("capacity_bytes") if isinstance(params, Mapping) else None
        if not isinstance(capacity, int | float):
            continue
        iops = _figure(params, "baseline_iops") or _figure(params, "iops")
        cost = volume_cost(
            str(dev.get("device_model")),
            float(capacity) / GIB,
            iops,
            _figure(params, "mbps"),
            table,
        )
        if cost is not None:
            volumes.append(cost)
    return RunCost(tuple(volumes)) if volumes else None


def load_price_file(path: Path) -> dict[str, Price]:
    """A TOML file of one's own prices, one table per profile:

    [gp3]
    region = "eu-west-1"
    source = "our contract, 2026-10"
    per_gib_month = 0.088
    per_iops_month = 0.0055
    iops_included = 3000
    per_mbps_month = 0.044
    mbps_included = 131.1
    # tiers = [[128, "P10", 21.0], [512, "P20", 78.0]]  (tiered disks)
    """
    data = tomllib.loads(path.read_text())
    out: dict[str, Price] = {}
    allowed = {
        "region",
        "source",
        "read",
        "per_gib_month",
        "tiers",
        "per_iops_month",
        "iops_included",
        "iops_read_up_to",
        "per_mbps_month",
        "mbps_included",
    }
    for profile, row in data.items():
        if not isinstance(row, dict):
            raise ValueError(f"{path}: [{profile}] must be a table")
        unknown = set(row) - allowed
        if unknown:
            raise ValueError(f"{path}: [{profile}] has unknown key(s) {', '.join(sorted(unknown))}")
        if "per_gib_month" not in row and "tiers" not in row:
            raise ValueError(f"{path}: [{profile}] needs per_gib_month or tiers")
        tiers = tuple((float(t[0]), str(t[1]), float(t[2])) for t in row.get("tiers", []))
        out[str(profile)] = Price(
            region=str(row.get("region", "")),
            source=str(row.get("source", str(path))),
            read=str(row.get("read", "given")),
            per_gib_month=(
                float(row["per_gib_month"]) if row.get("per_gib_month") is not None else None
            ),
            tiers=tiers,
            per_iops_month=float(row.get("per_iops_month", 0.0)),
            iops_included=float(row.get("iops_included", 0.0)),
            iops_read_up_to=float(row.get("iops_read_up_to", math.inf)),
            per_mbps_month=float(row.get("per_mbps_month", 0.0)),
            mbps_included=float(row.get("mbps_included", 0.0)),
        )
    return out


__all__ = ["INSTANCE_NOTE", "PRICES", "RunCost", "load_price_file", "run_cost"]
