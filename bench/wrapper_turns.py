"""What does driving pgbench through pgfsbench cost? pgbench as a run drives it against the
same pgbench started bare, in turns that cancel the host's swings.

A run starts pgbench with pgfsbench's Runner (its own process group, stdout to a file),
reads its progress lines as they come (a thread pumping stderr through the progress
parser) and waits for it on a pidfd, checking for a stall every half second; the
samplers are another matter (`observer_turns.py`). Here one lane's pgbench is started
and watched exactly so, the other lane's is the same command line started by
subprocess with its output thrown away; both run select-only, prepared, 2 clients, with
`-P 1`, on one hand-made server, one database each, taking turns of --slot seconds (see
`turns.py`). The arm "none" starts both bare: the design's own bias. Needs root.

    .venv/bin/python bench/wrapper_turns.py [--reps 20] [--seconds 20] [--slot 0.25]
        [--bindir /usr/lib/postgresql/15/bin] [--save F.json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from rawserver import RawServer, measure_in_workdir, raw_server
from turns import (
    DATABASES,
    Lane,
    Process,
    arm_summary,
    make_databases,
    print_repetition,
    take_turns,
    turns_parser,
)

from pgfsbench.system.runner import Runner
from pgfsbench.workloads.pgbench import parse_progress

ARMS = ("none", "wrapped")


def argv(server: RawServer, db: str) -> list[str]:
    return [
        str(server.bindir / "pgbench"),
        "-h",
        str(server.sock),
        "-S",
        "-M",
        "prepared",
        "-c2",
        "-j2",
        "-n",
        "-T3600",
        "-P",
        "1",
        db,
    ]


class Wrapped:
    """pgbench started and watched as a run does (Runner.spawn, the progress lines parsed
    as they come, the end waited for on a pidfd with a stall check every 0.5 s)."""

    def __init__(self, server: RawServer, db: str, workdir: Path):
        self.child = Runner().spawn(
            argv(server, db), stdout_path=workdir / f"{db}.stdout", user="postgres", cwd=workdir
        )
        self.points = 0

        def on_line(line: str) -> None:
            if parse_progress(line) is not None:
                self.points += 1

        self.child.on_stderr_line(on_line)
        self.code: int | None = None
        self.waiter = threading.Thread(target=self._wait, daemon=True)
        self.waiter.start()

    def _wait(self) -> None:
        self.code = self.child.wait_watching(7200, lambda: None)

    def send_signal(self, sig: int, /) -> None:
        os.kill(self.child.pid, sig)

    def kill(self) -> None:
        os.killpg(self.child.pid, signal.SIGKILL)  # its own group: pgbench alone

    def wait(self, timeout: float | None = None) -> int:
        self.waiter.join(timeout)
        return self.code if self.code is not None else -1


def bare(server: RawServer, db: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv(server, db), user="postgres", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def one_repetition(
    server: RawServer, work: Path, arm: str, rep: int, seconds: float, slot: float
) -> tuple[int, int]:
    """(transactions of the wrapped lane, of the bare one) in equal running time."""
    wrapped_db, bare_db = DATABASES if rep % 2 == 0 else DATABASES[::-1]
    first: Process = (
        Wrapped(server, wrapped_db, work) if arm == "wrapped" else bare(server, wrapped_db)
    )
    lanes = (Lane(first, wrapped_db), Lane(bare(server, bare_db), bare_db))
    counts = take_turns(server, lanes, (rep // 2) % 2, seconds, slot)
    if isinstance(first, Wrapped) and first.points < seconds / 2 * 0.8:
        raise RuntimeError(
            f"the wrapped pgbench reported {first.points} progress lines "
            f"in {seconds / 2:g} s of running"
        )
    return counts


def measure(work: Path, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    arms = args.arms.split(",")
    counts: dict[str, list[tuple[int, int]]] = {a: [] for a in arms}
    out = work / "out"
    out.mkdir()
    shutil.chown(out, "postgres", "postgres")  # pgbench runs as postgres, in there
    with raw_server(work, Path(args.bindir)) as server:
        make_databases(server)
        for rep in range(args.reps):
            for arm in arms if rep % 2 == 0 else arms[::-1]:
                counts[arm].append(one_repetition(server, out, arm, rep, args.seconds, args.slot))
            print_repetition(rep, counts, args.seconds)
    return {
        arm: arm_summary("both bare" if arm == "none" else "driven by pgfsbench", counts[arm])
        for arm in arms
    }


def main() -> None:
    parser = turns_parser(__doc__, 20, 0.25, "none,wrapped", f"of {', '.join(ARMS)}")
    args = parser.parse_args()
    for arm in args.arms.split(","):
        if arm not in ARMS:
            parser.error(f"bad arm {arm!r}: one of {', '.join(ARMS)}")
    measure_in_workdir(
        "pgfsb-wrapturns-",
        lambda work: measure(work, args),
        args.save,
        {"reps": args.reps, "seconds": args.seconds, "slot": args.slot},
    )


if __name__ == "__main__":
    main()
