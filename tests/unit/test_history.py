"""pgfsbench history: change points over stored campaigns and what changed at each.

The two results files under tests/data/history are real campaigns (bench/history_corpus.py):
20 campaigns of one ext4 cell, one `pgfsbench run` each. In step.sqlite vm.dirty_bytes was
set to 262144 on the host (not in the spec) before campaign 11; in flat.sqlite nothing
changed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgfsbench.analysis.history import (
    analyse_series,
    environment_facts,
    history,
    series_key,
    what_changed,
)
from pgfsbench.report.html import render_report
from pgfsbench.report.loading import analyse
from pgfsbench.report.terminal import history_lines
from pgfsbench.results.records import StoredRun
from pgfsbench.results.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "history"
STEP = DATA / "step.sqlite"
FLAT = DATA / "flat.sqlite"
CHROMIUM = shutil.which("chromium")


def _runs(path: Path) -> list[StoredRun]:
    store = Store(str(path))
    try:
        return store.list_runs(status="ok")
    finally:
        store.close()


def test_a_sysctl_set_on_the_host_is_the_one_change_point_and_it_is_named() -> None:
    found = history(_runs(STEP))
    assert len(found) == 1
    h = found[0]
    assert h.key.cell == "ext4/default/default/tpcb-like" and len(h.runs) == 20
    groups = h.by_run()
    assert len(groups) == 1, [c.text(h.key) for c in h.change_points]
    first = groups[0][0].first
    assert first.campaign_id == 11  # the first campaign with the sysctl
    by_metric = {c.metric.name: c for c in groups[0]}
    tps = by_metric["tps"]
    assert tps.change.ratio is not None and tps.change.ratio < 0.8
    assert tps.change.ci_high is not None and tps.change.ci_high < 1.0
    assert (tps.n_before, tps.n_after) == (10, 10)
    assert tps.p_value < 0.001
    keys = {c.key: (c.before, c.after) for c in tps.changes}
    assert keys["vm.dirty_bytes"] == ("0", "262144")
    # dirty_ratio goes to 0 when dirty_bytes is set: the kernel's doing, recorded as such
    assert set(keys) <= {"vm.dirty_bytes", "vm.dirty_ratio"}, keys
    text = tps.text(h.key)
    assert re.search(r"TPS -\d+\.\d% \[-\d+\.\d%, -\d+\.\d%\]", text), text
    assert "from campaign 11 (run " in text and "vm.dirty_bytes 0 -> 262144" in text
    # the other figures stepped at the same run: grouped, the environment said once
    lines = [str(t) for t in history_lines(found)]
    assert sum("what changed: vm.dirty_bytes 0 -> 262144" in ln for ln in lines) == 1


def test_nothing_changed_no_change_point() -> None:
    found = history(_runs(FLAT))
    assert len(found) == 1 and len(found[0].runs) == 20
    assert found[0].change_points == (), [c.text(found[0].key) for c in found[0].change_points]
    lines = [str(t) for t in history_lines(found)]
    assert any("no change point" in ln for ln in lines)


def test_loop_numbers_and_paths_are_not_facts_but_devices_beneath_are() -> None:
    runs = _runs(STEP)
    a, b = environment_facts(runs[0]), environment_facts(runs[1])
    # each campaign had its own loop device, directory and filesystem UUID: none is a fact
    assert not [k for k in a if "loop" in a[k] and k.startswith("device loop")]
    assert all("/var/tmp/pgfsbench/cells" not in v for v in a.values()), [
        (k, v) for k, v in a.items() if "/var/tmp/pgfsbench/cells" in v
    ]
    assert "device data rotational" in a and "device vda rotational" in a
    assert a["kernel"] == b["kernel"] and "postgresql" in a and "vm.dirty_ratio" in a
    assert a["mkfs data"].startswith("mkfs.ext4 -F")
    assert "spec postgres.settings.shared_buffers" in a


def _with_env(run: StoredRun, **changes: object) -> StoredRun:
    env = json.loads(json.dumps(run.environment))
    env.update(changes)
    return dataclasses.replace(run, environment=env)


def test_what_changed_names_constant_facts_only() -> None:
    base = _runs(FLAT)[:6]
    before = [_with_env(r, kernel="6.1.0-18-amd64") for r in base[:3]]
    after = [_with_env(r, kernel="6.1.0-21-amd64") for r in base[3:]]
    # a fact that varies within a side explains nothing
    before = [_with_env(r, pgbench=f"pgbench 15.{i}") if i else r for i, r in enumerate(before)]
    changes, compared = what_changed(before, after)
    assert [(c.key, c.before, c.after) for c in changes] == [
        ("kernel", "6.1.0-18-amd64", "6.1.0-21-amd64")
    ]
    assert compared > 100  # every vm.* sysctl, the settings, the devices...
    # a fact only the newer runs record is not a change
    newer = [_with_env(r, zfs_module_version="2.1.11") for r in after]
    assert [c.key for c in what_changed(before, newer)[0]] == ["kernel"]


def test_a_step_with_nothing_recorded_says_so() -> None:
    runs = _runs(FLAT)
    values = [1000.0 + 10 * (i % 3) for i in range(10)] + [700.0 + 10 * (i % 3) for i in range(10)]
    stepped = [dataclasses.replace(r, throughput=v) for r, v in zip(runs, values, strict=True)]
    h = analyse_series(series_key(stepped[0]), stepped)
    tps = [c for c in h.change_points if c.metric.name == "tps"]
    assert len(tps) == 1 and tps[0].first.run_id == stepped[10].run_id
    assert tps[0].changes == ()
    assert "nothing recorded changed" in tps[0].what_changed()


def test_filters_host_cell_since_and_too_few_runs() -> None:
    runs = _runs(STEP)
    assert history(runs, host="elsewhere") == []
    assert history(runs, cell=lambda c: c.startswith("xfs")) == []
    cut = dt.datetime.fromisoformat(runs[14].started_at or "")
    late = history(runs, since=cut)
    assert len(late[0].runs) == 6 and late[0].change_points == ()
    short = history(runs[:5])
    assert short[0].change_points == ()
    assert sum("too few for a change point" in n for n in short[0].notes) == 1  # once
    # series too short are one line at the end of `history`, not a paragraph each
    from pgfsbench.report.terminal import history_lines

    lines = [t.plain for t in history_lines(short * 3)]
    assert len(lines) == 1 and lines[0].startswith("3 series with fewer than 6 runs")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_cli_terminal_and_json(tmp_path: Path) -> None:
    copy = tmp_path / "step.sqlite"
    shutil.copyfile(STEP, copy)  # the store may migrate or lock: never the committed file
    out = _cli("history", "--results", str(copy))
    assert out.returncode == 0, out.stderr
    assert "from campaign 11 (run" in out.stdout and "vm.dirty_bytes 0 -> 262144" in out.stdout
    data = json.loads(_cli("history", "--results", str(copy), "--json").stdout)
    cps = data[0]["change_points"]
    assert {c["metric"] for c in cps} >= {"tps"} and all(c["campaign_id"] == 11 for c in cps)
    tps = next(c for c in cps if c["metric"] == "tps")
    assert (
        tps["ci_pct"][1] < 0
        and {"key": "vm.dirty_bytes", "before": "0", "after": "262144"} in (tps["changes"])
    )
    assert len(data[0]["points"]["tps"]) == 20
    none = _cli("history", "--results", str(copy), "--host", "nowhere")
    assert none.returncode == 0 and "no ok runs match" in none.stdout
    bad = _cli("history", "--results", str(copy), "--since", "last tuesday")
    assert bad.returncode == 2 and "--since" in bad.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_has_a_history_section_drawn(tmp_path: Path) -> None:
    copy = tmp_path / "step.sqlite"
    shutil.copyfile(STEP, copy)
    store = Store(str(copy))
    try:
        latest = store.latest_campaign_id()
        assert latest is not None
        a = analyse(store, [latest])
    finally:
        store.close()
    assert len(a.history) == 1
    html = render_report(a.campaigns, a.runs, a.cells, a.highlights, history=a.history)
    assert ">History</h2>" in html
    report = tmp_path / "report.html"
    report.write_text(html)
    assert CHROMIUM is not None
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=20000",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    assert 'data-rendered="yes"' in dom and "data-errors=" not in dom
    drawn = re.findall(r'<div class="chart js-plotly-plot" id="(history-[^"]+)"', dom)
    assert len(drawn) == 3, drawn  # TPS, p99 and load time
    section = dom[dom.index('id="history"') :]
    assert "From campaign 11 (run" in section and "vm.dirty_bytes 0 -&gt; 262144" in section
    # a report of one campaign of a series run once has no history section
    one = render_report(a.campaigns, a.runs, a.cells, a.highlights)
    assert ">History</h2>" not in one


def test_zfs_versions_parameters_and_spec_edits_are_facts_pool_names_are_not() -> None:
    base = _runs(FLAT)[:6]

    def zfs(run: StoredRun, i: int, version: str, arc_max: str, recordsize: str) -> StoredRun:
        details = {
            "implementation": f"OpenZFS {version} (kernel module)",
            "zfs_version": version,
            "pool": {"name": f"pgfsb-{i}", "layout": "stripe", "status": f"pool: pgfsb-{i}"},
            "module_parameters": {"zfs_arc_max": arc_max},
            "data": {"fs": "zfs", "source": f"pgfsb-{i}/data", "properties": {"recordsize": "16K"}},
        }
        params = json.loads(json.dumps(run.params))
        params["storage"]["data"] = {"properties": {"recordsize": recordsize}}
        return dataclasses.replace(run, storage_details=details, params=params)

    before = [zfs(r, i, "2.1.11", "0", "16K") for i, r in enumerate(base[:3])]
    after = [zfs(r, i + 3, "2.2.4", "0", "8K") for i, r in enumerate(base[3:])]
    changes = {c.key: (c.before, c.after) for c in what_changed(before, after)[0]}
    assert changes["storage zfs_version"] == ("2.1.11", "2.2.4")
    assert changes["spec storage.data.properties.recordsize"] == ("16K", "8K")
    assert not [k for k in changes if "pool.name" in k or "status" in k]
    assert "storage module_parameters.zfs_arc_max" not in changes  # the same on both sides
