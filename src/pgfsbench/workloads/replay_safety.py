"""A copy of another server's data made safe to run here: no code of its superuser's runs.

The copy's catalog is the captured server's, written by whoever was its superuser: its
functions may be C functions of any library on this host (``'libc.so.6', 'system'``), its
roles may be members of ``pg_execute_server_program``, its event triggers fire on
pgfsbench's own DDL, a SECURITY DEFINER function owned by a superuser runs as one. Before
the copy becomes a template, on its restore server (the private socket, the forced settings
of postgres/carried.py), as its bootstrap superuser:

- every event trigger is disabled (and none fires meanwhile: ``ALTER EVENT TRIGGER`` fires
  none; from 17 on, ``event_triggers = off`` also covers login triggers);
- no role stays a member of a superuser role or of a role that reaches the OS
  (``pg_execute_server_program``, ``pg_read_server_files``, ``pg_write_server_files``);
- the replay's own role, ``pgfsbench_replay``, non-superuser, owns what superusers owned
  (tables, sequences, views, functions, schemas, types, large objects, the databases), so
  that a superuser's session replays as it with the same privileges on the data, and a
  SECURITY DEFINER function runs as it;
- a function in an untrusted language (C, internal, plpython3u...) that is not an
  extension's from this host's library directory is executable by nobody but the bootstrap
  superuser, whom no replayed session is; the same for the built-in functions that read or
  write the server's files (``lo_export``, ``pg_read_file``...).

What each step changed is counted and kept with the capture. The statements of a capture
that would reach the OS are not replayed at all (``reaches_os``), and counted by reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.postgres.statements import Token, tokens
from pgfsbench.system.errors import CapabilityError

REPLAY_ROLE = "pgfsbench_replay"
OS_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")
# built-in functions that read or write the server's files or signal its processes
OS_FUNCTIONS = frozenset(
    [
        "lo_import",
        "lo_export",
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "pg_ls_logdir",
        "pg_ls_waldir",
        "pg_ls_tmpdir",
        "pg_ls_archive_statusdir",
        "pg_ls_logicalsnapdir",
        "pg_ls_logicalmapdir",
        "pg_ls_replslotdir",
        "pg_ls_summariesdir",
        "pg_current_logfile",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "pg_promote",
        "pg_file_write",
        "pg_file_rename",
        "pg_file_unlink",
        "pg_file_sync",
        "pg_logdir_ls",
        "pg_file_settings",
        "pg_hba_file_rules",
        "pg_ident_file_mappings",
        "dblink",
        "dblink_exec",
        "dblink_connect",
    ]
)
FIRST_NORMAL_OID = 16384  # FirstNormalObjectId: below, initdb's objects
_LIBDIR_LIB = re.compile(r"^\$libdir/([A-Za-z0-9_-]+)$")
_TRUSTED_DO = frozenset({"plpgsql", "sql"})
_BLOCK_WORDS = frozenset({"begin", "then", "else", "loop", "exception", "declare"})


@dataclass
class Hardened:
    """What was changed in the copy, counted (names of functions kept for `reaches_os`)."""

    event_triggers_disabled: int = 0
    memberships_revoked: int = 0
    objects_reassigned: int = 0
    functions_locked: list[str] = field(default_factory=list)  # regprocedure texts
    grants_revoked: int = 0
    role_map: dict[str, str] = field(default_factory=dict)  # captured user -> replay user

    def as_dict(self) -> dict[str, Any]:
        return {
            "event_triggers_disabled": self.event_triggers_disabled,
            "memberships_revoked": self.memberships_revoked,
            "objects_reassigned_to_the_replay_role": self.objects_reassigned,
            "functions_in_untrusted_languages_locked": self.functions_locked[:200],
            "grants_on_os_functions_revoked": self.grants_revoked,
            "role_map": self.role_map,
        }

    def locked_names(self) -> frozenset[str]:
        """The locked functions' names (no schema, no arguments), lower case."""
        return frozenset(
            f.split("(")[0].rsplit(".", 1)[-1].strip('"').lower() for f in self.functions_locked
        )


# a row of the system catalog written after initdb (its xmin at or past initdb's next
# transaction id: 724 for PostgreSQL 15, 752 for 18) was written by the captured server's
# users; the boundary is read from a fresh initdb of the same binaries (initdb_next_xid)
_CATALOG_CHANGES = """
SELECT 'view ' || r.ev_class::pg_catalog.regclass::text || ' redefined'
  FROM pg_catalog.pg_rewrite r
 WHERE r.ev_class < 16384 AND r.xmin::text::bigint >= %(boundary)s
UNION ALL
SELECT 'function ' || p.oid::pg_catalog.regprocedure::text || ' replaced'
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
 WHERE p.oid < 16384 AND p.xmin::text::bigint >= %(boundary)s
   AND (l.lanname NOT IN ('internal', 'c', 'sql') OR p.prosecdef OR p.proconfig IS NOT NULL)
UNION ALL
SELECT 'type ' || t.oid::pg_catalog.regtype::text || ' changed'
  FROM pg_catalog.pg_type t
 WHERE t.oid < 16384 AND t.xmin::text::bigint >= %(boundary)s
UNION ALL
SELECT 'operator ' || o.oid::pg_catalog.regoperator::text || ' changed'
  FROM pg_catalog.pg_operator o
 WHERE o.oid < 16384 AND o.xmin::text::bigint >= %(boundary)s
UNION ALL
SELECT 'cast ' || c.oid::text || ' changed'
  FROM pg_catalog.pg_cast c
 WHERE c.oid < 16384 AND c.xmin::text::bigint >= %(boundary)s
UNION ALL
SELECT 'function ' || p.oid::pg_catalog.regprocedure::text || ' added to pg_catalog'
  FROM pg_catalog.pg_proc p
 WHERE p.oid >= 16384 AND p.pronamespace = 11
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.objid = p.oid
                   AND d.classid = 1255 AND d.deptype = 'e')
UNION ALL
SELECT 'relation ' || c.oid::pg_catalog.regclass::text || ' added to pg_catalog'
  FROM pg_catalog.pg_class c
 WHERE c.oid >= 16384 AND c.relnamespace = 11 AND c.relkind NOT IN ('t', 'i')
   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.objid = c.oid
                   AND d.classid = 1259 AND d.deptype = 'e')
LIMIT 20
"""


def initdb_next_xid(runner: Any, binaries: Any, os_user: str | None, scratch: Path) -> int:
    """The transaction id a cluster starts at once initdb is done (pg_controldata of a fresh
    initdb of these binaries in ``scratch``): every row of a catalog older than it is
    initdb's own. Made once per binaries."""
    import re as _re

    key = str(binaries.bindir)
    if key in _NEXT_XID:
        return _NEXT_XID[key]
    from pgfsbench.system.held import Held, Owner

    with Held.open(scratch) as held:
        held.make_dir("initdb-xid", 0o700, Owner.of(os_user)).close()
    target = scratch / "initdb-xid" / "pgdata"
    try:
        runner.run(
            [binaries.tool("initdb"), "-D", str(target), "-U", "postgres", "--no-sync"],
            timeout=600,
            user=os_user,
        )
        out = runner.run([binaries.tool("pg_controldata"), str(target)], timeout=60).stdout
    finally:
        with Held.open(scratch) as held:  # the server user's directory: by descriptor
            held.remove("initdb-xid")
    m = _re.search(r"NextXID:\s+(?:\d+:)?(\d+)", out)
    if m is None:
        raise CapabilityError("pg_controldata did not say initdb's next transaction id")
    _NEXT_XID[key] = int(m.group(1))
    return _NEXT_XID[key]


_NEXT_XID: dict[str, int] = {}


def catalog_changes(conn: Any, boundary: int) -> list[str]:
    """What the captured server's superuser changed in the system catalog itself: a view
    of pg_catalog redefined, a built-in function replaced by one in another language or
    made SECURITY DEFINER, a built-in type, operator or cast changed, a function or relation
    added to pg_catalog (an extension's excepted). Every query of pgfsbench's own (its
    counters, its checks, as superuser) would run such code: a copy holding it is refused.
    Read from the catalog's base tables only, before anything else runs in the copy."""
    return [str(r[0]) for r in conn.execute(_CATALOG_CHANGES, {"boundary": boundary}).fetchall()]


def _rows(conn: Any, sql: str, *args: object) -> list[tuple[Any, ...]]:
    return list(conn.execute(sql, args or None).fetchall())


def _ident(conn: Any, name: str) -> str:
    from psycopg import sql

    return sql.Identifier(name).as_string(conn)


def harden_cluster(conn: Any, users: Iterable[str], major: int) -> Hardened:
    """The cluster-wide steps (roles), on a connection of the bootstrap superuser's."""
    done = Hardened()
    conn.execute("SET search_path = pg_catalog, pg_temp")
    # the replay's role, whatever a role of that name was in the capture
    exists = _rows(conn, "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", REPLAY_ROLE)
    verb = "ALTER" if exists else "CREATE"
    conn.execute(
        f"{verb} ROLE {REPLAY_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE "
        "NOREPLICATION NOBYPASSRLS"
    )
    # memberships that make a role a superuser (SET ROLE) or reach the OS
    for _ in range(3):  # a revoke may reveal nothing new; three passes bound it
        found = _rows(
            conn,
            "SELECT r.rolname, m.rolname, g.rolname FROM pg_catalog.pg_auth_members a "
            "JOIN pg_catalog.pg_roles r ON r.oid = a.roleid "
            "JOIN pg_catalog.pg_roles m ON m.oid = a.member "
            "LEFT JOIN pg_catalog.pg_roles g ON g.oid = a.grantor "
            "WHERE (r.rolsuper OR r.rolname = ANY(%s)) AND NOT m.rolsuper",
            list(OS_ROLES),
        )
        if not found:
            break
        for role, member, grantor in found:
            by = f" GRANTED BY {_ident(conn, grantor)}" if major >= 16 and grantor else ""
            conn.execute(f"REVOKE {_ident(conn, role)} FROM {_ident(conn, member)}{by}")
            done.memberships_revoked += 1
    left = _rows(
        conn,
        "SELECT m.rolname FROM pg_catalog.pg_roles m WHERE NOT m.rolsuper "
        "AND m.rolname <> ALL(%s) AND ("
        " pg_catalog.pg_has_role(m.oid, 'pg_execute_server_program', 'MEMBER') OR"
        " pg_catalog.pg_has_role(m.oid, 'pg_write_server_files', 'MEMBER') OR"
        " pg_catalog.pg_has_role(m.oid, 'pg_read_server_files', 'MEMBER') OR"
        " EXISTS (SELECT 1 FROM pg_catalog.pg_roles s WHERE s.rolsuper"
        "  AND pg_catalog.pg_has_role(m.oid, s.oid, 'MEMBER')))",
        list(OS_ROLES),
    )
    if left:
        raise CapabilityError(
            f"roles {[r[0] for r in left][:5]} of the capture still reach the server's OS "
            "after their memberships were revoked: refused"
        )
    supers = {
        str(r[0]) for r in _rows(conn, "SELECT rolname FROM pg_catalog.pg_roles WHERE rolsuper")
    }
    for user in sorted(set(users)):
        done.role_map[user] = REPLAY_ROLE if user in supers else user
    return done


def harden_database(conn: Any, done: Hardened, pkglibdir: Path, boundary: int) -> None:
    """One database's steps (event triggers, ownership, functions), on a connection of
    the bootstrap superuser's to it."""
    conn.execute("SET search_path = pg_catalog, pg_temp")
    changed = catalog_changes(conn, boundary)
    if changed:
        raise CapabilityError(
            f"the captured server's system catalog was changed ({'; '.join(changed[:5])}): "
            "pgfsbench's own queries would run that code as a superuser on this host; a copy "
            "of it is not started for a replay"
        )
    for (name,) in _rows(
        conn, "SELECT evtname FROM pg_catalog.pg_event_trigger WHERE evtenabled <> 'D'"
    ):
        conn.execute(f"ALTER EVENT TRIGGER {_ident(conn, str(name))} DISABLE")
        done.event_triggers_disabled += 1
    replay = _ident(conn, REPLAY_ROLE)
    statements: list[str] = []
    for (name,) in _rows(
        conn,
        "SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(c.relname) "
        "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.oid >= 16384 AND c.relkind IN ('r','p','v','m','S','f') "
        "AND c.relowner IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper) "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        # a serial's or an identity column's sequence goes with its table
        "AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d "
        " WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid "
        " AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass "
        " AND d.deptype IN ('a', 'i')))",
    ):
        statements.append(f"ALTER TABLE {name} OWNER TO {replay}")
    for (name,) in _rows(
        conn,
        "SELECT p.oid::pg_catalog.regprocedure::text FROM pg_catalog.pg_proc p "
        "WHERE p.oid >= 16384 "
        "AND p.proowner IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper)",
    ):
        statements.append(f"ALTER ROUTINE {name} OWNER TO {replay}")
    for (name,) in _rows(
        conn,
        "SELECT pg_catalog.quote_ident(nspname) FROM pg_catalog.pg_namespace "
        "WHERE (oid >= 16384 OR nspname = 'public') "
        "AND nspowner IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper)",
    ):
        statements.append(f"ALTER SCHEMA {name} OWNER TO {replay}")
    for (name,) in _rows(
        conn,
        "SELECT t.oid::pg_catalog.regtype::text FROM pg_catalog.pg_type t "
        "WHERE t.oid >= 16384 "
        "AND t.typowner IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper) "
        "AND (t.typtype IN ('d', 'e', 'r', 'm') OR (t.typtype = 'c' AND "
        " (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c'))",
    ):
        statements.append(f"ALTER TYPE {name} OWNER TO {replay}")
    for (oid,) in _rows(
        conn,
        "SELECT oid::bigint FROM pg_catalog.pg_largeobject_metadata "
        "WHERE lomowner IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper)",
    ):
        statements.append(f"ALTER LARGE OBJECT {int(oid)} OWNER TO {replay}")
    (db,) = _rows(conn, "SELECT pg_catalog.current_database()")[0]
    if _rows(
        conn,
        "SELECT 1 FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database() "
        "AND datdba IN (SELECT oid FROM pg_catalog.pg_roles WHERE rolsuper)",
    ):
        statements.append(f"ALTER DATABASE {_ident(conn, str(db))} OWNER TO {replay}")
    for statement in statements:
        conn.execute(statement)
    done.objects_reassigned += len(statements)
    _lock_functions(conn, done, pkglibdir)


def _lock_functions(conn: Any, done: Hardened, pkglibdir: Path) -> None:
    bootstrap = _rows(conn, "SELECT rolname FROM pg_catalog.pg_roles WHERE oid = 10")[0][0]
    owner = _ident(conn, str(bootstrap))
    candidates = _rows(
        conn,
        "SELECT p.oid::pg_catalog.regprocedure::text, l.lanname, p.probin, "
        " EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = "
        "  'pg_catalog.pg_proc'::pg_catalog.regclass AND d.objid = p.oid AND d.deptype = 'e') "
        "FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang "
        "WHERE p.oid >= 16384 AND NOT l.lanpltrusted",
    )
    locked: list[str] = []
    for name, language, probin, in_extension in candidates:
        m = _LIBDIR_LIB.match(str(probin or ""))
        host_library = (
            language == "c"
            and in_extension
            and m is not None
            and (pkglibdir / f"{m.group(1)}.so").is_file()
        )
        if not host_library:
            locked.append(str(name))
    builtins = _rows(
        conn,
        "SELECT p.oid::pg_catalog.regprocedure::text FROM pg_catalog.pg_proc p "
        "WHERE p.proname = ANY(%s)",
        sorted(OS_FUNCTIONS),
    )
    for name in [*locked, *(str(b[0]) for b in builtins)]:
        for (grantee,) in _rows(
            conn,
            "SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
            "ELSE a.grantee::pg_catalog.regrole::text END "
            "FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a "
            "WHERE p.oid = %s::pg_catalog.regprocedure AND a.grantee <> p.proowner",
            name,
        ):
            conn.execute(f"REVOKE ALL ON FUNCTION {name} FROM {grantee}")
            done.grants_revoked += 1
        conn.execute(f"REVOKE ALL ON FUNCTION {name} FROM PUBLIC")
    for name in locked:
        conn.execute(f"ALTER ROUTINE {name} OWNER TO {owner}")
    done.functions_locked += locked


def _significant(toks: Iterable[Token]) -> list[Token]:
    return [t for t in toks if t.kind not in ("space", "comment")]


def _quoted_body(tok: Token) -> str:
    """A string or dollar-quoted token's content."""
    text = tok.text
    if tok.kind == "dollar":
        tag_end = text.index("$", 1) + 1
        return text[tag_end : len(text) - tag_end]
    start = text.index("'") + 1
    return text[start:-1].replace("''", "'")


def _segments(toks: list[Token]) -> list[list[Token]]:
    """The tokens cut at each ';' (statements, or a block's statements)."""
    out: list[list[Token]] = [[]]
    for t in toks:
        if t.kind == "other" and t.text == ";":
            out.append([])
        else:
            out[-1].append(t)
    return [seg for seg in out if seg]


def _word(t: Token) -> str:
    if t.kind == "word":
        return t.text.lower()
    if t.kind == "ident" and t.text.startswith('"'):
        return t.text[1:-1].replace('""', '"').lower()
    return ""


def reaches_os(sql: str, locked: frozenset[str] = frozenset(), depth: int = 0) -> str | None:
    """Why a statement would reach the server's OS (and is not replayed), else None: COPY
    with PROGRAM or a server file, a built-in file function, a function locked in the copy
    (an untrusted language's), LOAD, ALTER SYSTEM, DO in an untrusted language, or a DO
    whose body (or a string in it: EXECUTE '...') does one of these, wherever in the body."""
    toks = _significant(tokens(sql))
    for seg in _segments(toks):
        words = [_word(t) for t in seg]
        for i, w in enumerate(words):
            rest = words[i + 1 :]
            # a statement starts here: the segment's first word, or one after a PL/pgSQL
            # block's keyword (BEGIN COPY ...; THEN COPY ...)
            starts = i == 0 or words[i - 1] in _BLOCK_WORDS
            if w == "copy" and starts and "program" in rest:
                return "COPY ... PROGRAM (runs a command on the server's host)"
            if (
                w == "copy"
                and starts
                and any(
                    words[j] in ("to", "from") and j + 1 < len(seg) and seg[j + 1].kind == "string"
                    for j in range(i + 1, len(seg))
                )
            ):
                return "COPY to or from a file of the server's"
            if (
                w == "load"
                and starts
                and i + 1 < len(seg)
                and seg[i + 1].kind in ("string", "dollar")
            ):
                return "LOAD (a library into the server)"
            if w == "alter" and starts and rest[:1] == ["system"]:
                return "ALTER SYSTEM (the server's configuration)"
            if w and i + 1 < len(seg) and seg[i + 1].text == "(":
                if w in OS_FUNCTIONS:
                    return f"{w}() (the server's files)"
                if w in locked:
                    return f"{w}() (a function in an untrusted language, locked in the copy)"
        if words and words[0] == "do":
            language = next(
                (words[i + 1] for i, w in enumerate(words[:-1]) if w == "language"), "plpgsql"
            )
            if language not in _TRUSTED_DO:
                return f"DO in {language} (an untrusted language)"
        if depth < 4:
            for t in seg:
                if t.kind in ("string", "dollar") and (
                    why := reaches_os(_quoted_body(t), locked, depth + 1)
                ):
                    return why if depth else f"a body that runs {why}"
    return None
