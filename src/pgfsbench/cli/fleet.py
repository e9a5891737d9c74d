"""pgfsbench fleet run | status | resume."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from pgfsbench.cli import app
from pgfsbench.report.inert import plain_console
from pgfsbench.system.errors import RunsFailed, UsageError

if TYPE_CHECKING:
    from pgfsbench.fleet.driver import FleetState, HostState

fleet_app = typer.Typer(
    help="Run one spec on many hosts through Ansible; every host's results in one store.",
    no_args_is_help=True,
)
app.add_typer(fleet_app, name="fleet")

AcceptKeys = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-keys",
        help="Accept (and record) the SSH key of a host never reached before; a key that "
        "changed is still refused. Default: every key checked against the known hosts "
        "(root's, or the inventory's UserKnownHostsFile).",
    ),
]
DirOpt = Annotated[
    Path,
    typer.Option(
        "--fleet-dir",
        help="Where the fleet keeps its state, Ansible's files and the fetched results.",
    ),
]
DEFAULT_DIR = Path("pgfsbench-fleet")


def _importer(results: str):  # type: ignore[no-untyped-def]
    from pgfsbench.results.importer import import_store
    from pgfsbench.results.store import Store

    def import_file(path: Path, host: str) -> tuple[str, int | None]:
        src = Store(str(path))
        report = import_store(src, Store(results), host)
        camp = src.latest_campaign_id()
        return report.text(), camp

    return import_file


def _table(state: FleetState) -> Table:
    table = Table(title=f"fleet {state.run_uuid}", title_justify="left")
    for col in ("host", "status", "runs", "ETA", "phase", "controller s", "imported", "error"):
        table.add_column(col)
    for h in state.hosts.values():
        ctl = h.controller_s()
        table.add_row(
            h.name,
            h.status,
            h.runs(),
            h.eta(),
            h.phase,
            "" if ctl is None else str(ctl),
            h.imported,
            h.error,
        )
    return table


def _line(h: HostState) -> str:
    runs = f" {h.runs()} runs" if h.runs() else ""
    eta = f", ETA {h.eta()}" if h.eta() else ""
    return f"{h.name}: {h.status}{runs}{eta}: {h.phase}"


class _Printer:
    """One line per host: on a terminal a live table (host, status, n/N runs, ETA, phase),
    elsewhere a line whenever a host's status, run count or phase changes."""

    def __init__(self, console: Console):
        self.console = console
        self.seen: dict[str, tuple[str, str, str]] = {}
        self.live: Live | None = None

    def __enter__(self) -> _Printer:
        if self.console.is_terminal:
            self.live = Live(console=self.console, auto_refresh=False, transient=True)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()

    def __call__(self, state: FleetState) -> None:
        if self.live is not None:
            self.live.update(_table(state), refresh=True)
            return
        for h in state.hosts.values():
            now = (h.status, h.runs(), h.phase)
            if self.seen.get(h.name) != now:
                self.seen[h.name] = now
                self.console.print(_line(h), markup=False, highlight=False)


def _finish(console: Console, state: FleetState) -> None:
    console.print(_table(state))
    bad = [h.name for h in state.hosts.values() if h.status != "done"]
    if bad:
        raise RunsFailed(
            f"{len(bad)} host(s) did not finish ({', '.join(bad)}); "
            "`pgfsbench fleet resume` runs them again"
        )


@fleet_app.command("run")
def run_cmd(
    spec: Annotated[Path, typer.Argument(help="The spec file, run on every host.")],
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Ansible inventory.")],
    results: Annotated[
        str,
        typer.Option(
            "--results",
            "-r",
            help="The store every host's "
            "results are imported into (postgresql:// or a "
            "SQLite file).",
        ),
    ],
    limit: Annotated[str | None, typer.Option(help="Ansible --limit.")] = None,
    serial: Annotated[
        int | None,
        typer.Option(
            help="Hosts at a time (hosts sharing a SAN would disturb each other); default: all."
        ),
    ] = None,
    fleet_dir: DirOpt = DEFAULT_DIR,
    command: Annotated[
        str, typer.Option("--pgfsbench-cmd", help="How pgfsbench is run on the hosts.")
    ] = "pgfsbench",
    sets: Annotated[
        list[str] | None, typer.Option("--set", help="Passed to `run` on every host.")
    ] = None,
    remote_dir: Annotated[
        str,
        typer.Option(
            help="Where each host keeps the run (its spec, results file and work directory), "
            "under the fleet run's UUID and the host's inventory name."
        ),
    ] = ("/var/tmp/pgfsbench-fleet"),
    accept_new_host_keys: AcceptKeys = False,
) -> None:
    """Run SPEC on every host of the inventory and import each host's results as they
    arrive. Exits 6 when some host did not finish."""
    from pgfsbench.fleet.driver import new_state, run_fleet
    from pgfsbench.spec import load_spec

    if not spec.is_file() or not inventory.is_file():
        raise UsageError(f"{spec if not spec.is_file() else inventory}: no such file")
    load_spec(spec, sets or [])  # refused here, not on every host
    from pgfsbench.results.store import Store, check_writable

    check_writable(results)  # and reachable, with its schema: before any host starts
    Store(results).close()
    run_args = " ".join(f"--set {shlex.quote(s)}" for s in sets or [])
    state = new_state(
        spec, inventory, results, fleet_dir, command, run_args, remote_dir, accept_new_host_keys
    )
    console = plain_console()
    console.print(
        f"fleet run {state.run_uuid}: {spec} on {inventory}"
        + (f" (limit {limit})" if limit else "")
        + (f", {serial} host(s) at a time" if serial else ""),
        markup=False,
    )
    with _Printer(console) as printer:
        run_fleet(
            state, limit=limit, serial=serial, on_change=printer, import_file=_importer(results)
        )
    _finish(console, state)


@fleet_app.command("status")
def status_cmd(fleet_dir: DirOpt = DEFAULT_DIR) -> None:
    """Each host of the last fleet run: its status, phase, what was imported."""
    from pgfsbench.fleet.driver import FleetState

    plain_console().print(_table(FleetState.load(fleet_dir)))


@fleet_app.command("resume")
def resume_cmd(
    fleet_dir: DirOpt = DEFAULT_DIR,
    serial: Annotated[int | None, typer.Option(help="Hosts at a time.")] = None,
    results: Annotated[
        str | None,
        typer.Option(
            "--results",
            "-r",
            help="The store, when the run's was given with a password in its URL (the "
            "fleet's state keeps it without).",
        ),
    ] = None,
) -> None:
    """Run again the hosts that failed or were unreachable (`run --resume` where the host
    had begun a campaign), without rerunning those that finished."""
    from pgfsbench.fleet.driver import FleetState, run_fleet

    state = FleetState.load(fleet_dir)
    if results is not None:
        state.results = results
    elif "***" in state.results:
        raise UsageError(
            f"the fleet's store is {state.results}: give it again with --results (its "
            "password is not kept), or its password through PGPASSWORD or ~/.pgpass"
        )
    todo = [h for h in state.hosts.values() if h.status != "done"]
    console = plain_console()
    if not todo:
        console.print("every host finished; nothing to resume")
        return
    fresh = ",".join(h.name for h in todo if h.campaign is None)
    resume = {h.name: h.campaign for h in todo if h.campaign is not None}
    with _Printer(console) as printer:
        if fresh:
            run_fleet(
                state,
                limit=fresh,
                serial=serial,
                on_change=printer,
                import_file=_importer(state.results),
            )
        if resume:
            run_fleet(
                state,
                limit=None,
                serial=serial,
                on_change=printer,
                import_file=_importer(state.results),
                resume={h: c for h, c in resume.items() if c is not None},
            )
    _finish(console, state)


@fleet_app.command("capture")
def capture_cmd(
    inventory: Annotated[Path, typer.Option("--inventory", "-i", help="Ansible inventory.")],
    seconds: Annotated[float, typer.Option(help="How long each host captures.")],
    output: Annotated[
        str,
        typer.Option(
            "--output",
            "-o",
            help="The capture's directory on every host (new; root's, 0700). It stays "
            "there: a fleet run's replay cells name it.",
        ),
    ],
    dsn: Annotated[
        str | None,
        typer.Option(
            help="The server each host captures (default: the inventory's "
            "pgfsbench_capture_dsn of each host)."
        ),
    ] = None,
    limit: Annotated[str | None, typer.Option(help="Ansible --limit.")] = None,
    fleet_dir: DirOpt = DEFAULT_DIR,
    command: Annotated[
        str, typer.Option("--pgfsbench-cmd", help="How pgfsbench is run on the hosts.")
    ] = "pgfsbench",
    log_format: Annotated[
        str | None,
        typer.Option("--log-format", help="jsonlog or csvlog (default: by each server's version)."),
    ] = None,
    remote_workdir: Annotated[
        str,
        typer.Option(
            help="Where each host keeps the capture's journal (what `cleanup` puts back there)."
        ),
    ] = "/var/tmp/pgfsbench-capture",
    accept_new_host_keys: AcceptKeys = False,
) -> None:
    """Capture each host's server at once (`pgfsbench capture` there), each capture kept
    on its host: its statements and data never travel. Prints each host's counts; exits 6
    when some host did not capture."""
    from pgfsbench.fleet.driver import CaptureHost, capture_fleet

    if not inventory.is_file():
        raise UsageError(f"{inventory}: no such file")
    if seconds <= 0:
        raise UsageError("--seconds must be above 0")
    console = plain_console()
    seen: dict[str, str] = {}

    def changed(hosts: dict[str, CaptureHost]) -> None:
        for h in hosts.values():
            if seen.get(h.name) != h.status:
                seen[h.name] = h.status
                console.print(f"{h.name}: {h.status}", markup=False, highlight=False)

    args = f"--log-format {shlex.quote(log_format)}" if log_format else ""
    hosts = capture_fleet(
        inventory=inventory,
        directory=fleet_dir,
        dsn=dsn,
        seconds=seconds,
        capture_dir=output,
        command=command,
        capture_args=args,
        workdir=remote_workdir,
        limit=limit,
        accept_new_host_keys=accept_new_host_keys,
        on_change=changed,
    )
    table = Table(title=f"fleet capture into {output}", title_justify="left")
    for col in ("host", "status", "statements", "seconds", "log MB", "format", "error"):
        table.add_column(col)
    for h in sorted(hosts.values(), key=lambda h: h.name):
        s = h.summary
        table.add_row(
            h.name,
            h.status,
            str(s.get("statements", "")),
            f"{s['seconds']:.1f}" if isinstance(s.get("seconds"), int | float) else "",
            f"{s['log_bytes'] / 1e6:.1f}" if isinstance(s.get("log_bytes"), int | float) else "",
            str(s.get("format") or ""),
            h.error,
        )
    console.print(table)
    bad = [h.name for h in hosts.values() if h.status != "done"]
    if bad or not hosts:
        raise RunsFailed(
            f"{len(bad)} host(s) did not capture ({', '.join(bad)})" if bad else "no host"
        )
