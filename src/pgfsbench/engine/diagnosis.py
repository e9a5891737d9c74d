"""Why a run failed, named at its root: the disk that filled, the server that died (with
its last FATAL/PANIC lines), the huge pages the kernel did not give; not the symptom
("PQendcopy failed", "connection closed").

Pure: the exception and the evidence in, one line out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.units import human_bytes

_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ \[\d+\] ")
_ENOSPC = "No space left on device"
_FILE_IN = re.compile(r'file "([^"]+)"')


@dataclass(frozen=True)
class Volume:
    role: str  # data or wal
    mountpoint: str
    fs: str
    source: str
    size_bytes: int | None  # the filesystem's size (statvfs), if it was readable


@dataclass(frozen=True)
class Evidence:
    """What is known about the run when it failed."""

    log_lines: tuple[str, ...] = ()  # the server log's last lines (the run's part)
    server_alive: bool | None = None  # None: never started or unknown
    volumes: tuple[Volume, ...] = ()
    needed_bytes: int | None = None  # the workload's estimate of the loaded data
    huge_page_kb: int | None = None
    huge_pages_total: int | None = None
    huge_pages_free: int | None = None
    huge_pages_setting: str | None = None


def strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line).strip()


def severe_lines(lines: tuple[str, ...], limit: int = 2) -> list[str]:
    """The last FATAL/PANIC lines of a server log, without their timestamp prefix."""
    found = [strip_prefix(ln) for ln in lines if re.search(r"\b(PANIC|FATAL):", ln)]
    return list(dict.fromkeys(found))[-limit:]


def _disk_full(ev: Evidence, text: str) -> str | None:
    lines = [ln for ln in ev.log_lines if _ENOSPC in ln]
    if not lines and _ENOSPC not in text:
        return None
    where = None
    for line in lines or [text]:
        m = _FILE_IN.search(line)
        if m:
            where = m.group(1)
            break
    volume = None
    if ev.volumes:
        volume = ev.volumes[0]
        wal = next((v for v in ev.volumes if v.role == "wal"), None)
        if where is not None:
            if where.startswith("/"):
                matches = [
                    v for v in ev.volumes if where.startswith(v.mountpoint.rstrip("/") + "/")
                ]
                volume = max(matches, key=lambda v: len(v.mountpoint)) if matches else volume
            elif where.startswith("pg_wal") and wal is not None:
                volume = wal
    msg = _ENOSPC
    if volume is not None:
        msg += f" on {volume.mountpoint} ({volume.fs} on {volume.source})"
    details = []
    if ev.needed_bytes:
        details.append(f"the data directory needed about {human_bytes(ev.needed_bytes)}")
    if volume is not None and volume.size_bytes:
        details.append(f"the device has {human_bytes(volume.size_bytes)}")
    if details:
        msg += f" ({', '.join(details)})"
    if where:
        msg += f"; writing {where}"
    return msg


def _huge_pages(ev: Evidence) -> str | None:
    text = "\n".join(ev.log_lines)
    if "could not map anonymous shared memory" not in text and "huge pages" not in text.lower():
        return None
    if ev.huge_pages_setting not in ("on", "true", "1", "yes"):
        return None
    m = re.search(r"request size \(currently (\d+) bytes\)", text)
    asked = int(m.group(1)) if m else None
    page_kb = ev.huge_page_kb or 2048
    parts = ["huge_pages = on but the shared memory could not be mapped in huge pages:"]
    if asked is not None:
        pages = math.ceil(asked / (page_kb * 1024))
        parts.append(f"the server asked for {pages} pages of {page_kb} kB ({human_bytes(asked)})")
    if ev.huge_pages_total is not None:
        parts.append(
            f"the kernel has {ev.huge_pages_total} (vm.nr_hugepages), {ev.huge_pages_free} free"
        )
    return " ".join(parts[:1]) + " " + "; ".join(parts[1:])


def root_cause(exc: BaseException, ev: Evidence) -> str:
    """One line saying why the run failed."""
    text = str(exc)
    full = _disk_full(ev, text)
    if full:
        return full
    hp = _huge_pages(ev)
    if hp:
        return hp
    severe = severe_lines(ev.log_lines)
    panic = [ln for ln in severe if "PANIC:" in ln]
    if panic:
        return f"PostgreSQL server stopped with a PANIC: {panic[-1]}"
    if ev.server_alive is False:
        detail = "; ".join(severe) if severe else "no FATAL or PANIC line in its log"
        return f"PostgreSQL server terminated during the run: {detail}"
    if isinstance(exc, PgfsbenchError):
        return text.splitlines()[0] if text else type(exc).__name__
    import psycopg  # the run imported it: no cost here

    if isinstance(exc, psycopg.Error):
        first = text.splitlines()[0] if text else ""
        return f"lost the connection to PostgreSQL: {first}"
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:500]
