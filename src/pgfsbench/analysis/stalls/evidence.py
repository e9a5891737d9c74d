"""The evidence of an episode's seconds, compared with the rest of its run: what each
hypothesis reads."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from pgfsbench.analysis.series import Aligned, median_finite
from pgfsbench.analysis.stalls.model import IO_WAITS, Clue, _blocked_key, wchan_kind
from pgfsbench.analysis.stalls.thresholds import GOOD

# ---------------------------------------------------------------- the evidence


class Context:
    """The seconds of one episode, and the rest of the run to compare them with (the
    seconds of no episode; those next to one are left out when enough remain)."""

    def __init__(self, al: Aligned, a: int, b: int, inside: np.ndarray):
        self.al, self.a, self.b = al, a, b
        calm = ~inside
        near = inside.copy()
        near[1:] |= inside[:-1]
        near[:-1] |= inside[1:]
        self.base = calm & ~near if (calm & ~near).sum() >= 3 else calm
        self.n = b - a + 1
        self.throughput_name = "tps" if al.has("tps") else "tps_log"

    # numeric series
    def _in(self, name: str, pad: int = 0) -> np.ndarray:
        v = self.al.get(name)[max(0, self.a - pad) : self.b + 1 + pad]
        out: np.ndarray = v[np.isfinite(v)]
        return out

    def mean_in(self, name: str, pad: int = 0) -> float:
        v = self._in(name, pad)
        return float(v.mean()) if v.size else math.nan

    def max_in(self, name: str) -> float:
        v = self._in(name)
        return float(v.max()) if v.size else math.nan

    def min_in(self, name: str) -> float:
        v = self._in(name)
        return float(v.min()) if v.size else math.nan

    def seconds_below(self, name: str, floor: float) -> int:
        """Seconds of the episode where a series was at or below ``floor``."""
        v = self._in(name)
        return int((v <= floor).sum())

    def min_tps_share(self) -> float:
        """The episode's lowest throughput as a share of the usual (0: a full stop)."""
        low, usual = self.min_in(self.throughput_name), self.usual(self.throughput_name)
        return low / usual if math.isfinite(low) and math.isfinite(usual) and usual > 0 else 1.0

    def usual(self, name: str) -> float:
        v = self.al.get(name)
        return median_finite(v[self.base]) if self.base.any() else math.nan

    def at(self, name: str, i: int) -> float:
        return float(self.al.get(name)[i]) if 0 <= i < self.al.seconds else math.nan

    def rose(self, name: str, factor: float, floor: float) -> tuple[float, float] | None:
        """(during, usual) when a series' mean in the episode is at least ``factor`` times
        its usual value and above ``floor``; None otherwise."""
        inside, usual = self.mean_in(name), self.usual(name)
        if not math.isfinite(inside) or inside < floor:
            return None
        u = usual if math.isfinite(usual) else 0.0
        return (inside, u) if inside >= factor * u else None

    # wait events
    def _mean_waits(self, seconds: Iterable[int]) -> dict[str, float]:
        total: dict[str, float] = {}
        idx = list(seconds)
        for i in idx:
            for event, n in self.al.waits[i].items():
                total[event] = total.get(event, 0.0) + float(n)
        return {e: n / len(idx) for e, n in total.items()} if idx else {}

    def waits_in(self) -> dict[str, float]:
        """Backends per wait event, on average over the episode."""
        if not self.al.waits:
            return {}
        return self._mean_waits(range(self.a, self.b + 1))

    def waits_usual(self) -> dict[str, float]:
        if not self.al.waits:
            return {}
        return self._mean_waits(np.flatnonzero(self.base).tolist())

    def excess_waits(self) -> dict[str, float]:
        """Backends per wait event above the rest of the run (not on the CPU or their
        client): what the episode added."""
        usual = self.waits_usual()
        return {
            e: n - usual.get(e, 0.0)
            for e, n in self.waits_in().items()
            if not e.startswith(("CPU/", "Client/", "Activity/")) and n - usual.get(e, 0.0) > 0.05
        }

    # structured series
    def structured_in(self, name: str) -> list[Any]:
        """A structured series' values during the episode (None where not sampled)."""
        values = self.al.structured.get(name) or []
        return values[self.a : self.b + 1]

    def blocked_in(self) -> tuple[int, dict[tuple[bool, str, str], float]]:
        """(seconds sampled, average processes in uninterruptible sleep per (benchmark?,
        wait kind, where)) over the episode."""
        sampled = [v for v in self.structured_in("blocked") if v is not None]
        totals: dict[tuple[bool, str, str], float] = {}
        for sec in sampled:
            for key, n in sec.items():
                who, wchan, where, _ = _blocked_key(key)
                k = (who == "benchmark", wchan_kind(wchan) + ":" + wchan, where)
                totals[k] = totals.get(k, 0.0) + n
        return len(sampled), {k: v / len(sampled) for k, v in totals.items()} if sampled else {}

    def seconds_blocked(self, kind: str, on_test: bool = True) -> int:
        """Sampled seconds of the episode where a benchmark process slept in the kernel in
        a wait of this kind (on a volume under test)."""
        count = 0
        for sec in self.structured_in("blocked"):
            if not sec:
                continue
            for key in sec:
                who, wchan, where, _ = _blocked_key(key)
                if (
                    who == "benchmark"
                    and wchan_kind(wchan) == kind
                    and (not on_test or where not in ("elsewhere", "unknown"))
                ):
                    count += 1
                    break
        return count

    def caps(self) -> list[tuple[str, float, float, str, bool, bool]]:
        """(series, cap, rate, unit, put on during the episode, at the cap the rest of the
        run too) of each I/O limit the devices under test wrote at. The limits are those
        in effect each second where recorded (a limit someone sets during a run counts),
        else the spec's. A throttle releases writes in bursts, so the rate is taken over
        the episode and 2 s either side (the seconds of it under the limit)."""
        found = []
        lo, hi = max(0, self.a - 2), min(self.al.seconds, self.b + 3)
        for name, unit, series in (
            ("write_mbps", "MB/s", "disk_write_mbps"),
            ("write_iops", "IOPS", "disk_write_iops"),
        ):
            if not self.al.has(series):
                continue
            rates, limits = self.al.get(series)[lo:hi], self.al.get(f"cap_{name}")[lo:hi]
            usual_rate = self.usual(series)
            if np.isfinite(limits).any():  # recorded each second
                under = np.isfinite(limits) & np.isfinite(rates)
                cap, rate = float(np.median(limits[under])), float(np.mean(rates[under]))
                before = self.usual(f"cap_{name}")
                new = not math.isfinite(before) or before > 1.5 * cap
                always = math.isfinite(before) and usual_rate >= 0.85 * before
            elif self.al.limits.get(name):
                cap, rate = float(self.al.limits[name]), self.mean_in(series, pad=2)
                new, always = False, usual_rate >= 0.85 * cap
            else:
                continue
            if math.isfinite(rate) and rate >= 0.85 * cap:
                found.append((series, cap, rate, unit, new, bool(always)))
        return found

    def cap(self) -> bool:
        return bool(self.caps())

    def cap_clue(self) -> Clue | None:
        parts = []
        for series, cap, rate, unit, new, always in self.caps():
            usual = self.usual(series)
            parts.append(
                f"{rate:,.1f} {unit} around the episode; cap {cap:,.4g} {unit}"
                + (", put on the device during the episode" if new else "")
                + "; "
                + (
                    "at the cap the rest of the run too"
                    if always
                    else f"{usual:,.1f} the rest of the run"
                    if math.isfinite(usual)
                    else "nothing the rest of the run"
                )
            )
        if not parts:
            return None
        return Clue(f"writes at the device's limit ({'; '.join(parts)})", GOOD)

    def io_waits(self) -> tuple[float, str]:
        """Backends waiting on I/O or WAL (above the rest of the run), and the top ones."""
        ex = {e: n for e, n in self.excess_waits().items() if e.startswith(IO_WAITS)}
        return sum(ex.values()), top(ex)

    def missing(self) -> list[str]:
        out = []
        if not self.al.waits:
            out.append("wait events (samplers off)")
        if not self.al.sampled("blocked"):
            out.append("the process table (processes stuck in the kernel, outside processes)")
        if not self.al.sampled("blockers"):
            out.append("lock blockers")
        if not self.al.has("disk_write_mbps"):
            out.append("device I/O")
        elif self.al.under_test and not self.al.beneath:
            pass  # real devices: nothing beneath them
        if not self.al.has("dirty_kb"):
            out.append("dirty and writeback memory")
        if not self.al.has("lat_p99_ms"):
            out.append("per-second latency (transaction log)")
        return out

    def span(self) -> tuple[float, float]:
        return float(self.a), float(self.b + 1)

    def calm_share(self, lo: float, hi: float) -> float:
        """The share of the rest of the run's seconds that overlap [lo, hi] (seconds of
        the measured phase): near 1 for something that was there all along."""
        idx = np.flatnonzero(self.base)
        if not idx.size:
            return math.nan
        return float(np.mean((idx + 1 > lo) & (idx < hi)))


def top(waits: dict[str, float], k: int = 4) -> str:
    return ", ".join(f"{e} {n:.1f}" for e, n in sorted(waits.items(), key=lambda x: -x[1])[:k])


def _mb(kb: float) -> str:
    return f"{kb / 1024:,.0f} MB"
