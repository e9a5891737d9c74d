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
            values = {k: v for k, v in dict(row).items() if k not in _ADOPTED_KEEPS}
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
            _copy_children(src, dst, old, new)
            if moved is not None:
                checksums: dict[str, object] = {}
                for a in dst.execute(
                    select(schema.artifact).where(schema.artifact.c.run_id == new)
                ).mappings():
                    path = _moved(str(a["path"]), moved)
                    dst.execute(
                        update(schema.artifact)
                        .where(schema.artifact.c.run_id == new, schema.artifact.c.kind == a["kind"])
                        .values(path=path)
                    )
                    checksums[str(a["kind"])] = {"path": path, "sha256": sha256_of(Path(path))}
                metrics = dict(values.get("metrics") or {})
                metrics["imported_artifacts"] = checksums
                dst.execute(
                    update(schema.run).where(schema.run.c.id == new).values(metrics=metrics)
                )


def _moved(path: str, moved: tuple[Path, Path]) -> str:
    src, dst = moved
    p = Path(path)
    return str(dst / p.relative_to(src)) if p.is_relative_to(src) else path
