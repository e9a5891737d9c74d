"""Text from outside shown as text: names from a results store, errors, the command lines
of processes any local user started. A terminal must not receive their control characters
or escape sequences (which can retitle it, clear it, or rewrite what was printed before),
and Markdown must not carry their HTML to whatever renders it."""

from __future__ import annotations

import re
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


_TRAILING = re.compile(r"[ \t]+\n")

# without a terminal (a pipe, a file) a line is as long as it needs: every column, whole
# values, no wrapping (psql and pgbench print every column in full into a pipe too)
PIPE_WIDTH = 100_000


def plain_console(**options: Any) -> Console:
    """The console every command prints with: a string it is given, a table cell or a
    title included, is shown as it is, never read as rich markup (a stored name like
    ``[link=...]`` would make a hyperlink, an unbalanced ``[/x]`` would crash the command).
    A line of pgfsbench's own that carries styles says so: ``print(..., markup=True)``,
    with any outside text in it through ``rich.markup.escape``.

    Into a pipe or a file (not a terminal, and no COLUMNS given): no width, so nothing is
    wrapped, cut or left out to fit 80 columns, and tables without boxes (columns apart by
    spaces, one row a line): what a script or a grep reads."""
    import os
    import sys

    from rich.console import Console
    from rich.table import Table

    options.setdefault("markup", False)
    target = options.get("file") or (sys.stderr if options.get("stderr") else sys.stdout)
    piped = not _is_tty(target) and not options.get("force_terminal")
    if piped and "width" not in options and not os.environ.get("COLUMNS"):
        options["width"] = PIPE_WIDTH
    if not piped:
        return Console(**options)

    class PipeConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:
            for obj in objects:
                _unboxed(obj, Table)
            super().print(*objects, **kwargs)

    options["file"] = _Trimmed(target)
    options.pop("stderr", None)
    return PipeConsole(**options)


class _Trimmed:
    """A stream without the spaces rich pads a line with up to its table's width."""

    def __init__(self, stream: Any):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(_TRAILING.sub("\n", text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def close(self) -> None:
        self.stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def fileno(self) -> int:
        return int(self.stream.fileno())

    @property
    def encoding(self) -> str:
        return str(getattr(self.stream, "encoding", None) or "utf-8")


def _is_tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _unboxed(obj: Any, table_type: type, depth: int = 0) -> None:
    """Tables (in groups too) without their box lines."""
    if depth > 8:
        return
    if isinstance(obj, table_type):
        obj.box = None  # type: ignore[attr-defined]
        obj.show_edge = False  # type: ignore[attr-defined]
        obj.pad_edge = False  # type: ignore[attr-defined]
    for inner in getattr(obj, "renderables", None) or ():
        _unboxed(inner, table_type, depth + 1)
