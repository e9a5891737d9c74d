"""pgfsbench doctor (list, explain) and pgfsbench advise."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from pgfsbench.cli import app
from pgfsbench.cli.program import program
from pgfsbench.jsonish import obj

if TYPE_CHECKING:
    from pgfsbench.advisor.doctor import Finding
    from pgfsbench.advisor.facts import Facts
from pgfsbench.report.inert import plain_console
from pgfsbench.system.errors import UsageError
from pgfsbench.system.held import write_file
from pgfsbench.system.paths import DEFAULT_WORKDIR

doctor_app = typer.Typer(
    help="Audit this host's storage stack against PostgreSQL's settings (reads only). "
    "Exit 0 all OK, 1 warnings, 2 bad findings, 3 could not inspect.",
    invoke_without_command=True,
)
app.add_typer(doctor_app, name="doctor")

PgdataOpt = Annotated[
    Path | None,
    typer.Option(
        "--pgdata",
        "-D",
        help="The data directory (the server is asked if it runs there, "
        "else its configuration files are read).",
    ),
]
DsnOpt = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        help="A libpq connection string to a running server (e.g. "
        "'host=/var/run/postgresql user=postgres').",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="postgresql.conf when it is not in the data directory (Debian: "
        "/etc/postgresql/N/main/postgresql.conf).",
    ),
]
PathOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--path", help="Another directory to audit (repeatable), e.g. a planned data directory."
    ),
]
STYLE = {"OK": "green", "WARN": "yellow", "BAD": "bold red"}


def _gather(
    pgdata: Path | None, dsn: str | None, config: Path | None, paths: list[str] | None
) -> tuple[Any, bool]:
    from pgfsbench.advisor.facts import gather

    if pgdata is not None and not pgdata.exists():
        return None, False
    facts = gather(pgdata, dsn, config, paths)
    asked_pg = pgdata is not None or dsn is not None
    inspected = not asked_pg or (
        facts.pg is not None and (facts.pg.source == "server" or bool(facts.paths))
    )
    return facts, inspected


@doctor_app.callback()
def doctor_cmd(
    ctx: typer.Context,
    pgdata: PgdataOpt = None,
    dsn: DsnOpt = None,
    config: ConfigOpt = None,
    path: PathOpt = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Only these rule ids (globs).")
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="Leave out these rule ids (globs).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the findings as JSON (for a fleet's preflight).")
    ] = False,
    show_ok: Annotated[bool, typer.Option("--ok", help="List the rules that passed too.")] = (
        False
    ),
) -> None:
    """Audit the filesystems, devices, kernel and PostgreSQL settings under a data
    directory (or the host alone). Never starts, stops, loads or writes anything."""
    if ctx.invoked_subcommand is not None:
        return
    from pgfsbench.advisor.doctor import examine, exit_status, report_json, select_rules

    rules = select_rules(only or (), ignore or ())
    if not rules:
        raise UsageError(f"--only/--ignore leave no rule (see `{program()} doctor list`)")
    facts, inspected = _gather(pgdata, dsn, config, path)
    if facts is None:
        msg = f"{pgdata}: no such directory"
        if as_json:
            print(json.dumps({"status": 3, "error": msg}))
        else:
            plain_console(stderr=True).print(f"pgfsbench doctor: {msg}", markup=False)
        raise typer.Exit(3)
    findings, skipped = examine(facts, rules)
    status = exit_status(findings, inspected)
    if as_json:
        print(json.dumps(report_json(facts, findings, skipped, status), indent=2, default=str))
        raise typer.Exit(status)
    _render(facts, findings, skipped, status, show_ok)
    raise typer.Exit(status)


def _render(
    facts: Facts, findings: list[Finding], skipped: list[str], status: int, show_ok: bool
) -> None:
    from pgfsbench.advisor.doctor import LAYERS, summary_lines

    console = plain_console()
    console.print(
        "[bold]pgfsbench doctor[/]: read only; nothing was started or changed", markup=True
    )
    for line in summary_lines(facts):
        console.print(f"  {escape(line)}")
    for layer in LAYERS:
        shown = [f for f in findings if f.layer == layer and (show_ok or f.severity > 0)]
        if not shown:
            continue
        console.print(f"\n[bold]{layer}[/]", markup=True)
        by_rule: dict[str, list[Finding]] = {}
        for f in shown:  # a rule that saw several things: each, then its advice once
            by_rule.setdefault(f.rule, []).append(f)
        for rule, seen in by_rule.items():
            f = seen[0]
            tag = f.severity.name
            for one in seen:
                text = one.seen or ("no problem seen" if tag == "OK" else one.title)
                console.print(f"  [{STYLE[tag]}]{tag:4}[/] {rule}: {escape(text)}", markup=True)
            if f.severity > 0:
                console.print(f"       why: {escape(f.why)}")
                console.print(f"       do:  {escape(f.remedy)}")
                # a URL is never broken across lines: it would not open
                console.print(f"       see: {f.source}", style="dim", soft_wrap=True)
    counts = {n: sum(1 for f in findings if f.severity.name == n) for n in STYLE}
    console.print(
        f"\n{counts['BAD']} bad, {counts['WARN']} warning(s), {counts['OK']} ok; "
        f"{len(skipped)} rule(s) did not apply"
    )
    if skipped and show_ok:
        from pgfsbench.advisor.doctor import why_skipped
        from pgfsbench.advisor.rules import BY_ID

        reasons: dict[str, list[str]] = {}
        for r in skipped:
            reasons.setdefault(why_skipped(BY_ID[r], facts), []).append(r)
        for why, ids in reasons.items():
            console.print(f"  [dim]did not apply ({escape(why)}): {', '.join(ids)}[/]", markup=True)
    for what in facts.unread:
        console.print(f"[dim]could not read: {escape(what)}[/]", markup=True)
    if status == 3:
        console.print("[red]could not inspect what was asked for[/]", markup=True)


@doctor_app.command("list")
def list_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the rules as JSON.")] = False,
) -> None:
    """Every rule: id, layer, severity when it fires, what it checks."""
    from pgfsbench.advisor.rules import RULES

    if as_json:
        print(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "layer": r.layer,
                        "severity": r.severity.name,
                        "title": r.title,
                        "source": r.source,
                    }
                    for r in RULES
                ],
                indent=2,
            )
        )
        return
    console = plain_console()
    for r in RULES:
        console.print(
            f"{r.id:28} {r.layer:11} [{STYLE[r.severity.name]}]{r.severity.name:4}[/]"
            f" {escape(r.title)}",
            markup=True,
        )


@doctor_app.command("explain")
def explain_cmd(rule: Annotated[str, typer.Argument(help="A rule id.")]) -> None:
    """What a rule checks, why it matters, what to do, and its source."""
    from pgfsbench.advisor.rules import BY_ID

    r = BY_ID.get(rule)
    if r is None:
        raise UsageError(f"no rule {rule!r} (see `{program()} doctor list`)")
    console = plain_console()
    console.print(
        f"[bold]{r.id}[/] ({r.layer}, {r.severity.name} when it fires): {escape(r.title)}",
        markup=True,
    )
    console.print(f"why: {escape(r.why)}")
    console.print(f"do:  {escape(r.remedy)}")
    console.print(f"see: {r.source}")


@app.command("advise")
def advise_cmd(
    output: Annotated[Path, typer.Option("--output", "-o", help="The spec to write.")],
    findings: Annotated[
        Path | None, typer.Option("--from", help="`pgfsbench doctor --json` output to advise from.")
    ] = None,
    pgdata: PgdataOpt = None,
    dsn: DsnOpt = None,
    config: ConfigOpt = None,
    fs: Annotated[
        str | None,
        typer.Option(
            "--fs",
            help="Advise for this filesystem (ext4, xfs, btrfs, zfs, tmpfs) without a doctor run.",
        ),
    ] = None,
    workload: Annotated[str, typer.Option(help="pgbench builtin workload.")] = "tpcb-like",
    scale: Annotated[
        int | None, typer.Option(help="pgbench scale (default: what fits the free space).")
    ] = None,
    duration: Annotated[str, typer.Option(help="Measured phase of each run.")] = "30s",
    repetitions: Annotated[
        str,
        typer.Option(
            help="Repetitions of each cell: a number, or auto (until each comparison is "
            "settled, within --budget)."
        ),
    ] = "auto",
    budget: Annotated[
        str, typer.Option(help="With auto repetitions: no new round after this long.")
    ] = "12m",
    workdir: Annotated[
        Path,
        typer.Option(
            help="Where `run` will make its loop files: written into the spec (on the disk "
            "you want measured; sizes fit its free space)."
        ),
    ] = (DEFAULT_WORKDIR),
    tries: Annotated[
        list[str] | None,
        typer.Option(
            "--try",
            help="Measure this setting too, against today's (SETTING=VALUE, repeatable: "
            "--try wal_compression=on --try wal_compression=lz4).",
        ),
    ] = None,
) -> None:
    """Write a spec that benchmarks the configuration found against the recommended
    alternatives, on the same kind of storage, so advice is proven before it is adopted."""
    import os

    from pgfsbench.advisor.advise import ADVISED_WORKLOADS, advise, to_toml
    from pgfsbench.spec.kinds import host_fstypes

    if fs is not None and fs not in host_fstypes():
        raise UsageError(f"--fs {fs}: one of {', '.join(host_fstypes())}")
    if workload not in ADVISED_WORKLOADS:
        raise UsageError(f"--workload {workload}: one of {', '.join(ADVISED_WORKLOADS)}")
    doctor: dict[str, object] | None = None
    if findings is not None:
        try:
            doctor = json.loads(findings.read_text())
        except (OSError, ValueError) as exc:
            raise UsageError(
                f"--from {findings}: not the JSON of `pgfsbench doctor --json` ({exc})"
            ) from exc
        if not isinstance(doctor, dict) or "findings" not in doctor:
            raise UsageError(f"--from {findings}: no findings in it")
    elif pgdata is not None or dsn is not None or fs is None:
        from pgfsbench.advisor.doctor import examine, exit_status, report_json, select_rules

        facts, inspected = _gather(pgdata, dsn, config, None)
        if facts is None or not inspected:
            from pgfsbench.postgres.conninfo import shown_dsn

            why = "; ".join(facts.unread) if facts is not None and facts.unread else ""
            asked = str(pgdata) if pgdata is not None else shown_dsn(dsn or "")
            raise UsageError(
                f"could not inspect {asked}"
                + (f": {why}" if why else (": no such directory" if facts is None else ""))
            )
        found, skipped = examine(facts, select_rules())
        doctor = report_json(facts, found, skipped, exit_status(found, inspected))
    probe = workdir if workdir.exists() else workdir.parent
    try:
        st = os.statvfs(probe)
        free: int | None = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    reps: int | str = repetitions
    if repetitions != "auto":
        if not repetitions.isdigit() or int(repetitions) < 1:
            raise UsageError(f"--repetitions {repetitions}: a number of at least 1, or auto")
        reps = int(repetitions)
    from pgfsbench.units import parse_duration

    try:
        parse_duration(budget)
    except ValueError as exc:
        raise UsageError(f"--budget {budget!r}: {exc}") from None
    if not workdir.is_absolute():
        workdir = Path.cwd() / workdir
    advice = advise(
        doctor,
        fs,
        free,
        scale,
        workload,
        duration,
        reps,
        tries or [],
        str(workdir),
        budget=budget if reps == "auto" else None,
    )
    write_file(output, to_toml(advice), 0o644)
    console = plain_console()
    console.print(
        f"wrote {output}: {len(obj(advice.spec['storage']))} storage(s) x "
        f"{len(obj(advice.spec['postgres']))} PostgreSQL configuration(s)"
        + (
            f" x {len(obj(advice.spec['kernel']))} kernel configuration(s)"
            if "kernel" in advice.spec
            else ""
        ),
        markup=False,
    )
    for r in advice.reasons:
        console.print(f"  {r}", markup=False)
    for r in advice.sizes:
        console.print(f"  {r}", markup=False)
    for line in where_lines(workdir, doctor):
        console.print(f"  {line}", markup=False)
    if advice.left_out:
        console.print(
            "  settings-today copies your settings that shape what the storage sees; left out:",
            markup=False,
        )
        for r in advice.left_out:
            console.print(f"    {r}", markup=False)
    console.print(f"next: {program()} plan {shlex.quote(str(output))}", markup=False)


def where_lines(workdir: Path, doctor: dict[str, object] | None) -> list[str]:
    """Where the loop files will go (filesystem, device) and, when the data directory is
    on another device, how to measure that one instead."""
    from pgfsbench.advisor.facts import mount_of
    from pgfsbench.jsonish import objs, text
    from pgfsbench.system.mountinfo import mount_table
    from pgfsbench.system.paths import nearest_existing

    table = mount_table()
    here = mount_of(str(nearest_existing(workdir)), table)
    if here is None:
        return [f"loop files under {workdir}"]
    out = [
        f"loop files under {workdir}: on {here.fstype} ({here.source}, mounted on {here.target})"
    ]
    for p in objs(obj(obj(doctor or {}).get("facts")).get("paths")):
        if p.get("role") != "data directory":
            continue
        source = text(obj(p.get("mount")).get("source"))
        if source and source != here.source:
            out.append(
                f"your data directory {text(p.get('path'))} is on {source}: to measure that "
                f"disk, give --workdir DIR on it (the loop files take room there for the runs)"
            )
    return out
