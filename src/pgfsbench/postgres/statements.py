"""A statement's text without its literals: what pgfsbench may show of a statement it did
not write (a captured workload's, a lock holder's in the diagnosis). Literals hold users'
data; reports, summaries and stored evidence get the normalised text only."""

from __future__ import annotations

import re

__all__ = ["normalise"]

# literals, in the order a lexer meets them: comments, dollar quotes, strings, numbers
_LEX = re.compile(
    r"""(?P<comment>--[^\n]*|/\*.*?\*/)
      |(?P<dollar>\$(?P<tag>[A-Za-z_][A-Za-z_0-9]*|)\$.*?\$(?P=tag)\$)
      |(?P<string>[EeBbXxNn]?'(?:[^']|'')*')
      |(?P<ident>"(?:[^"]|"")*")
      |(?P<param>\$\d+)
      |(?P<word>[A-Za-z_][A-Za-z_0-9$]*)
      |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    """,
    re.S | re.X,
)


def normalise(sql: str) -> str:
    """The statement with every literal (string, number, dollar-quoted body) and comment
    replaced: `$n` for a literal as pg_stat_statements shows it, nothing for a comment;
    whitespace collapsed. Parameters already `$n` stay; identifiers stay."""
    out: list[str] = []
    pos = 0
    n = max((int(m) for m in re.findall(r"\$(\d+)", sql)), default=0)
    for m in _LEX.finditer(sql):
        out.append(sql[pos : m.start()])
        kind = m.lastgroup
        if kind in ("string", "dollar", "number"):
            n += 1
            out.append(f"${n}")
        elif kind == "comment":
            out.append(" ")
        else:
            out.append(m.group(0))
        pos = m.end()
    out.append(sql[pos:])
    return " ".join("".join(out).split())
