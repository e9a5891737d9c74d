"""A replay's fidelity to its capture, as one reconciliation and side by side.

Every statement of the workload the capture logged is accounted for once: replayed, not
sent (the replayer stopped), already in the data copy (its transaction committed before
the copy ended), or not replayable, by reason; those of a transaction still open at the
capture's end are replayed, then rolled back, and said. The statements table counts the
same way, by normalised statement (never a literal). The servers' own counters (commits,
rows, WAL records, full-page images, blocks dirtied) are then set side by side.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pgfsbench.system.trust import read_trusted

FIDELITY_WAL_PCT = 5.0  # a replay's WAL beyond this of the capture's is marked
TOP_STATEMENTS = 20  # normalised statements a run keeps with their calls


# the work compared, from each side's counters: (name, where, column)
WORK = (
    ("commits", "database", "xact_commit"),
    ("rollbacks", "database", "xact_rollback"),
    ("rows inserted", "database", "tup_inserted"),
    ("rows updated", "database", "tup_updated"),
    ("rows deleted", "database", "tup_deleted"),
    ("WAL records", "wal", "wal_records"),
    ("full-page images", "wal", "wal_fpi"),
    ("blocks dirtied", "statements", "shared_blks_dirtied"),
)


def work_of(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """What was done between two counter snapshots (capture.stats_snapshot): commits,
    rows, WAL records and full-page images, blocks dirtied (pg_stat_statements, where it
    is installed). A counter missing on either side is left out."""

    def keyed(snap: dict[str, Any], where: str) -> dict[tuple[str, ...], dict[str, Any]]:
        out: dict[tuple[str, ...], dict[str, Any]] = {}
        for row in snap.get(where) or []:
            if isinstance(row, dict):
                out[(str(row.get("datname")), str(row.get("queryid")), str(row.get("dbid")))] = row
        return out

    done: dict[str, int] = {}
    for name, where, column in WORK:
        if where not in before or where not in after:
            continue
        old, new = keyed(before, where), keyed(after, where)
        total = 0
        for key, row in new.items():
            try:
                total += int(row.get(column) or 0) - int(old.get(key, {}).get(column) or 0)
            except (TypeError, ValueError):
                continue
        done[name] = total
    return done


def tablespace_names(manifest: dict[str, Any]) -> list[str]:
    """The names of the capture's tablespaces (its manifest's, each cut to 63 characters)."""
    spaces = (manifest.get("base") or {}).get("tablespaces") or []
    return [str(s.get("name", ""))[:63] for s in spaces if isinstance(s, dict)][:100]


# what a statement log cannot give a replay (a wire capture carries each of them)
LOG_CANNOT_CARRY = [
    "parameter types (sent as text, their types left to the server: a typed parameter in "
    "an untyped place fails, 42P18)",
    "start-up options (search_path, DateStyle, TimeZone... given at connection: the replay's "
    "sessions run with the server's)",
    "COPY's data, and a statement that failed before it was logged (at parse or bind)",
]


def _differs(cap: dict[str, Any], rep: dict[str, Any], rows_known: bool) -> str | None:
    """How one statement did otherwise in the replay than in the capture (None: alike)."""
    parts = []
    calls = int(cap.get("calls", 0)) - int(cap.get("in_copy", 0))
    if calls != int(rep.get("calls", 0)):
        parts.append(f"calls {rep.get('calls', 0)} against {calls}")
    cap_states = {k: int(v) for k, v in (cap.get("states") or {}).items() if int(v)}
    rep_states = {k: int(v) for k, v in (rep.get("sqlstates") or {}).items() if int(v)}
    if (cap_states or rep_states) and cap_states != rep_states:
        parts.append(f"errors {rep_states or 'none'} against {cap_states or 'none'}")
    elif int(cap.get("errors", 0)) != int(rep.get("errors", 0)):
        parts.append(f"errors {rep.get('errors', 0)} against {cap.get('errors', 0)}")
    if rows_known and "rows" in cap and int(cap.get("rows", 0)) != int(rep.get("rows", 0)):
        parts.append(f"rows {rep.get('rows', 0)} against {cap.get('rows', 0)}")
    return "; ".join(parts) or None


def _statement_row(cap: dict[str, Any], rep: dict[str, Any], why: str | None) -> dict[str, Any]:
    return {
        "query": str(cap.get("query", ""))[:400],
        "calls_captured": int(cap.get("calls", 0)),
        "calls_in_copy": int(cap.get("in_copy", 0)),
        "calls_replayed": int(rep.get("calls", 0)),
        "errors_captured": int(cap.get("errors", 0)),
        "errors_replayed": int(rep.get("errors", 0)),
        "sqlstates_captured": {k: v for k, v in (cap.get("states") or {}).items() if v},
        "sqlstates_replayed": dict(rep.get("sqlstates") or {}),
        "rows_captured": cap.get("rows"),
        "rows_replayed": int(rep.get("rows", 0)),
        "differs": why,
    }


def reconciliation(prepared: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """Every workload statement of the capture accounted for once: captured = replayed +
    not sent + already in the data copy + not replayable (by reason). ``balanced`` says
    whether the parts add up (a capture prepared by an older pgfsbench has no total)."""
    written = prepared.get("written") or {}
    to_replay = int(written.get("statements") or 0)
    in_copy = int(written.get("already_in_the_copy") or 0)
    skipped = {str(k): int(v) for k, v in (prepared.get("skipped") or {}).items()}
    sent = int(stats.get("statements") or 0)
    retried = int(stats.get("retry_statements_skipped") or 0)
    not_sent = max(0, to_replay - sent - retried)
    captured = prepared.get("captured")
    parts = sent + not_sent + retried + in_copy + sum(skipped.values())
    return {
        "captured": captured,
        "replayed": sent,
        "not_sent": not_sent,
        # a client's retry whose first attempt succeeded in the replay: not sent, as the
        # client would not have sent it
        "retries_not_needed": retried,
        "already_in_the_copy": in_copy,
        "not_replayable": skipped,
        "open_at_end_replayed_then_rolled_back": int(prepared.get("open_at_end") or 0),
        "not_the_workload": int(prepared.get("not_workload") or 0),
        "balanced": None if captured is None else int(captured) == parts,
        "sessions": written.get("sessions"),
    }


def fidelity(
    manifest: dict[str, Any],
    replay_file: Path,
    stats: dict[str, Any],
    wal_bytes: int,
    work: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The replay's work against the capture's: the reconciliation of statements, errors
    and calls by normalised statement (counted the same way), WAL bytes, and the servers'
    own counters side by side; what differs beyond the stated limits is listed."""
    summary_path = replay_file.with_suffix(".json")
    prepared = json.loads(read_trusted(summary_path)) if summary_path.exists() else {}
    queries = {int(q["q"]): q for q in prepared.get("queries", [])}
    replayed = {int(q["q"]): q for q in stats.get("queries", [])}
    rec = reconciliation(prepared, stats)
    written = int(prepared.get("written", {}).get("statements", 0))
    sent = rec["replayed"]
    errors_captured = sum(int(q.get("errors", 0)) for q in queries.values())
    errors_replayed = sum(int(q.get("errors", 0)) for q in replayed.values())
    wal_captured = None
    try:
        before = manifest["stats_before"]["wal"][0]["wal_bytes"]
        after = manifest["stats_after"]["wal"][0]["wal_bytes"]
        wal_captured = int(after) - int(before)
    except (KeyError, IndexError, TypeError, ValueError):
        pass
    differs: list[str] = []
    if rec["not_sent"]:
        differs.append(f"{rec['not_sent']} of {written} statements to replay not sent")
    if rec["balanced"] is False:
        differs.append(
            f"the statements do not add up to the {rec['captured']:,} captured (a capture "
            "prepared by another version)"
        )
    if errors_replayed > errors_captured:
        differs.append(f"{errors_replayed} errors against {errors_captured} in the capture")
    wal_pct = None
    if wal_captured:
        wal_pct = round((wal_bytes - wal_captured) / wal_captured * 100, 2)
        if abs(wal_pct) > FIDELITY_WAL_PCT:
            differs.append(f"WAL {wal_pct:+.1f}% of the capture's (limit {FIDELITY_WAL_PCT:g}%)")
    # by normalised statement (no literal), counted as the reconciliation counts
    # (captured = to replay + in the copy): every one that differs, whatever its rank,
    # then the busiest
    wire = prepared.get("format") == "wire"
    rows_known = wire or any("rows" in q for q in queries.values())
    differing: dict[int, str] = {}
    for q in set(queries) | set(replayed):
        why = _differs(queries.get(q, {}), replayed.get(q, {}), rows_known)
        if why:
            differing[q] = why
    top = sorted(queries, key=lambda q: -int(queries[q].get("calls", 0)))[:TOP_STATEMENTS]
    shown = sorted(differing, key=lambda q: -int(queries.get(q, {}).get("calls", 0)))
    shown += [q for q in top if q not in differing]
    by_statement = [
        _statement_row(queries.get(q, {}), replayed.get(q, {}), differing.get(q)) for q in shown
    ]
    if differing:
        differs.append(
            f"{len(differing)} statement(s) did otherwise than in the capture (calls, errors "
            "or rows: see the statements table)"
        )
    if errors_replayed < errors_captured:
        differs.append(f"{errors_replayed} errors against {errors_captured} in the capture")
    tx = int(stats.get("transactions") or 0)
    cpu = float(stats.get("cpu_user_s") or 0) + float(stats.get("cpu_system_s") or 0)
    captured_work = work_of(manifest.get("stats_before") or {}, manifest.get("stats_after") or {})
    side_by_side = [
        {
            "what": name,
            "captured": captured_work[name],
            "replayed": (work or {})[name],
            "pct": round((work or {})[name] / captured_work[name] * 100 - 100, 1)
            if captured_work[name]
            else None,
        }
        for name, _, _ in WORK
        if name in captured_work and name in (work or {})
    ]
    return {
        "reconciliation": rec,
        "format": "wire" if wire else "log",
        "cannot_carry": [] if wire else LOG_CANNOT_CARRY,
        "statements_differ": len(differing),
        "statements": by_statement,
        "work": side_by_side,
        "replayer_cpu_us_per_tx": round(cpu / tx * 1e6, 1) if tx else None,
        "schedule_lag_max_ms": stats.get("schedule_lag_max_ms"),
        "statements_captured": rec["captured"] if rec["captured"] is not None else written,
        "statements_replayed": sent,
        "not_replayable": rec["not_replayable"],
        "already_in_the_copy": rec["already_in_the_copy"],
        # restored inside the data directory: on the storage under test, not a device of its own
        "tablespaces": tablespace_names(manifest),
        "errors_captured": errors_captured,
        "errors_replayed": errors_replayed,
        "wal_bytes_captured": wal_captured,
        "wal_bytes_replayed": wal_bytes,
        "wal_pct": wal_pct,
        "differs": differs,
    }
