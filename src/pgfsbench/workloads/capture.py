"""Capture a live server's workload for replay (`pgfsbench capture`).

For a bounded time, the server logs every statement with its session, its parameters and
its duration, and its connections and disconnections, in jsonlog (PostgreSQL 15 and later:
one JSON object a line, with the session id, the transaction id, the query id). The
settings this needs are changed with ALTER SYSTEM and a reload, journaled before they are
changed (what postgresql.auto.conf held for each), and always put back: at the end, on an
error or Ctrl-C, and after a SIGKILL through `pgfsbench cleanup`. A setting that would need
a restart (logging_collector off) is refused with its name, never changed.

With it: a physical copy of the data at the capture's start (`pg_basebackup`, plain format,
its WAL streamed; each tablespace into tablespaces/OID of the capture), unless the user
gives one; the server's own counters before and after
(pg_stat_statements, pg_stat_wal, pg_stat_database, pg_stat_io from 16), the capture's own
measurement of what the workload did; the server's settings. The log is read through the
server (pg_read_file, as the server's user reads its own files): root never opens a path
in a directory the server's user can write.

The output is one directory, root's and 0700, each file 0600: the log holds the workload's
literals (its parameters, its error details), which never leave it (see replay.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.postgres.statements import normalise
from pgfsbench.system.errors import CapabilityError, CommandError, UsageError
from pgfsbench.system.held import write_file
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.workloads.replay_file import (
    MANIFEST,
    log_file_name,
    log_rows,
)

if TYPE_CHECKING:
    import psycopg

MANIFEST_VERSION = 1
LOG_FORMATS = ("jsonlog", "csvlog")
BASE_DIR = "base"  # pg_basebackup's plain copy of the data at the capture's start
TABLESPACES_DIR = "tablespaces"  # each tablespace's copy, by OID (pg_basebackup maps it there)
READ_CHUNK = 1 << 20  # bytes a pg_read_file call returns

# what the capture sets, each for a reason; a reload applies them all (none needs a restart)
CAPTURE_SETTINGS: dict[str, str] = {
    "log_statement": "all",  # every statement, logged when it arrives (its start)
    "log_duration": "on",  # and how long it took (the capture's latency; think times)
    "log_min_duration_statement": "-1",  # no second copy of each statement
    "log_connections": "on",  # a session's user and database
    "log_disconnections": "on",
    "log_parameter_max_length": "-1",  # parameters whole
    "lc_messages": "C",  # the messages parsed are the English ones
    "compute_query_id": "on",  # each line with pg_stat_statements' query id (14 on)
}
# plus log_destination, with jsonlog (csvlog) added to what it was


def log_format_for(version: int, asked: str | None) -> str:
    """jsonlog from PostgreSQL 15 on, csvlog before (13 and 14); csvlog when asked."""
    if asked is not None and asked not in LOG_FORMATS:
        raise UsageError(f"--log-format {asked!r}: jsonlog or csvlog")
    fmt = asked or ("jsonlog" if version >= 150000 else "csvlog")
    if fmt == "jsonlog" and version < 150000:
        raise CapabilityError(
            f"PostgreSQL {version // 10000} has no jsonlog (15 and later): use --log-format csvlog"
        )
    if version < 130000:
        raise CapabilityError(
            f"PostgreSQL {version // 10000}: capture needs 13 or later (log_parameter_max_length "
            "logs parameters whole, and csvlog names each line's backend type)"
        )
    return fmt


def capture_settings(version: int) -> dict[str, str]:
    """The settings a capture sets on a server of this version."""
    wanted = dict(CAPTURE_SETTINGS)
    if version < 140000:
        del wanted["compute_query_id"]  # 14 on
    return wanted


@dataclass(frozen=True)
class AutoConf:
    """What postgresql.auto.conf said of one setting before the capture (None: nothing,
    so putting it back is ALTER SYSTEM RESET)."""

    name: str
    value: str | None


@dataclass
class CaptureResult:
    directory: Path
    seconds: float
    log_bytes: int
    statements: int
    base: str  # "pg_basebackup", or the copy the user gave
    manifest: dict[str, Any] = field(default_factory=dict)


def _connect(dsn: str) -> psycopg.Connection[Any]:
    import psycopg

    try:
        return psycopg.connect(dsn, connect_timeout=10, autocommit=True)
    except psycopg.Error as exc:
        raise UsageError(f"--dsn: cannot connect ({' '.join(str(exc).split())})") from None


def _one(conn: psycopg.Connection[Any], sql: str, *args: object) -> Any:
    row = conn.execute(sql, args or None).fetchone()
    return None if row is None else row[0]


def preflight(
    conn: psycopg.Connection[Any], need_log: bool = True, log_format: str | None = None
) -> dict[str, Any]:
    """What the server is and whether it can be captured; refused with the reason."""
    version = int(_one(conn, "SELECT current_setting('server_version_num')"))
    fmt = log_format_for(version, log_format) if need_log else None
    if not _one(conn, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        raise UsageError(
            "--dsn: capture needs a superuser (it changes logging settings with ALTER "
            "SYSTEM and reads the server's log through pg_read_file)"
        )
    collector = _one(conn, "SELECT setting FROM pg_settings WHERE name = 'logging_collector'")
    if need_log and collector != "on":
        raise CapabilityError(
            f"logging_collector is off: {fmt} needs it, and turning it on needs a restart "
            "of the server, which capture never does (set logging_collector = on, restart "
            "when you can, then capture)"
        )
    pending = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM pg_settings WHERE pending_restart AND name = ANY(%s)",
            ([*capture_settings(version), "log_destination"],),
        )
    ]
    if pending:
        raise CapabilityError(
            f"{', '.join(pending)}: changed but waiting for a restart; capture would not know "
            "what the server logs"
        )
    return {
        "server_version_num": version,
        "log_format": fmt,
        "server_version": _one(conn, "SHOW server_version"),
        "data_directory": _one(conn, "SHOW data_directory"),
        "system_identifier": str(_one(conn, "SELECT system_identifier FROM pg_control_system()")),
    }


def auto_conf(conn: psycopg.Connection[Any], names: list[str]) -> list[AutoConf]:
    """What postgresql.auto.conf holds for each setting now (pg_file_settings)."""
    rows = conn.execute(
        "SELECT name, setting FROM pg_file_settings "
        "WHERE sourcefile LIKE '%%postgresql.auto.conf' AND name = ANY(%s) AND applied",
        (names,),
    ).fetchall()
    found = {str(n): str(v) for n, v in rows}
    return [AutoConf(n, found.get(n)) for n in names]


def put_back(conn: psycopg.Connection[Any], before: list[AutoConf]) -> None:
    """postgresql.auto.conf as it was for these settings, then a reload."""
    from psycopg import sql

    for s in before:
        if s.value is None:
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(s.name)))
        else:
            conn.execute(
                sql.SQL("ALTER SYSTEM SET {} = {}").format(
                    sql.Identifier(s.name), sql.Literal(s.value)
                )
            )
    conn.execute("SELECT pg_reload_conf()")


def _settings_bound(args: dict[str, object], scope: Scope) -> str | None:
    names = {str(s["name"]) for s in args["settings"]}  # type: ignore[attr-defined]
    allowed = {*CAPTURE_SETTINGS, "log_destination"}
    if not names <= allowed:
        return f"settings {sorted(names - allowed)} are not the capture's"
    if not isinstance(args.get("dsn"), str):
        return "no dsn"
    return None


@undo_action("restore_server_settings", bound=_settings_bound)
def _restore_server_settings(runner: Runner, args: dict[str, object]) -> None:
    settings = args["settings"]
    assert isinstance(settings, list)
    before = [
        AutoConf(str(s["name"]), None if s["value"] is None else str(s["value"])) for s in settings
    ]
    with _connect(str(args["dsn"])) as conn:
        put_back(conn, before)


def stats_snapshot(conn: psycopg.Connection[Any], version: int) -> dict[str, Any]:
    """The server's counters of what work was done: WAL, databases, I/O (16+), and
    pg_stat_statements where it is installed (normalised statements only: no literals)."""
    out: dict[str, Any] = {"t": time.time(), "lsn": str(_one(conn, "SELECT pg_current_wal_lsn()"))}

    def rows(query: str) -> list[dict[str, Any]]:
        cur = conn.execute(query)
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    out["wal"] = rows("SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_sync FROM pg_stat_wal")
    out["database"] = rows(
        "SELECT datname, xact_commit, xact_rollback, blks_read, blks_hit, tup_inserted, "
        "tup_updated, tup_deleted, deadlocks, temp_bytes FROM pg_stat_database "
        "WHERE datname IS NOT NULL"
    )
    if version >= 160000:
        out["io"] = rows(
            "SELECT backend_type, object, context, reads, writes, extends, fsyncs "
            "FROM pg_stat_io WHERE reads IS NOT NULL"
        )
    has_pss = _one(conn, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'")
    if has_pss:
        try:
            found = rows(
                "SELECT queryid::text, dbid::bigint, calls, rows, shared_blks_dirtied, "
                "shared_blks_written, wal_records, wal_fpi, wal_bytes::bigint, "
                "total_exec_time, query FROM pg_stat_statements WHERE queryid IS NOT NULL"
            )
            # a utility statement's text keeps its literals there: normalised here
            for r in found:
                r["query"] = normalise(str(r.get("query") or ""))
            out["statements"] = found
        except Exception as exc:
            out["statements_unavailable"] = " ".join(str(exc).split())[:200]
    return out


def _log_file(conn: psycopg.Connection[Any], fmt: str) -> str | None:
    return _one(conn, "SELECT pg_current_logfile(%s)", fmt)  # type: ignore[no-any-return]


def _file_size(conn: psycopg.Connection[Any], path: str) -> int:
    return int(_one(conn, "SELECT size FROM pg_stat_file(%s, true)", path) or 0)


def read_log(
    conn: psycopg.Connection[Any], files: list[tuple[str, int]], out_fd: int, limit: int
) -> int:
    """Append the log files' bytes (each from its offset) through pg_read_file: the
    server's user reads its own files. Stops at ``limit`` bytes; returns the count."""
    written = 0
    for path, offset in files:
        pos = offset
        while written < limit:
            chunk = _one(
                conn, "SELECT pg_read_binary_file(%s, %s, %s, true)", path, pos, READ_CHUNK
            )
            if not chunk:
                break
            data = bytes(chunk)[: limit - written]
            os.write(out_fd, data)
            written += len(data)
            pos += len(data)
            if len(chunk) < READ_CHUNK:
                break
    return written


def _logs_since(conn: psycopg.Connection[Any], first: str, since: float) -> list[str]:
    """The log files of ``first``'s kind written from it on (a rotation during the
    capture makes more than one), oldest first."""
    directory = Path(first).parent
    rows = conn.execute(
        "SELECT name, extract(epoch from modification) FROM pg_ls_logdir() "
        "WHERE name LIKE %s ORDER BY modification, name",
        ("%" + Path(first).suffix,),
    ).fetchall()
    names = [str(directory / str(n)) for n, m in rows if float(m) >= since - 1]
    if first not in names:
        names.insert(0, first)
    return names[names.index(first) :]


def base_backup(
    runner: Runner,
    pg_basebackup: str,
    dsn: str,
    target: Path,
    spaces: list[dict[str, Any]] | None = None,
    spaces_dir: Path | None = None,
) -> float:
    """A plain physical copy of the data with the WAL to make it consistent, into a new
    directory of root's; each tablespace of ``spaces`` into ``spaces_dir``/OID (its
    location mapped there: never written where the server keeps it); returns the seconds
    it took."""
    mapping: list[str] = []
    for space in spaces or []:
        if spaces_dir is None:
            raise ValueError("tablespaces need a directory for their copies")
        old = _mapping_part(str(space["location"]))
        new = _mapping_part(str(spaces_dir / str(space["oid"])))
        mapping.append(f"--tablespace-mapping={old}={new}")
    started = time.monotonic()
    try:
        runner.run(
            [
                pg_basebackup,
                "-d",
                dsn,
                "-D",
                str(target),
                "-Fp",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
                *mapping,
            ],
            timeout=24 * 3600,
        )
    except CommandError as exc:
        raise CapabilityError(f"pg_basebackup failed: {exc}") from None
    return time.monotonic() - started


def _mapping_part(path: str) -> str:
    """A path as --tablespace-mapping takes it: its '=' written '\\='."""
    return path.replace("=", "\\=")


def tablespaces(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The server's tablespaces kept outside its data directory (a location that is an
    absolute path): their OID, name and location. An in-place tablespace (a directory in
    pg_tblspc, PostgreSQL 15's allow_in_place_tablespaces) is in the data's copy itself."""
    rows = conn.execute(
        "SELECT oid::bigint, spcname, pg_tablespace_location(oid) FROM pg_tablespace "
        "WHERE spcname NOT IN ('pg_default', 'pg_global') ORDER BY oid"
    ).fetchall()
    return [
        {"oid": int(oid), "name": str(name), "location": str(loc)}
        for oid, name, loc in rows
        if loc and Path(str(loc)).is_absolute()
    ]


def copy_data(
    conn: psycopg.Connection[Any], runner: Runner, pg_basebackup: str, dsn: str, out: Path
) -> dict[str, Any]:
    """The data's copy in ``out``/base, its tablespaces' in ``out``/tablespaces/OID; what
    the manifest says of it."""
    spaces = tablespaces(conn)
    into = out / TABLESPACES_DIR if spaces else None
    took = base_backup(runner, pg_basebackup, dsn, out / BASE_DIR, spaces, into)
    return {"kind": "pg_basebackup", "seconds": round(took, 1), "tablespaces": spaces}


def _check_output(seconds: float, out: Path) -> None:
    """A capture's length and directory: new, where no one else can write (the capture
    holds the workload's literals, or its data)."""
    from pgfsbench.system.trust import path_problem

    if seconds <= 0:
        raise UsageError("--seconds: more than 0")
    if out.exists():
        raise UsageError(f"-o {out}: exists; capture writes a new directory")
    if (why := path_problem(out.absolute().parent)) is not None:
        raise UsageError(f"-o {out}: {why}")


def server_settings(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The settings the server was given (its configuration files, its command line):
    what a copy of its data is to run with."""
    return {
        str(n): str(v)
        for n, v in conn.execute(
            "SELECT name, setting FROM pg_settings WHERE source NOT IN "
            "('default', 'override', 'client', 'session') AND context <> 'internal'"
        )
    }


def capture(
    *,
    dsn: str,
    seconds: float,
    out: Path,
    journal: Journal,
    runner: Runner,
    pg_basebackup: str | None,
    base: Path | None = None,
    max_log_bytes: int = 2 << 30,
    ready: Callable[[], None] | None = None,
    wait: Callable[[float], bool] | None = None,
    log_format: str | None = None,
) -> CaptureResult:
    """Capture ``seconds`` of the server's workload into ``out`` (a new directory).
    ``ready`` is called once statements are logged (the base copy made); ``wait`` waits
    the capture's time and says False when it was cut short (Ctrl-C)."""
    _check_output(seconds, out)
    conn = _connect(dsn)
    with conn:
        facts = preflight(conn, log_format=log_format)
        fmt = str(facts["log_format"])
        # the capture's own session is not the workload (its statements are left out)
        own = _one(
            conn,
            "SELECT to_hex(trunc(extract(epoch FROM backend_start))::bigint) || '.' || "
            "to_hex(pid) FROM pg_stat_activity WHERE pid = pg_backend_pid()",
        )
        destination = str(_one(conn, "SHOW log_destination"))
        wanted = capture_settings(int(facts["server_version_num"]))
        parts = [p.strip() for p in destination.split(",") if p.strip()]
        wanted["log_destination"] = ",".join([*parts, fmt] if fmt not in parts else parts)
        before = auto_conf(conn, list(wanted))
        settings_before = {
            str(n): str(v)
            for n, v in conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(wanted),)
            )
        }
        out.mkdir(mode=0o700, parents=False)
        manifest: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "format": fmt,
            "server": facts,
            "settings_changed": wanted,
            "settings_before": settings_before,
            "own_sessions": [own],
        }
        manifest["server_settings"] = server_settings(conn)
        from psycopg import sql

        step = journal.record(
            f"capture settings of the server at {dsn}",
            Undo(
                "restore_server_settings",
                {"dsn": dsn, "settings": [{"name": s.name, "value": s.value} for s in before]},
            ),
        )
        try:
            for name, value in wanted.items():
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
            conn.execute("SELECT pg_reload_conf()")
            first = _await_log(conn, fmt)
            offset = _file_size(conn, first)
            # a statement logged from here on is in the capture
            t0 = time.time()
            manifest["start"] = {"time": t0, "log_file": Path(first).name, "offset": offset}
            manifest["stats_before"] = stats_snapshot(conn, facts["server_version_num"])
            if base is None:
                if pg_basebackup is None:
                    raise CapabilityError("pg_basebackup not found (give --base DIR)")
                manifest["base"] = copy_data(conn, runner, pg_basebackup, dsn, out)
            else:
                manifest["base"] = {"kind": "given", "path": str(base)}
            if ready is not None:
                ready()
            done = (wait or _sleep)(seconds)
            manifest["stats_after"] = stats_snapshot(conn, facts["server_version_num"])
            t1 = time.time()
            manifest["end"] = {"time": t1, "cut_short": not done}
        finally:
            put_back(conn, before)
            journal.settle(step, "put back")
        # the log of the capture, through the server
        files = _logs_since(conn, first, t0)
        log_file = out / log_file_name(fmt)
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            size = read_log(
                conn, [(f, offset if f == first else 0) for f in files], fd, max_log_bytes
            )
        finally:
            os.close(fd)
    statements = sum(
        1
        for row in log_rows(log_file, fmt)
        if str(row.get("message") or "").startswith(("statement: ", "execute "))
    )
    manifest["log"] = {
        "bytes": size,
        "files": [Path(f).name for f in files],
        "truncated": size >= max_log_bytes,
    }
    manifest["seconds"] = round(manifest["end"]["time"] - manifest["start"]["time"], 3)
    write_file(out / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n", 0o600)
    return CaptureResult(
        out, manifest["seconds"], size, statements, manifest["base"]["kind"], manifest
    )


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def _await_log(conn: psycopg.Connection[Any], fmt: str, timeout: float = 10.0) -> str:
    """The jsonlog (csvlog) file the server writes once the reload took effect."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = _log_file(conn, fmt)
        on = _one(conn, "SELECT setting FROM pg_settings WHERE name = 'log_statement'")
        if path and on == "all":
            return path
        time.sleep(0.1)
    raise CapabilityError(f"the server did not start writing {fmt} within 10 s of the reload")


STATS_FILE = "stats.json"  # the lighter path: pg_stat_statements' deltas and the scripts


def capture_stats(
    *,
    dsn: str,
    seconds: float,
    out: Path,
    runner: Runner,
    pg_basebackup: str | None,
    ready: Callable[[], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> CaptureResult:
    """The lighter capture: no setting changed, no statement logged. pg_stat_statements
    before and after, the busiest client sessions counted each second, the tables'
    column statistics, and pgbench scripts made from them (workloads/synthesis.py); with
    the data copy. An approximation of the workload, said so wherever it is used."""
    from pgfsbench.workloads.synthesis import (
        COLUMN_STATS_SQL,
        columns_of,
        deltas,
        scripts_from_stats,
    )

    _check_output(seconds, out)
    with _connect(dsn) as conn:
        facts = preflight(conn, need_log=False)
        before = stats_snapshot(conn, facts["server_version_num"])
        if "statements" not in before:
            raise CapabilityError(
                "pg_stat_statements is not there (CREATE EXTENSION pg_stat_statements, with "
                "it in shared_preload_libraries): the lighter capture reads only it"
            )
        dbid = int(
            _one(conn, "SELECT oid::bigint FROM pg_database WHERE datname = current_database()")
        )
        out.mkdir(mode=0o700, parents=False)
        t0 = time.time()
        manifest: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "format": "pg_stat_statements",
            "server": facts,
            "dbname": _one(conn, "SELECT current_database()"),
            "start": {"time": t0},
            "server_settings": server_settings(conn),
        }
        if pg_basebackup is None:
            raise CapabilityError("pg_basebackup not found")
        manifest["base"] = copy_data(conn, runner, pg_basebackup, dsn, out)
        manifest["stats_before"] = before = stats_snapshot(conn, facts["server_version_num"])
        if ready is not None:
            ready()
        busiest, counts = 0, []
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (stop and stop()):
            n = int(
                _one(
                    conn,
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid() AND datname = current_database() "
                    "AND state <> 'idle'",
                )
            )
            busiest = max(busiest, n)
            counts.append(n)
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))
        after = stats_snapshot(conn, facts["server_version_num"])
        manifest["stats_after"] = after
        t1 = time.time()
        manifest["end"] = {"time": t1, "cut_short": time.monotonic() < end}
        columns = [
            dict(zip([d.name for d in cur.description or []], r, strict=True))
            for cur in [conn.execute(COLUMN_STATS_SQL)]
            for r in cur.fetchall()
        ]
    rows = deltas(before["statements"], after["statements"], dbid)
    made = scripts_from_stats(rows, columns_of(columns))
    sessions = max(1, round(sum(counts) / len(counts))) if counts else 1
    stats = {
        "approximation": "pgbench scripts from pg_stat_statements (no statement log)",
        "clients": max(sessions, min(busiest, 4 * sessions)),
        "busiest_sessions": busiest,
        "mean_active_sessions": round(sum(counts) / len(counts), 2) if counts else 0,
        "calls_total": made.calls_total,
        "calls_covered": made.calls_covered,
        "skipped": made.skipped,
        "scripts": [{"text": t, "weight": w, "query": q} for t, w, q in made.scripts],
        "transactions_per_s": round(made.calls_total / max(t1 - t0, 1e-6), 2),
    }
    write_file(out / STATS_FILE, json.dumps(stats, indent=1) + "\n", 0o600)
    manifest["seconds"] = round(t1 - t0, 3)
    write_file(out / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n", 0o600)
    return CaptureResult(out, manifest["seconds"], 0, made.calls_total, "pg_basebackup", manifest)
