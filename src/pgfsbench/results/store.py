"""The results store: SQLite by default (a file path), PostgreSQL for teams (a URL)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from pgfsbench.results import schema
from pgfsbench.system.errors import StoreError

LIST_KEYS = ("run_id", "campaign_id", "cell", "storage", "fs", "postgres", "kernel", "workload",
             "clients", "repetition", "status", "tps", "latency_avg_ms", "load_seconds",
             "space_bytes", "error", "implementation", "fuse", "started_at")


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def engine_url(target: str) -> str:
    if "://" not in target:
        return f"sqlite:///{Path(target).expanduser().resolve()}"
    if target.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + target.split("://", 1)[1]
    return target


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # SQLite gives naive datetimes back; we stored UTC
            value = value.replace(tzinfo=dt.UTC)
        return value.isoformat()
    return value


class Store:
    def __init__(self, target: str, artifacts_root: Path | None = None):
        self.target = target
        self.url = engine_url(target)
        if self.url.startswith("sqlite:///"):
            db = Path(self.url[len("sqlite:///"):])
            if not db.parent.is_dir():
                raise StoreError(f"{db.parent} does not exist")
            self.artifacts_root = artifacts_root or db.parent / f"{db.stem}-artifacts"
        else:
            self.artifacts_root = artifacts_root or Path("pgfsbench-artifacts").resolve()
        try:
            self.engine: Engine = create_engine(self.url)
            schema.metadata.create_all(self.engine)
            self._check_version()
        except SQLAlchemyError as exc:
            raise StoreError(f"results store {target}: {exc.__class__.__name__}: "
                             f"{str(exc).splitlines()[0]}") from None

    def _check_version(self) -> None:
        with self.engine.begin() as conn:
            row = conn.execute(select(schema.meta.c.value).where(
                schema.meta.c.key == "schema_version")).first()
            if row is None:
                conn.execute(insert(schema.meta).values(key="schema_version",
                                                        value=str(schema.SCHEMA_VERSION)))
            elif int(row[0]) > schema.SCHEMA_VERSION:
                raise StoreError(f"{self.target} was written by a newer pgfsbench "
                                 f"(schema {row[0]} > {schema.SCHEMA_VERSION})")

    # ------------------------------------------------------------ writing

    def start_campaign(self, **fields: Any) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(insert(schema.campaign).values(
                started_at=now(), status="running", **fields))
            return int(result.inserted_primary_key[0])  # type: ignore[index]

    def finish_campaign(self, campaign_id: int, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(schema.campaign).where(schema.campaign.c.id == campaign_id)
                         .values(ended_at=now(), status=status))

    def start_run(self, **fields: Any) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(insert(schema.run).values(
                started_at=now(), status="running", **fields))
            return int(result.inserted_primary_key[0])  # type: ignore[index]

    def update_run(self, run_id: int, **fields: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(schema.run).where(schema.run.c.id == run_id).values(**fields))

    def finish_run(self, run_id: int, status: str, **fields: Any) -> None:
        self.update_run(run_id, status=status, ended_at=now(), **fields)

    def mark_aborted(self, run_ids: Sequence[int], reason: str) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(
                update(schema.run)
                .where(schema.run.c.id.in_(list(run_ids)), schema.run.c.status == "running")
                .values(status="aborted", error=reason, ended_at=now()))
            return int(result.rowcount)

    def put_series(self, run_id: int, name: str, data: Sequence[Any], *, unit: str = "",
                   t0: float = 0.0, step: float = 1.0) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(schema.series).where(schema.series.c.run_id == run_id,
                                                     schema.series.c.name == name))
            conn.execute(insert(schema.series).values(run_id=run_id, name=name, unit=unit, t0=t0,
                                                      step=step, data=list(data)))

    def put_checkpoints(self, run_id: int, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        with self.engine.begin() as conn:
            conn.execute(insert(schema.checkpoint), [{"run_id": run_id, **r} for r in rows])

    def put_artifact(self, run_id: int, kind: str, path: Path) -> None:
        size = path.stat().st_size if path.exists() else None
        with self.engine.begin() as conn:
            conn.execute(delete(schema.artifact).where(schema.artifact.c.run_id == run_id,
                                                       schema.artifact.c.kind == kind))
            conn.execute(insert(schema.artifact).values(run_id=run_id, kind=kind,
                                                        path=str(path), bytes=size))

    def put_ceiling(self, identity: str, storage: str, figures: dict[str, Any]) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(schema.ceiling).where(schema.ceiling.c.identity == identity))
            conn.execute(insert(schema.ceiling).values(identity=identity, storage=storage,
                                                       measured_at=now(), figures=figures))

    def get_ceiling(self, identity: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.ceiling).where(
                schema.ceiling.c.identity == identity)).mappings().first()
        return {k: _plain(v) for k, v in dict(row).items()} if row else None

    # ------------------------------------------------------------ reading

    def list_runs(self, campaign_id: int | None = None,
                  status: str | None = None) -> list[dict[str, Any]]:
        query = select(schema.run).order_by(schema.run.c.id)
        if campaign_id is not None:
            query = query.where(schema.run.c.campaign_id == campaign_id)
        if status is not None:
            query = query.where(schema.run.c.status == status)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [self._row(dict(r)) for r in rows]

    @staticmethod
    def _row(row: dict[str, Any]) -> dict[str, Any]:
        row = {k: _plain(v) for k, v in row.items()}
        row["run_id"] = row.pop("id")
        return row

    def get_run(self, run_id: int) -> dict[str, Any]:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.run).where(schema.run.c.id == run_id)).mappings() \
                .first()
            if row is None:
                raise StoreError(f"no run {run_id} in {self.target}")
            result = self._row(dict(row))
            result["series"] = {
                s["name"]: {"unit": s["unit"], "t0": s["t0"], "step": s["step"],
                            "values": s["data"]}
                for s in conn.execute(select(schema.series).where(
                    schema.series.c.run_id == run_id).order_by(schema.series.c.name)).mappings()
            }
            result["checkpoints"] = [
                {k: v for k, v in dict(c).items() if k not in ("id", "run_id")}
                for c in conn.execute(select(schema.checkpoint).where(
                    schema.checkpoint.c.run_id == run_id).order_by(schema.checkpoint.c.id))
                .mappings()
            ]
            result["artifacts"] = {
                a["kind"]: {"path": a["path"], "bytes": a["bytes"]}
                for a in conn.execute(select(schema.artifact).where(
                    schema.artifact.c.run_id == run_id)).mappings()
            }
        return result

    def campaigns(self) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(schema.campaign).order_by(schema.campaign.c.id)) \
                .mappings().all()
        return [{k: _plain(v) for k, v in dict(r).items() if k != "spec_text"} for r in rows]

    def latest_campaign_id(self) -> int | None:
        camps = self.campaigns()
        return int(camps[-1]["id"]) if camps else None

    def close(self) -> None:
        self.engine.dispose()
