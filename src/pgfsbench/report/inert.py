"""Text from outside shown as text: names from a results store, errors, the command lines
of processes any local user started. A terminal must not receive their control characters
or escape sequences (which can retitle it, clear it, or rewrite what was printed before),
and Markdown must not carry their HTML to whatever renders it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pgfsbench.system.printable import PRINTABLE_TABLE as _PRINTABLE
from pgfsbench.system.printable import REPLACEMENT, printable

__all__ = [
    "REPLACEMENT",
    "make_rich_inert",
    "markdown_inline",
    "markdown_text",
    "plain_console",
    "printable",
]

if TYPE_CHECKING:
    from rich.console import Console

_MARKDOWN: Final[dict[int, str]] = {
    **_PRINTABLE,
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
}


def markdown_text(text: str) -> str:
    """``text`` for a Markdown document: printable, and no HTML a renderer would act on."""
    return text.translate(_MARKDOWN)


# what makes Markdown act inside a line: links and images ([x](y), ![x](y)), autolinks
# and HTML (<...>), table cells (|), escapes (\\). Emphasis (*, _) is left: it changes no
# more than a look, and escaping it would make names like wal_buffers hard to read.
_MARKDOWN_INLINE: Final[dict[int, str]] = {
    **_PRINTABLE,
    **{ord(c): "\\" + c for c in "\\[]|`"},
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
    ord("\n"): " \u23ce ",  # a line break shown, never a new block (a heading, an image)
    ord("\r"): "",
}


def markdown_inline(text: str) -> str:
    """Outside text (a name, an error, a server's message) as one inert run of Markdown:
    on one line, its HTML as entities, every character that would make a link, an image,
    code or a table cell escaped, a '#' that would start a heading too."""
    out = text.translate(_MARKDOWN_INLINE)
    return "\\" + out if out.lstrip().startswith(("#", "+", "-", "=", ">")) else out


def make_rich_inert() -> None:
    """Every text rich prints (tables, lines) goes through its own control-code filter,
    which leaves ESC and most C0/C1 codes in: widen it to all of them. Rich's styles are
    written by rich itself, after this filter, and are unaffected."""
    from rich import control

    control._CONTROL_STRIP_TRANSLATE.update(_PRINTABLE)  # type: ignore[arg-type]


def plain_console(**options: Any) -> Console:
    """The console every command prints with: a string it is given, a table cell or a
    title included, is shown as it is, never read as rich markup (a stored name like
    ``[link=...]`` would make a hyperlink, an unbalanced ``[/x]`` would crash the command).
    A line of pgfsbench's own that carries styles says so: ``print(..., markup=True)``,
    with any outside text in it through ``rich.markup.escape``."""
    from rich.console import Console

    options.setdefault("markup", False)
    return Console(**options)
