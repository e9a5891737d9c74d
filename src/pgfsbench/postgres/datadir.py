"""What PostgreSQL itself makes in a data directory (and in a tablespace's), by name.

A copy of another server's data (a capture's) is hostile input: a file planted in it (a
library a setting then loads, a log with the workload's literals) must not travel into a
template, a cell, or the storage under test. Each path is checked against the layout
PostgreSQL 13-18 makes; what is not in it is left out of the copy, and named.
"""

from __future__ import annotations

import re

_RELFILE = re.compile(r"^[0-9]+(_(fsm|vm|init))?(\.[0-9]+)?$")
_SLRU = re.compile(r"^[0-9A-F]{4,15}$")
_WAL = re.compile(
    r"^([0-9A-F]{24}(\.partial)?|[0-9A-F]{8}\.history|[0-9A-F]{24}\.[0-9A-F]{8}\.backup)$"
)
_OID = re.compile(r"^[1-9][0-9]{0,9}$")
_VERSION_DIR = re.compile(r"^PG_[0-9]+_[0-9]+$")  # a tablespace's per-version directory

TOP_FILES = frozenset(
    {
        "PG_VERSION",
        "postgresql.conf",
        "postgresql.auto.conf",
        "pg_hba.conf",
        "pg_ident.conf",
        "backup_label",
        "tablespace_map",
        "backup_manifest",
    }
)
TOP_DIRS = frozenset(
    {
        "base",
        "global",
        "pg_commit_ts",
        "pg_dynshmem",
        "pg_logical",
        "pg_multixact",
        "pg_notify",
        "pg_replslot",
        "pg_serial",
        "pg_snapshots",
        "pg_stat",
        "pg_stat_tmp",
        "pg_subtrans",
        "pg_tblspc",
        "pg_twophase",
        "pg_wal",
        "pg_xact",
    }
)
_SLRU_DIRS = frozenset({"pg_xact", "pg_subtrans", "pg_commit_ts", "pg_serial", "pg_notify"})
_CATALOG_FILES = frozenset({"PG_VERSION", "pg_filenode.map", "pg_internal.init"})


def _database_file(name: str) -> bool:
    return bool(_RELFILE.match(name)) or name in _CATALOG_FILES


def _tablespace_path(parts: tuple[str, ...], is_dir: bool) -> bool:
    """Beneath a tablespace: PG_<major>_<catversion>/<database OID>/<relation files>."""
    if not parts:
        return is_dir
    if not _VERSION_DIR.match(parts[0]):
        return False
    if len(parts) == 1:
        return is_dir
    if not _OID.match(parts[1]):
        return False
    if len(parts) == 2:
        return is_dir
    return len(parts) == 3 and not is_dir and _database_file(parts[2])


def in_data_directory(parts: tuple[str, ...], is_dir: bool) -> bool:
    """Is this path (names from the data directory's top) one PostgreSQL makes there?"""
    if not parts:
        return is_dir
    top, rest = parts[0], parts[1:]
    if not rest:
        return (is_dir and top in TOP_DIRS) or (not is_dir and top in TOP_FILES)
    if top not in TOP_DIRS:
        return False
    name = rest[-1]
    depth = len(rest)
    if top == "base":
        if not _OID.match(rest[0]):
            return False
        return (depth == 1 and is_dir) or (depth == 2 and not is_dir and _database_file(name))
    if top == "global":
        return depth == 1 and not is_dir and (_database_file(name) or name == "pg_control")
    if top == "pg_wal":
        if depth == 1:
            return (is_dir and name in ("archive_status", "summaries")) or (
                not is_dir and bool(_WAL.match(name))
            )
        return depth == 2 and not is_dir and bool(re.match(r"^[0-9A-Za-z_.]{1,64}$", name))
    if top in _SLRU_DIRS:
        return depth == 1 and not is_dir and bool(_SLRU.match(name))
    if top == "pg_multixact":
        if depth == 1:
            return is_dir and name in ("offsets", "members")
        return depth == 2 and not is_dir and bool(_SLRU.match(name))
    if top == "pg_twophase":
        return depth == 1 and not is_dir and bool(re.match(r"^[0-9A-F]{8,16}$", name))
    if top == "pg_logical":
        if depth == 1:
            return (is_dir and name in ("snapshots", "mappings")) or (
                not is_dir and name == "replorigin_checkpoint"
            )
        return depth == 2 and not is_dir and bool(re.match(r"^[0-9A-Za-z_.-]{1,80}$", name))
    if top == "pg_replslot":
        if depth == 1:
            return is_dir and bool(re.match(r"^[a-z0-9_]{1,63}$", name))
        return (
            depth == 2
            and not is_dir
            and bool(re.match(r"^(state|xid-[0-9a-zA-Z_-]+\.spill)$", name))
        )
    if top == "pg_stat":
        return depth == 1 and not is_dir and bool(re.match(r"^[a-z0-9_]{1,32}\.stat$", name))
    if top == "pg_tblspc":  # an in-place tablespace (a directory named by its OID)
        return bool(_OID.match(rest[0])) and _tablespace_path(rest[1:], is_dir)
    return False  # pg_dynshmem, pg_snapshots, pg_stat_tmp: nothing of theirs is copied


def in_tablespace(parts: tuple[str, ...], is_dir: bool) -> bool:
    """Is this path (from a tablespace's top) one PostgreSQL makes there?"""
    return _tablespace_path(parts, is_dir)


def is_oid(name: str) -> bool:
    return bool(_OID.match(name))
