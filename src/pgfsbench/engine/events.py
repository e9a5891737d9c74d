"""What the engine tells its front end (progress bar, log lines). The engine never prints."""

from __future__ import annotations

from typing import Protocol

from pgfsbench.plan import PlannedRun
from pgfsbench.results.records import RunOutcome

LiveValue = float | dict[str, float]


class LiveSource(Protocol):
    """What the samplers of the run going on saw last (a live view, read when asked)."""

    def latest(self) -> dict[str, LiveValue]: ...


class Events(Protocol):
    def campaign_started(self, campaign_id: int, runs: int) -> None: ...
    def run_started(self, run: PlannedRun, run_id: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def live(
        self, second: float, throughput: float, unit: str, latency_ms: float | None = None
    ) -> None: ...
    def observing(self, source: LiveSource | None) -> None: ...
    def run_finished(self, run: PlannedRun, run_id: int, record: RunOutcome) -> None: ...
    def warning(self, text: str) -> None: ...
    def extend(self, runs: int) -> None: ...


class QuietEvents:
    def campaign_started(self, campaign_id: int, runs: int) -> None:
        pass

    def run_started(self, run: PlannedRun, run_id: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def live(
        self, second: float, throughput: float, unit: str, latency_ms: float | None = None
    ) -> None:
        pass

    def observing(self, source: LiveSource | None) -> None:
        pass

    def run_finished(self, run: PlannedRun, run_id: int, record: RunOutcome) -> None:
        pass

    def warning(self, text: str) -> None:
        pass

    def extend(self, runs: int) -> None:
        pass
