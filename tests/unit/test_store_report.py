from pathlib import Path

import polars as pl
import pytest

from pgfsbench.analysis.summary import spread, summarise
from pgfsbench.report.html import render_report
from pgfsbench.report.terminal import summary_table
from pgfsbench.results.export import export_runs
from pgfsbench.results.store import LIST_KEYS, Store, engine_url
from pgfsbench.system.errors import StoreError


def fill(store: Store) -> int:
    cid = store.start_campaign(name="t", spec_text="x", host="h")
    for cell, fs, tps in (("ext4/d/d/w", "ext4", [100.0, 110.0, 90.0]),
                          ("zfs/d/d/w", "zfs", [150.0, 160.0])):
        for rep, t in enumerate(tps, 1):
            rid = store.start_run(campaign_id=cid, cell=cell, storage=cell.split("/")[0], fs=fs,
                                  postgres="d", kernel="d", workload="w", repetition=rep,
                                  clients=4, fuse=fs == "zfs",
                                  implementation="zfs-fuse" if fs == "zfs" else None)
            store.finish_run(rid, "ok", tps=t, latency_avg_ms=1000 / t, load_seconds=1.0,
                             space_bytes=1000 * rep)
            store.put_series(rid, "tps", [t - 1, t, t + 1], unit="tps", t0=1.0)
    rid = store.start_run(campaign_id=cid, cell="ext4/d/d/w", storage="ext4", fs="ext4",
                          postgres="d", kernel="d", workload="w", repetition=4)
    store.finish_run(rid, "failed", error="disk full")
    store.finish_campaign(cid, "done")
    return cid


def test_store_roundtrip_and_list_keys(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    runs = store.list_runs()
    assert len(runs) == 6
    assert set(LIST_KEYS) <= set(runs[0])
    one = store.get_run(1)
    assert one["series"]["tps"]["values"] == [99.0, 100.0, 101.0]
    assert one["started_at"].endswith("+00:00")
    assert store.mark_aborted([1, 6], "x") == 0  # neither is 'running'
    with pytest.raises(StoreError, match="no run 99"):
        store.get_run(99)


def test_summary_median_and_spread(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    cells = summarise(store.list_runs())
    ext4 = cells[0]
    assert ext4.runs == 4 and ext4.ok == 3
    assert ext4.tps is not None and ext4.tps.median == 100.0
    assert (ext4.tps.low, ext4.tps.high, ext4.tps.n) == (90.0, 110.0, 3)
    assert ext4.errors == ("disk full",)
    assert cells[1].fuse
    assert spread([None, None]) is None
    table = summary_table(cells)
    assert table.row_count == 2


def test_html_report_marks_fuse_and_lists_cells(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    cid = fill(store)
    runs = [store.get_run(int(r["run_id"])) for r in store.list_runs(cid)]
    html = render_report(store.campaigns()[0], runs, inline_js=False)
    assert "zfs-fuse" in html and 'id="fuse-warning"' in html
    assert "ext4/d/d/w" in html and "100 (90–110, n=3)" in html
    assert "disk full" in html


def test_export_csv_and_parquet(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    assert export_runs(store, tmp_path / "runs.csv", "csv") == 6
    assert pl.read_csv(tmp_path / "runs.csv")["tps"].max() == 160.0
    assert export_runs(store, tmp_path / "s.parquet", "parquet", series=True) == 15
    frame = pl.read_parquet(tmp_path / "s.parquet")
    assert set(frame["series"]) == {"tps"}


def test_engine_urls() -> None:
    assert engine_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert engine_url("r.sqlite").startswith("sqlite:////")
