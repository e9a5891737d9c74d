"""Sizes and durations as people write them in specs ("4G", "512MiB", "90s", "2m")."""

from __future__ import annotations

import math
import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_DUR_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_DUR_MULT = {"ms": 0.001, "s": 1.0, "": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_size(text: str | int) -> int:
    """Bytes from '4G', '512M', '1GiB', '4096' (binary multiples, as losetup/truncate use)."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError("a size cannot be negative")
        return text
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 512M, 4G, 1GiB)")
    return int(float(m.group(1)) * _SIZE_MULT[m.group(2).lower()])


def parse_duration(text: str | int | float) -> float:
    """Seconds from '5s', '2m', '1h', '500ms' or a plain number of seconds."""
    if isinstance(text, int | float):
        if not math.isfinite(text) or text < 0:
            raise ValueError("a duration is a finite number of seconds, not negative")
        if text > 366 * 86400:
            raise ValueError("a duration of more than a year is not a benchmark")
        return float(text)
    m = _DUR_RE.match(text)
    if not m:
        raise ValueError(f"{text!r} is not a duration (examples: 30s, 2m, 1h)")
    return parse_duration(float(m.group(1)) * _DUR_MULT[(m.group(2) or "").lower()])


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def human_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    # to what a time means: tenths under 10 s (a load, a stall), whole seconds up to a
    # minute and a half, then minutes (to the half under 10) and hours
    if s < 10:
        return f"{s:.1f} s"
    if s < 90:
        return f"{s:.0f} s"
    if s < 600:
        return f"{round(s / 30) / 2:g} min"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def parse_human(text: str) -> int | None:
    """zfs-fuse's sizes ("842M", "3.97G"; it has no -p)."""
    m = re.fullmatch(r"([\d.]+)([BKMGTP]?)", text.strip())
    if m is None:
        return None
    try:
        return int(float(m.group(1)) * _UNITS[m.group(2)])
    except ValueError:
        return None
