"""The documentation site builds with no warning (links, anchors, nav), its reference
pages come from the code, and the README stays a few screens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pgfsbench.spec.kinds import STORAGE_KINDS, WORKLOAD_TOOLS
from pgfsbench.spec.models import Defaults
from pgfsbench.spec.reference import render, render_schema

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "site" / "reference" / "spec" / "index.html").read_text()
    assert "stall_fraction" in page and "storage_class" in page
    cli_page = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--destroy-data-on" in cli_page and "pgfsbench results summary" in cli_page
    # on a phone each table cell is a line with its column's name (stylesheets/extra.css)
    assert 'data-label="default"' in page
    assert (tmp_path / "site" / "stylesheets" / "extra.css").is_file()


def test_the_spec_reference_has_every_kind_tool_and_default() -> None:
    text = render()
    for kind in STORAGE_KINDS:
        assert f'fs = "{kind.name}"' in text
    for tool in WORKLOAD_TOOLS:
        assert f'tool = "{tool.name}"' in text
    for name in Defaults.model_fields:
        assert f"| `{name}` |" in text
    # a field's own comment travels with it
    assert "settled by an anytime-valid confidence sequence" in text


def test_the_schema_page_lists_every_column() -> None:
    from pgfsbench.results import schema

    text = render_schema()
    for table in schema.metadata.sorted_tables:
        assert f"## {table.name}" in text
        for column in table.columns:
            assert f"| `{column.name}` |" in text


def test_the_readme_is_a_few_screens_and_names_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    # run as root, as the machine is: `sudo` is not there on a Debian 12 root install
    commands = [ln for ln in readme.splitlines() if ln.startswith("bash scripts/")]
    assert [c.split()[1] for c in commands] == ["scripts/demo.sh", "scripts/test.sh"]
    assert not any(ln.startswith("sudo ") for ln in readme.splitlines())
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_every_spec_key_is_described() -> None:
    """The spec reference has no key without a word on what it is (a field without a
    comment in spec/models.py or spec/cluster.py fails here, by its table and name)."""
    empty: list[str] = []
    table = ""
    for line in render().splitlines():
        if line.startswith("### "):
            table = line[4:].split(" {")[0]
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not cells[-1]:
                empty.append(f"{table}: {cells[0]}")
    assert not empty, empty


def test_example_times_in_the_docs_are_plans_within_a_quarter() -> None:
    """Each "(plan)" time of docs/examples.md, and the README's, within 25% of what `plan`
    says today for the command given (a doc's time drifts as the estimates improve)."""
    import re
    import shlex

    from pgfsbench.plan import make_plan
    from pgfsbench.spec import load_spec

    commands: dict[str, str] = {}
    checked = 0
    for doc in (ROOT / "docs" / "examples.md", ROOT / "README.md"):
        for line in doc.read_text().splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("| `") or len(cells) < 3:
                continue
            name = cells[0].strip("`")
            if doc.name == "examples.md":
                commands[name] = cells[2].split("`")[1]
            m = re.match(r"([0-9.]+) (min|s) \(plan", cells[-1])
            if not m or name not in commands:
                continue
            stated = float(m.group(1)) * (60 if m.group(2) == "min" else 1)
            args = shlex.split(commands[name])
            sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
            only = [args[i + 1] for i, a in enumerate(args) if a == "--only"]
            plan = make_plan(load_spec(ROOT / "examples" / f"{name}.toml", sets), None, only)
            assert abs(plan.estimated_seconds - stated) <= 0.25 * plan.estimated_seconds, (
                doc.name,
                name,
                stated,
                plan.estimated_seconds,
            )
            checked += 1
    assert checked >= 10


def _prose(text: str) -> str:
    """A page without its fenced code blocks (an example's output may show a date)."""
    import re

    return re.sub(r"```.*?```", "", text, flags=re.S)


def test_user_pages_cite_no_dates_or_commit_ids() -> None:
    """The manual reads as a manual: measurement logs, with their dates and commits, are
    the validation pages' (and the developers' page); a user page links to them."""
    import re

    date = re.compile(r"\b20\d\d-\d\d-\d\d\b")
    commit = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        rel = page.relative_to(ROOT).as_posix()
        if rel.startswith("docs/validation/") or rel == "docs/development.md":
            continue
        text = page.read_text()
        found += [f"{rel}: {m}" for m in date.findall(_prose(text))]
        found += [f"{rel}: {m}" for m in commit.findall(text)]
    assert not found, found


def test_the_cli_reference_has_every_command_and_option() -> None:
    from pgfsbench.cli import _register, command
    from pgfsbench.cli.reference import render as render_cli

    text = render_cli()
    _register()

    def walk(cmd: object, path: str) -> None:
        if path != "pgfsbench":
            assert f"# {path}\n" in text, path
        for p in getattr(cmd, "params", []):
            for opt in getattr(p, "opts", []):
                if opt.startswith("-") and opt != "--help":
                    assert f"`{opt}`" in text, (path, opt)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            if not getattr(sub, "hidden", False):
                walk(sub, f"{path} {name}")

    walk(command(), "pgfsbench")
    assert "<!-- cli reference -->" in (ROOT / "docs" / "reference" / "cli.md").read_text()
