from pathlib import Path

import pytest

from pgfsbench.collect.ceiling import fio_argv, identity, parse_fio, parse_pg_test_fsync

DATA = Path(__file__).resolve().parents[1] / "data" / "ceiling"


def test_pg_test_fsync_every_method_by_section() -> None:
    r = parse_pg_test_fsync((DATA / "pg_test_fsync_pg15.txt").read_text())
    assert r["file sync methods using one 8kB write: fdatasync"] == pytest.approx(8273.007)
    assert r["open_sync with different write sizes: 2 * 8kB open_sync writes"] == pytest.approx(
        4365.092
    )
    assert r["Non-sync'ed 8kB writes: write"] > 1e6
    assert not any("fsync_writethrough" in k for k in r)  # n/a on Linux
    assert len(r) == 16


def test_fio_json() -> None:
    r = parse_fio((DATA / "fio_randrw_8k.json").read_text())
    assert r["read_iops"] > r["write_iops"] > 0  # 70/30 mix
    assert r["read_mbps"] == pytest.approx(r["read_iops"] * 8192 / 1e6, rel=0.02)
    assert r["read_p99_ms"] > 0 and r["fdatasync_avg_ms"] > 0
    argv = fio_argv(Path("/m"), 10)
    assert "--bs=8k" in argv and "--output-format=json" in argv and "--directory=/m" in argv


def test_identity_depends_on_the_configuration() -> None:
    assert identity({"fs": "ext4"}) == identity({"fs": "ext4"})
    assert identity({"fs": "ext4"}) != identity({"fs": "xfs"})
