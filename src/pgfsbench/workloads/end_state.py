"""A database's end state, to compare a replay's with its capture's: each user table's row
count and a checksum of its rows (the sum of a 64-bit hash of each row's text), taken on
the captured server when the capture ends, and on the replay's server when a replay ends.
Equal says the replay did what the capture did; a difference is named by table, and read
(same rows, other values: what the order of a sequence or a retried conflict changes).

Bounded: at most MAX_TABLES tables, each within TABLE_TIMEOUT_S (a table that takes longer
is said as not compared), in one repeatable-read snapshot. The names are the server's
(data): they are quoted, never spliced; they are kept only in the capture's directory and in
the run's record as a report shows them (names of tables, never their rows).
"""

from __future__ import annotations

from typing import Any

MAX_TABLES = 500
TABLE_TIMEOUT_S = 30

# a table with a column of a type the server's users made (a domain, an enum, a composite,
# an extension's type, an array of one) is not read: its text would run that type's output
# function, code of the captured server's, as pgfsbench's superuser on the replay's host
_TABLES = """
SELECT n.nspname, c.relname,
       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
               WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                 AND a.atttypid >= 16384)
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg_temp%%' AND n.nspname NOT LIKE 'pg_toast_temp%%'
ORDER BY 1, 2 LIMIT %s
"""


def end_state(conn: Any) -> dict[str, Any]:
    """Every user table of the connected database: {"schema.table": [rows, checksum]},
    and the tables not compared with why."""
    from psycopg import errors, sql

    tables: dict[str, list[int]] = {}
    skipped: dict[str, str] = {}
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        conn.execute(
            "SELECT pg_catalog.set_config('statement_timeout', %s, true), "
            "pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)",
            (f"{TABLE_TIMEOUT_S}s",),
        )
        for schema, name, user_types in conn.execute(_TABLES, (MAX_TABLES,)).fetchall():
            key = f"{schema}.{name}"
            if user_types:
                skipped[key] = "a column of a type the server's users made (its code not run)"
                continue
            query = sql.SQL(
                "SELECT pg_catalog.count(*), "
                "coalesce(pg_catalog.sum(pg_catalog.hashtextextended(t::text, 0)), 0) "
                "FROM {}.{} t"
            ).format(sql.Identifier(schema), sql.Identifier(name))
            try:
                with conn.transaction():  # a savepoint: one table's failure is its own
                    row = conn.execute(query).fetchone()
            except errors.QueryCanceled:
                skipped[key] = f"took longer than {TABLE_TIMEOUT_S} s"
                continue
            except errors.Error as exc:
                skipped[key] = " ".join(str(exc).split())[:200]
                continue
            if row is not None:
                tables[key] = [int(row[0]), int(row[1])]
    return {"tables": tables, "not_compared": skipped}


def databases_state(connect: Any, databases: list[str]) -> dict[str, Any]:
    """``end_state`` of each database (``connect(dbname)`` gives a connection)."""
    out: dict[str, Any] = {}
    for db in databases:
        try:
            with connect(db) as conn:
                out[db] = end_state(conn)
        except Exception as exc:  # a database that cannot be read is said, not compared
            out[db] = {"tables": {}, "not_compared": {"*": " ".join(str(exc).split())[:200]}}
    return out


def compare_states(captured: dict[str, Any], replayed: dict[str, Any]) -> dict[str, Any]:
    """The replay's end state against the capture's: equal, or which tables differ and
    how (rows missing or added; the same count with other values)."""
    differs: list[dict[str, Any]] = []
    not_compared: list[str] = []
    compared = 0
    for db, cap in captured.items():
        rep = replayed.get(db)
        if rep is None:
            not_compared.append(f"{db}: not read after the replay")
            continue
        for where, why in {**cap.get("not_compared", {}), **rep.get("not_compared", {})}.items():
            not_compared.append(f"{db}.{where}: {why}")
        cap_t, rep_t = cap.get("tables", {}), rep.get("tables", {})
        for table in sorted(set(cap_t) | set(rep_t)):
            if table in cap.get("not_compared", {}) or table in rep.get("not_compared", {}):
                continue
            compared += 1
            a, b = cap_t.get(table), rep_t.get(table)
            if a == b:
                continue
            if a is None or b is None:
                how = "made by the replay only" if a is None else "missing after the replay"
            elif a[0] != b[0]:
                how = f"{b[0] - a[0]:+d} rows ({b[0]} against {a[0]})"
            else:
                how = (
                    "the same rows counted, other values (a sequence's order, a conflict "
                    "retried, a time taken when it ran)"
                )
            rows_differ = a is None or b is None or a[0] != b[0]
            differs.append({"table": f"{db}.{table}", "how": how, "rows_differ": rows_differ})
    return {
        "equal": not differs and compared > 0,
        "tables_compared": compared,
        "differs": differs,
        "not_compared": not_compared,
    }
