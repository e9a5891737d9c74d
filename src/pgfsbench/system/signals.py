"""Signals held back while a step must not be cut in two: an undo, or a child started and
not yet known (a SIGTERM between fork and the registry would leave it running, unknown to
the stop and to `cleanup`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done, then act as they would
    have (once each). Python runs its signal handlers in the main thread whichever thread
    the kernel gives a signal to, so they are deferred there, in Python: a signal mask
    (pthread_sigmask) holds back only the thread that sets it, and the samplers' threads
    took a Ctrl-C in the middle of an undo. A signal ignored here stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []

    def defer(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)

    old: dict[signal.Signals, Any] = {}
    for sig in HELD_SIGNALS:
        # ignored, or handled outside Python (which cannot be put back): left as it is
        if signal.getsignal(sig) not in (signal.SIG_IGN, None):
            old[sig] = signal.signal(sig, defer)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(pending):
            signal.raise_signal(signum)


__all__ = ["HELD_SIGNALS", "signals_held"]
