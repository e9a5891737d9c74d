"""What a transaction costs on a cloud volume: published prices with their sources, the
volumes a run capped or emulated, one's own prices, and the tables that show them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.analysis.cost import INSTANCE_NOTE, load_price_file, run_cost
from pgfsbench.analysis.summary import Highlights, summarise
from pgfsbench.report.loading import cell_json
from pgfsbench.report.markdown import render_markdown
from pgfsbench.report.terminal import cost_lines, fmt_cost
from pgfsbench.results.records import StoredRun
from pgfsbench.spec.device_models import resolve_model
from pgfsbench.spec.profiles import GIB, PRICES, volume_cost

CELL = "ext4-gp3/default/default/tpcb-like"


def capped(profile: str, gib: float, iops: int, mbps: float, rep: int, tps: float) -> StoredRun:
    return StoredRun(
        run_id=rep,
        cell=CELL,
        storage="ext4-gp3",
        fs="ext4",
        workload="tpcb-like",
        repetition=rep,
        throughput=tps,
        storage_details={
            "device_limits": [
                {
                    "role": "data",
                    "device": "/dev/loop0",
                    "profile": profile,
                    "capacity_gib": gib,
                    "read_iops": iops,
                    "write_iops": iops,
                    "read_bps": int(mbps * 1e6),
                    "write_bps": int(mbps * 1e6),
                }
            ]
        },
    )


def test_every_price_says_where_it_was_read() -> None:
    for name, price in PRICES.items():
        assert price.source and price.read and price.region, name
        assert price.per_gib_month is not None or price.tiers, name


def test_gp3_at_its_baseline_costs_its_capacity_and_more_iops_cost_more() -> None:
    base = volume_cost("gp3", 300, 3000, 125 * 1.048576)
    assert base is not None and base.usd_month == pytest.approx(24.00)
    more = volume_cost("gp3", 300, 6000, 250 * 1.048576)
    assert more is not None and more.usd_month is not None
    # 300 GiB x 0.08 + 3,000 IOPS x 0.005 + 131 MB/s x 0.04
    assert more.usd_month == pytest.approx(24 + 15 + (250 - 125) * 1.048576 * 0.04, abs=0.01)
    assert "3,000 IOPS x $0.005" in more.text()
    assert volume_cost("hdd-7200", 300, 78, 150) is None  # not a cloud volume: no cost
    azure = volume_cost("azure-premium", 300, 2300, 150)
    assert azure is not None and azure.usd_month == pytest.approx(73.22)  # P20
    big = volume_cost("azure-premium", 4000, 7500, 250)
    assert big is not None and big.usd_month is None and "tiers read up to" in big.why
    # io2: every provisioned IOPS is paid; the rate above 32,000 was not read
    io2 = volume_cost("io2", 100, 20_000, 312.5)
    assert io2 is not None and io2.usd_month == pytest.approx(100 * 0.125 + 20_000 * 0.065)
    over = volume_cost("io2", 1000, 64_000, 1000)
    assert over is not None and over.usd_month is None and "32,000" in over.why
    unknown = volume_cost("essd-pl1", 300, 16800, 270)
    assert unknown is not None and unknown.usd_month is None and "--price-file" in unknown.why


def test_a_capped_cell_gets_a_monthly_cost_and_a_cost_per_1000_tps() -> None:
    runs = [
        capped("gp3", 300, 3000, 131.072, rep, tps)
        for rep, tps in ((1, 1900.0), (2, 2000.0), (3, 2100.0))
    ]
    cell = summarise(runs)[0]
    assert cell.cost is not None and cell.cost.usd_month == pytest.approx(24.0)
    assert cell.usd_per_1000_tps == pytest.approx(12.0)  # $24 / 2 (2,000 TPS)
    assert fmt_cost(cell) == "$24.00 · $12.00"
    lines = cost_lines([cell])
    assert "$12.00 a month per 1,000 TPS sustained" in lines[0] and INSTANCE_NOTE in lines[-1]
    data = cell_json(cell)
    assert data["cost"]["usd_month"] == pytest.approx(24.0)
    assert data["cost"]["volumes"][0]["source"].startswith("AWS EBS pricing page")
    md = render_markdown([], [cell], Highlights(), [], runs)
    assert "What the volumes cost" in md and "per 1,000 TPS" in md


def test_an_emulated_cloud_volume_is_priced_at_its_drive_size() -> None:
    model = resolve_model("gp2", 4 * GIB, drive_bytes=500 * GIB)
    run = StoredRun(
        run_id=1,
        cell="c",
        storage_details={
            "emulated_devices": {
                "/dev/loop3": {
                    "role": "data",
                    "device_model": "gp2",
                    "device_model_params": model.params,
                }
            }
        },
    )
    cost = run_cost(run)
    assert cost is not None and cost.usd_month == pytest.approx(50.0)  # 500 GiB x $0.10


def test_ones_own_prices_win_and_a_bad_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "prices.toml"
    f.write_text(
        '[essd-pl1]\nregion = "cn-hangzhou"\nsource = "our bill"\nper_gib_month = 0.15\n'
        "[gp3]\nper_gib_month = 0.1\n"
    )
    prices = load_price_file(f)
    run = capped("essd-pl1", 300, 16800, 270, 1, 1000.0)
    assert run_cost(run) is not None and run_cost(run).usd_month is None  # type: ignore[union-attr]
    mine = run_cost(run, prices)
    assert mine is not None and mine.usd_month == pytest.approx(45.0)
    assert "cn-hangzhou" in mine.text()
    bad = tmp_path / "bad.toml"
    bad.write_text("[gp3]\nper_gb = 1\n")
    with pytest.raises(ValueError, match="unknown key"):
        load_price_file(bad)


def test_an_unknown_price_is_explained_once() -> None:
    runs = [capped("essd-pl1", 300, 16800, 270, rep, 1000.0) for rep in (1, 2)]
    lines = cost_lines(summarise(runs))
    assert lines[0].count("no price") == 1 and lines[0].endswith(": cost unknown"), lines[0]
