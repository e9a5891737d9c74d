"""--help reads like a manual, not like Python: placeholders in capitals (SPEC, FILE, N),
help on every option, the commands in the order of the work."""

from __future__ import annotations

import re
from typing import Any

import pytest

from pgfsbench.cli import ORDER, _register, command


def _commands(cmd: Any, path: str = "pgfsbench") -> list[tuple[str, Any]]:
    out = [(path, cmd)]
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        if not getattr(sub, "hidden", False):
            out += _commands(sub, f"{path} {name}")
    return out


@pytest.fixture(scope="module")
def root() -> Any:
    _register()
    return command()


def test_every_option_and_argument_says_what_it_is(root: Any) -> None:
    missing = [
        f"{path} {p.name}"
        for path, cmd in _commands(root)
        for p in cmd.params
        if p.name != "help" and not (getattr(p, "help", None) or "").strip()
    ]
    assert missing == []


def test_placeholders_are_capitals(root: Any) -> None:
    for path, cmd in _commands(root):
        for p in cmd.params:
            if p.metavar:
                assert re.fullmatch(r"[A-Z][A-Z0-9_=]*", p.metavar), (path, p.name, p.metavar)


def test_help_has_no_python_types_and_lists_commands_in_the_order_of_the_work(
    root: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    for args in (
        ["--help"],
        ["run", "--help"],
        ["compare", "--help"],
        ["results", "show", "--help"],
    ):
        with pytest.raises(SystemExit):
            root.main(args, prog_name="pgfsbench")
        text = capsys.readouterr().out
        assert not re.search(r"<(bool|str|int|path|list\[\w+\])>|\{\w+\}", text), text
    assert list(root.commands)[: len(ORDER)] == list(ORDER)
