"""Capture a live server's workload for replay (`pgfsbench capture`).

For a bounded time, the server logs every statement with its session, its parameters and
its duration, and its connections and disconnections, in jsonlog (PostgreSQL 15 and later:
one JSON object a line, with the session id, the transaction id, the query id). The
settings this needs are changed with ALTER SYSTEM and a reload, journaled before they are
changed (what postgresql.auto.conf held for each), and always put back: at the end, on an
error or Ctrl-C, and after a SIGKILL through `pgfsbench cleanup`. A setting that would need
a restart (logging_collector off) is refused with its name, never changed.

With it: a physical copy of the data at the capture's start (`pg_basebackup` as a uid of its
own, tar format, unpacked by pgfsbench: workloads/capture_copy.py), unless the user gives
one; the server's own counters before and after
(pg_stat_statements, pg_stat_wal, pg_stat_database, pg_stat_io from 16), the capture's own
measurement of what the workload did; the server's settings. The log is read through the
server (pg_read_file, as the server's user reads its own files): root never opens a path
in a directory the server's user can write.

The output is one directory, root's and 0700, each file 0600: the log holds the workload's
literals (its parameters, its error details), which never leave it (see replay.py).

The server is another principal's: what it answers is data, checked before it is kept.
Every catalog name is qualified (``pg_catalog.``) and the connection's search_path is
pg_catalog's alone, so that a superuser's ``public.pg_settings`` answers nothing; its
settings are kept only as the allowlist of postgres/carried.py says. Its password reaches
no child's argv or environment and no journal: pg_basebackup reads it from a passfile of
its own uid's; `cleanup` connects with libpq's own sources (PGPASSWORD, ~/.pgpass).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.postgres.carried import carried
from pgfsbench.postgres.conninfo import shown_dsn
from pgfsbench.postgres.statements import normalise
from pgfsbench.system.errors import CapabilityError, PgfsbenchError, UsageError
from pgfsbench.system.held import new_dir, open_new_file, write_file
from pgfsbench.system.journal import Journal, Scope, Undo, leftover_journals, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.workloads.capture_copy import BASE_DIR, TABLESPACES_DIR, copy_data
from pgfsbench.workloads.capture_sql import one as _one
from pgfsbench.workloads.capture_sql import read_log
from pgfsbench.workloads.capture_stderr import (
    STDERR,
    await_stderr,
    line_prefix,
    new_token,
    stderr_log,
)
from pgfsbench.workloads.replay_file import (
    MANIFEST,
    log_file_name,
    log_rows,
    read_capture_log,
)

if TYPE_CHECKING:
    import psycopg

    from pgfsbench.system.euid import Account

# 2: the copy unpacked by pgfsbench (tar, as an unprivileged uid), settings allowlisted
MANIFEST_VERSION = 2
LOG_FORMATS = ("jsonlog", "csvlog")
# the connection's own: catalog names resolve in pg_catalog, never in a schema the server's
# superuser filled
SAFE_OPTIONS = "-c search_path=pg_catalog,pg_temp"
__all__ = ["BASE_DIR", "TABLESPACES_DIR", "capture", "capture_stats"]

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


def _open(dsn: str) -> psycopg.Connection[Any]:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    options = str(conninfo_to_dict(dsn).get("options") or "")
    return psycopg.connect(
        dsn,
        connect_timeout=10,
        autocommit=True,
        options=f"{options} {SAFE_OPTIONS}".strip(),
        application_name="pgfsbench capture",
    )


def connect_as(dsn: str) -> tuple[psycopg.Connection[Any], Account | None]:
    """A connection to the server (libpq's own password sources: the DSN, PGPASSWORD,
    ~/.pgpass), its search_path pg_catalog's alone (SAFE_OPTIONS, after the DSN's own).
    A server that takes local connections by peer authentication only (Debian's as
    shipped: root is not its superuser) is connected to as the OS user whose socket it
    is: the account that runs the server, named with the connection (None: as root)."""
    from pgfsbench.postgres.conninfo import peer_aware

    try:
        return peer_aware(lambda: _open(dsn), dsn)
    except UsageError as exc:
        raise UsageError(f"--dsn {exc}") from None


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return connect_as(dsn)[0]


def _text(value: object, what: str, limit: int = 1024) -> str:
    """A text the server answered, kept only when it is one line of sane length."""
    text = str(value)
    if len(text) > limit or any(c in text for c in "\n\r\0"):
        raise CapabilityError(f"the server answered a {what} that is not one line: refused")
    return text


def preflight(
    conn: psycopg.Connection[Any], need_log: bool = True, log_format: str | None = None
) -> dict[str, Any]:
    """What the server is and whether it can be captured; refused with the reason. Its
    answers are checked as the data they are (a number is a number, a name one line)."""
    conn.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', false)")
    try:
        version = int(_one(conn, "SELECT pg_catalog.current_setting('server_version_num')"))
    except (TypeError, ValueError):
        raise CapabilityError("the server's version is not a number: refused") from None
    if not 90000 <= version < 1000000:
        raise CapabilityError(f"server_version_num {version}: not a PostgreSQL version")
    fmt = log_format_for(version, log_format) if need_log else None
    identifier = str(_one(conn, "SELECT system_identifier FROM pg_catalog.pg_control_system()"))
    if not identifier.isdigit():
        raise CapabilityError("the server's system identifier is not a number: refused")
    if not _one(
        conn, "SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = pg_catalog.current_user()"
    ):
        raise UsageError(
            "--dsn: capture needs a superuser (it changes logging settings with ALTER "
            "SYSTEM and reads the server's log through pg_read_file)"
        )
    collector = _one(
        conn, "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'logging_collector'"
    )
    source = "collector"
    if need_log and collector != "on":
        source, fmt = "stderr", "jsonlog"  # its lines made into jsonlog's
        if (why := _stderr_refusal(conn, log_format)) is not None:
            raise CapabilityError(why)
    pending = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM pg_catalog.pg_settings WHERE pending_restart AND name = ANY(%s)",
            ([*capture_settings(version), "log_destination", "log_line_prefix"],),
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
        "log_source": source if need_log else None,
        "server_version": _text(_one(conn, "SHOW server_version"), "version", 64),
        "data_directory": _text(_one(conn, "SHOW data_directory"), "data directory"),
        "system_identifier": identifier,
        "standard_conforming_strings": _one(conn, "SHOW standard_conforming_strings") != "off",
        "bootstrap_superuser": _text(
            _one(conn, "SELECT rolname FROM pg_catalog.pg_roles WHERE oid = 10"), "role", 63
        ),
    }


def _stderr_refusal(conn: psycopg.Connection[Any], log_format: str | None) -> str | None:
    """Why a server without its logging collector cannot be captured from its standard
    error (workloads/capture_stderr.py), or None."""
    from pgfsbench.workloads.capture_stderr import stderr_problem

    if log_format is not None:
        return (
            f"--log-format {log_format}: the server writes it only with logging_collector = "
            "on (a restart); leave --log-format out and capture reads its standard error log"
        )
    destination = _text(_one(conn, "SHOW log_destination"), "log_destination", 200)
    if "stderr" not in [p.strip() for p in destination.split(",")]:
        return (
            f"logging_collector is off and log_destination ({destination}) has no stderr: "
            "the server keeps no log capture can read without a restart (add stderr to "
            "log_destination and reload, or turn logging_collector on at a restart)"
        )
    if (why := stderr_problem(conn)) is not None:
        return (
            f"logging_collector is off (its log is its standard error) and {why}; turn "
            "logging_collector on at a restart, then capture"
        )
    return None


def auto_conf(conn: psycopg.Connection[Any], names: list[str]) -> list[AutoConf]:
    """What postgresql.auto.conf holds for each setting now (pg_file_settings)."""
    rows = conn.execute(
        "SELECT name, setting FROM pg_catalog.pg_file_settings "
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
    conn.execute("SELECT pg_catalog.pg_reload_conf()")


def _settings_bound(args: dict[str, object], scope: Scope) -> str | None:
    names = {str(s["name"]) for s in args["settings"]}  # type: ignore[attr-defined]
    allowed = {*CAPTURE_SETTINGS, "log_destination", "log_line_prefix"}
    if not names <= allowed:
        return f"settings {sorted(names - allowed)} are not the capture's"
    if not isinstance(args.get("dsn"), str):
        return "no dsn"
    if "password" in str(args["dsn"]):
        return "a journaled connection string holds a password"
    return None


@undo_action("restore_server_settings", bound=_settings_bound)
def _restore_server_settings(runner: Runner, args: dict[str, object]) -> None:
    settings = args["settings"]
    assert isinstance(settings, list)
    before = [
        AutoConf(str(s["name"]), None if s["value"] is None else str(s["value"])) for s in settings
    ]
    # the journal keeps no password: libpq's own sources give it (PGPASSWORD, ~/.pgpass)
    try:
        conn = _connect(str(args["dsn"]))
    except UsageError as exc:
        raise CapabilityError(
            f"{exc}; the journal keeps no password: give it as libpq takes it "
            "(PGPASSWORD=... pgfsbench cleanup, or a line in ~/.pgpass)"
        ) from None
    with conn:
        if (want := args.get("system_identifier")) is not None and str(want) != str(
            _one(conn, "SELECT system_identifier FROM pg_catalog.pg_control_system()")
        ):
            raise CapabilityError(
                f"{args['dsn']} is not the server the capture changed (system identifier "
                f"{want}): its settings were not touched"
            )
        put_back(conn, before)


def pending_capture(workdir: Path, system_identifier: str) -> str | None:
    """A journal an earlier capture of this server left with its settings not put back
    (killed): its name, else None."""
    for journal in leftover_journals(workdir):
        for step in journal.steps:
            if step.undo.kind == "restore_server_settings" and str(
                step.undo.args.get("system_identifier")
            ) == str(system_identifier):
                return journal.path.name
    return None


def stats_snapshot(conn: psycopg.Connection[Any], version: int) -> dict[str, Any]:
    """The server's counters of what work was done: WAL, databases, I/O (16+), and
    pg_stat_statements where it is installed (normalised statements only: no literals)."""
    out: dict[str, Any] = {
        "t": time.time(),
        "lsn": _text(_one(conn, "SELECT pg_catalog.pg_current_wal_lsn()"), "LSN", 32),
    }

    def rows(query: Any) -> list[dict[str, Any]]:
        cur = conn.execute(query)
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    out["wal"] = rows(
        "SELECT wal_records, wal_fpi, wal_bytes::bigint, wal_sync FROM pg_catalog.pg_stat_wal"
    )
    out["database"] = rows(
        "SELECT datname, xact_commit, xact_rollback, blks_read, blks_hit, tup_inserted, "
        "tup_updated, tup_deleted, deadlocks, temp_bytes FROM pg_catalog.pg_stat_database "
        "WHERE datname IS NOT NULL"
    )
    if version >= 160000:
        out["io"] = rows(
            "SELECT backend_type, object, context, reads, writes, extends, fsyncs "
            "FROM pg_catalog.pg_stat_io WHERE reads IS NOT NULL"
        )
    schema = _one(
        conn,
        "SELECT n.nspname FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_stat_statements'",
    )
    if schema:
        try:
            from psycopg import sql

            found = rows(
                sql.SQL(
                    "SELECT queryid::text, dbid::bigint, calls, rows, shared_blks_dirtied, "
                    "shared_blks_written, wal_records, wal_fpi, wal_bytes::bigint, "
                    "total_exec_time, query FROM {}.pg_stat_statements "
                    "WHERE queryid IS NOT NULL"
                ).format(sql.Identifier(_text(schema, "schema", 63)))
            )
            # a utility statement's text keeps its literals there: normalised here
            for r in found:
                r["query"] = normalise(str(r.get("query") or ""))[:2000]
            out["statements"] = found
        except Exception as exc:
            out["statements_unavailable"] = " ".join(str(exc).split())[:200]
    return out


def _log_file(conn: psycopg.Connection[Any], fmt: str) -> str | None:
    found = _one(conn, "SELECT pg_catalog.pg_current_logfile(%s)", fmt)
    return None if found is None else _text(found, "log file name")


def _file_size(conn: psycopg.Connection[Any], path: str) -> int:
    return int(_one(conn, "SELECT size FROM pg_catalog.pg_stat_file(%s, true)", path) or 0)


def _logs_since(conn: psycopg.Connection[Any], first: str, since: float) -> list[str]:
    """The log files of ``first``'s kind written from it on (a rotation during the
    capture makes more than one), oldest first."""
    directory = Path(first).parent
    rows = conn.execute(
        "SELECT name, extract(epoch from modification) FROM pg_catalog.pg_ls_logdir() "
        "WHERE name LIKE %s ORDER BY modification, name",
        ("%" + Path(first).suffix,),
    ).fetchall()
    names = [
        str(directory / _text(n, "log file name", 255))
        for n, m in rows
        if float(m) >= since - 1 and "/" not in str(n)
    ]
    if first not in names:
        names.insert(0, first)
    return names[names.index(first) :]


def tablespaces(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The server's tablespaces kept outside its data directory (a location that is an
    absolute path): their OID, name and location. An in-place tablespace (a directory in
    pg_tblspc, PostgreSQL 15's allow_in_place_tablespaces) is in the data's copy itself."""
    rows = conn.execute(
        "SELECT oid::bigint, spcname, pg_catalog.pg_tablespace_location(oid) "
        "FROM pg_catalog.pg_tablespace "
        "WHERE spcname NOT IN ('pg_default', 'pg_global') ORDER BY oid"
    ).fetchall()
    return [
        {
            "oid": int(oid),
            "name": _text(name, "tablespace name", 63),
            "location": _text(loc, "tablespace location"),
        }
        for oid, name, loc in rows
        if loc and Path(str(loc)).is_absolute()
    ]


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


def server_settings(conn: psycopg.Connection[Any]) -> tuple[dict[str, str], dict[str, str]]:
    """The settings the server was given (its configuration files, its command line) that
    a copy of its data runs with (postgres/carried.py's allowlist, values of their type),
    and those left out with why."""
    given = {
        str(n): v
        for n, v in conn.execute(
            "SELECT name, setting FROM pg_catalog.pg_settings WHERE source NOT IN "
            "('default', 'override', 'client', 'session') AND context <> 'internal'"
        )
    }
    return carried(given)


def _removed_on_failure(out: Path) -> None:
    """A capture that failed leaves no half directory (it may hold part of the data)."""
    from pgfsbench.system.held import Held

    with contextlib.suppress(OSError, PgfsbenchError), Held.open(out.parent) as parent:
        if parent.exists(out.name):
            parent.remove(out.name)


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
    workdir: Path | None = None,
) -> CaptureResult:
    """Capture ``seconds`` of the server's workload into ``out`` (a new directory).
    ``ready`` is called once statements are logged (the base copy made); ``wait`` waits
    the capture's time and says False when it was cut short (a stop signal). Refused
    while ``workdir`` holds a killed capture's journal for the same server. A capture
    that fails leaves no directory."""
    _check_output(seconds, out)
    try:
        return _capture(
            dsn=dsn,
            seconds=seconds,
            out=out,
            journal=journal,
            runner=runner,
            pg_basebackup=pg_basebackup,
            base=base,
            max_log_bytes=max_log_bytes,
            ready=ready,
            wait=wait,
            log_format=log_format,
            workdir=workdir,
        )
    except BaseException:
        _removed_on_failure(out)
        raise


def _capture(
    *,
    dsn: str,
    seconds: float,
    out: Path,
    journal: Journal,
    runner: Runner,
    pg_basebackup: str | None,
    base: Path | None,
    max_log_bytes: int,
    ready: Callable[[], None] | None,
    wait: Callable[[float], bool] | None,
    log_format: str | None,
    workdir: Path | None,
) -> CaptureResult:
    conn, peer = connect_as(dsn)
    with conn:
        facts = preflight(conn, log_format=log_format)
        fmt = str(facts["log_format"])
        from_stderr = facts["log_source"] == "stderr"
        if workdir is not None and (
            left := pending_capture(workdir, str(facts["system_identifier"]))
        ):
            raise CapabilityError(
                f"an earlier capture of this server was killed before it put its settings "
                f"back ({workdir}/{left}): run `pgfsbench cleanup --workdir {workdir}` "
                "first (PGPASSWORD or ~/.pgpass give it the password)"
            )
        # the capture's own session is not the workload (its statements are left out)
        own = _one(
            conn,
            "SELECT pg_catalog.to_hex(pg_catalog.trunc(pg_catalog.date_part('epoch', "
            "backend_start))::bigint) || '.' || pg_catalog.to_hex(pid) "
            "FROM pg_catalog.pg_stat_activity WHERE pid = pg_catalog.pg_backend_pid()",
        )
        destination = _text(_one(conn, "SHOW log_destination"), "log_destination", 200)
        wanted = capture_settings(int(facts["server_version_num"]))
        token = new_token()
        if from_stderr:  # its lines told apart by a prefix of the capture's own
            wanted["log_line_prefix"] = line_prefix(token, int(facts["server_version_num"]))
        else:
            parts = [p.strip() for p in destination.split(",") if p.strip()]
            wanted["log_destination"] = ",".join([*parts, fmt] if fmt not in parts else parts)
        before = auto_conf(conn, list(wanted))
        if (why := _left_by_a_capture(before, wanted)) is not None:
            raise CapabilityError(why)
        settings_before = {
            str(n): _text(v, "setting", 200)
            for n, v in conn.execute(
                "SELECT name, setting FROM pg_catalog.pg_settings WHERE name = ANY(%s)",
                (list(wanted),),
            )
        }
        new_dir(out, 0o700)
        kept, left_out = server_settings(conn)
        manifest: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "format": fmt,
            "server": facts,
            "settings_changed": wanted,
            "settings_before": settings_before,
            "own_sessions": [own],
            "server_settings": kept,
            "server_settings_left_out": left_out,
            "connected_as": peer.name if peer is not None else "root",
        }
        from psycopg import sql

        # the journal names the server without its password; cleanup gets it from libpq
        step = journal.record(
            f"capture settings of the server at {shown_dsn(dsn)}",
            Undo(
                "restore_server_settings",
                {
                    "dsn": shown_dsn(dsn),
                    "system_identifier": str(facts["system_identifier"]),
                    "settings": [{"name": s.name, "value": s.value} for s in before],
                },
            ),
        )
        try:
            for name, value in wanted.items():
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
            conn.execute("SELECT pg_catalog.pg_reload_conf()")
            if from_stderr:
                first = STDERR
                offset = await_stderr(conn, wanted["log_line_prefix"])
            else:
                first = _await_log(conn, fmt)
                offset = _file_size(conn, first)
            # a statement logged from here on is in the capture
            t0 = time.time()
            manifest["start"] = {"time": t0, "log_file": Path(first).name, "offset": offset}
            manifest["stats_before"] = stats_snapshot(conn, facts["server_version_num"])
            if base is None:
                if pg_basebackup is None:
                    raise CapabilityError("pg_basebackup not found (give --base DIR)")
                manifest["base"] = copy_data(
                    conn, runner, pg_basebackup, out, tablespaces(conn), peer
                )
            else:
                manifest["base"] = {"kind": "given", "path": str(base)}
            if ready is not None:
                ready()
            done = (wait or _sleep)(seconds)
            manifest["stats_after"] = stats_snapshot(conn, facts["server_version_num"])
            t1 = time.time()
            manifest["end"] = {"time": t1, "cut_short": not done}
            manifest["end_state"] = _end_state(conn, dsn)
        finally:
            put_back(conn, before)
            journal.settle(step, "put back")
        # the log of the capture, through the server
        log_file = out / log_file_name(fmt)
        if from_stderr:
            files = [STDERR]
            size, manifest["log_stderr"] = stderr_log(conn, offset, out, token, max_log_bytes)
        else:
            files = _logs_since(conn, first, t0)
            fd = open_new_file(log_file, 0o600)
            try:
                size = read_log(
                    conn, [(f, offset if f == first else 0) for f in files], fd, max_log_bytes
                )
            finally:
                os.close(fd)
    # the workload's statements (the capture's own session and background processes
    # aside): the count a replay's reconciliation starts from
    # (read as the replay reads it: a statement that failed before it was logged counts)
    read = read_capture_log(log_rows(log_file, fmt), [str(own)])
    statements, not_workload = read.captured, read.not_workload
    manifest["log"] = {
        "statements": statements,
        "not_workload_statements": not_workload,
        "bytes": size,
        "files": ["stderr"] if from_stderr else [Path(f).name for f in files],
        "source": facts["log_source"],
        "truncated": size >= max_log_bytes,
    }
    manifest["seconds"] = round(manifest["end"]["time"] - manifest["start"]["time"], 3)
    write_file(out / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n", 0o600)
    return CaptureResult(
        out, manifest["seconds"], size, statements, manifest["base"]["kind"], manifest
    )


def _end_state(conn: psycopg.Connection[Any], dsn: str) -> dict[str, Any]:
    """Each database's tables as the capture ends (workloads/end_state.py), to set a
    replay's beside."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pgfsbench.workloads.end_state import databases_state

    names = [
        _text(r[0], "database", 63)
        for r in conn.execute(
            "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn "
            "AND NOT datistemplate ORDER BY 1 LIMIT 50"
        )
    ]

    def connect(db: str) -> psycopg.Connection[Any]:
        params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
        params["dbname"] = db
        return _connect(make_conninfo(**params))

    return databases_state(connect, names)


# the settings whose values, all at once in postgresql.auto.conf, can only be a capture's
_CAPTURE_SIGNATURE = ("log_statement", "log_duration", "log_parameter_max_length")


def _left_by_a_capture(before: list[AutoConf], wanted: dict[str, str]) -> str | None:
    """Why the settings found cannot be taken as the server's own: postgresql.auto.conf
    already holds a capture's values (one killed, whose journal is gone), and putting them
    "back" would leave the server logging every statement with its parameters."""
    found = {s.name: s.value for s in before}
    if all(found.get(n) == wanted[n] for n in _CAPTURE_SIGNATURE):
        return (
            "postgresql.auto.conf already holds a capture's settings ("
            + ", ".join(f"{n} = {wanted[n]}" for n in _CAPTURE_SIGNATURE)
            + "): an earlier capture was killed and its journal is gone. Put the server's "
            "own values back (ALTER SYSTEM RESET ...; SELECT pg_reload_conf()) and capture "
            "again"
        )
    return None


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return True


def _await_log(conn: psycopg.Connection[Any], fmt: str, timeout: float = 10.0) -> str:
    """The jsonlog (csvlog) file the server writes once the reload took effect."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = _log_file(conn, fmt)
        on = _one(conn, "SELECT setting FROM pg_catalog.pg_settings WHERE name = 'log_statement'")
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
    wait: Callable[[float], bool] | None = None,
) -> CaptureResult:
    """The lighter capture: no setting changed, no statement logged. pg_stat_statements
    before and after, the busiest client sessions counted each second, the tables'
    column statistics, and pgbench scripts made from them (workloads/synthesis.py); with
    the data copy. An approximation of the workload, said so wherever it is used. A
    capture that fails leaves no directory."""
    _check_output(seconds, out)
    try:
        return _capture_stats(dsn, seconds, out, runner, pg_basebackup, ready, wait)
    except BaseException:
        _removed_on_failure(out)
        raise


def _capture_stats(
    dsn: str,
    seconds: float,
    out: Path,
    runner: Runner,
    pg_basebackup: str | None,
    ready: Callable[[], None] | None,
    wait: Callable[[float], bool] | None,
) -> CaptureResult:
    from pgfsbench.workloads.synthesis import (
        COLUMN_STATS_SQL,
        columns_of,
        deltas,
        scripts_from_stats,
    )

    with _connect(dsn) as conn:
        facts = preflight(conn, need_log=False)
        before = stats_snapshot(conn, facts["server_version_num"])
        if "statements" not in before:
            raise CapabilityError(
                "pg_stat_statements is not there (CREATE EXTENSION pg_stat_statements, with "
                "it in shared_preload_libraries): the lighter capture reads only it"
            )
        dbid = int(
            _one(
                conn,
                "SELECT oid::bigint FROM pg_catalog.pg_database "
                "WHERE datname = pg_catalog.current_database()",
            )
        )
        new_dir(out, 0o700)
        t0 = time.time()
        manifest: dict[str, Any] = {
            "version": MANIFEST_VERSION,
            "format": "pg_stat_statements",
            "server": facts,
            "dbname": _text(_one(conn, "SELECT pg_catalog.current_database()"), "name", 63),
            "start": {"time": t0},
            "server_settings": server_settings(conn)[0],
        }
        if pg_basebackup is None:
            raise CapabilityError("pg_basebackup not found")
        manifest["base"] = copy_data(conn, runner, pg_basebackup, out, tablespaces(conn))
        manifest["stats_before"] = before = stats_snapshot(conn, facts["server_version_num"])
        if ready is not None:
            ready()
        busiest, counts = 0, []
        end = time.monotonic() + seconds
        going = True
        while time.monotonic() < end and going:
            n = int(
                _one(
                    conn,
                    "SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> pg_catalog.pg_backend_pid() "
                    "AND datname = pg_catalog.current_database() "
                    "AND state <> 'idle'",
                )
            )
            busiest = max(busiest, n)
            counts.append(n)
            going = (wait or _sleep)(min(1.0, max(0.0, end - time.monotonic())))
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
