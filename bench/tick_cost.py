"""What one tick of the sampler costs, and why: its CPU by job, and one wait-events
answer read after a sleep against the same read with the CPU kept busy.

A hand-made server on tmpfs (idle, or under `pgbench -S` with --load), pgfsbench's own
PgSampler and OsSampler driven by a Ticker at 10 Hz for --seconds, each job's CPU read
with the thread's clock; then the steps of reading one answer (libpq's consume_input,
the get_result loop, turning rows into Python, clearing) timed after a 50 ms sleep
("cold", as a tick reads it) and after a busy wait for the answer ("hot"). Needs root.

    .venv/bin/python bench/tick_cost.py [--seconds 20] [--load] [--reads 200]
        [--bindir /usr/lib/postgresql/15/bin]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from psycopg import pq
from rawserver import RawServer, raw_server

from pgfsbench.collect.samplers import Job, OsSampler, PgSampler, Statements, Ticker, _rows

STEPS = ("consume_input", "get_result", "rows", "clear")


def jobs_cost(server: RawServer, seconds: float) -> None:
    pg = PgSampler(server.conninfo, 15, counters_every=10)
    pg.open()
    sampler = OsSampler()
    spent: dict[str, list[float]] = {"waits": [], "waits and counters": [], "/proc": []}

    def timed(name: Callable[[], str], run: Callable[[], None]) -> Callable[[], None]:
        def job() -> None:
            key = name()  # before the run: the tick changes what is due
            t0 = time.thread_time()
            run()
            spent[key].append(time.thread_time() - t0)

        return job

    ticker = Ticker(
        "tick-cost",
        0.1,
        [
            Job(
                "pg",
                1,
                timed(lambda: "waits and counters" if pg._ticks % 10 == 0 else "waits", pg.tick),
            ),
            Job("os", 10, timed(lambda: "/proc", sampler.tick)),
        ],
    )
    ticker.start()
    time.sleep(seconds)
    ticker.stop()
    pg.close([])
    sampler.close()
    for name, v in spent.items():
        print(
            f"{name:>20}: {len(v):4} ticks, {1e6 * statistics.median(v):6.0f} us each "
            f"(median), {1e3 * sum(v) / seconds:5.2f} ms a second"
        )
    jobs = sum(sum(v) for v in spent.values())
    total = ticker.cpu_seconds
    print(
        f"{'the thread in all':>20}: {1e3 * total / seconds:5.2f} ms a second "
        f"({100 * total / seconds:.3f}% of a core); outside its jobs (waking up, "
        f"sleeping): {1e3 * (total - jobs) / seconds:.2f} ms a second"
    )


def one_answer(st: Statements, conn: pq.abc.PGconn, cold: bool) -> dict[str, int]:
    """The steps of reading one wait-events answer, in ns of this thread's CPU."""
    st.send(("waits",))
    if cold:
        time.sleep(0.05)  # as a tick: the answer came in while the thread slept
    else:
        while conn.is_busy():  # hot: spin until it is in, the CPU never left
            conn.consume_input()
    clock = time.thread_time_ns
    t0 = clock()
    conn.consume_input()
    t1 = clock()
    results = []
    while not conn.is_busy():
        res = conn.get_result()
        if res is None:
            continue
        if res.status == pq.ExecStatus.PIPELINE_SYNC:
            break
        results.append(res)
    t2 = clock()
    for res in results:
        _rows(res)
    t3 = clock()
    for res in results:
        res.clear()
    t4 = clock()
    st._sent, st._results = None, []  # read here, not through receive()
    return dict(zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True))


def answer_steps(server: RawServer, reads: int) -> None:
    pg = PgSampler(server.conninfo, 15)
    pg.open()
    assert pg._statements is not None and pg._conn is not None
    st, conn = pg._statements, pg._conn.pgconn
    for cold in (True, False):
        times = [one_answer(st, conn, cold) for _ in range(reads)]
        medians = {s: statistics.median(t[s] for t in times) / 1e3 for s in STEPS}
        print(
            f"one wait-events answer read {'after a 50 ms sleep' if cold else 'hot':>20}: "
            + ", ".join(f"{s} {v:.1f}" for s, v in medians.items())
            + f" us (medians of {reads}; sum {sum(medians.values()):.1f} us)"
        )
    pg.close([])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument(
        "--load", action="store_true", help="under pgbench -S -c2 -j2 (the overhead bench's load)"
    )
    parser.add_argument("--bindir", default="/usr/lib/postgresql/15/bin")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgfsb-tick-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        with raw_server(work, Path(args.bindir)) as server:
            load = None
            if args.load:
                seconds = int(args.seconds + args.reads * 0.06 + 30)
                load = subprocess.Popen(
                    server.pgbench("-S", "-M", "prepared", "-c2", "-j2", "-n", f"-T{seconds}"),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(2)
            try:
                jobs_cost(server, args.seconds)
                answer_steps(server, args.reads)
            finally:
                if load is not None:
                    load.terminate()
                    load.wait()


if __name__ == "__main__":
    main()
