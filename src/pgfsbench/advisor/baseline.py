"""Which of a server's own settings `advise` copies into the configuration it measures as
"today's": every setting not at PostgreSQL's default that shapes what the storage sees
(memory, WAL, checkpoints, the background writer, I/O, vacuum, the planner's costs), with
each one left out said and why, so "your settings as they are" is what runs.

Names and values are the server's (data, never configuration text): a setting is copied
only through postgres/carried.py's allowlist, its value of its type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pgfsbench.postgres.carried import ALLOWED, NAME, carried

# carried by a replay, but not what a storage benchmark's baseline should run with: they
# change what the benchmark's sessions do or how they read, not what the storage sees
SESSION_ONLY = frozenset(
    {
        "statement_timeout",
        "lock_timeout",
        "idle_in_transaction_session_timeout",
        "idle_session_timeout",
        "transaction_timeout",
        "deadlock_timeout",
        "default_transaction_isolation",
        "TimeZone",
        "log_timezone",
        "DateStyle",
        "IntervalStyle",
        "lc_monetary",
        "lc_numeric",
        "lc_time",
        "default_text_search_config",
        "bytea_output",
        "xmlbinary",
        "xmloption",
        "backslash_quote",
        "standard_conforming_strings",
        "array_nulls",
        "row_security",
        "quote_all_identifiers",
        "transform_null_equals",
        "escape_string_warning",
        "extra_float_digits",
    }
)
# set by pgfsbench for its own server, whatever a spec says
OWN_SERVER = frozenset(
    {
        "listen_addresses",
        "port",
        "unix_socket_directories",
        "unix_socket_group",
        "unix_socket_permissions",
        "data_directory",
        "hba_file",
        "ident_file",
        "external_pid_file",
        "config_file",
        "cluster_name",
        "logging_collector",
        "log_directory",
        "log_filename",
        "log_destination",
        "log_line_prefix",
        "log_file_mode",
        "log_rotation_age",
        "log_rotation_size",
        "log_truncate_on_rotation",
        "log_checkpoints",
        "log_autovacuum_min_duration",
        "log_lock_waits",
        "lc_messages",
        "stats_temp_directory",
    }
)


@dataclass
class Baseline:
    """Today's settings as a spec's [postgres] table, and what was left out, by reason."""

    settings: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, list[str]] = field(default_factory=dict)  # reason -> names

    def leave(self, name: str, why: str) -> None:
        self.left_out.setdefault(why, []).append(name)

    def comment(self) -> list[str]:
        """The lines of the spec's comment that say what was left out, and why."""
        return [
            f"left out ({why}): {', '.join(sorted(names))}" for why, names in self.left_out.items()
        ]


def _why_not_carried(name: str, source: str) -> str:
    lower = name.lower()
    if lower in OWN_SERVER:
        return "pgfsbench's own server sets them: private socket, own data directory and log"
    if lower.startswith(("ssl", "krb_", "password_", "authentication_", "db_user_")) or lower in (
        "scram_iterations",
        "md5_password_warnings",
    ):
        return "connections and authentication: its server takes local connections only"
    if lower.startswith(("log_", "debug_", "syslog_", "event_source", "trace_")):
        return "logging: pgfsbench's server logs its own way"
    if lower.endswith(("_command", "_library", "libraries", "library_path")) or lower in (
        "archive_mode",
        "jit_provider",
    ):
        return "they run commands or load libraries this test server may not have"
    if lower.startswith(("primary_", "recovery_", "hot_standby", "synchronous_standby")):
        return "replication and recovery: the benchmark runs one primary"
    return "not a setting that shapes what the storage sees"


def baseline(
    non_default: dict[str, str],
    sources: dict[str, str],
    fits: dict[str, bool] | None = None,
) -> Baseline:
    """Today's storage-relevant settings from ``non_default`` (name -> value as the server
    shows it, source -> where it was set); ``fits``: a memory setting too large for the
    machine that runs the benchmark (shared_buffers at most a quarter of its RAM)."""
    out = Baseline()
    kept, rejected = carried(non_default)
    for name, why in rejected.items():
        source = sources.get(name, "configuration file")
        if why.startswith("not a storage"):
            why = _why_not_carried(name, source)
        out.leave(name, why)
    for name, value in kept.items():
        source = sources.get(name, sources.get(name.lower(), "configuration file"))
        if name in SESSION_ONLY:
            out.leave(name, "they shape what sessions do, not what the storage sees")
        elif name == "max_connections":
            out.leave(name, "pgfsbench raises it to what a run opens, and records it")
        elif source in ("database", "user", "database user"):
            out.leave(name, "set for one database or role (ALTER DATABASE/ROLE ... SET) only")
        elif fits is not None and not fits.get(name, True):
            out.leave(name, "larger than a quarter of this machine's memory: 128MB instead")
        else:
            out.settings[name] = value
    return out


def tried(entries: list[str], known: set[str]) -> list[tuple[str, str, str]]:
    """`--try SETTING=VALUE` as (configuration name, setting, value): a setting of the
    allowlist (or one the server has: ``known``) and a value of its type."""
    from pgfsbench.system.errors import UsageError

    out: list[tuple[str, str, str]] = []
    by_lower = {k.lower(): k for k in [*ALLOWED, *known]}
    for entry in entries:
        name, sep, value = entry.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise UsageError(f"--try {entry}: SETTING=VALUE, e.g. --try wal_compression=on")
        if not NAME.match(name.lower()) or name.lower() not in by_lower:
            from pgfsbench.spec.loading import did_you_mean

            raise UsageError(
                f"--try {entry}: {name!r} is not a PostgreSQL setting pgfsbench can measure"
                + did_you_mean(name, list(ALLOWED))
            )
        canonical = by_lower[name.lower()]
        checked, why = carried({canonical: value})
        if canonical in ALLOWED and not checked:
            raise UsageError(f"--try {entry}: {next(iter(why.values()))}")
        config = f"{canonical}-{value}".lower()
        config = "".join(c if c.isalnum() or c in "_.+-" else "-" for c in config)[:60]
        out.append((config, canonical, value))
    names = [c for c, _, _ in out]
    if len(set(names)) != len(names):
        raise UsageError("--try: the same setting and value given twice")
    return out
