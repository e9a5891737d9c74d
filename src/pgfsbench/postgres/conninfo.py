"""Connection strings as they may be shown, and why a connection failed in libpq's words
(a wrong port, user, password or keyword is the DBA's to fix: said as the server or
libpq said it, the password never repeated)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pgfsbench.system.euid import Account

C = TypeVar("C")


def shown_dsn(dsn: str) -> str:
    """A connection string as it may be printed or journaled: without its password."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return "(a connection string that does not parse)"
    params.pop("password", None)
    params.pop("sslpassword", None)
    return make_conninfo(**{k: str(v) for k, v in params.items()})


def failure_reason(exc: BaseException, dsn: str) -> str:
    """libpq's (or the server's) reason on one line, any password in it masked."""
    from psycopg.conninfo import conninfo_to_dict

    reason = " ".join(str(exc).split()) or type(exc).__name__
    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        params = {}
    for key in ("password", "sslpassword"):
        secret = params.get(key)
        if secret:
            reason = reason.replace(str(secret), "***")
    return reason


_PEER_SOCKET = re.compile(r'on socket "([^"]+)" failed: .*Peer authentication failed', re.S)


def peer_aware(connect: Callable[[], C], dsn: str) -> tuple[C, Account | None]:
    """``connect()`` as root; when the server refuses root by peer authentication on its
    unix socket (Debian's cluster as shipped: `local all postgres peer`), again as the OS
    user whose socket it is, the account that runs the server (its data is that user's
    already). Returns the connection and that account (None: connected as root); raises
    UsageError with libpq's reasons."""
    import psycopg

    from pgfsbench.system.errors import UsageError
    from pgfsbench.system.euid import acting_as, socket_owner

    try:
        return connect(), None
    except psycopg.Error as exc:
        reason = failure_reason(exc, dsn)
    found = _PEER_SOCKET.search(reason)
    owner = socket_owner(found.group(1)) if found and os.geteuid() == 0 else None
    if owner is None:
        raise UsageError(f"{shown_dsn(dsn)}: cannot connect ({reason})")
    try:
        with acting_as(owner):
            return connect(), owner
    except psycopg.Error as exc:
        again = failure_reason(exc, dsn)
        raise UsageError(
            f"{shown_dsn(dsn)}: cannot connect ({reason}; as {owner.name}, the server's own "
            f"OS user, too: {again})"
        ) from None
