"""A capture replayed as a cell's workload (`tool = "replay"`).

The data: the capture's physical copy is restored once into a data template (the copy
started on a private socket so that it recovers to a consistent state, then stopped
cleanly; its configuration the captured server's performance settings, local trust on the
private socket only), kept with the initdb templates and copied whole into each cell's
fresh filesystem as an initdb template is (no reflinks, no clones: each cell writes its own
blocks). Transactions the copy already holds committed (the copy is consistent as of the
end of pg_basebackup, which ran while the capture logged) are left out of the replay,
counted.

The replay: `pgfsbench-replay` (native/replayer, Go and pgx) as the benchmark's OS user,
the replay file on its standard input (it holds the capture's literals and stays in the
capture's directory), writing pgbench's per-transaction log and progress lines, so the
percentiles, per-second series, stall diagnosis and verdicts are those of every run. Its
summary (calls, errors and rows by normalised statement: no literal) is kept with the run,
with the fidelity: the replay's work against the capture's (statements, errors, commits,
WAL bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.postgres.carried import conf_line, forced_block
from pgfsbench.postgres.datadir import in_data_directory
from pgfsbench.postgres.instance import CONF_NAME, Instance
from pgfsbench.postgres.template import Templates
from pgfsbench.spec import Cell, Defaults
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import ReplayWorkload
from pgfsbench.system.actions import make_dir, watch_process_group
from pgfsbench.system.errors import CapabilityError, PgfsbenchError, Stalled
from pgfsbench.system.held import Held, Owner, write_file
from pgfsbench.system.journal import Journal
from pgfsbench.system.reachable import executable_for
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import (
    UntrustedPath,
    open_written_by_others,
    path_problem,
    read_trusted,
)
from pgfsbench.workloads.base import (
    WORKLOAD_ENV,
    LoadResult,
    Measurement,
    Phase,
    Progress,
    WorkloadContext,
)
from pgfsbench.workloads.capture import MANIFEST_VERSION
from pgfsbench.workloads.capture_copy import BASE_DIR, TABLESPACES_DIR
from pgfsbench.workloads.pgbench import parse_progress, progress_series
from pgfsbench.workloads.replay_fidelity import fidelity, work_of
from pgfsbench.workloads.replay_file import MANIFEST, with_roles
from pgfsbench.workloads.replay_safety import (
    REPLAY_ROLE,
    Hardened,
    catalog_changes,
    harden_cluster,
    harden_database,
    initdb_next_xid,
    reaches_os,
)

REPLAYER = "pgfsbench-replay"

TEMPLATES = "templates"  # in the capture's directory: the data templates restored from it


def replayer_path() -> Path | None:
    """The replayer built beside this interpreter (scripts/bootstrap.sh), else on PATH."""
    here = Path(sys.executable).parent / REPLAYER
    if here.is_file() and os.access(here, os.X_OK):
        return here
    found = shutil.which(REPLAYER)
    return Path(found) if found else None


def capture_dir(cfg: ReplayWorkload, base_dir: Path) -> Path:
    path = Path(cfg.capture)
    return path if path.is_absolute() else base_dir / path


def read_manifest(directory: Path) -> dict[str, Any]:
    """The capture's manifest, only as root wrote it."""
    if (why := path_problem(directory)) is not None:
        raise CapabilityError(f"capture {directory}: {why}")
    try:
        manifest = json.loads(read_trusted(directory / MANIFEST))
    except (OSError, ValueError, PgfsbenchError) as exc:
        raise CapabilityError(f"capture {directory}: no manifest of root's ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        version = manifest.get("version") if isinstance(manifest, dict) else None
        why = (
            " (made by an earlier pgfsbench, whose copy pg_basebackup wrote as root: capture again)"
            if version == 1
            else ""
        )
        raise CapabilityError(
            f"capture {directory}: manifest version {version!r}, this pgfsbench reads "
            f"{MANIFEST_VERSION}{why}"
        )
    return manifest


def carried_settings(manifest: dict[str, Any], binaries: Binaries | None = None) -> dict[str, str]:
    """The captured server's settings the copy runs with: postgres/carried.py's allowlist
    again (the manifest is root's, but was filled from another server), and, given the
    binaries, only settings they know with a value they take."""
    from pgfsbench.postgres.binaries import known_settings, value_problem
    from pgfsbench.postgres.carried import carried

    kept, _ = carried(dict(manifest.get("server_settings") or {}))
    if binaries is None:
        return kept
    known = {k.lower(): v for k, v in known_settings(binaries).items()}
    return {
        k: v
        for k, v in kept.items()
        if (spec := known.get(k.lower())) is not None and value_problem(k, v, spec) is None
    }


def restore_tablespaces(
    directory: Path, source: Held, target: Held, owner: Owner | None
) -> list[str]:
    """The copy's pg_tblspc made anew in ``target``, each tablespace a directory in it
    (on the filesystem under test, with the rest of the data): each tablespace the capture
    copied (tablespaces/OID) and each in-place one (a directory in the copy's pg_tblspc),
    only as PostgreSQL lays a tablespace out. A link in the copy's pg_tblspc (a capture
    given with --base) is never followed: its tablespace must have a copy. The OIDs."""
    from pgfsbench.postgres.datadir import in_tablespace, is_oid

    def accept(parts: tuple[str, ...], is_dir: bool) -> bool:
        return in_tablespace(parts, is_dir)

    done: list[str] = []
    try:
        spaces = Held.open(directory / TABLESPACES_DIR)
    except (FileNotFoundError, UntrustedPath):
        spaces = None
    try:
        copies = spaces.names() if spaces is not None else []
        inplace: list[str] = []
        links: list[str] = []
        if source.exists("pg_tblspc"):
            with source.descend("pg_tblspc") as entries:
                for name in entries.names():
                    if not is_oid(name):
                        raise CapabilityError(
                            f"capture {directory}: pg_tblspc/{name} is not a tablespace's OID"
                        )
                    mode = entries.lstat(name).st_mode
                    if stat.S_ISDIR(mode):
                        inplace.append(name)
                    elif stat.S_ISLNK(mode):
                        links.append(name)
                    else:
                        raise UntrustedPath(
                            f"{directory / BASE_DIR / 'pg_tblspc' / name} is not a link or a "
                            "directory"
                        )
        for name in links:
            if name not in copies:
                raise CapabilityError(
                    f"capture {directory}: tablespace {name} has no copy in "
                    f"{TABLESPACES_DIR}/{name} (pgfsbench capture makes one; a data copy "
                    "given with --base holds only links)"
                )
        if both := sorted(set(copies) & set(inplace)):
            raise CapabilityError(
                f"capture {directory}: tablespace {both[0]} is both in place and copied"
            )
        with target.make_dir("pg_tblspc") as into:  # PostgreSQL needs it, empty or not
            for name in copies:
                if not is_oid(name):
                    raise CapabilityError(
                        f"capture {directory}: {TABLESPACES_DIR}/{name} is not a tablespace's OID"
                    )
                assert spaces is not None
                with spaces.descend(name) as copy, into.make_dir(name) as made:
                    made.copy_from(copy, owner, accept=accept)
                    made.hand_to(owner, 0o700)
                done.append(name)
            for name in inplace:
                with (
                    source.descend("pg_tblspc", name) as copy,
                    into.make_dir(name) as made,
                ):
                    made.copy_from(copy, owner, accept=accept)
                    made.hand_to(owner, 0o700)
                done.append(name)
            into.hand_to(owner, 0o700)
    finally:
        if spaces is not None:
            spaces.close()
    return sorted(done)


def template_key(
    directory: Path, binaries: Binaries, os_user: str | None, roles: str = "replay"
) -> str:
    """The data template's key: the capture (its manifest) restored by these binaries for
    this user; its replay file and summary are named after it in the capture."""
    digest = hashlib.sha256(read_trusted(directory / MANIFEST))
    digest.update(f"{binaries.bindir}\0{os_user}\0{roles}".encode())
    return f"replay-{digest.hexdigest()[:20]}"


def planned_cell(cell: Cell, base_dir: Path) -> Cell:
    """A replay cell as it will run: its measured phase as long as its capture (divided
    by speed when timed; as fast as possible takes less, an upper estimate), no warm-up.
    A capture that is missing, not root's or not a capture is refused here, before a plan
    is printed with a made-up estimate."""
    import dataclasses

    if cell.workload.tool != "replay":
        return cell
    cfg = workload_config(cell.workload, ReplayWorkload)
    directory = capture_dir(cfg, base_dir)
    if not directory.is_dir():
        raise CapabilityError(
            f"workload {cell.workload.name}: capture {directory} does not exist (make it "
            "with `pgfsbench capture`; a relative path is from the spec's directory)"
        )
    try:
        seconds = float(read_manifest(directory).get("seconds") or 0.0)
    except CapabilityError as exc:
        raise CapabilityError(f"workload {cell.workload.name}: {exc}") from None
    if seconds <= 0:
        raise CapabilityError(
            f"workload {cell.workload.name}: capture {directory} says it lasted "
            f"{seconds:g} s: nothing to replay"
        )
    duration = seconds / cfg.speed if cfg.mode == "timed" else seconds
    return dataclasses.replace(
        cell, workload=dataclasses.replace(cell.workload, duration_s=duration, warmup_s=0.0)
    )


def for_cell(cell: Cell, defaults: Defaults) -> Replay:
    return Replay(defaults)


def is_stats(manifest: dict[str, Any]) -> bool:
    """A capture of pg_stat_statements alone (capture --from-stats): pgbench scripts."""
    return manifest.get("format") == "pg_stat_statements"


@dataclass(frozen=True)
class Replay:
    defaults: Defaults | None = None
    tool: str = "replay"

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        cfg = workload_config(cell.workload, ReplayWorkload)
        directory = capture_dir(cfg, base_dir)
        out: list[str] = []
        try:
            manifest = read_manifest(directory)
        except CapabilityError as exc:
            return [str(exc)]
        if (
            manifest.get("base", {}).get("kind") != "pg_basebackup"
            or not (directory / BASE_DIR / "PG_VERSION").is_file()
        ):
            out.append(f"capture {directory}: no data copy in {BASE_DIR}/ (pg_basebackup's)")
        links = directory / BASE_DIR / "pg_tblspc"
        with contextlib.suppress(OSError):
            for entry in os.scandir(links):
                if entry.is_symlink() and not (directory / TABLESPACES_DIR / entry.name).is_dir():
                    out.append(
                        f"capture {directory}: tablespace {entry.name} has no copy in "
                        f"{TABLESPACES_DIR}/ (a data copy given with --base holds only links)"
                    )
        if not is_stats(manifest) and replayer_path() is None:
            out.append(f"{REPLAYER} is not built (scripts/bootstrap.sh builds it with Go)")
        return out

    def estimated_bytes(self, cell: Cell) -> int:
        cfg = workload_config(cell.workload, ReplayWorkload)
        total = 0
        for part in (BASE_DIR, TABLESPACES_DIR):  # os.walk follows no link
            for root, _dirs, files in os.walk(Path(cfg.capture) / part):
                for f in files:
                    try:
                        total += os.lstat(os.path.join(root, f)).st_size
                    except OSError:
                        continue
        return total

    def version_argv(self, binaries: Binaries) -> list[str]:
        found = replayer_path()
        return [str(found), "-version"] if found else []

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        # the data came with the cluster (data_template): nothing is loaded
        return LoadResult(0.0, {})

    def templates_root(self, cell: Cell, base_dir: Path) -> Path:
        """The capture's own directory holds the data templates restored from it (root's,
        0700, as the capture is): the captured data is nowhere else between runs."""
        return capture_dir(workload_config(cell.workload, ReplayWorkload), base_dir) / TEMPLATES

    def data_template(
        self,
        cell: Cell,
        *,
        runner: Runner,
        journal: Journal,
        binaries: Binaries,
        templates: Templates,
        os_user: str | None,
        scratch: Path,
        socket_dir: Path,
        log_path: Path,
        base_dir: Path,
    ) -> str:
        """The key of the data template restored from the capture (made once)."""
        from pgfsbench.workloads.replay_file import read_capture, transaction_ids

        cfg = workload_config(cell.workload, ReplayWorkload)
        directory = capture_dir(cfg, base_dir)
        manifest = read_manifest(directory)
        major = int(manifest["server"]["server_version_num"]) // 10000
        if major != binaries.major:
            raise CapabilityError(
                f"capture {directory} is of PostgreSQL {major}; this cell's binaries are "
                f"{binaries.major} (a physical copy needs the same major)"
            )
        key = template_key(directory, binaries, os_user, cfg.roles)
        replay_file = directory / f"{key}.jsonl"
        if templates.find(key) is not None and (is_stats(manifest) or replay_file.is_file()):
            return key
        owner = Owner.of(os_user)
        pgdata = make_dir(journal, scratch / "restore", owner=None, mode=0o700)
        with Held.open(directory / BASE_DIR) as source, Held.open(pgdata) as target:
            # only what PostgreSQL makes in a data directory (capture took in no more;
            # checked again: the copy is another server's)
            # tablespace_map would make recovery link pg_tblspc/OID to where the captured
            # server kept each tablespace (on this host: anywhere): the tablespaces are
            # directories in pg_tblspc instead (restore_tablespaces)
            skip = (
                "postgresql.auto.conf",
                "postmaster.pid",
                "pg_tblspc",
                "postgresql.conf",
                "tablespace_map",
            )
            target.copy_from(source, owner, skip=skip, accept=in_data_directory)
            spaces = restore_tablespaces(directory, source, target, owner)
            settings = carried_settings(manifest, binaries)
            conf = (
                "# the captured server's storage and performance settings (pgfsbench capture;\n"
                "# postgres/carried.py's allowlist)\n"
                + "".join(conf_line(k, v) + "\n" for k, v in sorted(settings.items()))
            )
            if spaces and major >= 15:
                conf += (
                    "# the tablespaces are directories in pg_tblspc, not links: recovery from\n"
                    "# the copy accepts them only with this (PostgreSQL 15's check)\n"
                    + conf_line("allow_in_place_tablespaces", "on")
                    + "\n"
                )
            conf += forced_block(major)
            target.write("postgresql.conf", conf, 0o600, owner)
            target.write("postgresql.auto.conf", "", 0o600, owner)
            # the server listens on a private socket only (0700, the cell's): trust there
            target.write("pg_hba.conf", "local all all trust\n", 0o600, owner)
            target.hand_to(owner, 0o700)
        instance = Instance(binaries, pgdata, None, socket_dir, log_path, os_user)
        instance.configure({})
        instance.start(journal, runner, timeout=600)
        prep: Any = None  # the log's sessions (replay_file.Prepared) or the wire's
        committed: set[int] = set()
        wire = manifest.get("format") == "wire"
        bootstrap = str((manifest.get("server") or {}).get("bootstrap_superuser") or "postgres")
        try:
            if wire:  # made at the wire: replayed as the clients spoke (replay_wire.py)
                from pgfsbench.workloads.replay_wire import WIRE_LOG, read_wire

                prep = read_wire(directory / WIRE_LOG)
            elif not is_stats(manifest):
                prep = read_capture(directory)
            users = sorted({s.user for s in prep.sessions}) if prep is not None else []
            boundary = initdb_next_xid(runner, binaries, os_user, scratch)
            with _connect_as(instance, bootstrap, "postgres") as conn:
                changed = catalog_changes(conn, boundary)
                if changed:
                    raise CapabilityError(
                        f"capture {directory}: the captured server's system catalog was "
                        f"changed ({'; '.join(changed[:5])}): pgfsbench's own queries would "
                        "run that code as a superuser on this host; a copy of it is not "
                        "started for a replay"
                    )
                hardened = harden_cluster(conn, users, binaries.major)
                databases = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT datname FROM pg_catalog.pg_database WHERE datallowconn "
                        "ORDER BY datname LIMIT 200"
                    )
                ]
                if prep is not None and not wire:  # a wire capture began after its copy
                    committed = _committed_in_copy(conn, transaction_ids(prep))
            libdir = _pkglibdir(runner, binaries)
            for db in databases:
                with _connect_as(instance, bootstrap, db) as conn:
                    harden_database(conn, hardened, libdir, boundary)
            if cfg.roles == "captured":
                hardened.role_map = {u: u for u in hardened.role_map}
            with _connect_as(instance, bootstrap, "postgres") as conn:
                conn.execute("CHECKPOINT")
        finally:
            instance.stop(runner)
        with Held.open(pgdata) as target:
            # the template without pgfsbench's own file and its include: each cell writes its own
            target.remove(CONF_NAME)
            target.remove("postgresql.conf")
            target.write("postgresql.conf", conf, 0o600, owner)
        _write_safety(directory, key, hardened)
        roles = hardened.role_map if cfg.roles != "captured" else {}
        if prep is not None and wire:
            from pgfsbench.workloads.replay_wire import filtered

            _write_wire_files(directory, key, filtered(prep, roles, hardened.locked_names()))
        elif prep is not None:
            prep = with_roles(prep, roles, hardened.locked_names())
            _write_replay_files(directory, key, prep, committed)
        templates.save(key, pgdata, None, f"(restored from the capture {directory})\n")
        shutil.rmtree(pgdata, ignore_errors=True)
        return key

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        cfg = workload_config(cell.workload, ReplayWorkload)
        if not phase.measured:
            return Measurement(throughput=0.0)
        directory = capture_dir(cfg, ctx.base_dir)
        manifest = read_manifest(directory)
        if is_stats(manifest):
            return self._scripts(ctx, cell, phase, directory, manifest, cfg)
        key = template_key(directory, ctx.binaries, ctx.os_user, cfg.roles)
        replay_file = directory / f"{key}.jsonl"
        if not replay_file.is_file():
            raise CapabilityError(f"capture {directory}: not prepared ({replay_file.name})")
        found = replayer_path()
        if found is None:
            raise CapabilityError(f"{REPLAYER} is not built")
        found = executable_for(found, ctx.os_user)  # a checkout under /root: root's copy
        txlog = ctx.workdir / "txlog.0"
        stats_path = ctx.workdir / "replay-stats.json"
        argv = [
            str(found),
            "-in",
            "-",
            "-host",
            ctx.server.host,
            "-port",
            str(ctx.server.port),
            "-mode",
            cfg.mode,
            "-speed",
            f"{cfg.speed:g}",
            "-think-scale",
            f"{cfg.think_scale:g}",
            "-lock-timeout",
            f"{int(cfg.lock_timeout * 1000)}ms",
            "-log",
            str(txlog),
            "-stats",
            str(stats_path),
        ]
        # as many processes as the cell's client threads (pgbench -j); the commit order is
        # held in one process
        wire = manifest.get("format") == "wire"  # one process, its sessions' own order
        jobs = 1 if cfg.commit_order or wire else max(1, cell.workload.threads)
        argv += ["-jobs", str(jobs), "-drift", f"{int(cfg.drift * 1000)}ms"]
        if cfg.commit_order and not wire:
            argv.append("-commit-order")
        wal_before = _wal_bytes(ctx)
        work_before = _work_snapshot(ctx)
        fd = os.open(replay_file, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            child = ctx.runner.spawn(
                argv,
                stdout_path=ctx.artifacts / "replay.stdout",
                user=ctx.os_user,
                cwd=ctx.workdir,
                env=WORKLOAD_ENV,
                stdin_fd=fd,
            )
        finally:
            os.close(fd)
        watch_process_group(ctx.journal, child.pid, child.start_time, f"replay pid {child.pid}")
        points = []

        def on_line(line: str) -> None:
            point = parse_progress(line)
            if point is not None:
                points.append(point)
                phase.on_progress(Progress(point.t, point.tps, point.latency_ms))

        child.on_stderr_line(on_line)
        started = time.monotonic()
        captured = float(read_manifest(directory).get("seconds") or 0.0)
        limit = max(600.0, captured / cfg.speed * 10)
        try:
            rc = child.wait_watching(limit, phase.stalled)
        except Stalled as exc:
            write_file(ctx.artifacts / "replay.stderr", child.stderr)
            return Measurement(
                series=progress_series(points), stalled=str(exc), returncode=-1, errors=(str(exc),)
            )
        except BaseException:
            child.kill_tree()
            raise
        wall = time.monotonic() - started
        write_file(ctx.artifacts / "replay.stderr", child.stderr)
        errors = tuple(ln for ln in child.stderr.splitlines() if ln.startswith("pgfsbench-replay:"))
        stats: dict[str, Any] = {}
        unread = None
        # the replayer's file, in a directory its user writes: read never by a link, and
        # bounded (hostile input, as every file another user writes)
        try:
            with open_written_by_others(stats_path) as fh:
                raw = fh.read(64 << 20)
            stats = json.loads(raw)
            if not isinstance(stats, dict) or "transactions" not in stats:
                raise ValueError("not the replayer's statistics")
            write_file(ctx.artifacts / "replay-stats.json", raw, 0o644)
        except (OSError, ValueError) as exc:
            stats = {}
            # without them there is no throughput: a failed run, never an ok one at 0 tps
            unread = f"{REPLAYER}'s statistics ({stats_path.name}) could not be read: {exc}"
        from pgfsbench.collect.txlog import compress_logs, parse_txlog

        m = Measurement(
            unit="tps",
            returncode=rc,
            errors=(*errors, unread) if unread else errors,
            series=progress_series(points),
        )
        tx = int(stats.get("transactions") or 0)
        seconds = float(stats.get("wall_s") or wall)
        m.transactions = tx
        m.failed_transactions = int(stats.get("failed_transactions") or 0)
        m.throughput = round((tx - m.failed_transactions) / seconds, 3) if seconds > 0 else None
        m.latency_avg_ms = stats.get("latency_avg_ms")
        m.latency_stddev_ms = stats.get("latency_stddev_ms")
        # one log a process: txlog.0, then txlog.0.1, ... (as pgbench names its threads')
        txlogs = [p for p in [txlog, *ctx.workdir.glob("txlog.0.*")] if p.is_file()]
        if txlogs:
            m.latency = parse_txlog(txlogs)
            m.artifacts["txlog"] = compress_logs(txlogs, ctx.artifacts / "txlog.gz")
        found_fidelity = fidelity(
            manifest,
            replay_file,
            stats,
            _wal_bytes(ctx) - wal_before,
            work_of(work_before, _work_snapshot(ctx, settle=True)),
        )
        if manifest.get("end_state"):  # the tables as the capture ended, and as the replay did
            found_fidelity["end_state"] = es = _end_state_against(ctx, manifest["end_state"])
            # rows missing or added mark the run; the same rows with other values (a time
            # taken when it ran, a sequence's order) are said with the end state
            counted = [d for d in es["differs"] if d.get("rows_differ")]
            if counted:
                found_fidelity["differs"].append(
                    "the end state has other rows in " + ", ".join(d["table"] for d in counted[:5])
                )
        m.extra = {
            "replay": {
                **{k: v for k, v in stats.items() if k != "queries"},
                # what it ran, as measured: its sessions, its data, its real duration
                "sessions": found_fidelity["reconciliation"].get("sessions"),
                "data_bytes": (manifest.get("base") or {}).get("bytes"),
                "wall_s": round(wall, 3),
                "captured_s": captured,
                "mode": cfg.mode,
                "speed": cfg.speed,
                "processes": jobs,
            },
            "fidelity": found_fidelity,
        }
        return m

    def _scripts(
        self,
        ctx: WorkloadContext,
        cell: Cell,
        phase: Phase,
        directory: Path,
        manifest: dict[str, Any],
        cfg: ReplayWorkload,
    ) -> Measurement:
        """The lighter path: pgbench with the scripts made from pg_stat_statements, as
        many clients as were busy, at the captured pace (timed) or as fast as it goes."""
        import dataclasses

        from pgfsbench.workloads import pgbench
        from pgfsbench.workloads.base import Endpoint
        from pgfsbench.workloads.capture import STATS_FILE

        stats = json.loads(read_trusted(directory / STATS_FILE))
        scripts = []
        owner = Owner.of(ctx.os_user)
        refused: dict[str, int] = {}
        # the scripts hold the column statistics' bounds (the captured data's): in a
        # directory of their own, the benchmark user's alone, each 0600
        with Held.open(ctx.workdir) as scratch, scratch.make_dir("stats-scripts", 0o700, owner):
            pass
        for i, s in enumerate(stats.get("scripts") or []):
            text = str(s.get("text") or "")
            # the captured server wrote these texts: one statement each, none that reaches
            # the OS, run as the replay's own role (never a superuser)
            why = reaches_os(text) or (None if _one_statement(text) else "more than one statement")
            if why is not None:
                refused[why] = refused.get(why, 0) + 1
                continue
            path = ctx.workdir / "stats-scripts" / f"{i:03d}.sql"
            write_file(path, text, 0o600, owner)
            scripts.append(f"{path}@{int(s['weight'])}")
        if not scripts:
            raise CapabilityError(
                f"capture {directory}: no statement of pg_stat_statements could be made a "
                f"script ({'; '.join(stats.get('skipped') or {}) or 'none captured'})"
            )
        clients = max(1, int(stats.get("clients") or 1))
        rate = None
        if cfg.mode == "timed":
            rate = float(stats.get("transactions_per_s") or 0) * cfg.speed or None
        w = dataclasses.replace(
            cell.workload,
            tool="pgbench",
            builtin=None,
            scripts=tuple(scripts),
            clients=clients,
            threads=min(clients, max(1, cell.workload.threads)),
            rate=rate,
            protocol="simple",
            extra_args=("-n",),
            config=None,
        )
        scripted = dataclasses.replace(cell, workload=w)
        server = Endpoint(
            ctx.server.host,
            ctx.server.port,
            ctx.server.user if cfg.roles == "captured" else REPLAY_ROLE,
            str(manifest.get("dbname") or "postgres"),
        )
        run_ctx = dataclasses.replace(ctx, endpoint=server, server=server)
        driver = pgbench.for_cell(scripted, self.defaults) if self.defaults else pgbench.Pgbench()
        m = driver.run(run_ctx, scripted, phase)
        m.extra = {
            **m.extra,
            "approximation": stats.get("approximation"),
            "scripts": [
                {"query": str(s.get("query", ""))[:400], "weight": s.get("weight")}
                for s in stats.get("scripts") or []
            ],
            "calls_covered_pct": round(
                100
                * int(stats.get("calls_covered") or 0)
                / max(1, int(stats.get("calls_total") or 0)),
                1,
            ),
            "not_replayable": {**(stats.get("skipped") or {}), **refused},
        }
        return m


def _one_statement(text: str) -> bool:
    """A pgbench script of one SQL statement (its meta-commands aside): no ';' but its last."""
    from pgfsbench.postgres.statements import tokens

    sql = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("\\"))
    semis = [t for t in tokens(sql) if t.kind == "other" and t.text == ";"]
    return len(semis) <= 1 and (not semis or sql.rstrip().endswith(";"))


def _connect_as(instance: Instance, user: str, dbname: str) -> Any:
    """A connection to the restore server as ``user`` (its private socket, trust)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    return psycopg.connect(
        make_conninfo(
            host=str(instance.socket_dir), port=str(instance.port), user=user, dbname=dbname
        ),
        autocommit=True,
        connect_timeout=10,
        options="-c statement_timeout=600000 -c search_path=pg_catalog,pg_temp",
        application_name="pgfsbench",
    )


def _pkglibdir(runner: Runner, binaries: Binaries) -> Path:
    """These binaries' library directory (where an extension's `$libdir/NAME` is)."""
    from pgfsbench.system.errors import CommandError

    try:
        done = runner.run([binaries.tool("pg_config"), "--pkglibdir"], timeout=30)
        return Path(done.stdout.strip())
    except CommandError:
        return binaries.bindir.parent / "lib"


def _write_safety(directory: Path, key: str, hardened: Hardened) -> None:
    """What making the copy safe changed, beside the replay file (the capture's own)."""
    write_file(
        directory / f"{key}.safety.json", json.dumps(hardened.as_dict(), indent=1) + "\n", 0o600
    )


def _committed_in_copy(conn: Any, xids: list[int]) -> set[int]:
    """The captured transaction ids the data copy holds as committed. A captured xid at
    or above the copy's next xid began after the copy's end: not in it (its epoch is the
    copy's; a capture spans no wraparound)."""
    row = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint").fetchone()
    xmax = int(row[0]) if row else 0
    epoch = xmax >> 32
    full = [x for x in ((epoch << 32) | x for x in xids) if x < xmax]
    committed: set[int] = set()
    for i in range(0, len(full), 5000):
        rows = conn.execute(
            "SELECT x, pg_xact_status(x::text::xid8) FROM unnest(%s::bigint[]) x",
            (full[i : i + 5000],),
        ).fetchall()
        committed |= {int(x) & 0xFFFFFFFF for x, status in rows if status == "committed"}
    return committed


def _write_wire_files(directory: Path, key: str, prep: Any) -> None:
    """A wire capture's replay file (version 2) and its summary, in the capture's own
    directory: each statement's outcome in the capture, to set beside the replay's."""
    from pgfsbench.workloads.replay_wire import queries_summary, write_wire_replay

    counts = write_wire_replay(prep, directory / f"{key}.jsonl")
    counts.pop("in_copy_by_query")
    summary = {
        "format": "wire",
        "captured": prep.captured,
        "open_at_end": prep.open_at_end,
        "not_workload": prep.not_workload,
        "retries": prep.retries,
        "written": counts,
        "skipped": prep.skipped,
        "queries": [{**q, "in_copy": 0} for q in queries_summary(prep)],
    }
    write_file(directory / f"{key}.json", json.dumps(summary, indent=1) + "\n", 0o600)


def _write_replay_files(directory: Path, key: str, prep: Any, committed: set[int]) -> None:
    """The replay file and its summary (normalised statements), in the capture's own
    directory: the file holds the capture's literals and never leaves it."""
    from pgfsbench.workloads.replay_file import queries_summary, write_replay

    replay_file = directory / f"{key}.jsonl"
    counts = write_replay(prep, replay_file, committed)  # made anew (open_new_file)
    in_copy = counts.pop("in_copy_by_query")
    queries = [{**q, "in_copy": in_copy[i]} for i, q in enumerate(queries_summary(prep))]
    summary = {
        "captured": prep.captured,
        "open_at_end": prep.open_at_end,
        "not_workload": prep.not_workload,
        "written": counts,
        "skipped": prep.skipped,
        "queries": queries,
    }
    write_file(directory / f"{key}.json", json.dumps(summary, indent=1) + "\n", 0o600)


def _end_state_against(ctx: WorkloadContext, captured: dict[str, Any]) -> dict[str, Any]:
    """The replay server's tables against the capture's end state (workloads/end_state)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from pgfsbench.workloads.end_state import compare_states, databases_state

    def connect(db: str) -> psycopg.Connection[Any]:
        params = {k: str(v) for k, v in conninfo_to_dict(ctx.server.conninfo()).items()}
        params["dbname"] = db
        return psycopg.connect(make_conninfo(**params), connect_timeout=10, autocommit=True)

    return compare_states(captured, databases_state(connect, list(captured)))


def _wal_bytes(ctx: WorkloadContext) -> int:
    import psycopg

    with psycopg.connect(ctx.server.conninfo(), connect_timeout=10, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def _work_snapshot(ctx: WorkloadContext, settle: bool = False) -> dict[str, Any]:
    """The replay server's counters (as the capture took its server's). ``settle``: first
    wait, at most 5 s, for the replay's sessions to be gone (a backend's counters are
    flushed as it exits)."""
    import psycopg

    from pgfsbench.workloads.capture import stats_snapshot

    try:
        with psycopg.connect(ctx.server.conninfo(), connect_timeout=10, autocommit=True) as conn:
            deadline = time.monotonic() + 5
            while settle and time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid()"
                ).fetchone()
                if not row or int(row[0]) == 0:
                    break
                time.sleep(0.05)
            return stats_snapshot(conn, ctx.binaries.major * 10000)
    except psycopg.Error:
        return {}
