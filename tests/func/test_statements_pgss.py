"""The normaliser against PostgreSQL's own: pg_stat_statements normalises the same
statements on a real server (a property test over literals of every kind, comments,
continuations, signs and both settings of standard_conforming_strings)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgfsbench.postgres.statements import normalise, without_comments
from tests.func.pgserver import Server, private_server

PORT = 5981
COMPARED: list[bool] = []

_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=12
)
_safe = st.text(alphabet='abcXYZ 09$-*/;é€😀"', max_size=8)


def _plain(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _escape(s: str) -> str:
    return "E'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _dollar(tag: str, body: str) -> str:
    d = f"${tag}$"
    return d + body.replace(d, "") + d


literal = st.one_of(
    _text.map(_plain),
    _text.map(_escape),
    st.tuples(st.sampled_from(["", "q", "tag_1", "é", "Été"]), _text).map(lambda t: _dollar(*t)),
    st.text(alphabet="01", min_size=1, max_size=8).map(lambda s: f"B'{s}'"),
    st.text(alphabet="0123456789abcdef", min_size=1, max_size=8).map(lambda s: f"X'{s}'"),
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: repr(abs(f))),
    st.sampled_from(["true", "FALSE", "NULL", ".5", "5.", "1e5", "- 7", "-0.25"]),
    _safe.map(lambda s: _plain(s) + "\n" + _plain(s)),  # a string continued
    st.sampled_from(["U&'d\\0061t'", "U&'d!0061t' UESCAPE '!'", "N'national'"]),
)
comment = st.one_of(
    _safe.map(lambda s: "/* " + s.replace("*/", "").replace("/*", "") + " */"),
    _safe.map(lambda s: "/* a /* " + s.replace("*/", "").replace("/*", "") + " */ b */"),
)
expression = st.one_of(
    literal,
    st.tuples(
        literal.filter(lambda x: x[0].isdigit()),
        st.sampled_from(["+", "-", "*"]),
        literal.filter(lambda x: x[0].isdigit()),
    ).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
    literal.map(lambda x: f"({x})"),
    st.tuples(literal, comment).map(lambda t: f"{t[0]} {t[1]}"),
)
statement = st.lists(expression, min_size=1, max_size=5).map(lambda xs: "SELECT " + ", ".join(xs))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="pgfsb-pgss-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        with private_server(base, PORT, "shared_preload_libraries = 'pg_stat_statements'\n") as srv:
            srv.psql("CREATE EXTENSION pg_stat_statements")
            yield srv
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _pgss(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> str | None:
    conn.execute("SELECT pg_stat_statements_reset()")
    try:
        conn.execute(sql.encode())
    except psycopg.Error:
        return None  # not a statement the server runs (an out-of-range cast, say)
    rows = conn.execute(
        "SELECT query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'"
    ).fetchall()
    return str(rows[0][0]) if len(rows) == 1 else None


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(sql=statement, conforming=st.booleans())
def test_the_normaliser_agrees_with_pg_stat_statements(
    server: Server, sql: str, conforming: bool
) -> None:
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(f"SET standard_conforming_strings = {'on' if conforming else 'off'}")
        conn.execute("SET escape_string_warning = off")
        theirs = _pgss(conn, sql)
    COMPARED.append(theirs is not None)
    if theirs is None:
        return
    ours = normalise(sql, backslash_quotes=not conforming)
    assert ours == without_comments(theirs), sql


def test_most_examples_were_compared() -> None:
    """The property test above compared (not skipped) most of its statements."""
    assert len(COMPARED) >= 100 and sum(COMPARED) >= 0.8 * len(COMPARED), COMPARED.count(False)


def test_no_literal_survives_the_cases_that_leaked() -> None:
    """The texts the review planted: each secret must be gone."""
    cases = [
        "SELECT E'x\\' secret1 '",  # an escaped quote inside E''
        "SELECT 1 /* a /* b */ secret2 */",  # a nested comment
        "SELECT $é$secret3$é$",  # a non-ASCII dollar tag
        "SELECT U&'secret4'",
        "SELECT B'1010', X'5ec5'",
        "SELECT 'sec'\n'ret5'",
        "SELECT 'secret6",  # never closed
        "SELECT $$secret7",
        "SELECT 1 /* secret8",
        "SELECT -42424242",
    ]
    for sql in cases:
        out = normalise(sql)
        assert "secret" not in out and "5ec5" not in out and "4242" not in out, (sql, out)
