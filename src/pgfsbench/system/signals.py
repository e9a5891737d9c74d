"""Signals held back while a step must not be cut in two: an undo, or a child started and
not yet known (a SIGTERM between fork and the registry would leave it running, unknown to
the stop and to `cleanup`)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from pgfsbench.system.errors import Interrupted

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# set when a stop signal arrived: every thread that waits (a cluster's, a capture's) checks
# it, so a stop never depends on which thread the kernel or Python woke
STOP = threading.Event()


@contextlib.contextmanager
def stop_on_signals(quiet: Callable[[], bool] | None = None) -> Iterator[threading.Event]:
    """The one place a signal becomes the stop of what runs (a campaign, a capture):
    SIGINT, SIGTERM and SIGHUP set ``STOP``, which every waiting thread checks, and raise
    in the main thread (KeyboardInterrupt for SIGINT, as Python does; Interrupted for the
    others) unless ``quiet()`` says the main thread is in a wait that ends on ``STOP`` by
    itself. SIGINT is handled even where the shell started pgfsbench with it ignored (a
    background job): a `kill -INT` is a deliberate stop. A SIGHUP ignored (nohup) stays
    ignored. Outside the main thread, nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return
    STOP.clear()

    def handler(signum: int, frame: FrameType | None) -> None:
        STOP.set()
        if quiet is not None and quiet():
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(f"stopped by signal {signal.Signals(signum).name}; everything undone")

    old: dict[signal.Signals, Any] = {}
    for sig in HELD_SIGNALS:
        current = signal.getsignal(sig)
        if current is None or (sig == signal.SIGHUP and current == signal.SIG_IGN):
            continue
        old[sig] = signal.signal(sig, handler)
    try:
        yield STOP
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


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


__all__ = ["HELD_SIGNALS", "STOP", "signals_held", "stop_on_signals"]
