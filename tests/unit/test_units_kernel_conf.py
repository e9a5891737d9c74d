from pathlib import Path

import pytest

from pgfsbench.kernel import format_value, selected
from pgfsbench.postgres.binaries import parse_version
from pgfsbench.postgres.instance import conf_value, initdb_argv, render_conf
from pgfsbench.spec import InitdbOptions
from pgfsbench.units import parse_duration, parse_size


def test_sizes_and_durations() -> None:
    assert parse_size("4G") == 4 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size("1.5k") == 1536
    assert parse_duration("2m") == 120.0 and parse_duration("500ms") == 0.5
    assert parse_duration(7) == 7.0
    with pytest.raises(ValueError):
        parse_size("lots")
    with pytest.raises(ValueError):
        parse_duration("-1s")


def test_thp_choice_and_sysctl_values() -> None:
    assert selected("always [madvise] never\n") == "madvise"
    assert selected("5") == "5"
    assert format_value(True) == "1" and format_value(67108864) == "67108864"


def test_conf_rendering_quotes_and_puts_spec_settings_last() -> None:
    text = render_conf(
        Path("/s o'k"),
        5432,
        {"full_page_writes": False, "shared_buffers": "1GB", "log_checkpoints": False},
    )
    assert "unix_socket_directories = '/s o''k'" in text
    assert "listen_addresses = ''" in text
    lines = text.splitlines()
    # the spec's value replaces pgfsbench's own
    assert "log_checkpoints = off" in lines and "log_checkpoints = on" not in lines
    assert "full_page_writes = off" in lines and "shared_buffers = '1GB'" in lines
    assert conf_value(0.9) == "0.9"
    assert "track_wal_io_timing" not in render_conf(Path("/s"), 5432, {}, major=13)


class FakeBinaries:
    def tool(self, name: str) -> str:
        return f"/pg/bin/{name}"


def test_initdb_argv() -> None:
    argv = initdb_argv(
        FakeBinaries(),  # type: ignore[arg-type]
        Path("/m/pgdata"),
        Path("/w/pg_wal"),
        InitdbOptions(wal_segsize=64, data_checksums=True),
    )
    assert argv[0] == "/pg/bin/initdb"
    assert argv[argv.index("--waldir") + 1] == "/w/pg_wal"
    assert argv[argv.index("--wal-segsize") + 1] == "64"
    assert "--data-checksums" in argv and "--auth-local" in argv


def test_parse_version() -> None:
    assert parse_version("postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)") == "15.18"
    assert parse_version("postgres (PostgreSQL) 17beta1") == "17"


def test_a_bad_setting_is_named_not_the_file(tmp_path: Path) -> None:
    from pgfsbench.postgres.instance import startup_failure

    log = tmp_path / "postgresql.log"
    log.write_text(
        "2026-11-22 19:01:44.895 UTC [5176] LOG:  20 s is outside the valid range for "
        'parameter "checkpoint_timeout" (30 .. 86400)\n'
        '2026-11-22 19:01:44.895 UTC [5176] FATAL:  configuration file "/w/pgfsbench.conf" '
        "contains errors\n"
    )
    assert startup_failure(log) == (
        'LOG:  20 s is outside the valid range for parameter "checkpoint_timeout" (30 .. 86400)'
    )
