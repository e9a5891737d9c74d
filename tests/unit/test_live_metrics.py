"""LiveMetrics: the engine's events served as Prometheus metrics on 127.0.0.1, scraped here
over HTTP and parsed with prometheus-client's own parser."""

from __future__ import annotations

import contextlib
import socket
import urllib.request
from types import SimpleNamespace
from typing import cast

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pgfsbench.analysis.stalls import StallEpisode
from pgfsbench.engine.events import LiveValue, QuietEvents
from pgfsbench.engine.live import LiveMetrics, phase_name
from pgfsbench.plan import PlannedRun
from pgfsbench.results.records import RunOutcome, RunStatus


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(
    metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    hits = [
        v
        for (n, ls), v in metrics.items()
        if n == name and all((k, w) in ls for k, w in labels.items())
    ]
    assert len(hits) == 1, (name, labels, [k for k in metrics if k[0] == name])
    return hits[0]


class Source:
    def __init__(self) -> None:
        self.calls = 0

    def latest(self) -> dict[str, LiveValue]:
        self.calls += 1
        return {"cpu_user_pct": 42.5, "waits": {"IO:WALSync": 1.5, "CPU": 0.5}}


def planned(cell: str, rep: int) -> PlannedRun:
    return cast(PlannedRun, SimpleNamespace(cell=SimpleNamespace(id=cell), repetition=rep))


def episode(cause: str) -> StallEpisode:
    return StallEpisode(3.0, 5.0, 0.0, 100, 900.0, cause, "high", ("frozen",))


def test_events_become_metrics_and_nothing_is_served_after_close() -> None:
    live = LiveMetrics(
        QuietEvents(),
        0,
        host="node-a",
        spec="quick",
        total=2,
        episodes=lambda run_id: [episode("fs_frozen")] if run_id == 1 else [],
    )
    port = live.start()
    try:
        m = scrape(port)
        assert value(m, "pgfsbench_campaign_info", spec="quick", host="node-a") == 1
        assert not [k for k in m if k[0] == "pgfsbench_run_info"]  # nothing runs yet
        live.campaign_started(7, 2)
        live.run_started(planned("ext4/default/default/tpcb-like", 1), 1)
        live.phase("measuring 60 s")
        source = Source()
        live.observing(source)
        for second, tps in enumerate([1000, 1010, 990, 1005, 995, 1000, 20, 0, 1000], 1):
            live.live(float(second), float(tps), "tps", 2.0 if tps else None)
        m = scrape(port)
        cell = {"campaign": "7", "host": "node-a", "cell": "ext4/default/default/tpcb-like"}
        assert value(m, "pgfsbench_run_info", phase="measuring", run_id="1", **cell) == 1
        assert value(m, "pgfsbench_throughput", unit="tps", **cell) == 1000
        assert value(m, "pgfsbench_measured_seconds", **cell) == 9
        # two seconds under a tenth of the median so far: live stall seconds
        assert value(m, "pgfsbench_live_stall_seconds_total", **cell) == 2
        assert value(m, "pgfsbench_live_stalled", **cell) == 0
        assert value(m, "pgfsbench_sample", series="cpu_user_pct", **cell) == 42.5
        assert value(m, "pgfsbench_backends_waiting", event="IO:WALSync", **cell) == 1.5
        assert source.calls == 1  # read when scraped, not before
        live.observing(None)
        live.run_finished(
            planned("ext4/default/default/tpcb-like", 1), 1, RunOutcome(status=RunStatus.OK)
        )
        live.extend(1)
        m = scrape(port)
        assert value(m, "pgfsbench_runs_done_total", status="ok", campaign="7") == 1
        assert value(m, "pgfsbench_runs_planned", campaign="7") == 3
        assert (
            value(m, "pgfsbench_stall_episodes_total", cause="fs_frozen", kind="stall", **cell) == 1
        )
        assert not [k for k in m if k[0] in ("pgfsbench_run_info", "pgfsbench_throughput")]
    finally:
        live.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_a_broken_episode_analysis_or_source_never_stops_the_campaign() -> None:
    def broken(run_id: int) -> list[StallEpisode]:
        raise RuntimeError("no such run")

    class Broken:
        def latest(self) -> dict[str, LiveValue]:
            raise OSError("gone")

    live = LiveMetrics(QuietEvents(), 0, host="h", spec="s", total=1, episodes=broken)
    with live:
        live.run_started(planned("c", 1), 1)
        live.observing(Broken())
        assert port_answers(live)
        live.run_finished(planned("c", 1), 1, RunOutcome(status=RunStatus.OK))
        assert live.episode_errors == 1


def port_answers(live: LiveMetrics) -> bool:
    assert live.port is not None
    return bool(scrape(live.port))


def test_a_taken_port_is_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        live = LiveMetrics(QuietEvents(), taken, host="h", spec="s", total=1)
        with pytest.raises(OSError):
            live.start()


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("measuring 60 s", "measuring"),
        ("warm-up 10 s", "warm-up"),
        ("loading scale 100", "loading scale"),
        ("", "starting"),
    ],
)
def test_phase_names_leave_figures_out(text: str, name: str) -> None:
    assert phase_name(text) == name


def test_silent_connections_hold_no_thread_each_and_the_endpoint_still_answers() -> None:
    """100 connections that say nothing: the server keeps a fixed pool (no thread per
    connection), closes what it cannot take, and answers a real scrape meanwhile."""
    import socket
    import threading
    import time

    from pgfsbench.engine import live as live_module

    live = LiveMetrics(QuietEvents(), 0, host="h", spec="s", total=1, episodes=lambda _: [])
    port = live.start()
    before = threading.active_count()
    idle = []
    try:
        for _ in range(100):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        time.sleep(0.5)
        grown = threading.active_count() - before
        assert grown <= live_module.MAX_CLIENTS + 1, grown
        started = time.monotonic()
        while True:  # the idle ones time out (REQUEST_TIMEOUT_S); then a scrape is served
            try:
                assert scrape(port)
                break
            except OSError:
                rounds = (
                    live_module.MAX_CLIENTS + live_module.MAX_WAITING
                ) / live_module.MAX_CLIENTS
                assert time.monotonic() - started < (rounds + 2) * live_module.REQUEST_TIMEOUT_S
                time.sleep(0.2)
    finally:
        for s in idle:
            s.close()
        live.close()


def test_clients_that_trickle_a_byte_a_second_hold_no_worker_past_its_deadline() -> None:
    """Eight clients each sending one byte a second (every read within its 2 s): on
    0206292 they held the workers for as long as they kept trickling. Each connection has a
    deadline: a scrape is answered within it."""
    import socket
    import threading
    import time

    from pgfsbench.engine import live as live_module

    live = LiveMetrics(QuietEvents(), 0, host="h", spec="s", total=1, episodes=lambda _: [])
    port = live.start()
    stop = threading.Event()
    slow = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]

    def trickle(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            while not stop.wait(1.0):
                s.sendall(b"X")

    threads = [threading.Thread(target=trickle, args=(s,), daemon=True) for s in slow]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        started = time.monotonic()
        while True:
            try:
                assert scrape(port)
                break
            except OSError:
                assert time.monotonic() - started < live_module.CONNECTION_DEADLINE_S * 3
                time.sleep(0.2)
    finally:
        stop.set()
        for s in slow:
            s.close()
        live.close()
