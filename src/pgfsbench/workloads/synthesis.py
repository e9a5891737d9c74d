"""The lighter path to your workload: pgbench scripts made from `pg_stat_statements` alone,
for servers where logging every statement is not allowed. An approximation, and said so:
each normalised statement becomes a script of its own, weighted by its calls over the
capture (pgbench's `-f FILE@WEIGHT`), each run as its own transaction; a parameter `$n`
compared with, set to or inserted into a numeric column gets a value drawn uniformly
between that column's smallest and largest value in the server's statistics (pg_stats);
a statement with a parameter pgfsbench cannot place (a text column, an expression) is left
out, counted and named. No literal is involved: pg_stat_statements has none, and the
values come from statistics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgfsbench.postgres.statements import normalise

MAX_SCRIPTS = 50  # the busiest statements, until they cover COVER of the calls
COVER = 0.99
WEIGHT_TOTAL = 10_000  # pgbench's weights, scaled to sum to about this

_NUMERIC = {
    "smallint",
    "integer",
    "bigint",
    "int2",
    "int4",
    "int8",
    "numeric",
    "real",
    "double precision",
    "float4",
    "float8",
}
_PARAM = re.compile(r"\$(\d+)")
_IDENT = r'"?([A-Za-z_][A-Za-z_0-9]*)"?'
# col = $n, col < $n, col + $n ... (the column before an operator and the parameter)
_COMPARED = re.compile(_IDENT + r"\s*(?:=|<>|!=|<=|>=|<|>|\+|-)\s*\$(\d+)")
_TABLES = re.compile(
    r"\b(?:FROM|JOIN|UPDATE|INTO)\s+" + r'(?:"?[A-Za-z_][A-Za-z_0-9]*"?\.)?' + _IDENT, re.I
)
_INSERT = re.compile(
    r"\bINSERT\s+INTO\s+"
    + r'(?:"?[A-Za-z_][A-Za-z_0-9]*"?\.)?'
    + _IDENT
    + r"\s*\(([^)]*)\)\s*VALUES\s*\(([^)]*)\)",
    re.I | re.S,
)
_UTILITY = re.compile(
    r"^\s*(BEGIN|START|COMMIT|END|ROLLBACK|ABORT|SET|RESET|SHOW|DISCARD|"
    r"DEALLOCATE|VACUUM|ANALYZE|CHECKPOINT|COPY|CREATE|DROP|ALTER|TRUNCATE|"
    r"GRANT|REVOKE|LOCK|LISTEN|NOTIFY|PREPARE|EXECUTE)\b",
    re.I,
)


@dataclass(frozen=True)
class Column:
    type: str
    low: float | None  # pg_stats' smallest value (histogram or most common)
    high: float | None


@dataclass
class Scripts:
    scripts: list[tuple[str, int, str]] = field(default_factory=list)  # (text, weight, query)
    calls_covered: int = 0
    calls_total: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # why -> calls


def deltas(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], dbid: int | None = None
) -> list[dict[str, Any]]:
    """pg_stat_statements' rows over the capture: calls and rows done in it, by query id
    (an entry evicted or reset meanwhile counts from zero)."""
    old = {(r.get("dbid"), r.get("queryid")): r for r in before}
    out = []
    for r in after:
        if dbid is not None and r.get("dbid") != dbid:
            continue
        prev = old.get((r.get("dbid"), r.get("queryid")), {})
        calls = int(r.get("calls") or 0) - int(prev.get("calls") or 0)
        if calls <= 0:
            continue
        out.append(
            {**r, "calls": calls, "rows": int(r.get("rows") or 0) - int(prev.get("rows") or 0)}
        )
    return sorted(out, key=lambda r: -r["calls"])


def _place(query: str, columns: Mapping[str, Mapping[str, Column]]) -> dict[int, Column] | str:
    """Each parameter's column, or why one has none."""
    tables = [t.lower() for t in _TABLES.findall(query)]
    placed: dict[int, str] = {}
    for m in _INSERT.finditer(query):
        names = [c.strip().strip('"').lower() for c in m.group(2).split(",")]
        values = [v.strip() for v in m.group(3).split(",")]
        for name, value in zip(names, values, strict=False):
            if (p := _PARAM.fullmatch(value)) is not None:
                placed[int(p.group(1))] = f"{m.group(1).lower()}.{name}"
    for col, n in _COMPARED.findall(query):
        placed.setdefault(int(n), col.lower())
    out: dict[int, Column] = {}
    for n in sorted({int(x) for x in _PARAM.findall(query)}):
        where = placed.get(n)
        if where is None:
            return f"a parameter not compared with, set to or inserted into a column (${n})"
        table, _, col = where.rpartition(".")
        candidates = [table] if table else tables
        found = next((columns[t][col] for t in candidates if col in columns.get(t, {})), None)
        if found is None:
            return f"a parameter on a column pgfsbench cannot find (${n}: {col})"
        base_type = found.type.split("(")[0].strip()
        if base_type not in _NUMERIC:
            return f"a parameter on a non-numeric column (${n}: {col}, {found.type})"
        if found.low is None or found.high is None:
            # no statistics (an empty table when it was analysed): the same column's
            # elsewhere (a key), else 0
            other = next(
                (c for t in columns.values() if (c := t.get(col)) and c.low is not None), None
            )
            found = other or Column(found.type, 0.0, 0.0)
        out[n] = found
    return out


def scripts_from_stats(
    rows: Sequence[Mapping[str, Any]], columns: Mapping[str, Mapping[str, Column]]
) -> Scripts:
    """pgbench scripts for the busiest statements (``rows``: deltas, busiest first)."""
    made = Scripts(calls_total=sum(int(r["calls"]) for r in rows))
    kept: list[tuple[str, int, str]] = []
    for r in rows:
        if made.calls_covered >= COVER * made.calls_total or len(kept) >= MAX_SCRIPTS:
            made.skipped["beyond the busiest statements"] = made.skipped.get(
                "beyond the busiest statements", 0
            ) + int(r["calls"])
            continue
        query = normalise(str(r.get("query") or ""))
        if not query or _UTILITY.match(query):
            why = "a transaction or utility statement (each script is its own transaction)"
            made.skipped[why] = made.skipped.get(why, 0) + int(r["calls"])
            continue
        placed = _place(query, columns)
        if isinstance(placed, str):
            made.skipped[placed] = made.skipped.get(placed, 0) + int(r["calls"])
            continue
        sets = []
        for n, col in placed.items():
            low, high = int(col.low or 0), int(col.high or 0)
            sets.append(f"\\set p{n} random({min(low, high)}, {max(low, high)})")
        body = _PARAM.sub(lambda m: f":p{m.group(1)}", query)
        kept.append(("\n".join([*sets, body + ";"]) + "\n", int(r["calls"]), query))
        made.calls_covered += int(r["calls"])
    total = sum(c for _, c, _ in kept) or 1
    made.scripts = [(text, max(1, round(c / total * WEIGHT_TOTAL)), q) for text, c, q in kept]
    return made


def columns_of(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Column]]:
    """pg_stats' rows (tablename, attname, type, low, high) as table -> column."""
    out: dict[str, dict[str, Column]] = {}
    for r in rows:
        low, high = r.get("low"), r.get("high")
        out.setdefault(str(r["tablename"]).lower(), {})[str(r["attname"]).lower()] = Column(
            str(r.get("type") or ""),
            None if low is None else float(low),
            None if high is None else float(high),
        )
    return out


# what capture reads: every column of the user's tables with its type, and for a numeric
# one its smallest and largest value in pg_stats (histogram, else most common values)
COLUMN_STATS_SQL = """
SELECT c.relname AS tablename, a.attname, format_type(a.atttypid, a.atttypmod) AS type,
       CASE WHEN format_type(a.atttypid, NULL) IN
            ('smallint', 'integer', 'bigint', 'numeric', 'real', 'double precision') THEN
         COALESCE((s.histogram_bounds::text::float8[])[1],
                  (SELECT min(v) FROM unnest(s.most_common_vals::text::float8[]) v)) END AS low,
       CASE WHEN format_type(a.atttypid, NULL) IN
            ('smallint', 'integer', 'bigint', 'numeric', 'real', 'double precision') THEN
         COALESCE((s.histogram_bounds::text::float8[])[
                    array_length(s.histogram_bounds::text::float8[], 1)],
                  (SELECT max(v) FROM unnest(s.most_common_vals::text::float8[]) v)) END AS high
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid AND c.relkind IN ('r', 'p')
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
                    AND s.attname = a.attname
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
  AND a.attnum > 0 AND NOT a.attisdropped
"""
