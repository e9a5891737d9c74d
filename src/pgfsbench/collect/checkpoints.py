"""Checkpoints from the server log (log_checkpoints = on, log_line_prefix = '%m [%p] ')."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

_TS = r"(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?) (\w+)"
_START_RE = re.compile(_TS + r" \[\d+\] LOG:  (?:checkpoint|restartpoint) starting: (.*)$")
_DONE_RE = re.compile(
    _TS + r" \[\d+\] LOG:  (?:checkpoint|restartpoint) complete: wrote (\d+) buffers \([\d.]+%\)"
    r"(?:, wrote \d+ SLRU buffers)?; (\d+) WAL file\(s\) added, (\d+) removed, (\d+) recycled; "
    r"write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s;.*?distance=(\d+) kB"
)


@dataclass(frozen=True)
class Checkpoint:
    started: float | None  # epoch seconds
    ended: float
    reason: str
    buffers: int
    wal_added: int
    wal_removed: int
    wal_recycled: int
    write_s: float
    sync_s: float
    total_s: float
    distance_kb: int


def _epoch(stamp: str, zone: str) -> float:
    parsed = dt.datetime.fromisoformat(stamp)
    if zone.upper() in ("UTC", "GMT"):
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def parse_checkpoints(log: str) -> list[Checkpoint]:
    """Pairs of 'checkpoint starting' / 'checkpoint complete' lines, in order."""
    result: list[Checkpoint] = []
    start: tuple[float, str] | None = None
    for line in log.splitlines():
        m = _START_RE.match(line)
        if m:
            start = (_epoch(m.group(1), m.group(2)), m.group(3).strip())
            continue
        m = _DONE_RE.match(line)
        if m:
            ended = _epoch(m.group(1), m.group(2))
            result.append(
                Checkpoint(
                    started=start[0] if start else None,
                    ended=ended,
                    reason=start[1] if start else "",
                    buffers=int(m.group(3)),
                    wal_added=int(m.group(4)),
                    wal_removed=int(m.group(5)),
                    wal_recycled=int(m.group(6)),
                    write_s=float(m.group(7)),
                    sync_s=float(m.group(8)),
                    total_s=float(m.group(9)),
                    distance_kb=int(m.group(10)),
                )
            )
            start = None
    return result


def running_checkpoint(log: str) -> tuple[float, str] | None:
    """(when it started, its reason) of a checkpoint the log says started and not yet that
    it completed: one still running when the log was read."""
    start: tuple[float, str] | None = None
    for line in log.splitlines():
        m = _START_RE.match(line)
        if m:
            start = (_epoch(m.group(1), m.group(2)), m.group(3).strip())
        elif _DONE_RE.match(line):
            start = None
    return start
