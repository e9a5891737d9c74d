"""Live metrics: the campaign as Prometheus sees it while it runs.

`LiveMetrics` is the engine's events (it passes each one on to the front end it wraps)
and a prometheus-client collector: every figure is made when Prometheus scrapes, from the
state the events left and from the samplers' last second (`Observation.latest`), so an
unwatched endpoint costs nothing. It listens on 127.0.0.1 (another address only when the
user names it: a fleet's hosts scraped from elsewhere), on the port the user gave, from the
campaign's start to its end; after that nothing is served.

Labels: campaign, host (the name the results give this host) and cell on every series of a
run. What is served (prefix pgfsbench_):
  campaign_info, runs_planned, runs_done_total{status}, run_info{cell, repetition, run_id,
  phase}, throughput{unit} and latency_ms (pgbench's last progress line), measured_seconds,
  sample{series} (each sampler series' last second: cpu_*, disk_*, dirty_kb, wal_mbps...),
  backends_waiting{event}, live_stalled and live_stall_seconds_total (a second under
  stall_fraction of the run's median so far, as it happens), stall_episodes_total{kind,
  cause, confidence} (the episodes the analysis finds in each finished run, with their
  cause), warnings_total.
"""

from __future__ import annotations

import contextlib
import re
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from pgfsbench.engine.events import Events, LiveSource, LiveValue
from pgfsbench.plan import PlannedRun
from pgfsbench.results.records import RunOutcome

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

    from pgfsbench.analysis.stalls import StallEpisode

MIN_SECONDS_FOR_MEDIAN = 5  # a live stall needs this many seconds of the run behind it
_PHASE_WORDS = re.compile(r"[^a-z -]+")


def phase_name(text: str) -> str:
    """A phase's text without its figures and what it says in parentheses: 'measuring 60 s
    (a 60 s window)' -> 'measuring'."""
    words = _PHASE_WORDS.sub(" ", text.lower().split("(")[0]).split()
    kept = [w for w in words if w not in ("s", "ms", "min", "gib", "mib", "kib")]
    return " ".join(kept[:3]) or "starting"


@dataclass
class _Run:
    cell: str = ""
    repetition: int = 0
    run_id: int = 0
    phase: str = "starting"
    second: float | None = None
    throughput: float | None = None
    unit: str = "tps"
    latency_ms: float | None = None
    history: list[float] = field(default_factory=list)
    stalled: bool = False


class LiveMetrics(Collector):
    """Events that pass through to ``inner`` and are served as Prometheus metrics on
    ``address``:``port`` (0: a free port; see ``port`` once started)."""

    def __init__(
        self,
        inner: Events,
        port: int,
        *,
        host: str,
        spec: str,
        total: int,
        stall_fraction: float = 0.1,
        episodes: Callable[[int], Sequence[StallEpisode]] | None = None,
        address: str = "127.0.0.1",
    ):
        self.inner = inner
        self.address = address
        self.requested_port = port
        self.port: int | None = None
        self.host = host
        self.spec = spec
        self.total = total
        self.stall_fraction = stall_fraction
        self.episodes = episodes
        self.campaign = ""
        self.done: dict[str, int] = {}
        self.run = _Run()
        self.source: LiveSource | None = None
        self.stall_seconds: dict[str, int] = {}
        self.found: dict[tuple[str, str, str, str], int] = {}
        self.warnings = 0
        self.episode_errors = 0
        self._lock = threading.Lock()
        self._server: BoundedServer | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    # ------------------------------------------------------------ serving

    def start(self) -> int:
        """Listen on the address (127.0.0.1 unless told otherwise); OSError if the port is
        taken or the address is not this host's."""
        server = serve_bounded(self.address, self.requested_port, make_wsgi_app(self.registry))
        self._server = server
        self.port = int(server.server_port)
        return self.port

    def close(self) -> None:
        """Stop serving: the port is free and nothing answers on it afterwards."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LiveMetrics:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------ the engine's events

    def campaign_started(self, campaign_id: int, runs: int) -> None:
        with self._lock:
            self.campaign = str(campaign_id)
            self.total = runs
        self.inner.campaign_started(campaign_id, runs)

    def run_started(self, run: PlannedRun, run_id: int) -> None:
        with self._lock:
            self.run = _Run(run.cell.id, run.repetition, run_id)
        self.inner.run_started(run, run_id)

    def phase(self, text: str) -> None:
        with self._lock:
            self.run.phase = phase_name(text)
        self.inner.phase(text)

    def live(
        self, second: float, throughput: float, unit: str, latency_ms: float | None = None
    ) -> None:
        with self._lock:
            r = self.run
            r.second, r.throughput, r.unit, r.latency_ms = second, throughput, unit, latency_ms
            if len(r.history) >= MIN_SECONDS_FOR_MEDIAN:
                median = statistics.median(r.history)
                r.stalled = median > 0 and throughput < self.stall_fraction * median
                if r.stalled:
                    self.stall_seconds[r.cell] = self.stall_seconds.get(r.cell, 0) + 1
            r.history.append(throughput)
        self.inner.live(second, throughput, unit, latency_ms)

    def observing(self, source: LiveSource | None) -> None:
        with self._lock:
            self.source = source
        self.inner.observing(source)

    def run_finished(self, run: PlannedRun, run_id: int, record: RunOutcome) -> None:
        found: Sequence[StallEpisode] = ()
        if self.episodes is not None and record.status == "ok":
            try:
                found = self.episodes(run_id)
            except Exception:  # the metrics must never stop the campaign
                self.episode_errors += 1
        with self._lock:
            status = str(record.status)
            self.done[status] = self.done.get(status, 0) + 1
            for e in found:
                key = (run.cell.id, e.kind, e.cause, e.confidence)
                self.found[key] = self.found.get(key, 0) + 1
            self.run = _Run(phase="between runs")
            self.source = None
        self.inner.run_finished(run, run_id, record)

    def warning(self, text: str) -> None:
        with self._lock:
            self.warnings += 1
        self.inner.warning(text)

    def extend(self, runs: int) -> None:
        with self._lock:
            self.total += runs
        self.inner.extend(runs)

    # ------------------------------------------------------------ what a scrape sees

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            base = [self.campaign, self.host]
            run = _Run(**{k: getattr(self.run, k) for k in _Run.__dataclass_fields__})
            done = dict(self.done)
            total = self.total
            source = self.source
            stall_seconds = dict(self.stall_seconds)
            found = dict(self.found)
            warnings = self.warnings
        names = ["campaign", "host"]
        info = GaugeMetricFamily(
            "pgfsbench_campaign_info", "The campaign being run.", labels=[*names, "spec"]
        )
        info.add_metric([*base, self.spec], 1)
        yield info
        planned = GaugeMetricFamily(
            "pgfsbench_runs_planned", "Runs the campaign will make (it may add some).", labels=names
        )
        planned.add_metric(base, total)
        yield planned
        runs_done = CounterMetricFamily(
            "pgfsbench_runs_done", "Runs finished, by status.", labels=[*names, "status"]
        )
        for status, n in sorted(done.items()):
            runs_done.add_metric([*base, status], n)
        yield runs_done
        warn = CounterMetricFamily("pgfsbench_warnings", "Warnings said so far.", labels=names)
        warn.add_metric(base, warnings)
        yield warn
        yield from self._run_metrics(names, base, run, source)
        cell = [*names, "cell"]
        stalled_s = CounterMetricFamily(
            "pgfsbench_live_stall_seconds",
            f"Seconds under {self.stall_fraction:g} of their run's median so far.",
            labels=cell,
        )
        for c, n in sorted(stall_seconds.items()):
            stalled_s.add_metric([*base, c], n)
        yield stalled_s
        episodes = CounterMetricFamily(
            "pgfsbench_stall_episodes",
            "Stalls and slowdowns the analysis found in finished runs, by cause.",
            labels=[*cell, "kind", "cause", "confidence"],
        )
        for key, n in sorted(found.items()):
            episodes.add_metric([*base, *key], n)
        yield episodes

    def _run_metrics(
        self, names: list[str], base: list[str], run: _Run, source: LiveSource | None
    ) -> Iterator[Metric]:
        if not run.cell:
            return
        cell = [*names, "cell"]
        at = [*base, run.cell]
        info = GaugeMetricFamily(
            "pgfsbench_run_info",
            "The run going on and its phase.",
            labels=[*cell, "repetition", "run_id", "phase"],
        )
        info.add_metric([*at, str(run.repetition), str(run.run_id), run.phase], 1)
        yield info
        if run.throughput is not None:
            tput = GaugeMetricFamily(
                "pgfsbench_throughput",
                "The workload's last progress report (per second).",
                labels=[*cell, "unit"],
            )
            tput.add_metric([*at, run.unit], run.throughput)
            yield tput
            stalled = GaugeMetricFamily(
                "pgfsbench_live_stalled",
                "1 while the last second is under stall_fraction of the run's median.",
                labels=cell,
            )
            stalled.add_metric(at, 1.0 if run.stalled else 0.0)
            yield stalled
        if run.latency_ms is not None:
            lat = GaugeMetricFamily(
                "pgfsbench_latency_ms", "Average latency in the last progress report.", labels=cell
            )
            lat.add_metric(at, run.latency_ms)
            yield lat
        if run.second is not None:
            sec = GaugeMetricFamily(
                "pgfsbench_measured_seconds", "Seconds into the measured phase.", labels=cell
            )
            sec.add_metric(at, run.second)
            yield sec
        latest: dict[str, LiveValue] = {}
        if source is not None:
            try:
                latest = source.latest()
            except Exception:  # a scrape must never disturb the run
                latest = {}
        sample = GaugeMetricFamily(
            "pgfsbench_sample",
            "Each sampler series' last second (the run's series by name).",
            labels=[*cell, "series"],
        )
        waiting = GaugeMetricFamily(
            "pgfsbench_backends_waiting",
            "Backends in each wait event over the last second (average).",
            labels=[*cell, "event"],
        )
        for name, value in sorted(latest.items()):
            if isinstance(value, dict):
                for event, n in sorted(value.items()):
                    waiting.add_metric([*at, event], n)
            else:
                sample.add_metric([*at, name], value)
        yield sample
        yield waiting


# The endpoint is scraped by one Prometheus, or looked at with curl: a few clients at a
# time. Anyone on the host can connect to it, so a client that connects and says nothing
# (or 200 of them) holds one of these workers for this long at most, never a thread each.
MAX_CLIENTS = 4  # requests served at once
MAX_WAITING = 4  # connections accepted beyond those, waiting for a worker; more are closed
REQUEST_TIMEOUT_S = 2.0  # each read or write of a request
# a whole connection, however it trickles (a byte every second keeps every read within
# REQUEST_TIMEOUT_S: eight such clients held the workers for good)
CONNECTION_DEADLINE_S = 5.0


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_S  # the socket's, for every read and write

    def log_message(self, format: str, *args: object) -> None:
        pass


class BoundedServer(WSGIServer):
    """A WSGI server with a fixed pool of workers and a timeout on every connection."""

    request_queue_size = 64  # the listen backlog: connections are taken (or closed) at once

    def __init__(self, address: tuple[str, int], family: socket.AddressFamily) -> None:
        self.address_family = family
        self._pool = ThreadPoolExecutor(MAX_CLIENTS, thread_name_prefix="pgfsbench-metrics")
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS + MAX_WAITING)
        self._lock = threading.Lock()
        self._deadlines: dict[Any, float] = {}
        self._closing = threading.Event()
        super().__init__(address, _QuietHandler)
        # one thread for every connection's deadline (not one each): past it, its socket
        # is shut down, so that a read that trickles ends
        threading.Thread(target=self._reap, name="pgfsbench-metrics-deadlines", daemon=True).start()

    def _reap(self) -> None:
        while not self._closing.wait(0.25):
            now = time.monotonic()
            with self._lock:
                late = [r for r, t in self._deadlines.items() if t <= now]
            for request in late:
                with contextlib.suppress(OSError):
                    request.shutdown(socket.SHUT_RDWR)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: closed, not queued
            return
        request.settimeout(REQUEST_TIMEOUT_S)
        with self._lock:
            self._deadlines[request] = time.monotonic() + CONNECTION_DEADLINE_S

        def serve() -> None:
            try:  # a client's broken or timed-out request ends only itself
                with contextlib.suppress(Exception):
                    self.finish_request(request, client_address)
            finally:
                with self._lock:
                    self._deadlines.pop(request, None)
                self.shutdown_request(request)
                self._slots.release()

        self._pool.submit(serve)

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def serve_bounded(address: str, port: int, app: WSGIApplication) -> BoundedServer:
    """Serve ``app`` on ``address``:``port`` (0: any free port) from a thread of its own."""
    family, _, _, _, sockaddr = socket.getaddrinfo(
        address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    server = BoundedServer((str(sockaddr[0]), port), family)
    server.set_app(app)
    threading.Thread(target=server.serve_forever, name="pgfsbench-metrics", daemon=True).start()
    return server
