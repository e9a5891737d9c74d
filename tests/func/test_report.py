"""The HTML report, rendered by a real browser (headless Chromium)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.func.conftest import pgfsbench, write_spec

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_report_renders_its_charts_in_chromium(base: Path) -> None:
    spec = write_spec(base / "s.toml", """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "3s"
warmup = "0s"
repetitions = 2
[storage.ram]
fs = "tmpfs"
size = "512M"
[storage.ext4]
fs = "ext4"
device = "loop:512M"
""")
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    report = base / "report.html"
    pgfsbench("report", "--results", str(results), "-o", str(report))
    html = report.read_text()
    assert "cdn" not in html.lower().split("<script>")[0]  # self-contained: no external loads
    profile = base / "chromium-profile"
    assert CHROMIUM is not None
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                          "--virtual-time-budget=10000", "--dump-dom", report.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert 'data-rendered="yes"' in dom  # every Plotly.newPlot ran without an exception
    assert dom.count('class="main-svg"') >= 8  # the charts were drawn
    for text in ("ram", "ext4", "TPS median", "Backends by wait event"):
        assert text in dom
    shot = base / "report.png"
    subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--window-size=1300,2400",
                    "--virtual-time-budget=10000", f"--screenshot={shot}", report.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 50_000
    shutil.copy(shot, Path("/tmp/pgfsbench-report-test.png"))
