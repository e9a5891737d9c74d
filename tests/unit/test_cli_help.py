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


def _words(text: str) -> list[str]:
    return text.split()


def test_help_at_80_columns_or_into_a_pipe_says_every_word_in_full(
    root: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a terminal at least 100 wide, --help is click's two plain columns: no line
    beyond 80, no word cut with an ellipsis, every option's description whole (the words
    in order), no markup escape, and no --no- twin for a destructive flag."""
    monkeypatch.setenv("COLUMNS", "80")
    for path, cmd in _commands(root):
        args = [*path.split()[1:], "--help"]
        with pytest.raises(SystemExit):
            root.main(args, prog_name="pgfsbench")
        text = capsys.readouterr().out
        assert text.strip(), path
        lines = text.splitlines()
        assert max(len(ln) for ln in lines) <= 80, (path, max(lines, key=len))
        assert "…" not in text and "\\[" not in text and "╭" not in text, path
        flat = " ".join(_words(text))
        for p in cmd.params:
            helptext = " ".join(_words(getattr(p, "help", None) or ""))
            assert helptext in flat, (path, p.name, helptext)
        assert "--no-force" not in text and "--no-destroy" not in text, path


def test_panels_only_on_a_wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from pgfsbench.cli import PANELS_MIN_WIDTH, panels_fit

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setenv("COLUMNS", str(PANELS_MIN_WIDTH))
    assert panels_fit()
    monkeypatch.setenv("COLUMNS", "80")
    assert not panels_fit()
    monkeypatch.setattr(
        sys, "stdout", object.__new__(type("Pipe", (), {"isatty": lambda s: False}))
    )
    monkeypatch.setenv("COLUMNS", "200")
    assert not panels_fit()
