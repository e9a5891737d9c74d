"""Copy the campaigns and runs of one results store into another (a host's SQLite file into
the team's PostgreSQL database), idempotently.

A campaign is the same campaign in both stores when its uuid is; a run is the same run when
its uuid and host are. Re-importing a file, or the file of a host that was resumed since,
adds only what is not there yet, and refreshes the campaign's status and notes. Series,
checkpoints and artifact references travel with each run; an artifact file is kept where
it is, by path, with its size and SHA-256 recorded so that a copy can be checked later.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from pgfsbench.results import schema
from pgfsbench.results.store import Store


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
    try:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


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


def _copy_children(src: Connection, dst: Connection, old: int, new: int) -> None:
    for s in src.execute(select(schema.series).where(schema.series.c.run_id == old)).mappings():
        dst.execute(insert(schema.series).values(**{**dict(s), "run_id": new}))
    for c in src.execute(
        select(schema.checkpoint).where(schema.checkpoint.c.run_id == old)
    ).mappings():
        dst.execute(
            insert(schema.checkpoint).values(
                **{k: v for k, v in dict(c).items() if k not in ("id", "run_id")}, run_id=new
            )
        )
    checksums: dict[str, object] = {}
    for a in src.execute(select(schema.artifact).where(schema.artifact.c.run_id == old)).mappings():
        dst.execute(insert(schema.artifact).values(**{**dict(a), "run_id": new}))
        checksums[str(a["kind"])] = {"path": a["path"], "sha256": sha256_of(Path(a["path"]))}
    if checksums:
        row = dst.execute(select(schema.run.c.metrics).where(schema.run.c.id == new)).first()
        metrics = dict(row[0] or {}) if row else {}
        metrics["imported_artifacts"] = checksums
        dst.execute(update(schema.run).where(schema.run.c.id == new).values(metrics=metrics))
