"""Reading a server pgfsbench does not own, through its own functions: one value of a
query, and a file of the server's read by the server (``pg_read_binary_file``), bounded."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

READ_CHUNK = 1 << 20  # bytes a pg_read_file call returns


def one(conn: psycopg.Connection[Any], sql: str, *args: object) -> Any:
    row = conn.execute(sql, args or None).fetchone()
    return None if row is None else row[0]


def read_log(
    conn: psycopg.Connection[Any], files: list[tuple[str, int]], out_fd: int, limit: int
) -> int:
    """Append the log files' bytes (each from its offset) through pg_read_file: the
    server's user reads its own files. Stops at ``limit`` bytes; returns the count."""
    written = 0
    for path, offset in files:
        pos = offset
        while written < limit:
            chunk = one(
                conn,
                "SELECT pg_catalog.pg_read_binary_file(%s, %s, %s, true)",
                path,
                pos,
                READ_CHUNK,
            )
            if not chunk:
                break
            data = bytes(chunk)[: limit - written]
            os.write(out_fd, data)
            written += len(data)
            pos += len(data)
            if len(chunk) < READ_CHUNK:
                break
    return written
