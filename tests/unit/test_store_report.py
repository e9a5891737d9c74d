import sqlite3
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from pgfsbench.analysis.summary import spread, summarise
from pgfsbench.report.html import render_report
from pgfsbench.report.terminal import summary_table
from pgfsbench.results.export import export_runs
from pgfsbench.results.records import (
    RunOutcome,
    RunPreparation,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import LIST_KEYS, SeriesRow, Store, engine_url
from pgfsbench.system.errors import StoreError


def fill(store: Store) -> int:
    cid = store.start_campaign(StoredCampaign(name="t", spec_text="x", host="h"))
    for cell, fs, tps in (
        ("ext4/d/d/w", "ext4", [100.0, 110.0, 90.0]),
        ("zfs/d/d/w", "zfs", [150.0, 160.0]),
    ):
        for rep, t in enumerate(tps, 1):
            rid = store.start_run(
                StoredRun(
                    campaign_id=cid,
                    cell=cell,
                    storage=cell.split("/")[0],
                    fs=fs,
                    postgres="d",
                    kernel="d",
                    workload="w",
                    repetition=rep,
                    clients=4,
                    fuse=fs == "zfs",
                    implementation="zfs-fuse" if fs == "zfs" else None,
                )
            )
            store.prepare_run(rid, RunPreparation(load_seconds=1.0, space_bytes=1000 * rep))
            store.finish_run(rid, RunOutcome(RunStatus.OK, tps=t, latency_avg_ms=1000 / t))
            store.put_series(rid, "tps", [t - 1, t, t + 1], unit="tps", t0=1.0)
    rid = store.start_run(
        StoredRun(
            campaign_id=cid,
            cell="ext4/d/d/w",
            storage="ext4",
            fs="ext4",
            postgres="d",
            kernel="d",
            workload="w",
            repetition=4,
        )
    )
    store.finish_run(rid, RunOutcome(RunStatus.FAILED, error="disk full"))
    store.finish_campaign(cid, "done")
    return cid


def test_store_roundtrip_and_list_keys(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    runs = store.list_runs()
    assert len(runs) == 6
    assert set(LIST_KEYS) <= set(runs[0].columns())
    one = store.get_run(1)
    assert one.series["tps"].values == [99.0, 100.0, 101.0]
    assert (one.started_at or "").endswith("+00:00")
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
    assert ext4.tps.ci_low is not None and ext4.tps.ci_high is not None
    assert ext4.tps.ci_low < 100 < ext4.tps.ci_high
    zfs = cells[1]
    assert zfs.baseline == ext4.label and zfs.vs_baseline is not None
    assert zfs.vs_baseline.verdict.value == "no verdict"  # 2 repetitions only
    text = render(summary_table(cells, width=160))
    assert "│ext4 " in text and "100 [78–128] !" in text and "baseline" in text
    assert "+55.4% –" in text and "zfs (FUSE)" in text  # 2 vs 3 repetitions: no verdict
    narrow = render(summary_table(cells, width=80), width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "│ext4 " in narrow and "+55.4% –" in narrow  # short names fit: no legend needed
    assert "data + pg_wal" not in narrow  # the optional columns went first


@pytest.mark.parametrize("width", [80, 100, 120, 126, 160])
def test_the_summary_fits_any_terminal_without_cutting_a_name_or_a_marker(
    tmp_path: Path, width: int
) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    cid = store.start_campaign(StoredCampaign(name="t", spec_text="x", host="h"))
    long = ["xfs-essd300-scaled/no-zero-no-fpw-big-segments/dirty-bg-5/write-heavy", "ext4/d/d/w"]
    for cell, tps in zip(long, ([100.0, 130.0, 70.0], [200.0, 201.0, 199.0]), strict=True):
        for rep, t in enumerate(tps, 1):
            rid = store.start_run(
                StoredRun(
                    campaign_id=cid,
                    cell=cell,
                    storage=cell.split("/")[0],
                    fs="xfs",
                    postgres=cell.split("/")[1],
                    kernel=cell.split("/")[2],
                    workload="w",
                    repetition=rep,
                    clients=4,
                )
            )
            store.prepare_run(rid, RunPreparation(load_seconds=1.0, space_bytes=1000))
            store.finish_run(rid, RunOutcome(RunStatus.OK, tps=t, latency_avg_ms=1000 / t))
    cells = summarise(store.list_runs())
    text = render(summary_table(cells, width=width), width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    assert "!" in text and "baseline" in text and ("▲" in text or "▼" in text or "≈" in text)
    for summary in cells:  # every name whole, in the table or in the legend below it
        name = summary.label.split(" (")[0]
        assert any(name in line for line in lines), name


def render(renderable: object, width: int = 160) -> str:
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def test_html_report_marks_fuse_and_lists_cells(tmp_path: Path) -> None:
    from pgfsbench.report.loading import analyse

    store = Store(str(tmp_path / "r.sqlite"))
    cid = fill(store)
    a = analyse(store, [cid])
    html = render_report(a.campaigns, a.runs, a.cells, a.highlights, inline_js=False)
    assert "zfs-fuse" in html and 'id="fuse-warning"' in html
    assert 'data-cell="ext4/d/d/w"' in html and "100 [78–128]" in html and "90–110" in html
    assert "disk full" in html and "a verdict needs at least 3 runs a side" in html


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


def test_html_summary_rows_come_group_by_group(tmp_path: Path) -> None:
    """A campaign's cells come storage by storage; each comparable group (here the scale)
    is one block of rows under one heading, as in the terminal and the Markdown."""
    from pgfsbench.report.html import table_rows
    from pgfsbench.report.loading import analyse

    store = Store(str(tmp_path / "r.sqlite"))
    cid = store.start_campaign(StoredCampaign(name="t", spec_text="x", host="h"))
    for storage in ("ext4", "xfs"):
        for scale in (2, 10):
            cell = f"{storage}/d/d/ro@scale={scale}"
            rid = store.start_run(
                StoredRun(
                    campaign_id=cid,
                    cell=cell,
                    storage=storage,
                    fs=storage,
                    postgres="d",
                    kernel="d",
                    workload="ro",
                    repetition=1,
                    clients=4,
                    scale=scale,
                )
            )
            store.finish_run(rid, RunOutcome(RunStatus.OK, tps=1000.0 * scale + (storage == "xfs")))
    store.finish_campaign(cid, "done")
    a = analyse(store, [cid])
    rows = table_rows(a.cells)
    groups = [r["group"] for r in rows]
    assert len(groups) == 4 and len(set(groups)) == 2
    assert groups[0] == groups[1] and groups[2] == groups[3]  # not interleaved
    assert [r["id"] for r in rows] == [
        "ext4/d/d/ro@scale=2",
        "xfs/d/d/ro@scale=2",
        "ext4/d/d/ro@scale=10",
        "xfs/d/d/ro@scale=10",
    ]
    html = render_report(a.campaigns, a.runs, a.cells, a.highlights, inline_js=False)
    assert html.count('<tr class="group">') == 2


def test_a_run_at_a_share_of_its_maximum_is_never_compared_with_an_unpaced_one(
    tmp_path: Path,
) -> None:
    """rate = ["max", "75%"]: the paced cells form their own group (their throughput is
    three quarters of their own maximum by construction), with their own baseline."""
    from pgfsbench.report.loading import analyse

    store = Store(str(tmp_path / "r.sqlite"))
    cid = store.start_campaign(StoredCampaign(name="t", spec_text="x", host="h"))
    for storage, tps in (("ext4", 3000.0), ("xfs", 3300.0)):
        for share in (None, 0.75):
            cell = f"{storage}/d/d/rw@rate={'75%' if share else 'max'}"
            rid = store.start_run(
                StoredRun(
                    campaign_id=cid,
                    cell=cell,
                    storage=storage,
                    fs=storage,
                    postgres="d",
                    kernel="d",
                    workload="rw",
                    repetition=1,
                    clients=8,
                    scale=2,
                    params={"workload": {"rate_fraction": share}},
                )
            )
            store.finish_run(rid, RunOutcome(RunStatus.OK, tps=tps * (share or 1.0)))
    store.finish_campaign(cid, "done")
    cells = {c.cell: c for c in analyse(store, [cid]).cells}
    paced = cells["xfs/d/d/rw@rate=75%"]
    assert paced.group != cells["xfs/d/d/rw@rate=max"].group
    assert paced.baseline == cells["ext4/d/d/rw@rate=75%"].label
    assert cells["ext4/d/d/rw@rate=75%"].baseline is None  # the first of its own group


def test_stored_records_are_typed_and_refuse_a_key_they_do_not_have(tmp_path: Path) -> None:
    from pgfsbench.results.records import StoredRun, StoredSeries

    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    one = store.get_run(1)
    # the JSON shape of `results show --json` reads back as the same record
    assert StoredRun.from_row(one.as_dict()) == one
    assert one.series["tps"].at(1) == 99.0 and one.series["tps"].at(0) is None
    with pytest.raises(TypeError, match="no field 'tsp'"):
        StoredRun.from_row({"cell": "c", "tsp": 1.0})
    # a series offset by its first second, with a step of two seconds
    s = StoredSeries("x", [10, 20, 30], t0=-1.0, step=2.0)
    assert [s.at(k) for k in (-1, 1, 3, 5)] == [10, 20, 30, None]
    assert one.throughput is None and one.figure == 100.0  # a record from before the unit
    assert StoredRun(throughput=3.0, tps=5.0).figure == 3.0


def test_a_runs_series_are_stored_in_one_go_and_replace_their_names_only(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    rid = store.list_runs()[0].run_id
    store.put_series(rid, "waits", [1.0])
    store.put_many_series(
        rid,
        [
            SeriesRow("tps", [5.0, 6.0], "tps", 2.0),
            SeriesRow("latency_ms", [1.5], "ms"),
            SeriesRow("latency_ms", [2.5], "ms"),  # a name twice: the last one
        ],
    )
    run = store.get_run(rid)
    assert run is not None
    assert run.series["tps"].values == [5.0, 6.0] and run.series["tps"].t0 == 2.0
    assert run.series["latency_ms"].values == [2.5]
    assert run.series["waits"].values == [1.0]  # not named: kept


def test_the_run_row_is_defined_once_and_its_parts_are_checked_against_it() -> None:
    """The run row is spelled by the table and by StoredRun; what the engine writes
    (RunPreparation, RunOutcome) is declared a part of it, checked when the module is
    imported: a column added to one and forgotten in another fails here, and so does a
    part that names a column the row lacks or holds another kind of value."""
    import dataclasses
    import typing

    from pgfsbench.results import schema
    from pgfsbench.results.records import (
        RunOutcome,
        RunPreparation,
        StoredRun,
        row_part,
        value_kinds,
    )

    table = {"run_id" if c.name == "id" else c.name for c in schema.run.columns}
    stored = typing.get_type_hints(StoredRun)
    assert table == set(stored) - {"series", "checkpoints", "artifacts"}
    assert {f.name for f in dataclasses.fields(StoredRun)} == set(stored)
    for part in (RunOutcome, RunPreparation):
        written = typing.get_type_hints(part)
        assert set(written) <= set(stored)
        assert all(value_kinds(h) == value_kinds(stored[n]) for n, h in written.items())

    @dataclasses.dataclass
    class Misspelt:
        latency_avg: float | None = None

    @dataclasses.dataclass
    class Retyped:
        transactions: float | None = None

    for wrong in (Misspelt, Retyped):
        with pytest.raises(TypeError, match=wrong.__name__):
            row_part(wrong)


def test_a_checkpoint_still_running_at_the_end_is_stored_and_aligned(tmp_path: Path) -> None:
    """The observation's rows for a completed and a running checkpoint (no end, no figures)
    are stored together; the aligned run draws the running one to the run's end."""
    from pgfsbench.analysis.series import align
    from pgfsbench.analysis.summary import unstable_reasons
    from pgfsbench.collect.observation import CHECKPOINT_FIGURES

    store = Store(str(tmp_path / "r.sqlite"))
    camp = store.start_campaign(StoredCampaign(name="c"))
    figures = dict.fromkeys(CHECKPOINT_FIGURES, 1)
    rid = store.start_run(
        StoredRun(
            campaign_id=camp,
            cell="ext4/p/k/w",
            storage="ext4",
            fs="ext4",
            postgres="p",
            kernel="k",
            workload="w",
            duration_s=30,
        )
    )
    store.finish_run(rid, RunOutcome(RunStatus.OK, throughput=1000.0, throughput_unit="tps"))
    store.put_series(rid, "tps", [1000.0] * 30)
    store.put_checkpoints(
        rid,
        [
            {**figures, "started_s": -50.0, "ended_s": -20.0, "reason": "time"},
            {
                **dict.fromkeys(CHECKPOINT_FIGURES),
                "started_s": 12.5,
                "ended_s": None,
                "reason": "wal",
            },
        ],
    )
    run = store.get_run(rid)
    al = align(run)
    running = [c for c in al.checkpoints if c.running]
    assert [(c.start, c.ended_s, c.reason) for c in running] == [(12.5, 30.0, "wal")]
    # a checkpoint during the measured phase of one repetition only is a reason it differs
    other = store.get_run(rid)
    object.__setattr__(other, "checkpoints", [])
    est = spread([1000.0, 1300.0])
    assert est is not None
    reasons = unstable_reasons([run, other], est, [], 5.0)
    assert any("checkpoint ran during repetition" in r for r in reasons), reasons


def test_runs_table_drops_columns_before_folding_a_cell_and_is_plain_in_a_pipe(
    tmp_path: Path,
) -> None:
    from pgfsbench.report.terminal import runs_table

    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    runs = store.list_runs()
    text = render(runs_table(runs, plain=True, width=80), width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == len(runs) + 1  # a line a run: no cell folded over several
    assert not any(ch in text for ch in "│┃━─")
    wide = render(runs_table(runs, width=160), width=160)
    assert "load s" in wide and "space" in wide and "│" in wide


def test_space_alike_on_every_cell_is_a_line_not_a_chart_of_equal_bars() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from pgfsbench.report.html import space_alike

    def cell(data: float, wal: float | None) -> Any:
        return SimpleNamespace(
            space_data_bytes=SimpleNamespace(median=data),
            space_bytes=None,
            space_wal_bytes=None if wal is None else SimpleNamespace(median=wal),
        )

    mib = 2.0**20
    alike = [cell(59.7 * mib, 48 * mib), cell(59.6 * mib, 48 * mib), cell(60.1 * mib, 48 * mib)]
    line = space_alike(cast(Any, alike))
    assert line is not None and "alike on every cell" in line and "48.0 MiB" in line
    # one cell 5% larger in all, or its pg_wal twice another's: the chart shows it
    assert space_alike(cast(Any, [*alike, cell(65 * mib, 48 * mib)])) is None
    assert space_alike(cast(Any, [cell(60 * mib, 1 * mib), cell(59 * mib, 2 * mib)])) is None
    # unknown space, or a single cell: nothing to say alike
    assert space_alike(cast(Any, [cell(60 * mib, 48 * mib)])) is None
    unknown = SimpleNamespace(space_data_bytes=None, space_bytes=None, space_wal_bytes=None)
    assert space_alike(cast(Any, [alike[0], unknown])) is None


def test_a_campaign_waits_for_a_reader_of_its_sqlite_file(tmp_path: Path) -> None:
    """Another terminal reading the store (a shared lock held for 6 s, longer than
    SQLite's default 5 s busy timeout) delays the campaign's write; it does not end it."""
    path = tmp_path / "r.sqlite"
    Store(str(path)).start_campaign(StoredCampaign(name="first", spec_text="x", host="h"))
    store = Store(str(path))
    reader = sqlite3.connect(
        f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
    )
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM campaign").fetchone()  # the shared lock, held
    released = threading.Timer(6.0, lambda: reader.execute("COMMIT"))
    released.start()
    t0 = time.monotonic()
    try:
        cid = store.start_campaign(StoredCampaign(name="second", spec_text="x", host="h"))
    finally:
        released.join()
        reader.close()
    assert cid == 2 and time.monotonic() - t0 >= 5.5
