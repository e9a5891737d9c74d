"""Text from outside shown as text: names from a results store, errors, the command lines
of processes any local user started. A terminal must not receive their control characters
or escape sequences (which can retitle it, clear it, or rewrite what was printed before),
and Markdown must not carry their HTML to whatever renders it."""

from __future__ import annotations

from typing import Final

# C0 controls but tab and newline, DEL, and the C1 controls (ESC's 8-bit twins)
_CONTROLS: Final = [
    *(c for c in range(0x20) if c not in (0x09, 0x0A)),
    0x7F,
    *range(0x80, 0xA0),
]
REPLACEMENT: Final = "\ufffd"  # shows that something was there
_PRINTABLE: Final[dict[int, str]] = dict.fromkeys(_CONTROLS, REPLACEMENT)
_MARKDOWN: Final[dict[int, str]] = {
    **_PRINTABLE,
    ord("&"): "&amp;",
    ord("<"): "&lt;",
    ord(">"): "&gt;",
}


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline replaced (U+FFFD)."""
    return text.translate(_PRINTABLE)


def markdown_text(text: str) -> str:
    """``text`` for a Markdown document: printable, and no HTML a renderer would act on."""
    return text.translate(_MARKDOWN)


def make_rich_inert() -> None:
    """Every text rich prints (tables, lines) goes through its own control-code filter,
    which leaves ESC and most C0/C1 codes in: widen it to all of them. Rich's styles are
    written by rich itself, after this filter, and are unaffected."""
    from rich import control

    control._CONTROL_STRIP_TRANSLATE.update(_PRINTABLE)  # type: ignore[arg-type]
