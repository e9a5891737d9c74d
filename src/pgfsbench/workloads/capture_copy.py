"""The capture's copy of the data: ``pg_basebackup`` as a uid of its own, taken in by root.

The server decides what a base backup holds (its ``pg_tblspc`` links, its files, their
modes), so pg_basebackup runs as an unprivileged uid with no account (system/unprivileged),
in a directory that uid owns inside the capture's (its working directory: a relative name
lands there), in tar format, each file bounded in size (RLIMIT_FSIZE), never prompting
(``-w``), its password in a 0600 passfile of its own (never argv, never an environment
another user can read). pgfsbench then unpacks the archives itself (system/untar): the data
directory's layout only (postgres/datadir), no link, no set-id bit; each tablespace the
server sent (``OID.tar``) into ``tablespaces/OID``; what was left out named in the manifest.
The uid's directory is removed at the end, whatever happened.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.postgres.datadir import in_data_directory, in_tablespace, is_oid
from pgfsbench.system.errors import CapabilityError, CommandError
from pgfsbench.system.held import Held, Owner
from pgfsbench.system.runner import Runner
from pgfsbench.system.unprivileged import free_uid, processes_of
from pgfsbench.system.untar import Unpacked, unpack

if TYPE_CHECKING:
    import psycopg

    from pgfsbench.system.euid import Account

BASE_DIR = "base"  # the copy of the data directory
TABLESPACES_DIR = "tablespaces"  # each tablespace's copy, by OID
WORK_DIR = ".copy"  # the unprivileged uid's, for the copy's time only
COPY_RATE = 4 << 20  # bytes a second a copy is given at least (its timeout)
COPY_FLOOR_S = 600.0
# a file of the copy may be this many times the server's whole data (the WAL archive
# grows with what the server writes meanwhile), and never less than this
FILE_BOUND_FACTOR = 3
FILE_BOUND_FLOOR = 4 << 30
# what the copy's connection takes from the capture's (a libpq as old as 13 knows these);
# never a password, a passfile or a service file (root's), nor pgfsbench's own options
_CONNINFO_KEPT = {
    "sslmode",
    "sslrootcert",
    "sslcrl",
    "sslcert",
    "sslkey",
    "gssencmode",
    "krbsrvname",
    "channel_binding",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
}


@dataclass(frozen=True)
class Source:
    """Where the copy connects, as libpq's keywords (no password), and the password."""

    params: dict[str, str]
    password: str | None

    def conninfo(self) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(**{**self.params, "connect_timeout": "10"})


def source_of(conn: psycopg.Connection[Any]) -> Source:
    """The connection as made (the host it reached, its port, user and database), without
    pgfsbench's own options; the password libpq used (from the DSN, PGPASSWORD or a
    passfile), kept apart."""
    params = {k: str(v) for k, v in conn.info.get_parameters().items() if k in _CONNINFO_KEPT}
    params.update(
        host=str(conn.info.host),
        port=str(conn.info.port),
        user=str(conn.info.user),
        dbname=str(conn.info.dbname),
    )
    params.pop("hostaddr", None)
    return Source(params, conn.info.password or None)


def passfile_line(password: str) -> str:
    """A passfile line matching any server: ``:`` and ``\\`` escaped (libpq's rules)."""
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    if "\n" in escaped or "\r" in escaped:
        raise CapabilityError("a password on more than one line cannot go in a passfile")
    return f"*:*:*:*:{escaped}\n"


def basebackup_argv(pg_basebackup: str, source: Source, bound: int) -> list[str]:
    """pg_basebackup into ``backup`` (relative: the working directory is the uid's), tar
    format, WAL streamed, never prompting, each file at most ``bound`` bytes."""
    return [
        "prlimit",
        f"--fsize={bound}",
        "--",
        pg_basebackup,
        "-d",
        source.conninfo(),
        "-D",
        "backup",
        "-Ft",
        "-X",
        "stream",
        "-c",
        "fast",
        "-w",
        "--no-sync",
        "--no-manifest",
    ]


def copy_bounds(data_bytes: int) -> tuple[int, float]:
    """The largest file, and the seconds, a copy of ``data_bytes`` of data is given."""
    bound = max(FILE_BOUND_FLOOR, FILE_BOUND_FACTOR * data_bytes)
    return bound, max(COPY_FLOOR_S, data_bytes / COPY_RATE * 2)


def _data_bytes(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT pg_catalog.sum(pg_catalog.pg_database_size(oid))::bigint "
        "FROM pg_catalog.pg_database WHERE datallowconn"
    ).fetchone()
    return int(row[0] or 0) if row else 0


def copy_data(
    conn: psycopg.Connection[Any],
    runner: Runner,
    pg_basebackup: str,
    out: Path,
    spaces: list[dict[str, Any]],
    server_user: Account | None = None,
) -> dict[str, Any]:
    """The data's copy in ``out``/base, each tablespace's in ``out``/tablespaces/OID; what
    the manifest says of it. ``server_user``: the server authenticates local connections
    by peer only, and the capture connected as its OS user: the copy runs as that user
    too (the principal that holds the data already; what it writes is unpacked as ever)."""
    source = source_of(conn)
    data_bytes = _data_bytes(conn)
    bound, timeout = copy_bounds(data_bytes)
    if server_user is None:
        uid = free_uid()
        owner = Owner(uid, uid)
        who = "an unprivileged uid of its own"
    else:
        uid = server_user.uid
        owner = Owner(uid, server_user.gid)
        who = f"the server's own OS user ({server_user.name})"
    if (why := _untraversable(out)) is not None:
        raise CapabilityError(
            f"-o {out}: {why}; pg_basebackup runs as {who} and must "
            "reach its directory there (PostgreSQL's tools return to their working directory "
            "by its path): capture into a directory under one every user can traverse "
            "(/var/tmp, /srv...), or give a copy with --base"
        )
    started = time.monotonic()
    with Held.open(out) as capture:
        # the uid's own group may traverse the capture (0710) while it copies; nobody else
        capture.hand_to(Owner(0, owner.gid), 0o710)
        try:
            made, took = _copy_as(
                capture,
                out,
                owner,
                runner,
                pg_basebackup,
                source,
                bound,
                timeout,
                spaces,
                started,
                server_user is None,
                None if server_user is None else server_user.name,
            )
        finally:
            capture.hand_to(Owner(0, 0), 0o700)
        capture.remove(WORK_DIR)
    return {
        "kind": "pg_basebackup",
        "seconds": round(took, 1),
        "tablespaces": spaces,
        "files": made["files"],
        "bytes": made["bytes"],
        "left_out": made["left_out"],
        "unprivileged_uid": uid if server_user is None else None,
        "as_server_user": None if server_user is None else server_user.name,
    }


def _untraversable(out: Path) -> str | None:
    """Why a uid of no account's could not reach ``out``'s parent by its path (a
    directory on the way without others' search permission), or None."""
    import stat as _stat

    current = Path(os.path.realpath(out)).parent
    for directory in [current, *current.parents]:
        try:
            mode = directory.stat().st_mode
        except OSError as exc:
            return f"{directory}: {exc.strerror}"
        if not mode & _stat.S_IXOTH:
            return f"{directory} (mode {_stat.filemode(mode)}) cannot be traversed by other users"
    return None


def _copy_as(
    capture: Held,
    out: Path,
    owner: Owner,
    runner: Runner,
    pg_basebackup: str,
    source: Source,
    bound: int,
    timeout: float,
    spaces: list[dict[str, Any]],
    started: float,
    own_uid: bool = True,
    account: str | None = None,
) -> tuple[dict[str, Any], float]:
    """pg_basebackup as ``owner`` in WORK_DIR, then its archives taken in. ``own_uid``:
    the uid is the copy's alone, so any process of it left is the copy's."""
    uid = owner.uid
    with capture.make_dir(WORK_DIR, 0o700, owner) as work:
        try:
            work.create(".pgpass", passfile_line(source.password or ""), 0o600, owner)
            work.make_dir("backup", 0o700, owner).close()
            try:
                runner.run(
                    basebackup_argv(pg_basebackup, source, bound),
                    timeout=timeout,
                    # an account by its name: its own group and groups (a bare uid has
                    # its number as its group)
                    user=account if account is not None else uid,
                    cwd=out / WORK_DIR,
                    env={"PGPASSFILE": str(out.absolute() / WORK_DIR / ".pgpass")},
                )
            except CommandError as exc:
                raise CapabilityError(f"pg_basebackup failed: {exc}") from None
            took = time.monotonic() - started
            if own_uid and (left := processes_of(uid)):
                raise CapabilityError(f"pg_basebackup left processes running: {left}")
            with work.descend("backup") as backup:
                made = _take_in(backup, capture, owner, bound * 4, spaces)
        finally:
            work.hand_to(Owner(0, 0), 0o700)  # root's again: nothing of the uid's stays
    return made, took


_TABLESPACE_TAR = re.compile(r"^([1-9][0-9]{0,9})\.tar$")


def _take_in(
    backup: Held, capture: Held, owner: Owner, max_bytes: int, spaces: list[dict[str, Any]]
) -> dict[str, Any]:
    """The archives pg_basebackup wrote, unpacked into the capture: base.tar, pg_wal.tar
    into base/pg_wal, OID.tar into tablespaces/OID; any other file refused."""
    names = backup.names()
    if "base.tar" not in names:
        raise CapabilityError(f"pg_basebackup wrote no base.tar (it wrote {names[:10]})")
    known = {str(s["oid"]) for s in spaces}
    total = Unpacked()

    def add(part: Unpacked) -> None:
        total.files += part.files
        total.bytes += part.bytes
        for k, v in part.left_out.items():
            total.left_out[k] = total.left_out.get(k, 0) + v

    def archive(name: str) -> int:
        return backup.open_existing(name, os.O_RDONLY, owner)

    with capture.make_dir(BASE_DIR, 0o700) as base:
        fd = archive("base.tar")
        try:
            part = unpack(
                fd,
                base,
                in_data_directory,
                max_bytes=max_bytes,
                accept_link=lambda p: len(p) == 2 and p[0] == "pg_tblspc" and is_oid(p[1]),
            )
        finally:
            os.close(fd)
        add(part)
        if "pg_wal.tar" in names:
            fd = archive("pg_wal.tar")
            try:
                with base.ensure_dir("pg_wal", 0o700) as wal:
                    add(
                        unpack(
                            fd,
                            wal,
                            lambda p, d: in_data_directory(("pg_wal", *p), d),
                            max_bytes=max_bytes,
                        )
                    )
            finally:
                os.close(fd)
    others = [n for n in names if n not in ("base.tar", "pg_wal.tar")]
    for name in others:
        m = _TABLESPACE_TAR.match(name)
        if m is None:
            raise CapabilityError(f"pg_basebackup wrote {name!r}: not an archive of a tablespace")
        oid = m.group(1)
        if oid not in known:
            raise CapabilityError(
                f"the server sent tablespace {oid}, which its catalog does not list with a "
                "location outside its data directory: refused"
            )
        with (
            capture.ensure_dir(TABLESPACES_DIR, 0o700) as spaces_dir,
            spaces_dir.make_dir(oid, 0o700) as into,
        ):
            fd = archive(name)
            try:
                add(unpack(fd, into, in_tablespace, max_bytes=max_bytes))
            finally:
                os.close(fd)
    missing = sorted(known - {m.group(1) for n in others if (m := _TABLESPACE_TAR.match(n))})
    if missing:
        raise CapabilityError(f"the server's catalog lists tablespaces {missing} it did not send")
    return {"files": total.files, "bytes": total.bytes, "left_out": total.left_out}
