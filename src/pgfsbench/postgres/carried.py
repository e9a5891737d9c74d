"""Which of a captured server's settings a copy of its data runs with, and which never.

A capture's settings come from a server pgfsbench does not own: names and values are data,
never configuration text. A setting is carried only when it is in the allowlist below (the
settings that shape what the storage sees: memory, WAL, checkpoints, the background
writer, I/O, vacuum, the planner's costs, and the few that decide how statements read:
DateStyle, TimeZone...), its name is a setting name and its value is of the setting's
type. Every setting that loads code, runs a command or logs statements is then forced to
its default in a block written last (``forced_block``), whatever else says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

NAME = re.compile(r"^[a-z_][a-z0-9_.]*$")
_VALUE = {
    "bool": re.compile(r"^(on|off|true|false|yes|no|1|0)$", re.I),
    "int": re.compile(r"^-?[0-9]{1,19}$"),
    "real": re.compile(r"^-?[0-9]{1,19}(\.[0-9]{1,19})?([eE][-+]?[0-9]{1,3})?$"),
    # a number in the setting's base unit (pg_settings.setting), or with a unit
    "unit": re.compile(r"^-?[0-9]{1,19}(\.[0-9]{1,19})?\s?(B|kB|MB|GB|TB|us|ms|s|min|h|d)?$"),
    "enum": re.compile(r"^[A-Za-z0-9_-]{1,32}$"),
    "zone": re.compile(r"^[A-Za-z0-9_+\-/:]{1,64}$"),
    "datestyle": re.compile(r"^[A-Za-z]{1,12}(, ?[A-Za-z]{1,12})?$"),
    "locale": re.compile(r"^[A-Za-z0-9_.@-]{1,64}$"),
    "tsconfig": re.compile(r"^[a-z_][a-z0-9_]{0,62}\.[a-z_][a-z0-9_]{0,62}$"),
}

_BOOL = [
    "fsync",
    "full_page_writes",
    "wal_log_hints",
    "wal_init_zero",
    "wal_recycle",
    "autovacuum",
    "track_counts",
    "track_io_timing",
    "track_wal_io_timing",
    "track_activities",
    "parallel_leader_participation",
    "jit",
    "synchronize_seqscans",
    "standard_conforming_strings",
    "array_nulls",
    "row_security",
    "quote_all_identifiers",
    "transform_null_equals",
    "escape_string_warning",
    "enable_async_append",
    "enable_bitmapscan",
    "enable_gathermerge",
    "enable_hashagg",
    "enable_hashjoin",
    "enable_incremental_sort",
    "enable_indexscan",
    "enable_indexonlyscan",
    "enable_material",
    "enable_memoize",
    "enable_mergejoin",
    "enable_nestloop",
    "enable_parallel_append",
    "enable_parallel_hash",
    "enable_partition_pruning",
    "enable_partitionwise_join",
    "enable_partitionwise_aggregate",
    "enable_presorted_aggregate",
    "enable_seqscan",
    "enable_sort",
    "enable_tidscan",
    "enable_group_by_reordering",
    "enable_distinct_reordering",
    "enable_self_join_elimination",
    "geqo",
    "vacuum_truncate",
    "summarize_wal",
]
_INT = [
    "max_connections",
    "superuser_reserved_connections",
    "reserved_connections",
    "max_prepared_transactions",
    "max_files_per_process",
    "vacuum_cost_page_hit",
    "vacuum_cost_page_miss",
    "vacuum_cost_page_dirty",
    "vacuum_cost_limit",
    "bgwriter_lru_maxpages",
    "effective_io_concurrency",
    "maintenance_io_concurrency",
    "max_worker_processes",
    "max_parallel_workers_per_gather",
    "max_parallel_maintenance_workers",
    "max_parallel_workers",
    "commit_delay",
    "commit_siblings",
    "max_wal_senders",
    "max_replication_slots",
    "default_statistics_target",
    "from_collapse_limit",
    "join_collapse_limit",
    "geqo_threshold",
    "geqo_effort",
    "geqo_pool_size",
    "geqo_generations",
    "autovacuum_max_workers",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_analyze_threshold",
    "autovacuum_freeze_max_age",
    "autovacuum_multixact_freeze_max_age",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_worker_slots",
    "autovacuum_vacuum_max_threshold",
    "vacuum_freeze_min_age",
    "vacuum_freeze_table_age",
    "vacuum_multixact_freeze_min_age",
    "vacuum_multixact_freeze_table_age",
    "vacuum_failsafe_age",
    "vacuum_multixact_failsafe_age",
    "max_locks_per_transaction",
    "max_pred_locks_per_transaction",
    "max_pred_locks_per_relation",
    "max_pred_locks_per_page",
    "extra_float_digits",
    "io_workers",
    "max_notify_queue_pages",
]
_REAL = [
    "bgwriter_lru_multiplier",
    "checkpoint_completion_target",
    "hash_mem_multiplier",
    "seq_page_cost",
    "random_page_cost",
    "cpu_tuple_cost",
    "cpu_index_tuple_cost",
    "cpu_operator_cost",
    "parallel_setup_cost",
    "parallel_tuple_cost",
    "jit_above_cost",
    "jit_inline_above_cost",
    "jit_optimize_above_cost",
    "cursor_tuple_fraction",
    "geqo_selection_bias",
    "geqo_seed",
    "recursive_worktree_factor",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_analyze_scale_factor",
    "vacuum_cost_delay",
]
_UNIT = [
    "shared_buffers",
    "huge_page_size",
    "temp_buffers",
    "work_mem",
    "maintenance_work_mem",
    "autovacuum_work_mem",
    "logical_decoding_work_mem",
    "min_dynamic_shared_memory",
    "temp_file_limit",
    "bgwriter_delay",
    "bgwriter_flush_after",
    "backend_flush_after",
    "wal_buffers",
    "wal_writer_delay",
    "wal_writer_flush_after",
    "wal_skip_threshold",
    "checkpoint_timeout",
    "checkpoint_flush_after",
    "checkpoint_warning",
    "max_wal_size",
    "min_wal_size",
    "effective_cache_size",
    "min_parallel_table_scan_size",
    "min_parallel_index_scan_size",
    "autovacuum_naptime",
    "autovacuum_vacuum_cost_delay",
    "deadlock_timeout",
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "idle_session_timeout",
    "transaction_timeout",
    "io_combine_limit",
    "io_max_combine_limit",
    "gin_pending_list_limit",
    "vacuum_buffer_usage_limit",
    "commit_timestamp_buffers",
    "multixact_member_buffers",
    "multixact_offset_buffers",
    "notify_buffers",
    "serializable_buffers",
    "subtransaction_buffers",
    "transaction_buffers",
]
_ENUM = [
    "huge_pages",
    "shared_memory_type",
    "wal_level",
    "synchronous_commit",
    "wal_sync_method",
    "wal_compression",
    "default_toast_compression",
    "constraint_exclusion",
    "plan_cache_mode",
    "track_functions",
    "default_transaction_isolation",
    "IntervalStyle",
    "bytea_output",
    "xmlbinary",
    "xmloption",
    "backslash_quote",
    "io_method",
]

ALLOWED: dict[str, str] = {
    **dict.fromkeys(_BOOL, "bool"),
    **dict.fromkeys(_INT, "int"),
    **dict.fromkeys(_REAL, "real"),
    **dict.fromkeys(_UNIT, "unit"),
    **dict.fromkeys(_ENUM, "enum"),
    "TimeZone": "zone",
    "log_timezone": "zone",
    "DateStyle": "datestyle",
    "lc_monetary": "locale",
    "lc_numeric": "locale",
    "lc_time": "locale",
    "default_text_search_config": "tsconfig",
}
_BY_LOWER = {k.lower(): k for k in ALLOWED}


def carried(settings: Mapping[str, object]) -> tuple[dict[str, str], dict[str, str]]:
    """The settings a copy runs with, and the others with why each was left out (a
    name not of a setting's shape is shown escaped, never as given)."""
    kept: dict[str, str] = {}
    left: dict[str, str] = {}
    for raw_name, raw_value in settings.items():
        name = str(raw_name)
        if not NAME.match(name.lower()) or len(name) > 63:
            left[ascii(name)[:80]] = "not a setting name"
            continue
        canonical = _BY_LOWER.get(name.lower())
        if canonical is None:
            left[name] = "not a storage or performance setting pgfsbench carries"
            continue
        value = str(raw_value)
        if not _VALUE[ALLOWED[canonical]].match(value):
            left[canonical] = f"a value that is not of its type ({ALLOWED[canonical]})"
            continue
        kept[canonical] = value
    return kept, left


def conf_line(name: str, value: str) -> str:
    """One postgresql.conf line: a checked name, the value quoted."""
    if not NAME.match(name.lower()):
        raise ValueError(f"not a setting name: {name!r}")
    if any(c in value for c in "\n\r\0"):
        raise ValueError(f"{name}: a value on more than one line")
    return f"{name} = '{value.replace(chr(92), chr(92) * 2).replace(chr(39), chr(39) * 2)}'"


def forced(major: int) -> dict[str, str]:
    """The settings a copy of captured data always runs with, whatever was carried: none
    loads a library, runs a command or logs a statement, a plan or a value."""
    out = {
        "shared_preload_libraries": "",
        "session_preload_libraries": "",
        "local_preload_libraries": "",
        "dynamic_library_path": "$libdir",
        "jit_provider": "llvmjit",
        "archive_mode": "off",
        "archive_command": "",
        "restore_command": "",
        "archive_cleanup_command": "",
        "recovery_end_command": "",
        "ssl": "off",
        "ssl_passphrase_command": "",
        "log_statement": "none",
        "log_duration": "off",
        "log_min_duration_statement": "-1",
        "log_min_duration_sample": "-1",
        "log_transaction_sample_rate": "0",
        "log_min_error_statement": "panic",
        "log_error_verbosity": "terse",
        "log_parameter_max_length": "0",
        "log_parameter_max_length_on_error": "0",
        "log_statement_stats": "off",
        "log_parser_stats": "off",
        "log_planner_stats": "off",
        "log_executor_stats": "off",
        "log_replication_commands": "off",
        "debug_print_parse": "off",
        "debug_print_rewritten": "off",
        "debug_print_plan": "off",
        "debug_pretty_print": "on",
        "compute_query_id": "auto",
    }
    if major >= 15:
        out["archive_library"] = ""
    if major >= 17:
        out["event_triggers"] = "off"  # a login event trigger runs at every connection
    return out


def forced_block(major: int) -> str:
    """``forced`` as the last lines of a postgresql.conf, with why."""
    lines = [
        "# written last, whatever the capture said: a copy of another server's data loads no",
        "# library, runs no command and logs no statement, plan or value (pgfsbench)",
    ]
    lines += [conf_line(k, v) for k, v in forced(major).items()]
    return "\n".join(lines) + "\n"
