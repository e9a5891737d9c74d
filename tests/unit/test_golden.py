"""The terminal summary and the Markdown report pinned by their exact output (golden files
in tests/data/golden): a change of words, columns or verdicts shows here as a diff.
PGFSBENCH_UPDATE_GOLDEN=1 writes the files anew (then read the diff before committing)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgfsbench.analysis.summary import highlights, summarise
from pgfsbench.report.markdown import render_markdown
from pgfsbench.report.terminal import highlight_lines, summary_table
from pgfsbench.results.records import StoredCampaign, StoredRun
from tests.unit.test_store_report import render

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"


def campaign_runs() -> list[StoredRun]:
    """A campaign of four storages and a RAM reference, 5 runs each, every verdict kind:
    xfs faster, btrfs slower, ext4-noatime equivalent, zfs undecided (noisy), tmpfs a
    reference; each run 60 s right after the load."""
    values = {
        "ext4": [1000, 1010, 990, 1005, 995],
        "xfs": [1200, 1210, 1190, 1205, 1195],
        "btrfs": [700, 705, 695, 702, 698],
        "ext4-noatime": [1000, 1002, 998, 1001, 999],
        "zfs": [800, 1400, 1000, 1250, 850],
        "tmpfs": [5000, 5050, 4950, 5020, 4980],
    }
    runs: list[StoredRun] = []
    for s, vals in values.items():
        for i, v in enumerate(vals):
            runs.append(
                StoredRun(
                    run_id=len(runs) + 1,
                    campaign_id=1,
                    cell=f"{s}/default/default/tpcb-like",
                    storage=s,
                    fs=s.split("-")[0],
                    postgres="default",
                    kernel="default",
                    workload="tpcb-like",
                    repetition=i + 1,
                    status="ok",
                    throughput=float(v),
                    throughput_unit="tps",
                    scale=100,
                    clients=16,
                    duration_s=60.0,
                    latency_ms={"p99": 10.0 + i},
                    params={"storage": {"reference": s == "tmpfs"}, "equivalence_margin": 0.02},
                    metrics={
                        "window": {
                            "estimand": "60 s right after the load",
                            "kind": "duration",
                            "stratum": "0",
                        }
                    },
                    host="vm",
                )
            )
    return runs


def check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PGFSBENCH_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: PGFSBENCH_UPDATE_GOLDEN=1 writes it"
    assert text == path.read_text(), f"{name} differs from its golden file"


def test_the_terminal_summary_is_pinned() -> None:
    cells = summarise(campaign_runs())
    out = render(summary_table(cells, title="golden: campaign 1", width=160))
    out += "".join(render(line) for line in highlight_lines(highlights(cells)))
    check("summary.txt", out)


def test_the_markdown_report_is_pinned() -> None:
    runs = campaign_runs()
    cells = summarise(runs)
    camp = StoredCampaign(id=1, name="golden", host="vm", started_at="2026-12-01T10:00:00")
    text = render_markdown([camp], cells, highlights(cells), ["a warning to read"], runs)
    check("report.md", text)


@pytest.mark.parametrize("name", ["summary.txt", "report.md"])
def test_the_golden_files_hold_every_verdict_kind(name: str) -> None:
    text = (GOLDEN / name).read_text()
    for word in ("faster", "slower", "equivalent", "undecided", "reference"):
        assert word in text, (name, word)
