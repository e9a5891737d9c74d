"""PostgreSQL versions (settings each knows, io_uring support), and the read workloads'
pure parts (pg_dump argv, the seqscan script, their spec models)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import (
    Binaries,
    io_uring_unsupported,
    parse_describe_config,
    value_problem,
)
from pgfsbench.spec.models import DumpWorkload, PgbenchWorkload, PostgresConfig
from pgfsbench.workloads.base import Endpoint
from pgfsbench.workloads.dump import dump_argv
from pgfsbench.workloads.pgbench import seqscan_script

DESCRIBE = (
    "full_page_writes\tsighup\tWrite-Ahead Log / Settings\tBOOLEAN\tFALSE\t\t\tWrites full...\n"
    "io_method\tpostmaster\tResource Usage / I/O\tENUM\tworker\t\t\tSelects the method...\n"
    "Shared_Buffers\tpostmaster\tResource Usage / Memory\tINTEGER\t16384\t16\t1073741823\t\n"
)


def test_describe_config_is_parsed_by_name() -> None:
    known = parse_describe_config(DESCRIBE)
    assert {k: v.type for k, v in known.items()} == {
        "full_page_writes": "BOOLEAN",
        "io_method": "ENUM",
        "shared_buffers": "INTEGER",
    }
    assert (known["shared_buffers"].min, known["shared_buffers"].max) == (16, 1073741823)


def test_setting_values_are_checked_against_their_type_and_range() -> None:
    """What a fuzzer got past `plan`: shared_buffers = "a b" or true, work_mem = "-o",
    max_connections = "-o"; and what must still pass."""
    known = parse_describe_config(
        DESCRIBE
        + (
            "work_mem\tuser\tResource Usage / Memory\tINTEGER\t0\t64\t2147483647\t\n"
            "max_connections\tpostmaster\tConnections\tINTEGER\t0\t1\t262143\t\n"
            "checkpoint_completion_target\tsighup\tWAL\tREAL\t0\t0\t1\t\n"
        )
    )

    def problem(name: str, value: object) -> str | None:
        return value_problem(name, value, known[name])

    for name, value in (
        ("shared_buffers", "a b"),
        ("shared_buffers", True),
        ("work_mem", "-o"),
        ("max_connections", "-o"),
        ("max_connections", 0),
        ("max_connections", 1.5),
        ("checkpoint_completion_target", 2),
        ("full_page_writes", "maybe"),
        ("io_method", "io uring"),
        ("shared_buffers", "128 parsecs"),
    ):
        assert problem(name, value) is not None, (name, value)
    for name, value in (
        ("shared_buffers", "128MB"),
        ("shared_buffers", 16384),
        ("work_mem", "4MB"),
        ("max_connections", 300),
        ("checkpoint_completion_target", 0.9),
        ("full_page_writes", False),
        ("full_page_writes", "off"),
        ("io_method", "worker"),
        ("shared_buffers", " 1 GB "),
    ):
        assert problem(name, value) is None, (name, value)


def _fake_bindir(tmp: Path, configure: str) -> Binaries:
    tmp.mkdir(parents=True, exist_ok=True)
    pg_config = tmp / "pg_config"
    pg_config.write_text(f'#!/bin/sh\necho "{configure}"\n')
    pg_config.chmod(0o755)
    (tmp / "postgres").write_bytes(b"\x7fELF...")
    return Binaries(tmp, "18.6", "postgres (PostgreSQL) 18.6")


def test_io_uring_needs_18_liburing_and_the_kernel(tmp_path: Path) -> None:
    enabled = tmp_path / "io_uring_disabled"
    enabled.write_text("0\n")
    without = _fake_bindir(tmp_path / "a", "'--prefix' '/opt' '--with-lz4'")
    assert "built without liburing" in str(io_uring_unsupported(without, enabled))
    with_uring = _fake_bindir(tmp_path / "b", "'--prefix' '/opt' '--with-liburing'")
    assert io_uring_unsupported(with_uring, enabled) is None
    enabled.write_text("2\n")
    assert "io_uring_disabled = 2" in str(io_uring_unsupported(with_uring, enabled))
    old = Binaries(tmp_path, "15.18", "postgres (PostgreSQL) 15.18")
    assert "has no io_method" in str(io_uring_unsupported(old, enabled))


def test_a_postgres_configuration_names_its_own_bindir() -> None:
    assert str(PostgresConfig(bindir="/usr/lib/postgresql/17/bin").bindir).endswith("17/bin")
    with pytest.raises(ValueError, match="absolute"):
        PostgresConfig(bindir="pg17/bin")


def test_dump_argv_custom_to_dev_null_and_directory_in_parallel() -> None:
    conn = Endpoint("/run/pg", 5433, "bench", "pgbench")
    custom = dump_argv("/pg/bin/pg_dump", conn, "custom", 1, 0, None)
    assert custom == [
        "/pg/bin/pg_dump",
        "-h",
        "/run/pg",
        "-p",
        "5433",
        "-U",
        "bench",
        "-d",
        "pgbench",
        "-Z",
        "0",
        "--no-sync",
        "-Fc",
        "-f",
        "/dev/null",
    ]
    directory = dump_argv("/pg/bin/pg_dump", conn, "directory", 4, 1, Path("/scratch/dump"))
    assert directory[-8:] == ["-Z", "1", "--no-sync", "-Fd", "-j", "4", "-f", "/scratch/dump"]


def test_read_workload_models() -> None:
    with pytest.raises(ValueError, match="directory"):
        DumpWorkload(tool="pg_dump", jobs=4)
    assert DumpWorkload(tool="pg_dump", format="directory", jobs=4, cache="cold").cache == "cold"
    scan = PgbenchWorkload(builtin="seqscan", parallel_workers=2)
    assert scan.parallel_workers == 2
    with pytest.raises(ValueError):
        PgbenchWorkload(builtin="seqscan", cache="lukewarm")


def test_seqscan_script_is_one_scan_per_transaction() -> None:
    assert seqscan_script(2) == (
        "SET max_parallel_workers_per_gather = 2;\nSELECT count(*) FROM pgbench_accounts;\n"
    )
