import datetime as dt
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from pgfsbench.collect import txlog
from pgfsbench.collect.checkpoints import parse_checkpoints, running_checkpoint
from pgfsbench.collect.procfs import (
    cpu_percentages,
    disk_rates,
    parse_diskstats,
    parse_meminfo,
    parse_stat,
    parse_vmstat,
)
from pgfsbench.collect.samplers import (
    OsSample,
    PgSamples,
    os_series,
    parse_waits,
    pg_series,
)
from pgfsbench.collect.txlog import parse_txlog
from pgfsbench.results.records import bucket_value_ms

DATA = Path(__file__).resolve().parents[1] / "data"


def proc(name: str, n: int) -> str:
    return (DATA / "proc" / f"{name}.{n}").read_text()


def test_proc_parsers_on_captured_files() -> None:
    a, b = parse_stat(proc("stat", 1)), parse_stat(proc("stat", 2))
    assert a.total < b.total
    pct = cpu_percentages(a, b)
    assert abs(sum(pct.values()) - 100) < 1.0
    disks = parse_diskstats(proc("diskstats", 1))
    assert "vda" in disks and disks["vda"].sectors_written > 0
    mem = parse_meminfo(proc("meminfo", 1))
    assert "Dirty" in mem and "Writeback" in mem and mem["MemTotal"] > 0
    assert "pgscan_kswapd" in parse_vmstat(proc("vmstat", 1))


def test_disk_rates() -> None:
    a = parse_diskstats("   7 0 loop0 10 0 80 5 100 0 2048 50 0 30 60 0 0 0 0 4 2")["loop0"]
    b = parse_diskstats("   7 0 loop0 20 0 160 15 300 0 6144 150 0 530 60 0 0 0 0 9 3")["loop0"]
    r = disk_rates(a, b, 2.0)
    assert r["write_mbps"] == pytest.approx(4096 * 512 / 1e6 / 2, abs=1e-3)
    assert r["read_iops"] == 5.0 and r["write_iops"] == 100.0
    assert r["await_ms"] == pytest.approx(110 / 210, abs=1e-3)
    assert r["util_pct"] == 25.0 and r["flushes"] == 5.0


def test_checkpoints_from_a_pg15_log() -> None:
    log = (DATA / "pglog" / "pg15_checkpoints.log").read_text() + (
        "2026-11-21 22:50:00.100 UTC [77] LOG:  checkpoint starting: time\n"
        "2026-11-21 22:50:27.200 UTC [77] LOG:  checkpoint complete: wrote 1200 buffers (7.3%); "
        "2 WAL file(s) added, 1 removed, 3 recycled; write=26.9 s, sync=0.150 s, total=27.1 s; "
        "sync files=12, longest=0.100 s, average=0.012 s; distance=65536 kB, "
        "estimate=65536 kB\n"
    )
    first, second = parse_checkpoints(log)
    assert first.reason == "immediate force wait" and first.buffers == 3984
    assert first.wal_recycled == 4 and first.total_s == pytest.approx(0.038)
    assert second.reason == "time" and second.wal_added == 2 and second.distance_kb == 65536
    assert second.started is not None
    assert second.ended - second.started == pytest.approx(27.1, abs=0.01)


def test_a_checkpoint_still_running_when_the_log_is_read() -> None:
    done = (DATA / "pglog" / "pg15_checkpoints.log").read_text()
    assert running_checkpoint(done) is None
    log = done + "2026-11-21 22:50:00.100 UTC [77] LOG:  checkpoint starting: wal\n"
    started = running_checkpoint(log)
    assert started is not None and started[1] == "wal"
    assert started[0] == pytest.approx(
        dt.datetime(2026, 11, 21, 22, 50, 0, 100000, dt.UTC).timestamp()
    )
    assert len(parse_checkpoints(log)) == len(parse_checkpoints(done))


def test_txlog_percentiles_match_exact_ones_within_a_bucket() -> None:
    path = DATA / "txlog" / "pg15_tpcb_4clients.log"
    stats = parse_txlog([path])
    assert stats is not None and stats.transactions == 3000 and stats.failed == 0
    lat = np.loadtxt(path, usecols=2) / 1000.0
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        exact = float(np.percentile(lat, q, method="inverted_cdf"))
        assert stats.percentiles_ms[key] == pytest.approx(exact, rel=0.011), key
    assert stats.percentiles_ms["max"] == pytest.approx(lat.max())
    assert sum(v or 0.0 for v in stats.series["tps_log"]) == 3000
    assert len(stats.series["lat_p99_ms"]) == len(stats.series["tps_log"])


def test_txlog_failed_lines_sampling_and_several_files(tmp_path: Path) -> None:
    a, b = tmp_path / "log.1", tmp_path / "log.1.1"
    a.write_text(
        "0 1 1000 0 1795301131 100000\n0 2 failed 0 1795301131 300000 0 3\n"
        "0 3 3000 0 1795301132 500000\n"
    )
    b.write_text("1 1 2000 0 1795301131 200000\n")
    stats = parse_txlog([a, b], sampling_rate=0.5)
    assert stats is not None
    assert stats.transactions == 3 and stats.failed == 1
    assert stats.series["tps_log"] == [4.0, 2.0]  # counts / sampling rate, per second
    assert stats.percentiles_ms["max"] == 3.0
    assert parse_txlog([tmp_path / "missing"]) is None


def test_txlog_in_small_blocks_gives_what_one_block_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines split across blocks, partial aggregates merged, and a transaction that
    started before anything in the first block (a 5-second one, logged late): the
    second pass counts seconds from its start, as reading it whole does."""
    lines = DATA.joinpath("txlog", "pg15_tpcb_4clients.log").read_text().splitlines()
    first_end = [int(x) for x in lines[0].split()[4:6]]
    end = first_end[0] * 1_000_000 + first_end[1] + 2_500_000
    lines.insert(len(lines) // 2, f"3 9999 5000000 0 {end // 1_000_000} {end % 1_000_000}")
    path = tmp_path / "log.1"
    path.write_text("\n".join(lines))  # and no line end at the very end
    whole = parse_txlog([path])
    monkeypatch.setattr(txlog, "CHUNK_BYTES", 997)
    monkeypatch.setattr(txlog, "_MERGE_EVERY", 3)
    blocks = parse_txlog([path])
    assert whole is not None and blocks is not None
    assert blocks == whole
    assert blocks.transactions == 3001
    assert blocks.start_epoch == pytest.approx((end - 5_000_000) / 1e6)
    # seconds count from the long one's start: nothing ended in the first two
    assert (
        blocks.series["tps_log"][:2] == [0.0, 0.0]
        and sum(v or 0.0 for v in blocks.series["tps_log"]) == 3001
    )


def test_bucket_midpoints_are_within_half_a_percent() -> None:
    for us in (137, 1000, 25_000, 3_000_000):
        b = np.floor(np.log(us) * 100)
        assert bucket_value_ms(float(b)) == pytest.approx(us / 1000, rel=0.01)


def test_series_alignment_and_wait_averages() -> None:
    start = 1000.0
    samples = PgSamples(
        counters=[
            {"t": 1000.0, "wal_lsn": 0, "wal_fpi": 0, "xact_commit": 0},
            {"t": 1001.0, "wal_lsn": 2_000_000, "wal_fpi": 10, "xact_commit": 500},
            {"t": 1002.0, "wal_lsn": 3_000_000, "wal_fpi": 10, "xact_commit": 900},
        ],
        # as the server answered: bytes on a tick's lean path, text on the general one
        raw_waits=[
            (1000.05, b"4 IO/WALSync"),
            (1000.55, "2 IO/WALSync"),
            (1001.05, b"1 Lock/tuple"),
            (1001.55, None),
        ],
    )
    series = pg_series(samples, start)
    assert series["wal_mbps"] == (1.0, [2.0, 1.0])
    assert series["commits_per_s"] == (1.0, [500.0, 400.0])
    # a sample with nobody waiting counts: that second's average is halved
    assert series["waits"] == (1.0, [{"IO/WALSync": 3.0}, {"Lock/tuple": 0.5}])


def test_wait_events_answer_is_parsed_whatever_the_event_names() -> None:
    # an extension's own wait event (PostgreSQL 17+) may hold spaces and colons
    raw = "2 CPU/running\n1 Extension/my ext: waiting 2\n13 LWLock/WALWrite"
    assert parse_waits(raw) == Counter(
        {"CPU/running": 2, "Extension/my ext: waiting 2": 1, "LWLock/WALWrite": 13}
    )
    assert parse_waits(raw.encode()) == parse_waits(raw)
    assert parse_waits(None) == Counter() and parse_waits("") == Counter()


def test_os_series_from_captured_snapshots() -> None:
    samples = [
        OsSample(
            1000.0 + i, proc("stat", i), proc("diskstats", i), proc("meminfo", i), proc("vmstat", i)
        )
        for i in (1, 2)
    ]
    series = os_series(samples, 1000.0, ["vda"])
    assert series["dirty_kb"][0] == 2.0  # the sample taken 2 s after start
    assert set(series) >= {
        "cpu_iowait_pct",
        "disk_write_mbps",
        "writeback_kb",
        "disk.vda.util_pct",
        "vm_pgscan_kswapd",
    }


def test_rate_limited_log_keeps_schedule_lag_as_percentiles_and_series() -> None:
    """pgbench -R adds a seventh column: the schedule lag (us); latencies include it."""
    import numpy as np

    path = DATA / "txlog" / "pg15_rate_R300.log"
    rows = [line.split() for line in path.read_text().splitlines()]
    assert {len(r) for r in rows} == {7}
    lags = np.array([int(r[6]) for r in rows]) / 1000.0
    stats = parse_txlog([path], duration_s=3)
    assert stats is not None and stats.lag_ms is not None
    assert stats.transactions == len(rows)
    for key, q in (("p50", 50), ("p90", 90), ("p99", 99)):
        exact = float(np.percentile(lags, q, method="inverted_cdf"))
        assert abs(stats.lag_ms[key] - exact) <= max(0.011 * exact, 0.002), key
    assert stats.lag_ms["max"] == round(lags.max(), 3)
    assert len(stats.series["lag_avg_ms"]) == len(stats.series["tps_log"]) == 3
    assert stats.as_dict()["schedule_lag_ms"] == stats.lag_ms


def test_pgbouncer_stats_and_pools_as_its_console_returns_them() -> None:
    """Rows as psycopg returns them from pgbouncer 1.18's SHOW STATS / SHOW POOLS."""
    from decimal import Decimal

    from pgfsbench.collect.pooler import PoolerSample, pooler_series, pools_sum, stats_row

    def stats(xacts: int, wait_us: int) -> list[dict[str, object]]:
        return [
            {
                "database": "pgbench",
                "total_xact_count": Decimal(xacts),
                "total_wait_time": Decimal(wait_us),
                "avg_wait_time": Decimal("247851"),
            },
            {"database": "pgbouncer", "total_xact_count": Decimal("2")},
        ]

    pools = [
        {
            "database": "pgbench",
            "user": "postgres",
            "cl_active": 2,
            "cl_waiting": 4,
            "sv_active": 2,
            "sv_idle": 0,
            "maxwait": 0,
            "maxwait_us": 5000,
            "pool_mode": "transaction",
        },
        {"database": "pgbouncer", "user": "pgbouncer", "cl_active": 1, "cl_waiting": 0},
    ]
    assert stats_row(stats(3062, 5754852), "pgbench")["total_xact_count"] == 3062.0
    assert pools_sum(pools, "pgbench")["cl_waiting"] == 4.0
    samples = [
        PoolerSample(100.0, stats_row(stats(0, 0), "pgbench"), pools_sum(pools, "pgbench")),
        PoolerSample(
            101.0, stats_row(stats(1000, 2_000_000), "pgbench"), pools_sum(pools, "pgbench")
        ),
        PoolerSample(
            102.0, stats_row(stats(2500, 2_600_000), "pgbench"), pools_sum(pools, "pgbench")
        ),
    ]
    figures = pooler_series(samples, start=100.0)
    assert figures.series["pooler_tps"] == (1.0, [1000.0, 1500.0])
    assert figures.series["pooler_wait_ms"] == (1.0, [2.0, 0.4])  # us per transaction / 1000
    assert figures.series["pooler_clients_waiting"] == (1.0, [4.0, 4.0])
    assert figures.totals == {"transactions": 2500.0, "avg_wait_ms": 1.04}


def test_process_cpu_from_a_stat_line_with_parentheses_in_the_name() -> None:
    from pgfsbench.collect.procfs import parse_process_cpu, process_cpu_seconds

    line = (
        "4242 (postgres: a (b) c) S 1 4242 4242 0 -1 4194560 1200 0 3 0 "
        "250 75 0 0 20 0 1 0 123456 225525760 2000 18446744073709551615 1 1 0 0 0 0"
    )
    assert parse_process_cpu(line, 100) == 3.25
    # this very process: at least what its main thread used, at most what all its
    # threads (finished ones too) used, as os.times() says
    main_thread = time.thread_time()
    t = os.times()
    here = process_cpu_seconds(os.getpid())
    assert here is not None and main_thread - 0.05 < here < t.user + t.system + 0.05
    assert process_cpu_seconds(2**22 + 1) is None  # above pid_max: no such process


def test_a_single_threaded_process_is_read_to_the_nanosecond() -> None:
    """A PostgreSQL backend answering the samplers uses a few ms in a short run: in clock
    ticks that reads as 0 or 10 ms, so its CPU comes from schedstat (nanoseconds)."""
    from pgfsbench.collect.procfs import parse_schedstat, parse_threads, process_cpu_seconds

    assert parse_schedstat("4312345678 1000 17\n") == 4.312345678
    line = (
        "4242 (postgres: a (b) c) S 1 4242 4242 0 -1 4194560 1200 0 3 0 "
        "250 75 0 0 20 0 3 0 123456 225525760 2000 18446744073709551615 1 1 0 0 0 0"
    )
    assert parse_threads(line) == 3
    # a child that burns about 3 ms of CPU, then waits (single-threaded) to be read
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time\n"
                "t = time.process_time()\n"
                "while time.process_time() - t < 0.003: pass\n"
                "sys.stdin.readline()"
            ),
        ],
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdin is not None
        time.sleep(0.5)  # its start-up (the interpreter) done, the loop done
        before = process_cpu_seconds(child.pid)
        time.sleep(0.2)
        after = process_cpu_seconds(child.pid)  # it waited meanwhile: no CPU
        assert before is not None and after is not None
        assert after == before  # exact: the same nanosecond count
        # not a multiple of a 10 ms tick: nanoseconds, not ticks
        assert round(before * 1e9) % 10_000_000 != 0
    finally:
        child.communicate("\n", timeout=10)


def test_libpq_text_values_become_what_psycopg_would_give() -> None:
    from pgfsbench.collect.samplers import _value

    assert _value(None, 20) is None
    assert _value(b"12345678901", 20) == 12345678901 and isinstance(_value(b"7", 23), int)
    assert _value(b"1.5", 701) == 1.5 and _value(b"123456789", 1700) == 123456789.0
    assert isinstance(_value(b"123456789", 1700), float)  # numeric as float, like _num
    assert _value(b"t", 16) is True and _value(b"f", 16) is False
    assert _value(b"IO/WALSync", 25) == "IO/WALSync"


def test_os_sampler_reads_its_kept_files_again_from_the_start(tmp_path: Path) -> None:
    from pgfsbench.collect.samplers import OsSampler

    for name in OsSampler.FILES:
        (tmp_path / name).write_text(proc(name, 1) if name != "diskstats" else "")
    # a file longer than one read, as /proc/diskstats is with hundreds of devices
    disks = proc("diskstats", 1) * 400
    assert len(disks) > 1 << 16
    (tmp_path / "diskstats").write_text(disks)
    sampler = OsSampler(tmp_path)
    sampler.tick()
    (tmp_path / "stat").write_text(proc("stat", 2))  # the kernel writes it anew
    sampler.tick()
    first, second = sampler.close()
    assert first.stat == proc("stat", 1) and second.stat == proc("stat", 2)
    assert first.diskstats == disks and second.vmstat == proc("vmstat", 1)
    assert parse_stat(first.stat).total < parse_stat(second.stat).total
    assert sampler._fds == []  # closed


def test_ticker_runs_each_job_at_its_own_pace_and_stops_at_once() -> None:
    import time

    from pgfsbench.collect.samplers import Job, Ticker

    seen: list[str] = []

    def fails() -> None:
        seen.append("bad")
        raise ValueError("broken sampler")

    every, third = Job("every", 1, lambda: seen.append("every")), Job("third", 3, fails)
    ticker = Ticker("test", 0.02, [every, third])
    ticker.start()
    time.sleep(0.25)
    ticker.stop()
    n = seen.count("every")
    assert 4 <= n <= 14 and seen.count("bad") == (n + 2) // 3  # 12 or 13 when idle
    assert third.errors and third.errors[0] == "ValueError: broken sampler"
    assert not every.errors and not ticker.is_alive()
    assert ticker.cpu_seconds > 0
    # a long interval does not hold up the stop, and a ticker never started stops too
    slow = Ticker("slow", 3600, [Job("once", 1, lambda: None)])
    slow.start()
    started = time.monotonic()
    slow.stop()
    assert time.monotonic() - started < 1 and not slow.is_alive()
    Ticker("never", 1, []).stop()
