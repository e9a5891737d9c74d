"""The command-line reference page, written from the commands themselves (docs/hooks.py puts
it in docs/reference/cli.md), so it cannot drift from what --help says."""

from __future__ import annotations

from typing import Any

import typer
import typer.core

from pgfsbench.cli import _register, command


def _cell(text: str) -> str:
    """A Markdown table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|").replace("[", "\\[")


def _commands(cmd: Any, path: str) -> list[tuple[str, Any]]:
    out = [(path, cmd)]
    for name, sub in (getattr(cmd, "commands", None) or {}).items():
        if not getattr(sub, "hidden", False):
            out += _commands(sub, f"{path} {name}")
    return out


def _flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False) or getattr(param, "count", False))


def _default(param: Any) -> str:
    if _flag(param):
        return ""
    value = param.default
    if value is None or value == () or value == [] or callable(value):
        return ""
    return f"`{value}`"


def _name(param: Any) -> str:
    if isinstance(param, typer.core.TyperArgument):
        return f"`{param.metavar or (param.name or '').upper()}`"
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    if not _flag(param) and param.metavar:
        names += f" {param.metavar}"
    return names


def render() -> str:
    """Every command, in the order --help lists them: its description, usage, and a
    table of its arguments and options with their defaults."""
    _register()
    root = command()
    parts: list[str] = []
    for path, cmd in _commands(root, "pgfsbench"):
        ctx = typer.Context(cmd, info_name=path)
        parts.append(f"{'#' * max(2, min(len(path.split()), 3))} {path}\n")
        if cmd.help:
            parts.append(cmd.help + "\n")
        parts.append(f"```\n{path} {' '.join(cmd.collect_usage_pieces(ctx))}\n```\n")
        rows = [p for p in cmd.params if p.name != "help" and not getattr(p, "hidden", False)]
        if not rows:
            continue
        parts.append("| argument or option | what it is | default |\n|---|---|---|")
        for p in rows:
            helptext = _cell(getattr(p, "help", None) or "")
            envvar = getattr(p, "envvar", None)
            if envvar:
                helptext += f" (environment: `{envvar}`)"
            parts.append(f"| {_name(p)} | {helptext} | {_default(p)} |")
        parts.append("")
    return "\n".join(parts)
