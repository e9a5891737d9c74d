"""The command line: parse -> call core -> render. Errors become one line and an exit code.

Exit status: 0 done (every run ok); 1 an error; 2 a spec or usage error; 3 needs root;
4 refused by the device guard; 5 the installed tools cannot do what the spec asks;
6 the campaign completed but some runs failed or were aborted; 7 another campaign holds
this host; 130 interrupted (everything undone). Anything else is a bug: its traceback is
written to a file in the work directory and one line points at it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import typer
import typer.core
import typer.main

from pgfsbench.report.inert import make_rich_inert, plain_console
from pgfsbench.system.errors import Interrupted, PgfsbenchError

app = typer.Typer(
    name="pgfsbench",
    help="Benchmark PostgreSQL on storage stacks (filesystems, ZFS, kernel and PostgreSQL "
    "settings) from one spec file, and keep every number with its environment.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
make_rich_inert()  # before anything is printed: no outside text reaches a terminal raw
err_console = plain_console(stderr=True)
BUG_EXIT = 70


def _version(value: bool) -> None:
    if value:
        from pgfsbench import __version__

        print(f"pgfsbench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version,
        is_eager=True,
        help="Print pgfsbench's version and exit.",
    ),
) -> None:
    """Benchmark PostgreSQL on storage stacks from one spec file."""


def _register() -> None:
    from pgfsbench.cli import (  # noqa: F401
        capture,
        cleanup,
        compare,
        doctor,
        fleet,
        history,
        pod,
        results,
        run,
    )


# the commands in the order of the work (--help lists them so)
ORDER = (
    "demo",
    "plan",
    "run",
    "results",
    "compare",
    "report",
    "history",
    "doctor",
    "advise",
    "capture",
    "fleet",
    "cleanup",
)
# an option's value in --help, by the option's name (else its name in capitals)
PLACEHOLDERS = {
    "set": "KEY=VALUE",
    "sets": "KEY=VALUE",
    "workdir": "DIR",
    "only": "GLOB",
    "results": "STORE",
    "output": "FILE",
    "campaign": "ID",
    "host": "HOST",
    "format": "FORMAT",
    "baseline": "NAME",
    "progress_file": "FILE",
    "price_file": "FILE",
    "metrics_port": "PORT",
    "metrics_address": "ADDRESS",
    "destroy_data_on": "DEVICE",
    "memory_limit": "SIZE",
    "pgdata": "DIR",
    "inventory": "FILE",
    "fleet_dir": "DIR",
}


class _Argument(typer.core.TyperArgument):
    """An argument shown by its placeholder (SPEC, not {spec})."""

    def _usage_display_name(self) -> str:
        name = self.display_name_raw
        return name if self.required else f"[{name}]"

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


class _Option(typer.core.TyperOption):
    """An option shown with its placeholder (FILE, N), a flag with none."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None if self.is_flag or self.count else self.metavar


# the narrowest terminal whose --help is drawn in panels: below it (or into a pipe) the
# help is click's plain two columns, which wrap each description in full, where rich's
# five-column table squeezed them and cut long words with an ellipsis at 80 columns
PANELS_MIN_WIDTH = 100


def panels_fit() -> bool:
    """Whether --help is drawn with rich's panels: a terminal at least PANELS_MIN_WIDTH
    wide (COLUMNS as rich reads it)."""
    import shutil

    if not sys.stdout.isatty():
        return False
    return shutil.get_terminal_size((80, 24)).columns >= PANELS_MIN_WIDTH


def command() -> Any:
    """The command line as it runs, with readable placeholders (SPEC, FILE, N: not the
    parameter's Python type) and the commands in the order of the work."""
    root = typer.main.get_command(app)
    _placeholders(root, panels=panels_fit())
    commands = getattr(root, "commands", None)
    if isinstance(commands, dict):
        root.commands = {n: commands[n] for n in (*ORDER, *commands) if n in commands}  # type: ignore[attr-defined]
    return root


def _reflow(text: str | None) -> str | None:
    """A docstring's paragraphs as paragraphs (the terminal wraps them, not the source)."""
    if not text:
        return text
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n") if p.strip())


def _plain(text: str | None) -> str | None:
    """Help text without rich's markup escapes (\\[kubernetes] is [kubernetes] in plain)."""
    return text.replace("\\[", "[") if text else text


def _placeholders(cmd: Any, *, panels: bool) -> None:
    cmd.help = _reflow(cmd.help)
    if not panels:
        cmd.rich_markup_mode = None
        cmd.help = _plain(cmd.help)
        cmd.epilog = _plain(_reflow(cmd.epilog))
    for param in cmd.params:
        if getattr(param, "help", None):
            param.help = _reflow(param.help) if panels else _plain(_reflow(param.help))
        name = str(param.name or "")
        if isinstance(param, typer.core.TyperArgument):
            param.metavar = name.upper()
            param.__class__ = _Argument
        elif isinstance(param, typer.core.TyperOption):
            if not (param.is_flag or param.count):
                kind = param.bare_type()
                default = {"int": "N", "float": "X", "path": "PATH"}.get(kind, name.upper())
                param.metavar = PLACEHOLDERS.get(name, default)
            param.__class__ = _Option
    # --help is made when asked for, not one of the params
    original = cmd.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = original(ctx)
        if isinstance(option, typer.core.TyperOption):
            option.__class__ = _Option
        return option

    cmd.get_help_option = get_help_option
    for sub in (getattr(cmd, "commands", None) or {}).values():
        _placeholders(sub, panels=panels)


def _workdir_from_argv(argv: list[str]) -> Path:
    from pgfsbench.system.paths import DEFAULT_WORKDIR

    for i, arg in enumerate(argv):
        if arg == "--workdir" and i + 1 < len(argv):
            return Path(argv[i + 1])
        if arg.startswith("--workdir="):
            return Path(arg.split("=", 1)[1])
    return DEFAULT_WORKDIR


def write_traceback(text: str, workdir: Path) -> Path:
    """Keep a bug's traceback where the user can send it (the work directory, else /tmp)."""
    name = f"traceback-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.txt"
    from pgfsbench.system.trust import open_nofollow, path_problem

    # the work directory only when only root can write there: never a file created
    # through someone else's symlink
    places = [workdir / "tracebacks"] if path_problem(workdir) is None else []
    for directory in [*places, Path(tempfile.gettempdir())]:
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            path = directory / name
            fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            return path
        except (OSError, PgfsbenchError):
            continue
    return Path("(could not be written)")


def main() -> None:
    """The command, then the process ends without the interpreter's teardown (see _leave)."""
    code: object = 0
    try:
        _main()
    except SystemExit as exc:
        code = exc.code
    _leave(code)


def _leave(code: object) -> None:
    """End the process now: the command's work is done and written (every result is
    committed, every file closed, every process it started ended or undone), and the
    interpreter's own teardown, which frees each object of the libraries a run loads
    (polars, numpy, SQLAlchemy, psycopg), took 0.1-0.25 s of every run here: more than a
    tenth of pgfsbench's own time in a run (bench/own_time.py). Python's own exit rules for
    the code: None is 0, an int is itself, anything else is printed and is 1."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing reaches it
            stream.flush()
    logging.shutdown()
    os._exit(status)


def _main() -> None:
    _register()
    try:
        command()(prog_name="pgfsbench")
    except PgfsbenchError as exc:
        err_console.print(f"pgfsbench: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("pgfsbench: interrupted; everything it created was undone")
        sys.exit(Interrupted.exit_code)
    except Exception as exc:  # the last resort: a traceback reaching the user is a bug
        path = write_traceback(traceback.format_exc(), _workdir_from_argv(sys.argv))
        first = str(exc).splitlines()[0] if str(exc) else ""
        err_console.print(
            f"pgfsbench: internal error ({type(exc).__name__}: {first[:200]}); "
            f"the traceback is in {path}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(BUG_EXIT)
