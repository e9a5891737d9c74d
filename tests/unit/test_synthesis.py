"""pgbench scripts from pg_stat_statements: weighted by calls, each parameter drawn from
its column's statistics, what cannot be placed counted and named."""

from __future__ import annotations

from pgfsbench.workloads.synthesis import Column, columns_of, deltas, scripts_from_stats

COLUMNS = columns_of(
    [
        {
            "tablename": "pgbench_accounts",
            "attname": "aid",
            "type": "integer",
            "low": 1,
            "high": 100000,
        },
        {
            "tablename": "pgbench_accounts",
            "attname": "abalance",
            "type": "integer",
            "low": 0,
            "high": 0,
        },
        {
            "tablename": "pgbench_accounts",
            "attname": "filler",
            "type": "character(84)",
            "low": None,
            "high": None,
        },
        {"tablename": "pgbench_tellers", "attname": "tid", "type": "integer", "low": 1, "high": 10},
        {
            "tablename": "pgbench_history",
            "attname": "tid",
            "type": "integer",
            "low": None,
            "high": None,
        },
        {
            "tablename": "pgbench_history",
            "attname": "aid",
            "type": "integer",
            "low": None,
            "high": None,
        },
        {
            "tablename": "pgbench_history",
            "attname": "delta",
            "type": "integer",
            "low": None,
            "high": None,
        },
    ]
)


def row(query: str, calls: int) -> dict[str, object]:
    return {"queryid": query, "dbid": 5, "calls": calls, "rows": calls, "query": query}


def test_deltas_are_the_captures_own_calls_busiest_first() -> None:
    before = [row("a", 10), row("b", 5)]
    after = [row("a", 15), row("b", 105), row("c", 3), {**row("d", 9), "dbid": 6}]
    got = deltas(before, after, dbid=5)
    assert [(r["queryid"], r["calls"]) for r in got] == [("b", 100), ("a", 5), ("c", 3)]


def test_scripts_place_parameters_and_weigh_by_calls() -> None:
    rows = [
        row("UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2", 300),
        row("SELECT abalance FROM pgbench_accounts WHERE aid = $1", 100),
        row("INSERT INTO pgbench_history (tid, aid, delta, mtime) VALUES ($1, $2, $3, now())", 100),
        row("SELECT * FROM pgbench_accounts WHERE filler = $1", 50),
        row("BEGIN", 400),
    ]
    made = scripts_from_stats(rows, COLUMNS)
    texts = {q: (t, w) for t, w, q in made.scripts}
    update, weight = texts["UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2"]
    assert "\\set p2 random(1, 100000)" in update and "\\set p1 random(0, 0)" in update
    assert update.rstrip().endswith("WHERE aid = :p2;")
    assert weight == 6000  # 300 of the 500 placed calls
    insert, _ = texts[
        "INSERT INTO pgbench_history (tid, aid, delta, mtime) VALUES ($1, $2, $3, now())"
    ]
    # no statistics in the empty history table: the same column's elsewhere, else 0
    assert "\\set p1 random(1, 10)" in insert and "\\set p2 random(1, 100000)" in insert
    assert "\\set p3 random(0, 0)" in insert
    assert made.skipped == {
        "a transaction or utility statement (each script is its own transaction)": 400,
        "a parameter on a non-numeric column ($1: filler, character(84))": 50,
    }
    assert made.calls_total == 950 and made.calls_covered == 500


def test_the_busiest_statements_only() -> None:
    rows = [row(f"SELECT c{i} FROM pgbench_tellers WHERE tid = $1", 1000 - i) for i in range(80)]
    made = scripts_from_stats(rows, {"pgbench_tellers": {"tid": Column("integer", 1, 10)}})
    assert len(made.scripts) == 50 and "beyond the busiest statements" in made.skipped
