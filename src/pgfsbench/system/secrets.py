"""Secrets as they may be printed, logged or kept: a results URL without its password, a
command line without the URLs' secrets (light: imported before any store is opened)."""

from __future__ import annotations

import re


def shown(target: str) -> str:
    """A results target as it may be printed, logged or recorded: a URL without its
    password (give one through ~/.pgpass or PGPASSWORD, never in the URL)."""
    if "://" not in target:
        return target
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(target)
    except (ArgumentError, ValueError):
        return target.split("://", 1)[0] + "://..."
    secret = {k: "***" for k in url.query if "password" in k.lower() or k.lower() == "passfile"}
    if secret:  # password=, sslpassword=, ...
        url = url.update_query_dict(secret)
    return url.render_as_string(hide_password=True)


_KEYWORD_SECRET = re.compile(
    r"""\b(password|sslpassword)(\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s]*)""", re.IGNORECASE
)


def shown_conninfo(text: str) -> str:
    """A libpq connection string (keywords or a URL) without its passwords."""
    if "://" in text:
        text = shown(text)
    return _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


def shown_argv(argv: list[str]) -> list[str]:
    """A command line as it may be kept (a journal's header) or printed: every results
    URL and connection string in it without its secrets (``--results URL``,
    ``--dsn 'host=... password=...'``)."""
    out = []
    for arg in argv:
        if "://" in arg:
            option, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
            arg = f"{option}{eq}{shown(value)}"
        if "password" in arg.lower():
            arg = _KEYWORD_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", arg)
        out.append(arg)
    return out
