"""Does pgfsbench name the right cause when TPS drops? Short measured runs with one cause
injected each, the diagnosis scored against what was injected.

Each case is a real `pgfsbench run` (loop devices, a real filesystem, PostgreSQL, pgbench)
with one cause made to happen while it measures:

  freeze        fsfreeze of the data filesystem for HOLD seconds
  lock-idle     a psql-like session updates the branch rows and sits idle in its
                transaction for HOLD seconds (every tpcb-like client needs one of them)
  lock-active   the same, but the session is busy (pg_sleep) inside its transaction
  cpu-hog       busy loops outside PostgreSQL, more than there are CPUs
  io-hog        a writer outside PostgreSQL on the disk that holds the loop files
  checkpoint    CHECKPOINT on a device capped at a few MB/s, after the buffers filled
  wal-init      new WAL segments zero-filled on a capped device (no injection: every
                episode of these runs is the injected kind; boundaries not scored)
  reclaim       PostgreSQL's memory cgroup limit cut below its page cache for HOLD s
  pooler        sessions from outside hold the pooler's server connections (pg_sleep)
  snapshot      btrfs snapshots of the data subvolume every 4 s
  throttle      a 1 MB/s limit put on the loop device (blkio) for HOLD seconds
  sigstop       the measured pgbench stopped (SIGSTOP) for HOLD seconds
  outside-insert  a bulk INSERT (CREATE TABLE AS) from a session outside the workload
  cpu-hog-long  busy loops over the whole measured phase: the run must be marked
                disturbed, for the CPU (no episode to find: the whole run is at one level)
  io-hog-long   a writer on the disk beneath over the whole measured phase: the run marked
                disturbed, for the I/O
  cpu-hog-half  busy loops from the middle of the measured phase to its end: a level shift,
                the second half an episode with its cause
  cpu-in-N, io-in-N  busy loops / a writer on the disk beneath that start after the measured
                phase (20 s) began and end before it ends: 4 s, 40%, 60% and 80% of it (N =
                4s, 40, 60, 80). Said when an episode over it names the cause or the run's
                mark does (from half the phase on, the outside work is most of the run)
  cpu-short-lived-60  the same 60% of the phase, by processes of 0.1 s each, one after
                another (a build): seen through the host's CPU time less the benchmark's
                cgroup, not the process table
  clean         nothing: no episode may be reported, and the run not marked disturbed

For each run it prints the episodes found and their causes; at the end a confusion matrix
(injected x diagnosed), the boundary errors, the share of right answers per confidence,
and the episodes of the clean runs; then the runs marked disturbed (analysis/disturbance):
a matrix of the whole-run cases against what the mark named, and the false marks of the
other cases and of the clean runs. Needs root; works in its own directory under /var/tmp
and removes it (a killed corpus: `pgfsbench cleanup --workdir DIR/work-*`).

    .venv/bin/python bench/diagnosis_corpus.py --reps 3 [--cases freeze,lock-idle] [--save F]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from rawserver import measured_commit, signals_unwind  # noqa: E402

DURATION, WARMUP, AT, HOLD = 16, 2, 5.0, 4.0
# outside work inside a 20 s phase: (label, start, seconds), each ending 2 s or more before
# the phase does
INSIDE_DURATION = 20
INSIDE = (("4s", 8.0, 4.0), ("40", 5.0, 8.0), ("60", 3.0, 12.0), ("80", 1.5, 16.0))

BASE = """
[defaults]
scale = {scale}
clients = 4
threads = 2
duration = "{duration}s"
warmup = "{warmup}s"
repetitions = 1
stall_timeout = "60s"
{defaults}
[storage.s]
{storage}
[postgres.p]
settings = {{ {settings} }}
{postgres}
[workload.w]
builtin = "{builtin}"
"""
EXT4 = 'fs = "ext4"\ndevice = "loop:1G"'


@dataclass
class Case:
    expected: str  # the cause that should be named ("none" for clean runs)
    storage: str = EXT4
    settings: str = 'shared_buffers = "128MB", max_wal_size = "1GB"'
    postgres: str = ""
    defaults: str = ""
    scale: int = 2
    builtin: str = "tpcb-like"
    duration: int = DURATION
    inject: Callable[[Run], None] | None = None
    window: tuple[float, float] | None = (AT, AT + HOLD)  # when, into the measured phase
    boundaries: bool = True  # whether the window's ends are known exactly
    # the cause lasts the whole measured phase: scored on the run's disturbance mark
    whole_run: bool = False
    # outside work that starts and ends inside the phase: said by an episode or the mark
    inside: bool = False


@dataclass
class Run:
    """One pgfsbench run being measured: where its things are."""

    proc: subprocess.Popen[str]
    work: Path
    measured_at: float = 0.0  # wall clock of the measured pgbench's start
    injected: list[tuple[float, float]] = field(default_factory=list)  # actual, relative

    def cell(self) -> Path:
        return next((self.work / "cells").glob("run-*"))

    def mount(self) -> Path:
        return self.cell() / "mnt" / "data"

    def socket(self) -> Path:
        sock = self.cell() / "sock"
        if sock.exists():
            return sock
        return max(Path("/tmp").glob("pgfsb-*"), key=lambda p: p.stat().st_mtime)

    def pooler_socket(self) -> Path:
        return self.cell() / "pgbsock"

    def sleep_until(self, offset: float) -> None:
        time.sleep(max(0.0, self.measured_at + offset - time.time()))

    def mark(self, t0: float, t1: float) -> None:
        self.injected.append((t0 - self.measured_at, t1 - self.measured_at))


def psql(sock: Path, sql: str, port: int = 5432) -> subprocess.Popen[str]:
    """psql, as a session from outside the workload (application name psql)."""
    return subprocess.Popen(
        [
            "psql",
            "-X",
            "-q",
            "-h",
            str(sock),
            "-p",
            str(port),
            "-U",
            "postgres",
            "-d",
            "pgbench",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PGAPPNAME": "psql"},
    )


# ---------------------------------------------------------------- injections


def held(run: Run, apply: Callable[[], object], undo: Callable[[], object]) -> None:
    """At AT seconds into the measured phase, ``apply``; HOLD seconds later, ``undo``
    (whatever happens); the window marked as injected."""
    run.sleep_until(AT)
    t0 = time.time()
    apply()
    try:
        time.sleep(HOLD)
    finally:
        undo()
    run.mark(t0, time.time())


def freeze(run: Run) -> None:
    mnt = run.mount()
    held(
        run,
        lambda: subprocess.run(["fsfreeze", "--freeze", str(mnt)], check=True),
        lambda: subprocess.run(["fsfreeze", "--unfreeze", str(mnt)], check=True),
    )


def lock_holder(active: bool) -> Callable[[Run], None]:
    def inject(run: Run) -> None:
        import psycopg  # the corpus's own session: from outside the workload

        run.sleep_until(AT)
        with psycopg.connect(
            f"host={run.socket()} user=postgres dbname=pgbench",
            application_name="psql",
            autocommit=True,
        ) as conn:
            t0 = time.time()
            conn.execute("BEGIN")
            conn.execute("UPDATE pgbench_branches SET bbalance = bbalance")
            if active:
                conn.execute("SELECT pg_sleep(%s)", (HOLD,))
            else:
                time.sleep(HOLD)
            conn.execute("COMMIT")
            run.mark(t0, time.time())

    return inject


def io_hog_for(start: float, seconds: float, depth: int, jobs: int) -> Callable[[Run], None]:
    """A direct writer on the disk that holds the loop files, from ``start`` s into the
    measured phase, for ``seconds``."""

    def inject(run: Run) -> None:
        target = run.work.parent / "io-hog.dat"  # on the disk that holds the loop files
        subprocess.run(["fallocate", "-l", "2G", str(target)], check=True)
        run.sleep_until(start)
        t0 = time.time()
        job = subprocess.Popen(
            [
                "fio",
                "--name=hog",
                f"--filename={target}",
                "--size=2G",
                "--rw=write",
                "--bs=1M",
                "--direct=1",
                "--ioengine=libaio",
                f"--iodepth={depth}",
                f"--numjobs={jobs}",
                f"--runtime={seconds:g}",
                "--time_based",
                "--group_reporting",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            job.wait(timeout=seconds + 60)
        finally:
            if job.poll() is None:
                job.kill()
                job.wait()
            run.mark(t0, time.time())
            target.unlink(missing_ok=True)

    return inject


def cpu_hog_for(start: float, seconds: float) -> Callable[[Run], None]:
    """Busy loops, more than there are CPUs, from ``start`` s into the measured phase."""

    def inject(run: Run) -> None:
        n = 3 * (os.cpu_count() or 2)
        run.sleep_until(start)
        t0 = time.time()
        code = f"import time\nt=time.time()\nwhile time.time()-t<{seconds}: pass"
        hogs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
        for h in hogs:
            h.wait(timeout=seconds + 30)
        run.mark(t0, time.time())

    return inject


def short_lived_cpu_for(start: float, seconds: float) -> Callable[[Run], None]:
    """Loops that each start a short busy process (0.1 s) after another, more than there
    are CPUs, from ``start`` s into the measured phase: a build's compilers, which the
    once-a-second process table hardly ever sees alive."""

    def inject(run: Run) -> None:
        n = 3 * (os.cpu_count() or 2)
        run.sleep_until(start)
        t0 = time.time()
        code = (
            f"import subprocess, sys, time\nend = time.time() + {seconds}\n"
            "while time.time() < end:\n"
            "    subprocess.run([sys.executable, '-S', '-c', "
            "'import time\\nt=time.time()\\nwhile time.time()-t<0.1: pass'])"
        )
        loops = [subprocess.Popen([sys.executable, "-S", "-c", code]) for _ in range(n)]
        for p in loops:
            p.wait(timeout=seconds + 30)
        run.mark(t0, time.time())

    return inject


def outside_insert(run: Run) -> None:
    """Two bulk INSERTs from sessions outside the workload (psql), each into a table of its
    own (no lock in common with the workload), cancelled after HOLD seconds."""
    run.sleep_until(AT)
    t0 = time.time()
    sessions = [
        psql(
            run.socket(),
            f"SET statement_timeout = {int(HOLD * 1000)}; "
            f"CREATE TABLE corpus_big_{i} AS SELECT generate_series(1, 100000000) "
            "AS g, repeat('x', 200) AS pad",
        )
        for i in range(2)
    ]
    for p in sessions:
        p.wait(timeout=HOLD + 60)  # cancelled by its statement_timeout: an error, expected
    run.mark(t0, time.time())


def throttle(run: Run) -> None:
    """A limit of 1 MB/s put on the loop device (blkio, root group) for HOLD seconds."""
    image = next((run.cell() / "devices").glob("data-*.img"))
    out = subprocess.run(
        ["losetup", "--noheadings", "--output", "NAME", "-j", str(image)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    number = (Path("/sys/class/block") / Path(out[0]).name / "dev").read_text().strip()
    limit = Path("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device")
    held(
        run,
        lambda: limit.write_text(f"{number} {1 << 20}\n"),
        lambda: limit.write_text(f"{number} 0\n"),
    )


def sigstop(run: Run) -> None:
    """The measured pgbench stopped (SIGSTOP) for HOLD seconds, then continued."""
    pid = next(
        int(e.name)
        for e in Path("/proc").iterdir()
        if e.name.isdigit() and _is_measured_pgbench(e, run.proc.pid)
    )
    held(run, lambda: os.kill(pid, signal.SIGSTOP), lambda: os.kill(pid, signal.SIGCONT))


def _is_measured_pgbench(entry: Path, parent: int) -> bool:
    try:
        cmd = (entry / "cmdline").read_bytes().split(b"\0")
        stat = (entry / "stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rindex(")") + 2 :].split()
    return (
        int(fields[1]) == parent
        and bool(cmd)
        and cmd[0].endswith(b"pgbench")
        and b"-T" in cmd
        and b"-n" in cmd
    )


def checkpoint(run: Run) -> None:
    run.sleep_until(AT)
    t0 = time.time()
    p = psql(run.socket(), "CHECKPOINT")
    p.wait(timeout=120)
    run.mark(t0, time.time())


def reclaim(run: Run) -> None:
    group = next(Path("/sys/fs/cgroup/memory").glob("pgfsbench-run-*"))
    limit = group / "memory.limit_in_bytes"
    before = limit.read_text().strip()

    def cut() -> None:
        with contextlib.suppress(OSError):  # may refuse to go below what it cannot reclaim
            limit.write_text(f"{48 << 20}\n")

    held(run, cut, lambda: limit.write_text(f"{before}\n"))


def pooler(run: Run) -> None:
    run.sleep_until(AT)
    t0 = time.time()
    held = [psql(run.pooler_socket(), f"SELECT pg_sleep({HOLD})", port=6432) for _ in range(3)]
    for p in held:
        p.wait(timeout=HOLD + 60)
    run.mark(t0, time.time())


CASES: dict[str, Case] = {
    "freeze": Case("fs_frozen", inject=freeze),
    "lock-idle": Case("locks", inject=lock_holder(active=False)),
    "lock-active": Case("locks", inject=lock_holder(active=True)),
    "cpu-hog": Case("host_cpu", inject=cpu_hog_for(AT, HOLD)),
    "io-hog": Case("host_io", inject=io_hog_for(AT, HOLD, depth=64, jobs=2)),
    "checkpoint": Case(
        "checkpoint",
        scale=5,
        duration=20,
        storage=EXT4
        + """
limits = { write_mbps = 6 }""",
        settings='shared_buffers = "256MB", max_wal_size = "4GB", wal_init_zero = false',
        inject=checkpoint,
        window=(AT, AT + 2),
        boundaries=False,
    ),
    "wal-init": Case(
        "wal_segment_creation",
        storage=EXT4
        + """
limits = { write_mbps = 8 }""",
        settings='shared_buffers = "128MB", max_wal_size = "4GB", wal_recycle = false',
        window=None,
    ),
    "reclaim": Case(
        "reclaim",
        builtin="select-only",
        scale=10,
        settings='shared_buffers = "16MB"',
        defaults='memory_limit = "400M"',
        inject=reclaim,
    ),
    "pooler": Case(
        "pooler",
        postgres='pooler = { kind = "pgbouncer", pool_mode = '
        '"transaction", default_pool_size = 4 }',
        inject=pooler,
    ),
    "snapshot": Case(
        "snapshot",
        storage='fs = "btrfs"\ndevice = "loop:2G"\nsnapshots = { every = "4s", keep = 2 }',
        scale=10,
        window=None,
    ),
    "throttle": Case("device_saturated", inject=throttle),
    "outside-insert": Case(
        "outside_session", storage='fs = "ext4"\ndevice = "loop:3G"', inject=outside_insert
    ),
    "sigstop": Case("stopped", inject=sigstop),
    "cpu-hog-long": Case(
        "host_cpu", inject=cpu_hog_for(0.0, DURATION + 1), window=None, whole_run=True
    ),
    "io-hog-long": Case(
        "host_io",
        inject=io_hog_for(0.0, DURATION + 1, depth=32, jobs=1),
        window=None,
        whole_run=True,
    ),
    "cpu-hog-half": Case(
        "host_cpu",
        inject=cpu_hog_for(DURATION / 2, DURATION / 2 + 1),
        window=(DURATION / 2, DURATION),
        boundaries=False,
    ),
    "clean": Case("none", window=None),
    **{
        f"{kind}-in-{label}": Case(
            "host_cpu" if kind == "cpu" else "host_io",
            duration=INSIDE_DURATION,
            inject=cpu_hog_for(start, length)
            if kind == "cpu"
            else io_hog_for(start, length, depth=32, jobs=1),
            window=(start, start + length),
            boundaries=False,
            inside=True,
        )
        for kind in ("cpu", "io")
        for label, start, length in INSIDE
    },
    "cpu-short-lived-60": Case(
        "host_cpu",
        duration=INSIDE_DURATION,
        inject=short_lived_cpu_for(3.0, 12.0),
        window=(3.0, 15.0),
        boundaries=False,
        inside=True,
    ),
}


def spec_text(case: Case) -> str:
    return BASE.format(
        scale=case.scale,
        duration=case.duration,
        warmup=WARMUP,
        defaults=case.defaults,
        storage=case.storage,
        settings=case.settings,
        postgres=case.postgres,
        builtin=case.builtin,
    )


def pgfsbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args],
        cwd=ROOT,
        text=True,
        capture_output=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )


def measured_pgbench(parent: int) -> float | None:
    """The wall-clock start of the measured pgbench that ``parent`` started (after a
    warm-up, the measured run is the one without vacuum: -n), or None."""
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    hz = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _is_measured_pgbench(entry, parent):
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                return boot + int(stat[stat.rindex(")") + 2 :].split()[19]) / hz
    return None


def run_case(name: str, case: Case, work: Path, results: Path) -> dict[str, Any]:
    spec = work / f"{name}.toml"
    spec.write_text(spec_text(case))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "run",
            str(spec),
            "--results",
            str(results),
            "--workdir",
            str(work / "w"),
        ],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    run = Run(proc, work / "w")
    errors: list[BaseException] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"pgfsbench ended before measuring: {proc.communicate()[1]}")
            at = measured_pgbench(proc.pid)
            if at is not None:
                run.measured_at = at
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("no measured pgbench in 300 s")
        if case.inject is not None:
            thread = threading.Thread(target=_guarded, args=(case.inject, run, errors))
            thread.start()
            thread.join()
        proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=120)
    if errors:
        raise RuntimeError(f"{name}: the injection failed: {errors[0]!r}")
    listed = json.loads(pgfsbench("results", "list", "--results", str(results), "--json").stdout)
    shown: dict[str, Any] = json.loads(
        pgfsbench(
            "results", "show", str(listed[-1]["run_id"]), "--results", str(results), "--json"
        ).stdout
    )
    if case.window is not None and run.injected:
        shown["injected"] = run.injected[0]
    elif case.window is not None:
        shown["injected"] = case.window
    return shown


def _guarded(fn: Callable[[Run], None], run: Run, errors: list[BaseException]) -> None:
    try:
        fn(run)
    except BaseException as exc:  # the run goes on; the case is reported failed
        errors.append(exc)


@dataclass
class Score:
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    by_confidence: dict[str, list[bool]] = field(default_factory=dict)
    boundary_errors: list[float] = field(default_factory=list)
    missed: Counter[str] = field(default_factory=Counter)  # injections with no episode
    clean_episodes: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)  # episodes outside the injection
    rows: list[dict[str, Any]] = field(default_factory=list)
    # whole-run cases: (injected, what the disturbance mark named or "none")
    marks: Counter[tuple[str, str]] = field(default_factory=Counter)
    # runs of the other cases (clean ones included) marked disturbed, and all of them
    false_marks: list[str] = field(default_factory=list)
    unmarked_runs: int = 0
    # outside work inside the phase: case -> [said, runs]
    said: dict[str, list[int]] = field(default_factory=dict)


OUTSIDE_WORK = ("host_cpu", "host_io")  # causes that are other work on the host


def disturbance_kinds(run: dict[str, Any]) -> list[str]:
    found = (run.get("metrics") or {}).get("disturbance") or {}
    return [str(c["kind"]) for c in found.get("causes") or [] if c.get("disturbs")]


def score_mark(name: str, case: Case, run: dict[str, Any], s: Score) -> None:
    """The run's disturbance mark: right for a whole-run case when it names the cause;
    false on any other run (a short injection is an episode, not a disturbed run: a
    mark there is said, as is one on a clean run)."""
    kinds = disturbance_kinds(run)
    print(f"      disturbance mark: {', '.join(kinds) or 'none'}")
    if case.whole_run:
        s.marks[(case.expected, kinds[0] if kinds else "none")] += 1
    elif case.expected in OUTSIDE_WORK:
        # a short hog moved the figure too: a mark naming it is right, not false
        s.marks[(f"{case.expected} (short)", kinds[0] if kinds else "none")] += 1
    elif kinds:
        s.false_marks.append(f"{name} run {run['run_id']}: {', '.join(kinds)}")
    else:
        s.unmarked_runs += 1


def score_run(name: str, case: Case, run: dict[str, Any], s: Score) -> None:
    episodes = run.get("stalls") or []
    window = run.get("injected")
    desc = [
        f"{e['kind']} {e['start_s']:g}-{e['end_s']:g} {e['cause']} ({e['confidence']})"
        for e in episodes
    ]
    print(
        f"  {name} run {run['run_id']} ({run['status']}, {run.get('tps') or 0:,.0f} tps)"
        + (f", injected {window[0]:.1f}-{window[1]:.1f} s" if window else "")
        + ": "
        + ("; ".join(desc) or "no episode"),
        flush=True,
    )
    for e in episodes:
        print(f"      evidence: {' | '.join(e['evidence'][:3])}")
        if e.get("alternatives"):
            print(
                "      beat: "
                + " | ".join(
                    f"{a['cause']} {a['score']}: {a['why_not']}" for a in e["alternatives"][:3]
                )
            )
    score_mark(name, case, run, s)
    if case.inside:
        t0, t1 = window or (0.0, 0.0)
        over = [e for e in episodes if e["end_s"] >= t0 - 1 and e["start_s"] <= t1 + 2]
        said = any(e["cause"] == case.expected for e in over) or (
            case.expected in disturbance_kinds(run)
        )
        tally = s.said.setdefault(name, [0, 0])
        tally[0] += int(said)
        tally[1] += 1
        print(f"      said: {'yes' if said else 'NO'}")
    if case.whole_run:
        s.other += [f"{name} run {run['run_id']}: {d}" for d in desc]
        return
    if case.expected == "none":
        s.clean_episodes += [f"{name} run {run['run_id']}: {d}" for d in desc]
        return
    if window is None:
        matched = episodes
    else:
        t0, t1 = window
        matched = [e for e in episodes if e["end_s"] >= t0 - 1 and e["start_s"] <= t1 + 2]
        s.other += [
            f"{name} run {run['run_id']}: {d}"
            for e, d in zip(episodes, desc, strict=True)
            if e not in matched
        ]
    if not matched:
        s.missed[case.expected] += 1
        return
    for e in matched:
        right = e["cause"] == case.expected
        s.confusion[(case.expected, e["cause"])] += 1
        s.by_confidence.setdefault(e["confidence"], []).append(right)
        s.rows.append({"case": name, "run": run["run_id"], "episode": e, "right": right})
    if window is not None and case.boundaries:
        first, last = min(e["start_s"] for e in matched), max(e["end_s"] for e in matched)
        s.boundary_errors += [abs(first - window[0]), abs(last - window[1])]


def report(s: Score) -> dict[str, Any]:
    expected = sorted({k[0] for k in s.confusion} | set(s.missed))
    diagnosed = sorted({k[1] for k in s.confusion})
    width = max([len(x) for x in expected + diagnosed] + [10])
    print("\nConfusion matrix (rows: injected; columns: diagnosed; episodes)")
    print(" " * width + " " + " ".join(f"{d[:12]:>12}" for d in diagnosed) + "  no episode")
    for e in expected:
        print(
            f"{e:<{width}} "
            + " ".join(f"{s.confusion[(e, d)]:>12}" for d in diagnosed)
            + f"  {s.missed[e]:>10}"
        )
    total = sum(s.confusion.values())
    right = sum(n for (e, d), n in s.confusion.items() if e == d)
    print(
        f"\nright cause: {right} of {total} injected episodes ({100 * right / max(1, total):.0f}%)"
    )
    for conf in ("high", "medium", "low"):
        got = s.by_confidence.get(conf, [])
        if got:
            print(f"  {conf}: {sum(got)} of {len(got)} right ({100 * sum(got) / len(got):.0f}%)")
    if s.boundary_errors:
        errs = sorted(s.boundary_errors)
        within = sum(1 for x in errs if x <= 1.0)
        print(
            f"boundaries: {within} of {len(errs)} within 1 s; median error "
            f"{errs[len(errs) // 2]:.2f} s, worst {errs[-1]:.2f} s"
        )
    print(
        f"clean runs: {len(s.clean_episodes)} episode(s)"
        + "".join(f"\n  {x}" for x in s.clean_episodes)
    )
    if s.other:
        print("episodes outside the injected window:" + "".join(f"\n  {x}" for x in s.other))
    if s.marks:
        print("\nWhole-run disturbances (rows: injected; columns: what the run's mark named)")
        for (e, d), n in sorted(s.marks.items()):
            print(f"  {e} -> {d}: {n}")
    if s.said:
        print("\nOutside work inside the phase (said by an episode or the mark)")
        for name, (said, runs) in sorted(s.said.items()):
            print(f"  {name}: {said} of {runs}")
    marked_wrongly = len(s.false_marks)
    print(
        f"runs marked disturbed that should not be: {marked_wrongly} of "
        f"{marked_wrongly + s.unmarked_runs}" + "".join(f"\n  {x}" for x in s.false_marks)
    )
    return {
        "marks": [[e, d, n] for (e, d), n in sorted(s.marks.items())],
        "false_marks": s.false_marks,
        "said_inside": s.said,
        "runs_not_whole_run": marked_wrongly + s.unmarked_runs,
        "confusion": [[e, d, n] for (e, d), n in sorted(s.confusion.items())],
        "missed": dict(s.missed),
        "right": right,
        "total": total,
        "by_confidence": {k: [sum(v), len(v)] for k, v in s.by_confidence.items()},
        "boundary_errors": s.boundary_errors,
        "clean_episodes": s.clean_episodes,
        "other_episodes": s.other,
    }


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pgfsb-corpus-", dir="/var/tmp"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for w in d.glob("*/w"):
            pgfsbench("cleanup", "--workdir", str(w))
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--clean", type=int, default=5, help="clean runs (default 5)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated")
    ap.add_argument("--save", type=Path)
    ap.add_argument("--keep", type=Path, help="copy the results file there at the end")
    args = ap.parse_args()
    names = [n for n in args.cases.split(",") if n]
    for n in names:
        if n not in CASES:
            ap.error(f"unknown case {n!r} (known: {', '.join(CASES)})")
    s = Score()
    started = time.time()
    with signals_unwind(), workspace() as d:
        results = d / "corpus.sqlite"
        order = [(n, rep) for rep in range(args.reps) for n in names if n != "clean"] + [
            ("clean", i) for i in range(args.clean) if "clean" in names
        ]
        for name, rep in order:
            work = d / f"{name}-{rep}"
            work.mkdir()
            try:
                run = run_case(name, CASES[name], work, results)
            except RuntimeError as exc:
                print(f"  {name} #{rep}: {exc}", flush=True)
                continue
            score_run(name, CASES[name], run, s)
        summary = report(s)
        if args.keep:
            shutil.copy(results, args.keep)
    summary["minutes"] = round((time.time() - started) / 60, 1)
    print(f"\n{summary['minutes']} min")
    if args.save:
        commit = measured_commit()
        args.save.write_text(
            json.dumps(
                {
                    "commit": commit,
                    "when": time.strftime("%F %T"),
                    "reps": args.reps,
                    "cases": names,
                    **summary,
                    "episodes": s.rows,
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    main()
