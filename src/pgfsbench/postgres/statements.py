"""A statement's text without its literals: what pgfsbench may show of a statement it did
not write (a captured workload's, a lock holder's in the diagnosis). Literals hold users'
data; reports, summaries and stored evidence get the normalised text only.

The text is read by a lexer of PostgreSQL's own rules (``src/backend/parser/scan.l``), not
by patterns: comments (``--`` and nested ``/* */``), strings of every kind (``'...'`` with
``''``, ``E'...'`` with backslash escapes, ``B'...'``, ``X'...'``, ``N'...'``, ``U&'...'``
with ``UESCAPE``, a string continued on the next line), dollar quotes with any tag (non-ASCII
letters included), quoted identifiers, parameters and numbers (decimal, exponent, and
PostgreSQL 16's ``0x``/``0o``/``0b`` and ``_`` separators). A constant becomes ``$n`` as
pg_stat_statements shows it (a negative number's sign included, ``TRUE``/``FALSE``/``NULL``
too); a comment is dropped. What the lexer cannot close (an unterminated string, comment or
dollar quote) is replaced to the end: a statement that does not lex leaks nothing.
``tests/func/test_statements_pgss.py`` checks the result against pg_stat_statements on the
same statements (a property test).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Token", "normalise", "tokens", "without_comments"]

_IDENT_START = r"A-Za-z_\u0080-\U0010ffff"
_IDENT = re.compile(rf"[{_IDENT_START}][{_IDENT_START}0-9$]*")
_DOLLAR_TAG = re.compile(rf"\$(?:[{_IDENT_START}][{_IDENT_START}0-9]*)?\$")
_PARAM = re.compile(r"\$[0-9]+")
# a number: 0x/0o/0b and '_' (PostgreSQL 16) as well as decimals and exponents; trailing
# identifier characters are taken with it (16 refuses them; 15 reads them as an alias, but
# a literal's digits must never be shown, whichever)
_NUMBER = re.compile(
    r"""(?:0[xX](?:_?[0-9A-Fa-f])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+
        |(?:[0-9](?:_?[0-9])*(?:\.(?![.])(?:[0-9](?:_?[0-9])*)?)?|\.[0-9](?:_?[0-9])*)
         (?:[eE][-+]?[0-9]+)?)""",
    re.X,
)
_SPACE = " \t\n\r\f\v"
_OPERATOR_CHARS = set("~!@#^&|`?+-*/%<>=")
# after these words an expression starts, so a '-' there is a sign (pg_stat_statements
# folds it into the constant); after any other word (a name) it is a minus
_EXPRESSION_STARTS = frozenset(
    [
        "all",
        "and",
        "any",
        "array",
        "as",
        "asc",
        "between",
        "both",
        "by",
        "case",
        "cast",
        "check",
        "collate",
        "column",
        "constraint",
        "create",
        "default",
        "desc",
        "distinct",
        "do",
        "else",
        "except",
        "exists",
        "fetch",
        "for",
        "from",
        "grant",
        "group",
        "having",
        "ilike",
        "in",
        "intersect",
        "into",
        "is",
        "lateral",
        "leading",
        "like",
        "limit",
        "not",
        "of",
        "offset",
        "on",
        "only",
        "or",
        "order",
        "returning",
        "return",
        "select",
        "set",
        "similar",
        "some",
        "symmetric",
        "table",
        "then",
        "to",
        "trailing",
        "union",
        "unique",
        "using",
        "values",
        "variadic",
        "when",
        "where",
        "window",
        "with",
    ]
)
# keywords that are constants to pg_stat_statements
_CONSTANT_WORDS = frozenset({"true", "false", "null"})


@dataclass(frozen=True)
class Token:
    """One lexical element: its kind and its text as written."""

    # space | comment | string | uescape | dollar | number | param | ident | word | op | other
    kind: str
    text: str


def _string_end(sql: str, i: int, backslash: bool) -> int:
    """The index just past a quoted string whose opening quote is at ``i``; -1 when it is
    not closed. ``''`` is a quote; with ``backslash`` (E'...'), ``\\x`` escapes x."""
    n = len(sql)
    j = i + 1
    while j < n:
        c = sql[j]
        if backslash and c == "\\":
            j += 2
            continue
        if c == "'":
            if j + 1 < n and sql[j + 1] == "'":
                j += 2
                continue
            return j + 1
        j += 1
    return -1


def _continued(sql: str, end: int) -> int:
    """A string continued: whitespace holding a newline, then another quote (scan.l's
    xqcat); the index of that quote, or -1."""
    j = end
    newline = False
    n = len(sql)
    while j < n and sql[j] in _SPACE:
        newline = newline or sql[j] in "\n\r"
        j += 1
    if newline and j < n and sql[j] == "'":
        return j
    # a comment may sit between the parts too ('a' -- x \n 'b')
    return -1


def _uescape(sql: str, end: int) -> int:
    """After a U& string: `UESCAPE 'c'` belongs to it; the index past it, else ``end``."""
    m = re.compile(r"\s*[uU][eE][sS][cC][aA][pP][eE]\s*'(?:[^']|'')'").match(sql, end)
    return m.end() if m else end


def _block_comment_end(sql: str, i: int) -> int:
    """The index past a (nested) /* */ comment starting at ``i``; -1 when not closed."""
    depth = 0
    j = i
    n = len(sql)
    while j < n:
        if sql.startswith("/*", j):
            depth += 1
            j += 2
        elif sql.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    return -1


def tokens(sql: str, backslash_quotes: bool = False) -> Iterator[Token]:
    """The statement's tokens, in order; their texts joined give the statement back.
    ``backslash_quotes``: plain strings take backslash escapes (the server's
    standard_conforming_strings off). What is not closed is one last token of its kind."""
    i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if c in _SPACE:
            j = i
            while j < n and sql[j] in _SPACE:
                j += 1
            yield Token("space", sql[i:j])
            i = j
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            yield Token("comment", sql[i:j])
            i = j
            continue
        if sql.startswith("/*", i):
            j = _block_comment_end(sql, i)
            j = n if j < 0 else j
            yield Token("comment", sql[i:j])
            i = j
            continue
        # strings with a prefix: E'', B'', X'', N'', U&''
        prefix = 0
        backslash = backslash_quotes
        if c in "eE" and sql.startswith("'", i + 1):
            prefix, backslash = 1, True
        elif c in "bBxXnN" and sql.startswith("'", i + 1):
            prefix = 1
        elif c in "uU" and sql.startswith("&'", i + 1):
            prefix = 2
        if c == "'" or prefix:
            start = i
            if c in "nN" and prefix:  # N'..': a type keyword then a plain string
                yield Token("word", c)
                start = i = i + 1
                prefix = 0
            q = i + prefix
            while True:
                end = _string_end(sql, q, backslash)
                if end < 0:
                    yield Token("string", sql[start:])
                    return
                nxt = _continued(sql, end)
                if nxt < 0:
                    break
                q = nxt
            yield Token("string", sql[start:end])
            i = end
            if c in "uU" and prefix == 2 and (k := _uescape(sql, end)) > end:
                yield Token("uescape", sql[end:k])  # its escape character: not a literal
                i = k
            continue
        if c == '"' or (c in "uU" and sql.startswith('&"', i + 1)):
            q = i + (2 if c != '"' else 0)
            j = q + 1
            while True:
                k = sql.find('"', j)
                if k < 0:
                    yield Token("ident", sql[i:])
                    return
                if sql.startswith('""', k):
                    j = k + 2
                    continue
                j = k + 1
                break
            if c != '"':
                j = _uescape(sql, j)
            yield Token("ident", sql[i:j])
            i = j
            continue
        if c == "$":
            if m := _PARAM.match(sql, i):
                yield Token("param", m.group(0))
                i = m.end()
                continue
            if m := _DOLLAR_TAG.match(sql, i):
                tag = m.group(0)
                k = sql.find(tag, m.end())
                if k < 0:
                    yield Token("dollar", sql[i:])
                    return
                yield Token("dollar", sql[i : k + len(tag)])
                i = k + len(tag)
                continue
            yield Token("other", c)
            i += 1
            continue
        if c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            m = _NUMBER.match(sql, i)
            assert m is not None
            j = m.end()
            tail = _IDENT.match(sql, j)  # trailing junk: part of the literal here
            if tail:
                j = tail.end()
            yield Token("number", sql[i:j])
            i = j
            continue
        if m := _IDENT.match(sql, i):
            yield Token("word", m.group(0))
            i = m.end()
            continue
        if c in _OPERATOR_CHARS:
            j = i
            while j < n and sql[j] in _OPERATOR_CHARS:
                if sql.startswith("--", j) or sql.startswith("/*", j):
                    break  # a comment starts inside what looked like an operator
                j += 1
            yield Token("op", sql[i:j])
            i = j
            continue
        yield Token("other", c)
        i += 1


def _ends_operand(tok: Token) -> bool:
    """Does this token end an operand (so that a '-' after it is a minus, not a sign)?"""
    if tok.kind in ("string", "dollar", "number", "param", "ident"):
        return True
    if tok.kind == "word":
        return tok.text.lower() not in _EXPRESSION_STARTS
    return tok.kind == "other" and tok.text in (")", "]")


def normalise(sql: str, backslash_quotes: bool = False) -> str:
    """The statement with every constant (string, number, dollar-quoted body, TRUE, FALSE,
    NULL, a number's sign) replaced by ``$n`` as pg_stat_statements numbers them (after the
    statement's own parameters), every comment dropped and whitespace collapsed.
    Identifiers and parameters stay. ``backslash_quotes``: the server's
    standard_conforming_strings is off (backslash escapes in plain strings)."""
    toks = list(tokens(sql, backslash_quotes))
    n = max((int(t.text[1:]) for t in toks if t.kind == "param"), default=0)
    out: list[str] = []
    previous: Token | None = None  # the last significant token
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.kind in ("space", "comment"):
            out.append(" ")
            i += 1
            continue
        constant = t.kind in ("string", "dollar", "number") or (
            t.kind == "word" and t.text.lower() in _CONSTANT_WORDS
        )
        if t.kind == "op" and t.text == "-" and (previous is None or not _ends_operand(previous)):
            j = i + 1
            while j < len(toks) and toks[j].kind == "space":
                j += 1
            if j < len(toks) and toks[j].kind == "number":  # a signed number: one constant
                n += 1
                out.append(f"${n}")
                previous = toks[j]
                i = j + 1
                continue
        if constant:
            n += 1
            out.append(f"${n}")
        else:
            out.append(t.text)
        previous = t
        i += 1
    return " ".join("".join(out).split())


def without_comments(sql: str) -> str:
    """The statement with its comments dropped and its whitespace collapsed (literals kept):
    how a text another tool normalised compares with ``normalise``'s."""
    return " ".join(
        "".join(" " if t.kind in ("space", "comment") else t.text for t in tokens(sql)).split()
    )
