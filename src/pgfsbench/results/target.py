"""How a results target is shown (light: the CLI imports it before any store is opened)."""

from __future__ import annotations


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
    if "password" in url.query:
        url = url.update_query_dict({"password": "***"})
    return url.render_as_string(hide_password=True)
