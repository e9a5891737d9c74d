"""Polling loops with deadlines: every wait in pgfsbench goes through here."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from pgfsbench.system.errors import TimeoutExpired

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Call ``probe`` until it returns something truthy; raise TimeoutExpired at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutExpired(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(min(interval, remaining))
