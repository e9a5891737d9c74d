"""MkDocs hooks: the pages written from the code itself, so they cannot drift from it."""

from __future__ import annotations

import importlib
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
