"""The results store: SQLite by default (a file path), PostgreSQL for teams (a URL)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import sqlite3
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from sqlalchemy import create_engine, delete, insert, inspect, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from pgfsbench.results import schema
from pgfsbench.results.records import (
    JsonObject,
    RunOutcome,
    RunPreparation,
    StoredArtifact,
    StoredCampaign,
    StoredCheckpoint,
    StoredRun,
    StoredSeries,
)
from pgfsbench.results.target import shown
from pgfsbench.system.errors import StoreError, UsageError
from pgfsbench.system.held import Held

LIST_KEYS = (
    "run_id",
    "campaign_id",
    "host",
    "cell",
    "storage",
    "fs",
    "postgres",
    "kernel",
    "workload",
    "pg_version",
    "scale",
    "clients",
    "repetition",
    "status",
    "tps",
    "throughput",
    "throughput_unit",
    "latency_avg_ms",
    "load_seconds",
    "space_bytes",
    "error",
    "implementation",
    "fuse",
    "started_at",
    "superseded_by",
    "uuid",
)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


SUPPORTED = "a SQLite file path, sqlite:///PATH, or postgresql://..."


def engine_url(target: str) -> str:
    """The SQLAlchemy URL of a results target; anything we do not support is refused."""
    if "://" not in target:
        return f"sqlite:///{Path(target).expanduser().resolve()}"
    scheme = target.split("://", 1)[0].lower()
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return "postgresql+psycopg://" + target.split("://", 1)[1]
    if scheme == "sqlite":
        return target
    raise UsageError(f"--results {shown(target)}: {scheme}:// is not supported ({SUPPORTED})")


def sqlite_path(url: str) -> Path | None:
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :])
    return None


# A pod's results file holds a few runs: reading it whole takes well under a second. A
# query still going after this is a trap (a view that recurses, a table made huge).
FOREIGN_DEADLINE_S = 60.0
# how long a write waits for readers of the same SQLite file (another terminal's `results
# show`, `report` or a script of the DBA's, which hold a shared lock while they read)
# before it fails; SQLite's own 5 s ended a running campaign on a long read
SQLITE_BUSY_S = 120.0


def _foreign_connection(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False)
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA query_only = ON")
    deadline = time.monotonic() + FOREIGN_DEADLINE_S
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    return conn


def foreign_schema_problem(conn: Connection) -> str | None:
    """Why another machine's results file cannot be read as ours (None: it can): its
    schema revision must be ours, and every table pgfsbench reads a table (never a view,
    whose query would run here) with exactly our columns. Only sqlite_master and the
    table_info pragma are read to decide."""
    kinds = {
        str(name): str(kind)
        for kind, name in conn.execute(text("SELECT type, name FROM sqlite_master")).all()
    }
    if kinds.get("alembic_version") != "table":
        return "no schema revision (not a results file of this pgfsbench)"
    revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    if revision != HEAD_REVISION:
        return (
            f"results schema revision {str(revision)[:20]!r}, where this pgfsbench writes "
            f"{HEAD_REVISION}: the image and the controller are different versions"
        )
    for table in schema.metadata.sorted_tables:
        if kinds.get(table.name) != "table":
            return f"{table.name} is a {kinds.get(table.name, 'missing table')}, not a table"
        columns = {str(r[1]) for r in conn.execute(text(f'PRAGMA table_xinfo("{table.name}")'))}
        if columns != {c.name for c in table.columns}:
            return f"table {table.name} does not have this pgfsbench's columns"
    return None


def check_writable(target: str) -> None:
    """Refuse, before anything runs, a results file that could not be written."""
    db = sqlite_path(engine_url(target))
    if db is None:
        return
    directory = db.parent
    if not directory.is_dir():
        raise UsageError(f"--results {target}: {directory} does not exist")
    if os.statvfs(directory).f_flag & os.ST_RDONLY:
        raise UsageError(f"--results {target}: {directory} is on a read-only filesystem")
    if db.exists():
        if not db.is_file():
            raise UsageError(f"--results {target}: not a file")
        if not os.access(db, os.R_OK | os.W_OK):
            raise UsageError(f"--results {target}: not writable by this user")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(
            f"--results {target}: cannot write in {directory} (SQLite needs to "
            "create its journal beside the file)"
        )


HEAD_REVISION = "0003"  # the newest migration (a unit test keeps the two in step)


def _alembic_config(conn: Connection) -> Any:
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(resources.files("pgfsbench.results") / "migrations"))
    cfg.attributes["connection"] = conn
    return cfg


def migrate(engine: Engine, target: str) -> None:
    """Bring the schema to the head revision. A file from pgfsbench 0.1.0 (no alembic
    table, meta schema_version 1) is stamped 0001 first; a newer file is refused."""
    with engine.begin() as conn:
        tables = set(inspect(conn).get_table_names())
        current = None
        if "alembic_version" in tables:
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            if current == HEAD_REVISION:
                return  # up to date: alembic (slow to import) is not needed
        if not tables:
            create_at_head(conn)
            return
        from alembic import command
        from alembic.script import ScriptDirectory

        cfg = _alembic_config(conn)
        scripts = ScriptDirectory.from_config(cfg)
        if "alembic_version" in tables:
            if current is not None and current not in {
                s.revision for s in scripts.walk_revisions()
            }:
                raise StoreError(
                    f"{target} was written by a newer pgfsbench (schema revision "
                    f"{current}); upgrade pgfsbench to read it"
                )
        elif "run" in tables:
            version = conn.execute(
                text("SELECT value FROM meta WHERE key = 'schema_version'")
            ).scalar()
            if version is not None and int(version) > 1:
                raise StoreError(f"{target} was written by a newer pgfsbench (schema {version})")
            command.stamp(cfg, "0001")
        command.upgrade(cfg, "head")
        conn.execute(delete(schema.meta).where(schema.meta.c.key == "schema_version"))
        conn.execute(
            insert(schema.meta).values(key="schema_version", value=str(schema.SCHEMA_VERSION))
        )


def create_at_head(conn: Connection) -> None:
    """An empty store gets the head schema in one step (what the migrations build, which a
    unit test checks table by table), stamped at the head revision: alembic's import and
    its walk through every revision cost a one-run campaign a third of a second."""
    schema.metadata.create_all(conn)
    conn.execute(
        text(
            "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL, "
            "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
        )
    )
    conn.execute(
        text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": HEAD_REVISION}
    )
    conn.execute(insert(schema.meta).values(key="schema_version", value=str(schema.SCHEMA_VERSION)))


class SeriesRow(NamedTuple):
    """One series of a run as stored: its values every ``step`` seconds from ``t0``."""

    name: str
    data: Sequence[Any]
    unit: str = ""
    t0: float = 0.0
    step: float = 1.0


class Store:
    def __init__(self, target: str, artifacts_root: Path | None = None):
        self.target = shown(target)  # what messages, journals and reports may say
        self.url = engine_url(target)
        db = sqlite_path(self.url)
        if db is not None:
            if not db.parent.is_dir():
                raise StoreError(f"{db.parent} does not exist")
            self.artifacts_root = artifacts_root or db.parent / f"{db.stem}-artifacts"
            if not db.exists():
                # root's alone: runs keep the command lines of other users' processes (a
                # disturbance's); SQLite gives its journal files the same mode
                with contextlib.suppress(FileExistsError), Held.open(db.parent) as parent:
                    parent.create(db.name, b"", 0o600)
        else:
            self.artifacts_root = artifacts_root or Path("pgfsbench-artifacts").resolve()
        try:
            busy = {"connect_args": {"timeout": SQLITE_BUSY_S}} if db is not None else {}
            self.engine: Engine = create_engine(self.url, **busy)
            migrate(self.engine, self.target)
        except SQLAlchemyError as exc:
            raise StoreError(
                f"results store {self.target}: {exc.__class__.__name__}: {str(exc).splitlines()[0]}"
            ) from None
        except ModuleNotFoundError as exc:
            raise StoreError(f"results store {self.target}: {exc}") from None

    @classmethod
    def foreign(cls, path: Path, artifacts_root: Path) -> Store:
        """Another machine's SQLite file (a pod's, from its bundle), opened read-only, as
        hostile input: no migration, the schema checked (``foreign_schema_problem``), its
        schema never trusted (``trusted_schema = OFF``), every query within a deadline."""
        store = cls.__new__(cls)
        store.target = shown(str(path))
        store.url = f"sqlite:///{path}"
        store.artifacts_root = artifacts_root
        store.engine = create_engine("sqlite://", creator=lambda: _foreign_connection(path))
        try:
            with store.engine.connect() as conn:
                why = foreign_schema_problem(conn)
        except SQLAlchemyError as exc:
            store.engine.dispose()
            raise StoreError(
                f"{store.target}: not a results file ({exc.__class__.__name__})"
            ) from None
        if why is not None:
            store.engine.dispose()
            raise StoreError(f"{store.target}: {why}")
        return store

    # ------------------------------------------------------------ writing

    def start_campaign(self, campaign: StoredCampaign) -> int:
        """A new campaign, running from now; its id (the record's own id is ignored)."""
        fields = {k: v for k, v in campaign.as_dict().items() if k != "id" and v is not None}
        fields.update(started_at=now(), status="running")
        with self.engine.begin() as conn:
            result = conn.execute(insert(schema.campaign).values(**fields))
            return int(result.inserted_primary_key[0])  # type: ignore[index]

    def finish_campaign(self, campaign_id: int, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(schema.campaign)
                .where(schema.campaign.c.id == campaign_id)
                .values(ended_at=now(), status=status)
            )

    def start_run(self, run: StoredRun) -> int:
        """A new run, running from now; its id. What the record leaves empty is left
        unset (its id, status and times are the store's)."""
        fields = {
            k: v
            for k, v in run.columns().items()
            if k not in ("run_id", "status", "started_at", "ended_at")
            and v is not None
            and v != {}
            and v != []
        }
        fields.update(started_at=now(), status="running")
        with self.engine.begin() as conn:
            result = conn.execute(insert(schema.run).values(**fields))
            return int(result.inserted_primary_key[0])  # type: ignore[index]

    def _update_run(self, run_id: int, fields: Mapping[str, object]) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(schema.run).where(schema.run.c.id == run_id).values(**fields))

    def prepare_run(self, run_id: int, prepared: RunPreparation) -> None:
        """What preparing the run's cell established (written before it is measured)."""
        self._update_run(run_id, prepared.columns())

    def set_run_host(self, run_id: int, host: str) -> None:
        """Where the run ran, when that is learnt after it started (a cluster's node)."""
        self._update_run(run_id, {"host": host})

    def add_to_run(
        self, run_id: int, metrics: dict[str, object], warnings: list[str] | None = None
    ) -> None:
        """What was learnt of a finished run afterwards: ``metrics`` merged into its own,
        ``warnings`` in place of its list (its status and times stay)."""
        fields: dict[str, object] = {"metrics": self._merged_metrics(run_id, metrics)}
        if warnings is not None:
            fields["warnings"] = warnings
        self._update_run(run_id, fields)

    def _merged_metrics(self, run_id: int, new: object) -> object:
        with self.engine.connect() as conn:
            old = conn.execute(
                select(schema.run.c.metrics).where(schema.run.c.id == run_id)
            ).scalar()
        if isinstance(old, dict):
            return {**old, **(new if isinstance(new, dict) else {})}
        return new

    def keep_outcome(self, run_id: int, outcome: RunOutcome) -> None:
        """What a run measured, its status and times left as they are (a run about to be
        failed by its caller, who names the cause); `metrics` merged as in `finish_run`."""
        fields = outcome.columns()
        fields.pop("status")
        fields["metrics"] = self._merged_metrics(run_id, fields.get("metrics", {}))
        self._update_run(run_id, fields)

    def finish_run(self, run_id: int, outcome: RunOutcome) -> None:
        """The run's outcome, ended now; its `metrics` are merged into what was stored
        before (the samplers' evidence, written during the run)."""
        fields = outcome.columns()
        fields["metrics"] = self._merged_metrics(run_id, fields.get("metrics", {}))
        fields["ended_at"] = now()
        self._update_run(run_id, fields)

    def mark_aborted(self, run_ids: Sequence[int], reason: str) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(
                update(schema.run)
                .where(schema.run.c.id.in_(list(run_ids)), schema.run.c.status == "running")
                .values(status="aborted", error=reason, ended_at=now())
            )
            return int(result.rowcount)

    def mark_campaign_aborted(self, campaign_id: int) -> bool:
        """A campaign left 'running' by a dead process becomes 'aborted'."""
        with self.engine.begin() as conn:
            result = conn.execute(
                update(schema.campaign)
                .where(schema.campaign.c.id == campaign_id, schema.campaign.c.status == "running")
                .values(status="aborted", ended_at=now())
            )
            return bool(result.rowcount)

    def note_campaign(self, campaign_id: int, key: str, value: Any) -> None:
        """Record one of the engine's decisions in the campaign's notes."""
        with self.engine.begin() as conn:
            old = conn.execute(
                select(schema.campaign.c.notes).where(schema.campaign.c.id == campaign_id)
            ).scalar()
            notes = dict(old) if isinstance(old, dict) else {}
            notes[key] = value
            conn.execute(
                update(schema.campaign)
                .where(schema.campaign.c.id == campaign_id)
                .values(notes=notes)
            )

    def reopen_campaign(self, campaign_id: int) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(schema.campaign)
                .where(schema.campaign.c.id == campaign_id)
                .values(status="running", ended_at=None)
            )

    def supersede(self, campaign_id: int, cell: str, repetition: int, by: int) -> int:
        """Earlier results of this cell x repetition that were not ok are replaced by run
        ``by`` (a resumed campaign): kept, but no longer counted."""
        with self.engine.begin() as conn:
            result = conn.execute(
                update(schema.run)
                .where(
                    schema.run.c.campaign_id == campaign_id,
                    schema.run.c.cell == cell,
                    schema.run.c.repetition == repetition,
                    schema.run.c.id != by,
                    schema.run.c.status != "ok",
                    schema.run.c.superseded_by.is_(None),
                )
                .values(superseded_by=by)
            )
            return int(result.rowcount)

    def put_series(
        self,
        run_id: int,
        name: str,
        data: Sequence[Any],
        *,
        unit: str = "",
        t0: float = 0.0,
        step: float = 1.0,
    ) -> None:
        self.put_many_series(run_id, [SeriesRow(name, data, unit, t0, step)])

    def put_many_series(self, run_id: int, rows: Sequence[SeriesRow]) -> None:
        """Every series of a run in one transaction (one commit: a run has about a hundred,
        and each commit of SQLite's waits for the disk)."""
        rows = list({r.name: r for r in rows}.values())  # a name given twice: the last
        if not rows:
            return
        with self.engine.begin() as conn:
            conn.execute(
                delete(schema.series).where(
                    schema.series.c.run_id == run_id,
                    schema.series.c.name.in_([r.name for r in rows]),
                )
            )
            conn.execute(
                insert(schema.series),
                [
                    {
                        "run_id": run_id,
                        "name": r.name,
                        "unit": r.unit,
                        "t0": r.t0,
                        "step": r.step,
                        "data": list(r.data),
                    }
                    for r in rows
                ],
            )

    def put_checkpoints(self, run_id: int, rows: Sequence[dict[str, object]]) -> None:
        if not rows:
            return
        with self.engine.begin() as conn:
            conn.execute(insert(schema.checkpoint), [{"run_id": run_id, **r} for r in rows])

    def put_artifact(self, run_id: int, kind: str, path: Path) -> None:
        size = path.stat().st_size if path.exists() else None
        with self.engine.begin() as conn:
            conn.execute(
                delete(schema.artifact).where(
                    schema.artifact.c.run_id == run_id, schema.artifact.c.kind == kind
                )
            )
            conn.execute(
                insert(schema.artifact).values(run_id=run_id, kind=kind, path=str(path), bytes=size)
            )

    def put_ceiling(self, identity: str, storage: str, figures: dict[str, object]) -> None:
        with self.engine.begin() as conn:
            conn.execute(delete(schema.ceiling).where(schema.ceiling.c.identity == identity))
            conn.execute(
                insert(schema.ceiling).values(
                    identity=identity, storage=storage, measured_at=now(), figures=figures
                )
            )

    def get_ceiling(self, identity: str) -> JsonObject | None:
        """The figures measured once for a storage identity, if they were."""
        with self.engine.connect() as conn:
            figures = conn.execute(
                select(schema.ceiling.c.figures).where(schema.ceiling.c.identity == identity)
            ).scalar()
        return dict(figures) if isinstance(figures, dict) else None

    # ------------------------------------------------------------ reading

    def list_runs(
        self, campaign_id: int | None = None, status: str | None = None
    ) -> list[StoredRun]:
        """The runs (without their series), oldest first."""
        query = select(schema.run).order_by(schema.run.c.id)
        if campaign_id is not None:
            query = query.where(schema.run.c.campaign_id == campaign_id)
        if status is not None:
            query = query.where(schema.run.c.status == status)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [StoredRun.from_row(dict(r)) for r in rows]

    def get_run(self, run_id: int) -> StoredRun:
        """One run with its series, checkpoints and artifacts."""
        with self.engine.connect() as conn:
            row = (
                conn.execute(select(schema.run).where(schema.run.c.id == run_id)).mappings().first()
            )
            if row is None:
                raise StoreError(f"no run {run_id} in {self.target}")
            series = {
                str(s["name"]): StoredSeries.from_row(str(s["name"]), dict(s))
                for s in conn.execute(
                    select(schema.series)
                    .where(schema.series.c.run_id == run_id)
                    .order_by(schema.series.c.name)
                ).mappings()
            }
            checkpoints = tuple(
                StoredCheckpoint.from_row(dict(c))
                for c in conn.execute(
                    select(schema.checkpoint)
                    .where(schema.checkpoint.c.run_id == run_id)
                    .order_by(schema.checkpoint.c.id)
                ).mappings()
            )
            artifacts = {
                str(a["kind"]): StoredArtifact(str(a["path"]), a["bytes"])
                for a in conn.execute(
                    select(schema.artifact).where(schema.artifact.c.run_id == run_id)
                ).mappings()
            }
        return dataclasses.replace(
            StoredRun.from_row(dict(row)),
            series=series,
            checkpoints=checkpoints,
            artifacts=artifacts,
        )

    def full_runs(
        self, campaign_ids: Sequence[int] | None = None, host: str | None = None
    ) -> list[StoredRun]:
        """Every run of these campaigns (all when None), with series and checkpoints;
        runs superseded by a resumed run are left out."""
        ids = list(campaign_ids) if campaign_ids else [None]
        out = []
        for cid in ids:
            for r in self.list_runs(cid):
                if r.superseded_by or (host is not None and r.host != host):
                    continue
                out.append(self.get_run(r.run_id))
        return out

    def campaign(self, campaign_id: int) -> StoredCampaign | None:
        with self.engine.connect() as conn:
            row = (
                conn.execute(select(schema.campaign).where(schema.campaign.c.id == campaign_id))
                .mappings()
                .first()
            )
        return StoredCampaign.from_row(dict(row)) if row else None

    def campaigns(self) -> list[StoredCampaign]:
        """Every campaign, oldest first, without its spec's text."""
        query = select(*[c for c in schema.campaign.c if c.name != "spec_text"])
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(schema.campaign.c.id)).mappings().all()
        return [StoredCampaign.from_row(dict(r)) for r in rows]

    def latest_campaign_id(self) -> int | None:
        camps = self.campaigns()
        return camps[-1].id if camps else None

    def close(self) -> None:
        self.engine.dispose()
