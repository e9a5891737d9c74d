"""The command line: parse -> call core -> render. Errors become one line and an exit code."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from pgfsbench.system.errors import Interrupted, PgfsbenchError

app = typer.Typer(
    name="pgfsbench",
    help="Benchmark PostgreSQL on storage stacks (filesystems, ZFS, kernel and PostgreSQL "
         "settings) from one spec file, and keep every number with its environment.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err_console = Console(stderr=True)


def _register() -> None:
    from pgfsbench.cli import cleanup, results, run  # noqa: F401


def main() -> None:
    _register()
    try:
        app()
    except PgfsbenchError as exc:
        err_console.print(f"pgfsbench: error: {exc}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("pgfsbench: interrupted; everything it created was undone")
        sys.exit(Interrupted.exit_code)
