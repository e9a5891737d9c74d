"""MkDocs hooks: the pages written from the code itself, so they cannot drift from it."""

from __future__ import annotations

from typing import Any

MARKERS = {
    "<!-- spec reference -->": "render",
    "<!-- results schema -->": "render_schema",
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from pgfsbench.spec import reference

    for marker, function in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, getattr(reference, function)())
    return markdown
