"""MkDocs hooks: the pages written from the code itself, so they cannot drift from it."""

from __future__ import annotations

import html
import importlib
import re
from typing import Any

# a marker in a page -> the module and function whose text replaces it
MARKERS = {
    "<!-- spec reference -->": ("pgfsbench.spec.reference", "render"),
    "<!-- results schema -->": ("pgfsbench.spec.reference", "render_schema"),
    "<!-- cli reference -->": ("pgfsbench.cli.reference", "render"),
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, (module, function) in MARKERS.items():
        if marker in markdown:
            text = getattr(importlib.import_module(module), function)()
            markdown = markdown.replace(marker, text)
    return markdown


_TABLE = re.compile(r"<table>(.*?)</table>", re.S)
_TH = re.compile(r"<th[^>]*>(.*?)</th>", re.S)
_TR = re.compile(r"<tr>(.*?)</tr>", re.S)
_TD = re.compile(r"<td([^>]*)>")
_TAG = re.compile(r"<[^>]+>")


def _labelled(match: re.Match[str]) -> str:
    """A table whose cells carry their column's name (data-label), for the phone layout
    in stylesheets/extra.css."""
    body = match.group(1)
    heads = [
        html.escape(html.unescape(_TAG.sub("", h)).strip(), quote=True) for h in _TH.findall(body)
    ]

    def row(tr: re.Match[str]) -> str:
        cells = iter(heads)

        def cell(td: re.Match[str]) -> str:
            label = next(cells, "")
            return f'<td{td.group(1)} data-label="{label}">' if label else td.group(0)

        return "<tr>" + _TD.sub(cell, tr.group(1)) + "</tr>"

    return "<table>" + _TR.sub(row, body) + "</table>"


def on_page_content(content: str, page: Any, config: Any, files: Any) -> str:
    return _TABLE.sub(_labelled, content)
