"""Text from outside (a results file, a server's log, another user's command line) made
safe to print: no control character or escape sequence reaches a terminal or a file."""

from __future__ import annotations

from typing import Final

# C0 controls but tab and newline, DEL, and the C1 controls (ESC's 8-bit twins)
_CONTROLS: Final = [
    *(c for c in range(0x20) if c not in (0x09, 0x0A)),
    0x7F,
    *range(0x80, 0xA0),
]
REPLACEMENT: Final = "\ufffd"  # shows that something was there
PRINTABLE_TABLE: Final[dict[int, str]] = dict.fromkeys(_CONTROLS, REPLACEMENT)


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline replaced (U+FFFD)."""
    return text.translate(PRINTABLE_TABLE)


__all__ = ["PRINTABLE_TABLE", "REPLACEMENT", "printable"]
