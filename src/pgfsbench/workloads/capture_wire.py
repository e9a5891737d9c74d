"""Capture at the wire (`pgfsbench capture --wire`): the server's clients, or their pooler,
connect through a relay of pgfsbench's (pgfsbench-wirecap, native/replayer/wirecap) for the
capture's seconds, and what they sent is written down as it came, message by message
(workloads/replay_wire.py reads it). No setting of the server is changed and nothing is
restarted; the log is not used.

The order: the server checked (a superuser connection, as for a log capture), its data
copied (pg_basebackup, workloads/capture_copy.py), its counters read, then the relay
started: every session it records began after the copy ended, so the replay starts from the
copy and replays everything the clients did after it. Sessions that reach the server some
other way are not in the capture (said in the manifest: the end state then differs).

The relay runs as an unprivileged uid of its own (system/unprivileged: no account, no
group, no process), its standard output the capture's file (root's, 0600, opened by
pgfsbench), journaled so that `cleanup` ends it after a SIGKILL. When the seconds are over
it stops recording and accepting; the sessions still open are relayed until they end, or
`drain` after (then closed: point the clients back at the server before the end). Its
overhead, the latency it adds to a statement, is measured by bench/wire_overhead.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.system.actions import watch_process_group
from pgfsbench.system.errors import CapabilityError, UsageError
from pgfsbench.system.held import Held, write_file
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from pgfsbench.workloads.capture import (
    MANIFEST_VERSION,
    CaptureResult,
    _check_output,
    _end_state,
    _removed_on_failure,
    _sleep,
    connect_as,
    preflight,
    server_settings,
    stats_snapshot,
    tablespaces,
)
from pgfsbench.workloads.capture_copy import copy_data
from pgfsbench.workloads.replay_file import MANIFEST
from pgfsbench.workloads.replay_wire import WIRE_LOG

if TYPE_CHECKING:
    import psycopg

WIRECAP = "pgfsbench-wirecap"


def wirecap_path() -> Path | None:
    """The relay built beside this interpreter (scripts/bootstrap.sh), else on PATH."""
    here = Path(sys.executable).parent / WIRECAP
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which(WIRECAP)
    return Path(found) if found else None


def upstream_of(conn: psycopg.Connection[Any], given: str | None) -> tuple[str, int]:
    """Where the relay reaches the server: ``given`` (HOST:PORT, or a socket directory
    with :PORT), else where the capture's own connection went."""
    if given:
        host, sep, port = given.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise UsageError(f"--upstream {given!r}: HOST:PORT (a host, or a socket directory)")
        return host, int(port)
    return str(conn.info.host), int(conn.info.port)


def _listening(capture_file: Path, child_alive: Callable[[], bool]) -> str:
    """The address the relay listens on, once its first event says so."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            first = capture_file.read_text(errors="replace").split("\n", 1)[0]
            ev = json.loads(first) if first else {}
            if ev.get("m") == "begin":
                return str(ev.get("listen"))
        except (OSError, ValueError):
            pass
        if not child_alive():
            raise CapabilityError(f"{WIRECAP} ended before it listened")
        time.sleep(0.05)
    raise CapabilityError(f"{WIRECAP} did not listen within 15 s")


def capture_wire(
    *,
    dsn: str,
    seconds: float,
    out: Path,
    journal: Journal,
    runner: Runner,
    pg_basebackup: str | None,
    listen: str,
    upstream: str | None = None,
    upstream_sslmode: str = "prefer",
    client_tls: bool = False,
    drain: float = 30.0,
    ready: Callable[[str], None] | None = None,
    wait: Callable[[float], bool] | None = None,
) -> CaptureResult:
    """Capture ``seconds`` of what the clients connecting through the relay at ``listen``
    send (a new directory ``out``); ``ready`` is told the address once they may connect.
    A capture that fails leaves no directory."""
    _check_output(seconds, out)
    try:
        return _capture_wire(
            dsn, seconds, out, journal, runner, pg_basebackup, listen, upstream,
            upstream_sslmode, client_tls, drain, ready, wait,
        )  # fmt: skip
    except BaseException:
        _removed_on_failure(out)
        raise


def _capture_wire(
    dsn: str,
    seconds: float,
    out: Path,
    journal: Journal,
    runner: Runner,
    pg_basebackup: str | None,
    listen: str,
    upstream: str | None,
    sslmode: str,
    client_tls: bool,
    drain: float,
    ready: Callable[[str], None] | None,
    wait: Callable[[float], bool] | None,
) -> CaptureResult:
    from pgfsbench.system.held import new_dir
    from pgfsbench.system.reachable import executable_for
    from pgfsbench.system.unprivileged import free_uid

    relay = wirecap_path()
    if relay is None:
        raise CapabilityError(f"{WIRECAP} is not built (scripts/bootstrap.sh, with Go)")
    if sslmode not in ("disable", "prefer", "require"):
        raise UsageError(f"--upstream-sslmode {sslmode!r}: disable, prefer or require")
    conn, peer = connect_as(dsn)
    with conn:
        facts = preflight(conn, need_log=False)
        host, port = upstream_of(conn, upstream)
        new_dir(out, 0o700)
        kept, left_out = server_settings(conn)
        manifest: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "format": "wire",
            "server": facts,
            "server_settings": kept,
            "server_settings_left_out": left_out,
            "connected_as": peer.name if peer is not None else "root",
            "own_sessions": [],
            "wire": {"listen": listen, "upstream": f"{host}:{port}", "sslmode": sslmode},
        }
        if pg_basebackup is None:
            raise CapabilityError("pg_basebackup not found (give --bindir)")
        # the copy first: every session the relay records begins after it
        manifest["base"] = copy_data(conn, runner, pg_basebackup, out, tablespaces(conn), peer)
        manifest["stats_before"] = stats_snapshot(conn, facts["server_version_num"])
        uid = free_uid()
        argv = [
            str(executable_for(relay, uid)),  # a checkout under /root: root's copy
            "-listen",
            listen,
            "-upstream-host",
            host,
            "-upstream-port",
            str(port),
            "-upstream-sslmode",
            sslmode,
            "-drain",
            f"{drain:g}s",
            *(["-client-tls"] if client_tls else []),
        ]
        capture_file = out / WIRE_LOG
        child = runner.spawn(argv, stdout_path=capture_file, user=uid, cwd="/", stdout_mode=0o600)
        watch_process_group(journal, child.pid, child.start_time, f"{WIRECAP} pid {child.pid}")
        t0 = time.time()
        try:
            address = _listening(capture_file, lambda: child.poll() is None)
            manifest["start"] = {"time": t0, "listen": address}
            if ready is not None:
                ready(address)
            done = (wait or _sleep)(seconds)
            manifest["end"] = {"time": time.time(), "cut_short": not done}
            os.kill(child.pid, signal.SIGUSR1)  # recording ends; open sessions drain
            try:
                child.wait(drain + 15)
            except Exception:
                child.kill_tree()
        except BaseException:
            child.kill_tree()
            raise
        manifest["stats_after"] = stats_snapshot(conn, facts["server_version_num"])
        manifest["end_state"] = _end_state(conn, dsn)
    with Held.open(out) as made:
        made.hand_to(None, 0o700)
    from pgfsbench.workloads.replay_wire import read_wire

    prepared = read_wire(capture_file)
    manifest["log"] = {
        "statements": prepared.captured,
        "sessions": len(prepared.sessions),
        "bytes": capture_file.stat().st_size,
        "source": "wire",
        "retries": prepared.retries,
    }
    manifest["seconds"] = round(manifest["end"]["time"] - t0, 3)
    write_file(out / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n", 0o600)
    return CaptureResult(
        out,
        manifest["seconds"],
        manifest["log"]["bytes"],
        prepared.captured,
        manifest["base"]["kind"],
        manifest,
    )
