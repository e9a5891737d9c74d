"""What the engine tells its front end (progress bar, log lines). The engine never prints."""

from __future__ import annotations

from typing import Protocol

from pgfsbench.engine.records import RunRecord
from pgfsbench.plan import PlannedRun


class Events(Protocol):
    def run_started(self, run: PlannedRun, run_id: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def live(self, second: float, throughput: float, unit: str) -> None: ...
    def run_finished(self, run: PlannedRun, run_id: int, record: RunRecord) -> None: ...
    def warning(self, text: str) -> None: ...
    def extend(self, runs: int) -> None: ...


class QuietEvents:
    def run_started(self, run: PlannedRun, run_id: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def live(self, second: float, throughput: float, unit: str) -> None:
        pass

    def run_finished(self, run: PlannedRun, run_id: int, record: RunRecord) -> None:
        pass

    def warning(self, text: str) -> None:
        pass

    def extend(self, runs: int) -> None:
        pass
