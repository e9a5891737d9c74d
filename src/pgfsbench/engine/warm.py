"""What a run does not need until its server starts or its measurement ends (psycopg, the
samplers, the transaction log's parser and its dataframe library, the statistics, the
diagnosis), imported in a thread of its own while the first cell's storage is made and
initdb runs (the main thread waits on those commands then), and finished before the load
starts: these imports no longer lengthen the run, and they never take CPU from a timed
phase (load, warm-up, measurement).

The main thread may import one of them meanwhile (psycopg, when the server starts): it
then waits for the thread's import to end, as Python's import locks make it. The thread
imports third-party packages and modules of ours that only need what the campaign already
imported, so neither thread ever waits on the other in turn. A module that fails here is
imported again where it is used, and fails there with its own error.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Sequence

AFTER_MEASUREMENT = (
    "psycopg",
    "pgfsbench.collect.observation",
    "pgfsbench.collect.txlog",
    "pgfsbench.analysis.stats",
    "pgfsbench.analysis.series",
    "pgfsbench.analysis.stalls",
    "pgfsbench.report.loading",
    "pgfsbench.cli.results",
)


class WarmImports:
    def __init__(self, modules: Sequence[str] = AFTER_MEASUREMENT) -> None:
        self.failed: dict[str, str] = {}
        self._thread = threading.Thread(
            target=self._run, args=(tuple(modules),), name="pgfsbench-imports", daemon=True
        )
        self._thread.start()

    def _run(self, modules: tuple[str, ...]) -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # the main thread's own import says it again
                self.failed[name] = f"{type(exc).__name__}: {exc}"

    def wait(self) -> None:
        """Before a timed phase: the imports are done."""
        self._thread.join()
