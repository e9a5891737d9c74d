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


RICH_MARKUP = "[link=https://evil.example/x]click[/link] [/unbalanced] [bold red]loud"


def test_stored_names_are_never_read_as_rich_markup(tmp_path: Path) -> None:
    """A name like ``[link=...]`` made a terminal hyperlink, and an unbalanced ``[/x]``
    crashed `results list`: every command shows stored text as it is."""
    store = hostile_store(tmp_path)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run SET cell = ? || '/' || id, error = ?", (RICH_MARKUP, RICH_MARKUP))
        conn.execute("UPDATE campaign SET name = ?", (RICH_MARKUP,))
    for argv in (
        ["results", "list", "--results", str(store)],
        ["results", "summary", "--results", str(store)],
        ["results", "show", "1", "--results", str(store)],
    ):
        done = cli(*argv)
        assert done.returncode == 0, f"{argv}: {done.stdout[-500:]}{done.stderr[-500:]}"
        assert "\x1b]8;" not in done.stdout  # no OSC 8 hyperlink
        assert "[/unbalanced]" in done.stdout or "unbalanced" in done.stdout, argv


def test_hostile_text_makes_no_markdown_block_link_or_image(tmp_path: Path) -> None:
    """A newline in a stored error started new Markdown blocks (a heading, a remote image):
    each stored text is one inert run of Markdown."""
    store = hostile_store(tmp_path)
    evil = "oops\n# Heading\n![t](https://evil.example/p.png) [x](javascript:alert(1)) <b>"
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run SET status = 'failed', error = ?", (evil,))
        conn.execute("UPDATE run SET cell = ? || id", ("![i](https://evil.example/c.png)",))
    md = tmp_path / "r.md"
    done = cli("report", "--results", str(store), "-o", str(md), "--format", "markdown")
    assert done.returncode == 0, done.stdout + done.stderr
    text = md.read_text()
    assert "\n# Heading" not in text
    assert "![" not in text.replace("\\!\\[", "") and "](" not in text.replace("\\](", "")
    assert "<b>" not in text


def test_plotly_text_is_given_as_entities() -> None:
    """plotly reads <a href>, <b>, <br> in labels and hover text: the template gives it
    every stored text through its entity escape."""
    template = (Path(__file__).resolve().parents[2] / "src/pgfsbench/report/templates").joinpath(
        "report.html.j2"
    )
    js = template.read_text()
    for raw in ("y: b.names,", "name: l.name,", "text: e.label,", "text: m.text, mode", "name: e,"):
        assert raw not in js, raw
    assert 'const P = s => String(s).replace(/&/g, "&amp;")' in js


def test_every_console_is_the_plain_one() -> None:
    """A console made elsewhere would read stored text as markup again."""
    src = Path(__file__).resolve().parents[2] / "src" / "pgfsbench"
    made = [
        f"{p.relative_to(src)}:{i}"
        for p in src.rglob("*.py")
        if p.name != "inert.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "Console(" in line and "plain_console(" not in line
    ]
    assert made == []


def test_a_csv_export_carries_no_escape_sequence_and_is_private(tmp_path: Path) -> None:
    import stat

    store = hostile_store(tmp_path)
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE run SET storage = ?", ("x\x1b]0;PWNED\x07\x1b[2Jname",))
    out = tmp_path / "runs.csv"
    done = cli("results", "export", str(out), "--results", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    assert "\x1b" not in text and "\x07" not in text and "PWNED" in text
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_the_demos_next_commands_carry_no_password() -> None:
    from pgfsbench.cli.run import next_commands

    lines = next_commands("postgresql://bob:hunter2@db/team", [], [1])
    assert lines and not any("hunter2" in line for line in lines)


def test_a_forged_pid_in_postmaster_pid_is_no_postmaster(tmp_path: Path) -> None:
    """postmaster.pid is the server user's file: a pid written there (this test's own
    process, init) is never taken for the server's and acted on."""
    import os

    from pgfsbench.postgres.instance import postmaster_of

    for pid in (os.getpid(), 1):
        assert not postmaster_of(pid, tmp_path, "postgres")
        assert not postmaster_of(pid, tmp_path, None)
