"""Copy the campaigns and runs of one results store into another (a host's SQLite file into
the team's PostgreSQL database), idempotently.

A campaign is the same campaign in both stores when its uuid is; a run is the same run when
its uuid and host are. Re-importing a file, or the file of a host that was resumed since,
adds only what is not there yet, and refreshes the campaign's status and notes. Series,
checkpoints and artifact references travel with each run; an artifact file is kept where
it is, by path, with its size and SHA-256 recorded so that a copy can be checked later.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    Integer,
    String,
    Table,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.types import TypeEngine

from pgfsbench.results import schema
from pgfsbench.results.store import Store
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held
from pgfsbench.system.trust import open_written_by_others


@dataclass
class ImportReport:
    campaigns_added: int = 0
    campaigns_updated: int = 0
    runs_added: int = 0
    runs_already_there: int = 0
    hosts: set[str] = field(default_factory=set)

    def text(self) -> str:
        return (
            f"{self.runs_added} run(s) added, {self.runs_already_there} already there; "
            f"{self.campaigns_added} campaign(s) added, {self.campaigns_updated} updated; "
            f"host(s): {', '.join(sorted(self.hosts)) or '-'}"
        )


def sha256_of(path: Path) -> str | None:
    """An artifact's SHA-256, when it is a regular file (opened without following a link
    or waiting on a FIFO: a results file names it, and a results file is input)."""
    try:
        with open_written_by_others(path) as f:
            digest = hashlib.sha256()
            while block := f.read(1 << 20):
                digest.update(block)
            return digest.hexdigest()
    except OSError:
        return None


def sha256_beneath(root: Path, path: Path) -> str | None:
    """The SHA-256 of ``path`` when it is a regular file beneath ``root`` reached without
    a link (a pod's bundle names its artifacts: none may name a file of the host's)."""
    if not path.is_relative_to(root):
        return None
    *dirs, name = path.relative_to(root).parts or ("",)
    try:
        with Held.open(root) as top, top.descend(*dirs) as parent:
            fd = parent.open_existing(name, os.O_RDONLY)
            with os.fdopen(fd, "rb") as f:
                return hashlib.file_digest(f, "sha256").hexdigest()
    except (OSError, PgfsbenchError):
        return None


def _fits(column_type: TypeEngine[Any], value: object) -> bool:
    """Is ``value`` of the Python type a column of ``column_type`` holds?"""
    if isinstance(column_type, Boolean):
        return isinstance(value, bool) or value in (0, 1)
    if isinstance(column_type, Integer):  # BigInteger too
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(column_type, Float):
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(column_type, String):  # Text too
        return isinstance(value, str)
    if isinstance(column_type, DateTime):
        return isinstance(value, dt.datetime)
    if isinstance(column_type, JSON):
        return isinstance(value, dict | list | str | int | float | bool)
    return False


def checked_row(table: Table, row: Mapping[str, Any]) -> dict[str, Any]:
    """A row read from another machine's store, with our columns only, each of its
    column's type; ValueError names the first that is not."""
    values = {}
    for column in table.columns:
        value = row.get(column.name)
        if value is not None and not _fits(column.type, value):
            raise ValueError(
                f"{table.name}.{column.name} holds a {type(value).__name__}, not a "
                f"{column.type.__class__.__name__}"
            )
        values[column.name] = value
    return values


def _campaign_key(row: dict[str, object]) -> str:
    """The uuid; a file from before uuids existed falls back to name + host + start."""
    return str(row.get("uuid") or f"{row.get('name')}|{row.get('host')}|{row.get('started_at')}")


def import_store(source: Store, target: Store, host: str | None = None) -> ImportReport:
    """Everything of ``source`` not yet in ``target``. ``host`` overrides the runs' host
    (an inventory name given on import)."""
    report = ImportReport()
    with source.engine.connect() as src, target.engine.begin() as dst:
        existing_camps = {
            _campaign_key(dict(r)): int(r["id"])
            for r in dst.execute(select(schema.campaign)).mappings()
        }
        existing_runs = {
            (str(r["uuid"]), str(r["host"])): int(r["id"])
            for r in dst.execute(
                select(schema.run.c.id, schema.run.c.uuid, schema.run.c.host)
            ).mappings()
            if r["uuid"]
        }
        campaign_ids: dict[int, int] = {}
        for row in src.execute(select(schema.campaign).order_by(schema.campaign.c.id)).mappings():
            camp = dict(row)
            key = _campaign_key(camp)
            values = {k: v for k, v in camp.items() if k != "id"}
            if host is not None:
                values["host"] = host
            if key in existing_camps:
                campaign_ids[int(camp["id"])] = existing_camps[key]
                dst.execute(
                    update(schema.campaign)
                    .where(schema.campaign.c.id == existing_camps[key])
                    .values(status=camp["status"], ended_at=camp["ended_at"], notes=camp["notes"])
                )
                report.campaigns_updated += 1
            else:
                new = dst.execute(insert(schema.campaign).values(**values))
                new_id = int(new.inserted_primary_key[0])  # type: ignore[index]
                campaign_ids[int(camp["id"])] = new_id
                existing_camps[key] = new_id
                report.campaigns_added += 1
        run_ids: dict[int, int] = {}
        superseded: list[tuple[int, int]] = []
        for row in src.execute(select(schema.run).order_by(schema.run.c.id)).mappings():
            run = dict(row)
            run_host = host or str(run.get("host") or "")
            report.hosts.add(run_host)
            rkey = (str(run.get("uuid")), run_host)
            if run.get("uuid") and rkey in existing_runs:
                run_ids[int(run["id"])] = existing_runs[rkey]
                if run.get("superseded_by"):  # superseded since (a resumed host)
                    superseded.append((existing_runs[rkey], int(run["superseded_by"])))
                report.runs_already_there += 1
                continue
            values = {k: v for k, v in run.items() if k not in ("id", "superseded_by")}
            values["host"] = run_host
            values["campaign_id"] = campaign_ids.get(int(run["campaign_id"] or 0))
            new = dst.execute(insert(schema.run).values(**values))
            new_id = int(new.inserted_primary_key[0])  # type: ignore[index]
            run_ids[int(run["id"])] = new_id
            if run.get("superseded_by"):
                superseded.append((new_id, int(run["superseded_by"])))
            report.runs_added += 1
            _copy_children(src, dst, int(run["id"]), new_id)
        for new_id, old_by in superseded:
            if old_by in run_ids:
                dst.execute(
                    update(schema.run)
                    .where(schema.run.c.id == new_id)
                    .values(superseded_by=run_ids[old_by])
                )
        known = {
            str(r["identity"]) for r in dst.execute(select(schema.ceiling.c.identity)).mappings()
        }
        for row in src.execute(select(schema.ceiling)).mappings():
            if str(row["identity"]) not in known:
                dst.execute(insert(schema.ceiling).values(**dict(row)))
    return report


def _copy_children(
    src: Connection, dst: Connection, old: int, new: int, moved: tuple[Path, Path] | None = None
) -> None:
    """A run's series, checkpoints and artifacts. With ``moved`` (another machine's
    store: a pod's bundle), each row is checked for our types and an artifact is kept only
    beneath the bundle's directory (``moved``'s second), found without a link."""

    def rows(table: Table) -> list[dict[str, Any]]:
        found = src.execute(select(table).where(table.c.run_id == old)).mappings()
        return [checked_row(table, dict(r)) if moved else dict(r) for r in found]

    for s in rows(schema.series):
        dst.execute(insert(schema.series).values(**{**s, "run_id": new}))
    for c in rows(schema.checkpoint):
        dst.execute(
            insert(schema.checkpoint).values(
                **{k: v for k, v in c.items() if k not in ("id", "run_id")}, run_id=new
            )
        )
    checksums: dict[str, object] = {}
    refused: list[str] = []
    for a in rows(schema.artifact):
        path = str(a["path"])
        if moved is not None:
            if not Path(path).is_relative_to(moved[0]) or ".." in Path(path).parts:
                refused.append(f"{a['kind']}: {path[:200]}")
                continue
            path = _moved(path, moved)
        dst.execute(insert(schema.artifact).values(**{**a, "path": path, "run_id": new}))
        digest = sha256_beneath(moved[1], Path(path)) if moved else sha256_of(Path(path))
        checksums[str(a["kind"])] = {"path": path, "sha256": digest}
    if checksums or refused:
        row = dst.execute(select(schema.run.c.metrics).where(schema.run.c.id == new)).first()
        metrics = dict(row[0] or {}) if row else {}
        metrics["imported_artifacts"] = checksums
        if refused:
            metrics["artifacts_refused"] = {"outside the bundle": refused[:20]}
        dst.execute(update(schema.run).where(schema.run.c.id == new).values(metrics=metrics))


# what a run adopted from another store keeps of its own row (the rest is the source's)
_ADOPTED_KEEPS = (
    "id",
    "campaign_id",
    "cell",
    "storage",
    "postgres",
    "kernel",
    "workload",
    "repetition",
    "params",
    "host",
    "uuid",
    "superseded_by",
)


def adopt_runs(
    source: Store,
    target: Store,
    pairs: list[tuple[int, int]],
    moved: tuple[Path, Path] | None = None,
    environment: dict[str, object] | None = None,
    storage_details: dict[str, object] | None = None,
) -> None:
    """Make each target run of ``pairs`` (source run id, target run id) the source run:
    its outcome, figures, series, checkpoints and artifacts. The target keeps its identity
    (id, campaign, cell and its configurations, repetition, params, host, uuid); ``moved``
    rewrites artifact paths from where the source wrote them to where they are now;
    ``environment`` and
    ``storage_details`` are merged into the run's own (what the pod could not see)."""
    with source.engine.connect() as src, target.engine.begin() as dst:
        for old, new in pairs:
            row = src.execute(select(schema.run).where(schema.run.c.id == old)).mappings().first()
            if row is None:
                raise ValueError(f"run {old} is not in {source.target}")
            checked = checked_row(schema.run, dict(row)) if moved is not None else dict(row)
            values = {k: v for k, v in checked.items() if k not in _ADOPTED_KEEPS}
            if environment:
                values["environment"] = {**dict(values.get("environment") or {}), **environment}
            if storage_details:
                values["storage_details"] = {
                    **dict(values.get("storage_details") or {}),
                    **storage_details,
                }
            if moved is not None and values.get("artifacts_dir"):
                values["artifacts_dir"] = _moved(str(values["artifacts_dir"]), moved)
            dst.execute(update(schema.run).where(schema.run.c.id == new).values(**values))
            for table in (schema.series, schema.checkpoint, schema.artifact):
                dst.execute(table.delete().where(table.c.run_id == new))
            _copy_children(src, dst, old, new, moved)


def _moved(path: str, moved: tuple[Path, Path]) -> str:
    src, dst = moved
    p = Path(path)
    return str(dst / p.relative_to(src)) if p.is_relative_to(src) else path
