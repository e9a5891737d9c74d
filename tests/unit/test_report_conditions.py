"""A reference storage (the RAM ceiling) is never the best nor the baseline; every report
states the conditions of its results; Markdown lists are whole."""

from __future__ import annotations

from typing import Any

from pgfsbench.analysis.stalls import StallEpisode
from pgfsbench.analysis.summary import highlights, summarise
from pgfsbench.analysis.warnings import reading_warnings
from pgfsbench.report.conditions import conditions, run_conditions
from pgfsbench.report.html import render_report
from pgfsbench.report.markdown import render_markdown
from pgfsbench.report.terminal import fmt_vs
from pgfsbench.results.records import StoredCampaign, StoredRun


def run(
    cell: str,
    fs: str,
    rep: int,
    tps: float,
    *,
    reference: bool = False,
    mount: str = "rw,relatime",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    storage = cell.split("/")[0]
    return {
        "run_id": rep + 10 * hash(cell) % 1000,
        "cell": cell,
        "storage": storage,
        "fs": fs,
        "postgres": "default",
        "kernel": "default",
        "workload": "tpcb-like",
        "repetition": rep,
        "status": "ok",
        "throughput": tps,
        "tps": tps,
        "latency_avg_ms": 1.0,
        "load_seconds": 1.0,
        "space_bytes": 1000,
        "implementation": None,
        "fuse": False,
        "scale": 2,
        "clients": 4,
        "threads": 2,
        "duration_s": 5.0,
        "warmup_s": 2.0,
        "host": "vm",
        "campaign_id": 1,
        "warnings": [],
        # no checkpoint in the window, as the run recorded it (its stratum)
        "metrics": {"window": {"stratum": "0", "kind": "duration"}},
        "params": {
            "storage": {"fs": fs, "device": "loop:1G", "reference": reference},
            "postgres": {"settings": settings or {"shared_buffers": "128MB"}},
            "kernel": {"sysctl": {}},
            "workload": {
                "tool": "pgbench",
                "builtin": "tpcb-like",
                "clients": 4,
                "threads": 2,
                "protocol": "simple",
            },
        },
        "environment": {
            "hostname": "vm",
            "cpus": 2,
            "cpu_model": "AMD EPYC",
            "memory_bytes": 24 << 30,
            "distribution": "Debian GNU/Linux 12",
            "kernel": "6.1.0",
            "postgresql": "postgres (PostgreSQL) 15.18",
            "pg_settings_changed": [
                {"name": "shared_buffers", "setting": "16384", "unit": "8kB"},
                {"name": "wal_init_zero", "setting": "on", "unit": None},
            ],
        },
        "storage_details": {
            "data": {
                "fs": fs,
                "mount_options": mount,
                "mkfs_argv": [f"mkfs.{fs}", "-f", "/dev/loop0"],
            }
        },
    }


def campaign() -> list[StoredRun]:
    runs = []
    for cell, fs, tps, ref in (
        ("tmpfs/default/default/tpcb-like", "tmpfs", 6500.0, True),
        ("ext4/default/default/tpcb-like", "ext4", 2600.0, False),
        ("xfs/default/default/tpcb-like", "xfs", 2900.0, False),
    ):
        for rep, jitter in enumerate((0.98, 1.0, 1.02), 1):
            runs.append(StoredRun.from_row(run(cell, fs, rep, tps * jitter, reference=ref)))
    return runs


def test_a_reference_is_never_the_best_nor_the_baseline() -> None:
    cells = summarise(campaign())
    tmpfs, ext4, xfs = cells
    assert tmpfs.reference and not ext4.reference
    assert ext4.baseline is None  # the first configuration that is not a reference
    assert tmpfs.baseline == ext4.label and xfs.baseline == ext4.label
    assert fmt_vs(tmpfs).endswith("ref") and "▲" not in fmt_vs(tmpfs)
    lines = highlights(cells).lines
    assert lines[0].startswith("tpcb-like") and "best xfs at" in lines[0], lines
    assert any(
        "reference tmpfs: 6,499 tps; the highest geometric mean (xfs) reaches 45% of it" in ln
        for ln in lines
    )
    html = render_report(
        [StoredCampaign(id=1, name="quick")], campaign(), cells, highlights(cells), inline_js=False
    )
    assert "tmpfs (reference)" in html and 'class=" reference"' in html
    # drawn as a line across the throughput chart, not as a bar
    assert '"refs":[{"name":"tmpfs","value":6500.0,"unsafe":""}]' in html


def test_the_conditions_of_a_campaign_and_what_differs_by_configuration() -> None:
    runs = campaign()
    runs[3].storage_details["data"]["mount_options"] = "rw,noatime"
    c = conditions(runs)
    common = dict(c.common)
    assert common["duration"] == "5 s measured after 2 s of warm-up"
    assert common["clients"] == "4 client(s), 2 thread(s)" and common["scale"] == "2"
    assert common["repetitions"] == "3"
    assert common["PostgreSQL"] == "postgres (PostgreSQL) 15.18"
    assert "shared_buffers = 128.0 MiB" in common["PostgreSQL settings (in effect)"]
    assert common["host"].startswith("vm: 2 CPU(s) AMD EPYC, 24.0 GiB RAM")
    assert c.differing == ("storage",)
    by_cell = dict(c.per_cell)
    assert by_cell["xfs/default/default/tpcb-like"] == (
        "data: xfs on loop:1G, made with `mkfs.xfs -f`, mounted rw,relatime",
    )
    one = run_conditions(runs[0])
    assert one["kernel settings"] == "as the host had them"
    assert common["CPUs"] == "every CPU shared by the server and the clients"
    runs[0].metrics["cpus"] = {"server": "0", "clients": "1-3", "postmaster_at_end": "0"}
    assert run_conditions(runs[0])["CPUs"] == (
        "PostgreSQL and its pooler on CPU 0, pgfsbench and the clients on CPU 1-3 (server_cpus)"
    )
    for r in runs:  # a configuration is shown by its runs (the last one that ended well)
        if r.cell == runs[0].cell:
            r.metrics["cpus"] = {"server": "0", "clients": "1-3"}
    assert "CPUs" in conditions(runs).differing
    # a run measured with the load still on its way to the disk says so
    runs[0].params["write_out"] = False
    assert run_conditions(runs[0])["duration"] == (
        "5 s measured after 2 s of warm-up, started as soon as the load ended (not written "
        "out first: write_out = false)"
    )


def test_markdown_states_the_conditions_and_lists_every_cell() -> None:
    runs = [
        StoredRun.from_row(run(f"c{i}/default/default/tpcb-like", "ext4", 1, 1000.0 + i))
        for i in range(7)
    ]
    cells = summarise(runs)
    text = render_markdown(
        [StoredCampaign(id=1, name="t")], cells, highlights(cells), reading_warnings(runs), runs
    )
    assert "## Conditions" in text and "| duration | 5 s measured after 2 s of warm-up |" in text
    # the warning about too few repetitions names all seven cells, not four and "..."
    warning = next(ln for ln in text.splitlines() if "fewer than 3 ok repetitions" in ln)
    assert all(f"c{i}/default" in warning for i in range(7)) and "..." not in warning


def test_the_zfsrc_warning_says_which_of_its_settings_each_cell_ran_with() -> None:
    """A cell that set max-arc-size itself still ran with the other two settings of
    /etc/zfs/zfsrc: it was said to run with none of them."""
    zfsrc = (
        "vdev-cache-size = 10\nmax-arc-size = 100\nzfs-prefetch-disable\nfuse-attr-timeout = 3600"
    )
    runs = [
        StoredRun(
            storage="zfs-plain",
            storage_details={
                "zfs_fuse_daemon": {
                    "argv": ["zfs-fuse", "--pidfile", "p", "--no-kstat-mount"],
                    "zfsrc": zfsrc,
                }
            },
        ),
        StoredRun(
            storage="zfs-arc",
            storage_details={
                "zfs_fuse_daemon": {
                    "argv": ["zfs-fuse", "--pidfile", "p", "--max-arc-size", "1024"],
                    "zfsrc": zfsrc,
                }
            },
        ),
    ]
    from pgfsbench.analysis.warnings import _zfsrc

    (text,) = _zfsrc(runs)
    assert "zfs-plain ran with all of them" in text
    assert (
        "zfs-arc with vdev-cache-size = 10, zfs-prefetch-disable (it set max-arc-size "
        "itself)" in text
    )
    assert "no cell" not in text


def test_results_show_counts_histogram_buckets_as_buckets_and_lists_episodes() -> None:
    from rich.console import Console

    from pgfsbench.report.terminal import run_detail

    run = StoredRun.from_row(
        {
            "run_id": 3,
            "cell": "e/d/d/w",
            "series": {
                "tps": {"values": [1.0] * 20},
                "latency_histogram": {"values": [[600, 1]] * 536},
            },
        }
    )
    episode = StallEpisode(
        start_s=5,
        end_s=9,
        min_tps=0,
        delayed_tx=100,
        max_latency_ms=4000.0,
        cause="locks",
        confidence="high",
        evidence=("held by pid 42 (a session from outside the workload)",),
        alternatives=(("fs_frozen", 0.2, "no benchmark process was asleep in the kernel"),),
        median_tps=25.0,
    )
    console = Console(width=200, record=True)
    console.print(run_detail(run, [episode]))
    text = console.export_text()
    assert "latency_histogram (536 buckets)" in text and "tps (20 s)" in text
    assert "held by pid 42" in text and "ruled out: not the filesystem was frozen" in text
    assert "lock waits behind a blocking transaction (high confidence)" in text


def test_campaign_times_to_the_second_with_how_long_and_sizes_in_words() -> None:
    from pgfsbench.report.html import campaign_line, readable
    from pgfsbench.report.terminal import when

    c = StoredCampaign(
        id=3,
        name="q",
        host="vm",
        started_at="2026-11-27T13:52:54.118472+00:00",
        ended_at="2026-11-27T13:54:59.500000+00:00",
        status="done",
    )
    assert campaign_line(c) == (
        "campaign 3 on vm: started 2026-11-27 13:52:54 UTC, took 2 min, status done"
    )
    assert when(None) == "-"
    assert readable("memory_bytes", 25276063744) == "23.5 GiB (25,276,063,744 bytes)"
    assert readable("kernel", "6.1") == "6.1"


def test_results_show_states_the_host_and_settings_rounded_and_without_raw_dicts() -> None:
    from rich.console import Console

    from pgfsbench.report.terminal import run_detail

    run = StoredRun.from_row(
        {
            "run_id": 7,
            "cell": "ext4/p/k/rw",
            "throughput": 1615.337812,
            "latency_avg_ms": 2.4765432,
            "started_at": "2026-11-27T13:52:54.118472+00:00",
            "load_phases": {"generate": 0.2345678, "vacuum": 0.1},
            "fuse": False,
            "environment": {
                "hostname": "vm",
                "cpus": 2,
                "cpu_model": "AMD EPYC",
                "memory_bytes": 25276063744,
                "distribution": "Debian 12",
                "kernel": "6.1.0-18-amd64",
                "postgresql": "PostgreSQL 15.18",
            },
            "params": {"postgres": {"settings": {"shared_buffers": "128MB"}}},
        }
    )
    console = Console(width=200, record=True)
    console.print(run_detail(run))
    text = console.export_text()
    assert "1,615.3" in text and "1615.337812" not in text and "2.48" in text
    assert "2026-11-27 13:52:54 UTC" in text and ".118472" not in text
    assert "generate 0.235, vacuum 0.1" in text and "{" not in text
    assert "kernel 6.1.0-18-amd64" in text and "2 CPU(s) AMD EPYC" in text
    assert "23.5 GiB RAM" in text and "PostgreSQL 15.18" in text
    assert "shared_buffers" in text


def test_conditions_state_pgbench_the_load_and_the_disk_beneath() -> None:
    row = run("ext4/default/default/tpcb-like", "ext4", 1, 2600.0)
    row["environment"]["pgbench"] = "pgbench (PostgreSQL) 15.18"
    row["environment"]["devices"] = {
        "loop0": {"rotational": "0"},
        "vda": {
            "rotational": "1",
            "scheduler": "none [mq-deadline] kyber",
            "write_cache": "write back",
        },
    }
    row["metrics"] = {"block_stack": {"under_test": ["loop0"], "beneath": ["vda"]}}
    row["load_phases"] = {"drop tables": 0.0, "client-side generate": 0.1, "vacuum": 0.05}
    said = run_conditions(StoredRun.from_row(row))
    assert said["pgbench"] == "pgbench (PostgreSQL) 15.18"
    assert said["load"] == "pgbench -i, client-side generation"
    assert said["disk beneath"] == "vda (rotational, scheduler mq-deadline, write cache write back)"
    html = render_report(
        [],
        [StoredRun.from_row(row)],
        summarise([StoredRun.from_row(row)]),
        highlights(summarise([StoredRun.from_row(row)])),
        inline_js=False,
    )
    assert "disk beneath" in html and "client-side generation" in html
