"""Root causes of failed runs, from the evidence a run leaves."""

from pgfsbench.engine.diagnosis import Evidence, Volume, root_cause, severe_lines
from pgfsbench.system.errors import CommandError, Stalled, WorkloadError

DATA = Volume("data", "/w/cells/run-3/mnt/data", "ext4", "/dev/loop3", 300 << 20)
WAL = Volume("wal", "/w/cells/run-3/mnt/wal", "xfs", "/dev/loop4", 512 << 20)


def test_disk_full_names_the_mount_the_need_and_the_size() -> None:
    ev = Evidence(
        log_lines=(
            '2026-11-22 10:00:01.123 UTC [812] ERROR:  could not extend file "base/16384/16397": '
            "No space left on device",
            "2026-11-22 10:00:01.123 UTC [812] HINT:  Check free disk space.",
        ),
        server_alive=True,
        volumes=(DATA,),
        needed_bytes=480 << 20,
    )
    exc = CommandError(["pgbench", "-i"], 1, "pgbench: error: PQendcopy failed")
    cause = root_cause(WorkloadError(f"pgbench -i failed: {exc}"), ev)
    assert cause.startswith(
        "No space left on device on /w/cells/run-3/mnt/data (ext4 on /dev/loop3)"
    )
    assert "needed about 480.0 MiB" in cause and "the device has 300.0 MiB" in cause
    assert "PQendcopy" not in cause


def test_disk_full_in_pg_wal_points_at_the_wal_volume() -> None:
    ev = Evidence(
        log_lines=(
            '2026-11-22 10:00:01.123 UTC [9] PANIC:  could not write to file "pg_wal/xlogtemp.9": '
            "No space left on device",
        ),
        server_alive=False,
        volumes=(DATA, WAL),
    )
    assert "on /w/cells/run-3/mnt/wal (xfs on /dev/loop4)" in root_cause(RuntimeError("x"), ev)


def test_a_dead_server_says_so_with_its_last_fatal_lines() -> None:
    ev = Evidence(
        log_lines=(
            "2026-11-22 10:00:00.000 UTC [700] LOG:  checkpoint starting: time",
            "2026-11-22 10:00:02.000 UTC [801] FATAL:  terminating connection due to unexpected "
            "postmaster exit",
            "2026-11-22 10:00:02.000 UTC [802] FATAL:  terminating connection due to unexpected "
            "postmaster exit",
        ),
        server_alive=False,
    )
    import psycopg

    cause = root_cause(
        psycopg.OperationalError(
            "consuming input failed: server closed the connection unexpectedly"
        ),
        ev,
    )
    assert cause == (
        "PostgreSQL server terminated during the run: FATAL:  terminating "
        "connection due to unexpected postmaster exit"
    )


def test_panic_wins_over_the_symptom() -> None:
    ev = Evidence(
        log_lines=(
            "2026-11-22 10:00:02.000 UTC [9] PANIC:  could not fsync file "
            '"base/1/2": Input/output error',
        ),
        server_alive=False,
    )
    assert root_cause(WorkloadError("pgbench: client 0 aborted"), ev).startswith(
        "PostgreSQL server stopped with a PANIC: PANIC:  could not fsync"
    )


def test_huge_pages_say_how_many_were_asked_and_given() -> None:
    ev = Evidence(
        log_lines=(
            "2026-11-22 10:00:00.000 UTC [5] FATAL:  could not map anonymous shared memory: Cannot "
            "allocate memory",
            "2026-11-22 10:00:00.000 UTC [5] HINT:  This error usually means that PostgreSQL's "
            "request for a shared memory segment exceeded available memory, swap space, or huge "
            "pages. To reduce the request size (currently 148324352 bytes), reduce PostgreSQL's "
            "shared memory usage, perhaps by reducing shared_buffers or max_connections.",
        ),
        server_alive=False,
        huge_page_kb=2048,
        huge_pages_total=0,
        huge_pages_free=0,
        huge_pages_setting="on",
    )
    cause = root_cause(WorkloadError("PostgreSQL did not start"), ev)
    assert "asked for 71 pages of 2048 kB" in cause
    assert "the kernel has 0 (vm.nr_hugepages), 0 free" in cause


def test_stall_and_our_own_errors_keep_their_words() -> None:
    assert (
        root_cause(Stalled("no transaction completed for 10 s"), Evidence(server_alive=True))
        == "no transaction completed for 10 s"
    )
    assert root_cause(OSError(28, "No space left on device"), Evidence()).startswith(
        "No space left on device"
    )
    assert root_cause(KeyError("x"), Evidence()) == "KeyError: 'x'"


def test_severe_lines_strip_prefixes_and_repeat_once() -> None:
    lines = (
        "2026-11-22 10:00:02.000 UTC [1] FATAL:  a",
        "2026-11-22 10:00:02.000 UTC [2] FATAL:  a",
        "2026-11-22 10:00:03.000 UTC [3] PANIC:  b",
        "x LOG: c",
    )
    assert severe_lines(lines) == ["FATAL:  a", "PANIC:  b"]
