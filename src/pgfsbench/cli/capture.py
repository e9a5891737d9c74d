"""pgfsbench capture."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from pgfsbench.cli import app
from pgfsbench.cli.program import program
from pgfsbench.report.inert import plain_console
from pgfsbench.system.errors import NeedsRootError
from pgfsbench.system.paths import DEFAULT_WORKDIR


@app.command("capture")
def capture_cmd(
    dsn: Annotated[
        str,
        typer.Option(help="The server to capture (a libpq connection string, as a superuser)."),
    ],
    seconds: Annotated[
        str, typer.Option(help="How long to capture: seconds, or with a unit (90s, 5m, 1h).")
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The capture's directory (new; root's, 0700).")
    ],
    base: Annotated[
        Path | None,
        typer.Option(
            help="A physical copy of the data taken at the capture's start (default: "
            "pg_basebackup makes one into the capture's directory)."
        ),
    ] = None,
    bindir: Annotated[
        str | None, typer.Option(help="The server's PostgreSQL binaries (for pg_basebackup).")
    ] = None,
    max_log: Annotated[
        int, typer.Option("--max-log-mb", help="Stop reading the statement log past this size.")
    ] = 2048,
    workdir: Annotated[
        Path, typer.Option(help="Where the journal lives (what `cleanup` puts back).")
    ] = DEFAULT_WORKDIR,
    log_format: Annotated[
        str | None,
        typer.Option(
            "--log-format",
            help="The statement log's format: jsonlog (default from PostgreSQL 15 on) or "
            "csvlog (the default for 13 and 14).",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print what was captured as JSON (counts and sizes, never a statement; for "
            "`fleet capture`).",
        ),
    ] = False,
    from_stats: Annotated[
        bool,
        typer.Option(
            "--from-stats",
            help="The lighter path: no statement logged, no setting changed; pgbench "
            "scripts made from pg_stat_statements and the tables' statistics (an "
            "approximation of the workload).",
        ),
    ] = False,
    wire: Annotated[
        bool,
        typer.Option(
            "--wire",
            help="Capture at the wire: clients (or their pooler) connect through a relay "
            "at --listen for the capture's seconds; everything they send is kept as it "
            "came (parameter types, start-up options, COPY data). No setting is changed.",
        ),
    ] = False,
    listen: Annotated[
        str, typer.Option(help="With --wire: where clients connect (HOST:PORT).")
    ] = "127.0.0.1:6543",
    upstream: Annotated[
        str | None,
        typer.Option(
            help="With --wire: where the relay reaches the server (HOST:PORT, or a socket "
            "directory and :PORT; default: where --dsn goes)."
        ),
    ] = None,
    upstream_sslmode: Annotated[
        str, typer.Option(help="With --wire: TLS to the server (disable, prefer, require).")
    ] = "prefer",
    client_tls: Annotated[
        bool,
        typer.Option(
            "--client-tls",
            help="With --wire: offer TLS to clients (a certificate made at start; a client "
            "that verifies the server's certificate refuses it).",
        ),
    ] = False,
    drain: Annotated[
        str,
        typer.Option(help="With --wire: how long sessions still open at the end are relayed."),
    ] = "30s",
) -> None:
    """Capture a live server's workload for `tool = "replay"`: every statement with its
    session, parameters and timing (jsonlog; csvlog before PostgreSQL 15), a physical
    copy of the data, and the server's counters before and after. The logging settings it
    changes are put back at the end, and by `cleanup` after a SIGKILL; one needing a
    restart is refused."""
    import os

    from pgfsbench.engine.preflight import check_workdir
    from pgfsbench.postgres.binaries import find_binaries
    from pgfsbench.system.errors import UsageError
    from pgfsbench.system.held import make_dirs
    from pgfsbench.system.hostlock import host_lock
    from pgfsbench.system.journal import Journal
    from pgfsbench.system.runner import Runner
    from pgfsbench.system.signals import stop_on_signals
    from pgfsbench.units import parse_duration
    from pgfsbench.workloads.capture import capture

    try:
        length = parse_duration(seconds)
    except ValueError as exc:
        raise UsageError(f"--seconds {seconds!r}: {exc}") from None
    try:
        drain_s = parse_duration(drain)
    except ValueError as exc:
        raise UsageError(f"--drain {drain!r}: {exc}") from None
    if wire and (from_stats or base is not None or log_format is not None):
        raise UsageError("--wire: not with --from-stats, --base or --log-format")
    if os.geteuid() != 0:
        raise NeedsRootError(
            "capture writes a root-owned directory and a root journal; run as root"
        )
    console = plain_console()
    check_workdir(workdir, None)
    waiting = False

    def say(line: str) -> None:
        if not as_json:  # --json: the summary alone on standard output
            console.print(line, markup=False)

    # SIGINT, SIGTERM and SIGHUP alike: during the capture's wait they end it sooner (the
    # capture is kept); anywhere else they stop the command, the server's settings put
    # back on the way out
    with stop_on_signals(quiet=lambda: waiting) as stop:

        def wait(s: float) -> bool:
            nonlocal waiting
            waiting = True
            try:
                return not stop.wait(s)
            finally:
                waiting = False

        with host_lock("pgfsbench capture", workdir):
            make_dirs(workdir, 0o700)
            runner = Runner()
            journal = Journal.create(workdir, runner, meta={"what": "capture"})
            try:
                with journal.scope():
                    binaries = find_binaries(bindir)
                    if wire:
                        from pgfsbench.workloads.capture_wire import capture_wire

                        done = capture_wire(
                            dsn=dsn,
                            seconds=length,
                            out=output,
                            journal=journal,
                            runner=runner,
                            pg_basebackup=binaries.tool("pg_basebackup"),
                            listen=listen,
                            upstream=upstream,
                            upstream_sslmode=upstream_sslmode,
                            client_tls=client_tls,
                            drain=drain_s,
                            ready=lambda address: say(
                                f"capturing for {length:g} s: point your clients (or their "
                                f"pooler) at {address} (Ctrl-C ends it sooner)"
                            ),
                            wait=wait,
                        )
                    elif from_stats:
                        from pgfsbench.workloads.capture import capture_stats

                        done = capture_stats(
                            dsn=dsn,
                            seconds=length,
                            out=output,
                            runner=runner,
                            pg_basebackup=binaries.tool("pg_basebackup"),
                            ready=lambda: say(f"reading pg_stat_statements for {length:g} s"),
                            wait=wait,
                        )
                    else:
                        done = capture(
                            dsn=dsn,
                            seconds=length,
                            out=output,
                            journal=journal,
                            runner=runner,
                            pg_basebackup=binaries.tool("pg_basebackup"),
                            base=base,
                            max_log_bytes=max_log << 20,
                            ready=lambda: say(
                                f"capturing for {length:g} s (Ctrl-C ends it sooner)"
                            ),
                            wait=wait,
                            log_format=log_format,
                            workdir=workdir,
                        )
            finally:
                journal.close()
    if as_json:
        import json

        summary = {
            "directory": str(done.directory),
            "kind": "pg_stat_statements" if from_stats else "statement log",
            "format": done.manifest.get("format"),
            "seconds": done.seconds,
            "statements": done.statements,
            "log_bytes": done.log_bytes,
            "base": done.base,
            "server_version": (done.manifest.get("server") or {}).get("server_version"),
        }
        print(json.dumps(summary))
        return
    if from_stats:
        console.print(
            f"read {done.statements} calls from pg_stat_statements in {done.seconds:.1f} s into "
            f"{done.directory} (pgbench scripts: an approximation; data copy: {done.base})",
            markup=False,
        )
    else:
        console.print(
            f"captured {done.statements} statements in {done.seconds:.1f} s into "
            f"{done.directory} (log {done.log_bytes / 1e6:.1f} MB, data copy: {done.base}); "
            "settings put back",
            markup=False,
        )
    console.print(
        f'next: a spec with tool = "replay", capture = "{done.directory}"; '
        f"then {program()} plan SPEC",
        markup=False,
    )
