"""Terminal tables (rich). Pure: summaries in, renderables out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from pgfsbench.analysis.summary import CellSummary, Spread
from pgfsbench.units import human_bytes


def fmt_spread(s: Spread | None, digits: int = 0, unit: str = "") -> str:
    if s is None:
        return "-"
    main = f"{s.median:,.{digits}f}{unit}"
    if s.n == 1:
        return main
    return f"{main} ({s.low:,.{digits}f}–{s.high:,.{digits}f}, n={s.n})"


def summary_table(cells: Sequence[CellSummary], title: str = "Summary") -> Table:
    """The seeds' table: one row per cell, TPS as median (min–max) of the repetitions."""
    table = Table(title=title, title_justify="left")
    for col, justify in (("cell", "left"), ("fs", "left"), ("TPS median (min–max)", "right"),
                         ("vs first", "right"), ("latency ms", "right"), ("p99 ms", "right"),
                         ("load s", "right"), ("space after load", "right"),
                         ("runs ok", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    base = next((c.tps.median for c in cells if c.tps), None)
    for c in cells:
        rel = "-"
        if c.tps and base:
            rel = f"{(c.tps.median / base - 1) * 100:+.1f}%"
        fs = c.fs + (" (FUSE)" if c.fuse else "")
        status = f"{c.ok}/{c.runs}"
        row_style = None if c.ok == c.runs else "red"
        table.add_row(c.label or c.cell, fs, fmt_spread(c.tps), rel,
                      fmt_spread(c.latency_avg_ms, 2), fmt_spread(c.latency_p99_ms, 2),
                      fmt_spread(c.load_seconds, 1),
                      human_bytes(c.space_bytes.median) if c.space_bytes else "-",
                      status, style=row_style)
    return table


def failure_lines(cells: Sequence[CellSummary]) -> list[Text]:
    """Why runs failed, and the warnings that change the reading of the others."""
    return ([Text(f"{c.cell}: {e}", style="red") for c in cells for e in c.errors]
            + [Text(f"{c.cell} {w}", style="yellow") for c in cells for w in c.warnings])


RUN_COLUMNS = ("run_id", "cell", "repetition", "status", "tps", "latency_avg_ms",
               "load_seconds", "space_bytes", "error")


def runs_table(runs: Sequence[Mapping[str, Any]]) -> Table:
    table = Table()
    for col in RUN_COLUMNS:
        table.add_column(col, justify="right" if col in ("tps", "latency_avg_ms", "load_seconds",
                                                        "space_bytes", "run_id") else "left")
    for r in runs:
        table.add_row(
            str(r["run_id"]), r["cell"], str(r["repetition"]), r["status"],
            f"{r['tps']:,.1f}" if r.get("tps") is not None else "-",
            f"{r['latency_avg_ms']:.3f}" if r.get("latency_avg_ms") is not None else "-",
            f"{r['load_seconds']:.2f}" if r.get("load_seconds") is not None else "-",
            human_bytes(r["space_bytes"]) if r.get("space_bytes") is not None else "-",
            (r.get("error") or "")[:80],
        )
    return table


def run_detail(run: Mapping[str, Any]) -> Table:
    """A two-column view of one run, nested values summarised."""
    table = Table(show_header=False, title=f"run {run['run_id']}: {run['cell']}",
                  title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value")
    skip = {"series", "checkpoints", "artifacts", "environment", "params", "storage_details",
            "space", "metrics", "kernel_applied"}
    for key, value in run.items():
        if key in skip or value is None:
            continue
        if key.endswith("_bytes") and isinstance(value, int):
            value = f"{value} ({human_bytes(value)})"
        table.add_row(key, str(value))
    if run.get("fuse"):
        table.add_row("WARNING", Text("ZFS through FUSE (zfs-fuse): not kernel ZFS numbers",
                                      style="bold red"))
    details = run.get("storage_details") or {}
    for role in ("data", "wal"):
        vol = details.get(role)
        if vol:
            table.add_row(f"{role} volume", f"{vol.get('fs')} on {vol.get('source')} "
                                            f"({vol.get('mount_options', '')})")
    if details.get("implementation"):
        table.add_row("zfs implementation", details["implementation"])
    pool = details.get("pool")
    if pool:
        table.add_row("zfs pool", f"{pool['name']}: {pool['layout']} of {len(pool['devices'])}"
                      f" device(s), log {pool['log'] or '-'}, cache {pool['cache'] or '-'}, "
                      f"ashift {pool['ashift'] or 'default'}")
    for role in ("data", "wal"):
        vol = details.get(role) or {}
        props = vol.get("properties")
        if props:
            shown = {k: props[k] for k in ("recordsize", "compression", "atime", "logbias",
                                            "primarycache", "sync", "xattr", "redundant_metadata")
                     if k in props}
            table.add_row(f"zfs {role} dataset", f"{vol.get('dataset')}: " + ", ".join(
                f"{k}={v}" for k, v in shown.items()))
    space = run.get("space") or {}
    for phase in ("after_load", "after_run"):
        figures = space.get(phase) or {}
        if figures:
            parts = [f"data directory {human_bytes(figures.get('space_bytes'))}"]
            if "compressratio" in figures:
                parts.append(f"compressratio {figures['compressratio']}")
            if "zfs_used_bytes" in figures:
                parts.append(f"zfs used {human_bytes(figures['zfs_used_bytes'])}")
            table.add_row(f"space {phase.replace('_', ' ')}", ", ".join(parts))
    if run.get("latency_ms"):
        table.add_row("latency percentiles", ", ".join(
            f"{k} {v:.2f} ms" for k, v in run["latency_ms"].items()))
    for a in run.get("kernel_applied") or []:
        table.add_row(f"kernel {a['name']}", f"{a['before']} -> {a['after']} (restored after)")
    ceiling = (run.get("metrics") or {}).get("ceiling")
    if ceiling:
        fsync = ceiling.get("pg_test_fsync") or {}
        best = max(fsync.items(), key=lambda kv: kv[1]) if fsync else None
        fio = ceiling.get("fio") or {}
        table.add_row("storage ceiling", (f"best fsync method {best[0]}: {best[1]:,.0f} ops/s; "
                                          if best else "")
                      + (f"fio 8k randrw {fio.get('read_iops', 0):,.0f} r + "
                         f"{fio.get('write_iops', 0):,.0f} w IOPS" if fio else ""))
    series = run.get("series") or {}
    if series:
        table.add_row("series", ", ".join(f"{k} ({len(v['values'])} s)"
                                          for k, v in series.items()))
    for c in run.get("checkpoints") or []:
        when = "?" if c.get("started_s") is None else f"{c['started_s']:+.1f} s"
        table.add_row("checkpoint", f"at {when} ({c['reason']}): {c['buffers']} buffers, "
                                    f"write {c['write_s']} s, sync {c['sync_s']} s, "
                                    f"total {c['total_s']} s")
    for kind, art in (run.get("artifacts") or {}).items():
        table.add_row(f"artifact {kind}", art["path"])
    return table
