"""Text from a results store (names, errors, outside processes' command lines) is shown,
never run: the HTML report opened in headless Chromium carries no injected effect, and the
Markdown and terminal outputs carry no markup or escape sequence of it raw."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from pgfsbench.report.html import script_json
from tests.unit.test_cli_answers import cli

DATA = Path(__file__).resolve().parents[1] / "data"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PAYLOAD = "a</script><script>document.title=`PWNED5`</script><img src=x onerror=alert(1)>"


def test_script_json_reads_back_as_the_same_text_and_holds_no_tag() -> None:
    import json

    value = {"name": PAYLOAD + "<!-- & \u2028\u2029"}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == value


def hostile_store(tmp_path: Path) -> Path:
    store = tmp_path / "hostile.sqlite"
    shutil.copy(DATA / "results" / "v1-pgfsbench-0.1.0.sqlite", store)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run SET storage = ?, error = ?", (PAYLOAD, PAYLOAD))
        conn.execute("UPDATE run SET cell = ? || '/' || id", (PAYLOAD,))
    return store


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_a_hostile_name_in_the_store_does_nothing_in_the_report(tmp_path: Path) -> None:
    store = hostile_store(tmp_path)
    report = tmp_path / "r.html"
    done = cli("report", "--results", str(store), "-o", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    html = report.read_text()
    assert "</script><script>document.title" not in html
    assert CHROMIUM is not None
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    ).stdout
    assert "PWNED5" not in dom.split("</title>")[0]  # the title is the report's own
    assert '<img src="x" onerror' not in dom and "<img src=x onerror" not in dom
    assert "pgfsbench" in dom.split("</title>")[0].lower()
    # the figures were read: the charts were drawn from them
    assert "plotly" in dom.lower()


def test_markdown_and_terminal_show_hostile_text_inert(tmp_path: Path) -> None:
    store = hostile_store(tmp_path)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run SET storage = ?", ("x\x1b]0;PWNED\x07\x1b[2J\rname",))
    md = tmp_path / "r.md"
    done = cli("report", "--results", str(store), "-o", str(md), "--format", "markdown")
    assert done.returncode == 0, done.stdout + done.stderr
    text = md.read_text()
    assert "<script>" not in text and "\x1b" not in text and "\x07" not in text
    listed = cli("results", "list", "--results", str(store))
    assert listed.returncode == 0, listed.stderr
    assert "\x1b]0;" not in listed.stdout and "\x07" not in listed.stdout
