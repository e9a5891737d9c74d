"""What a replay run's figures are worth, marked apart from a host's disturbance: a replay
that did not do what its capture did measured something else; one too short to measure
has no figure to give a verdict; a timed replay whose schedule ran late measured the
replayer's lag as much as the storage. Pure: a stored run in, its marks out."""

from __future__ import annotations

from pgfsbench.results.records import StoredRun

# a replay's measured phase needs at least this long and this many transactions for a
# throughput (a fast replay of a short capture can be over in a fraction of a second)
MIN_SECONDS = 5.0
MIN_TRANSACTIONS = 200
# a timed replay whose worst schedule lag is above this share of its mean latency: its
# latencies are the replayer's schedule, not the storage's answer
LAG_SHARE = 0.5


def _replay(run: StoredRun) -> dict[str, object] | None:
    extra = run.recorded.tool.model_extra or {}
    found = extra.get("replay")
    return found if isinstance(found, dict) else None


def too_short(run: StoredRun) -> str | None:
    """Why a replay run's throughput is no figure (None: it is one, or not a replay)."""
    r = _replay(run)
    if r is None:
        return None
    wall = r.get("wall_s")
    tx = run.transactions
    if isinstance(wall, int | float) and wall < MIN_SECONDS:
        return (
            f"too short to measure: {float(wall):.2f} s replayed (a figure needs at least "
            f"{MIN_SECONDS:g} s): no verdict; capture longer, or replay timed"
        )
    if tx is not None and tx < MIN_TRANSACTIONS:
        return (
            f"too short to measure: {tx} transactions (a figure needs at least "
            f"{MIN_TRANSACTIONS}): no verdict"
        )
    return None


def lagged(run: StoredRun) -> str | None:
    """Why a timed replay's latencies are not the storage's (None: they are)."""
    r = _replay(run)
    if r is None or r.get("mode") != "timed":
        return None
    lag = r.get("schedule_lag_max_ms")
    lat = run.latency_avg_ms
    if isinstance(lag, int | float) and lat and lag > LAG_SHARE * lat and lag > 1.0:
        return (
            f"its schedule ran late (up to {float(lag):,.1f} ms against a mean latency of "
            f"{lat:,.1f} ms): its latencies are the replayer's schedule as much as the "
            "storage's, and are not shown as the storage's"
        )
    return None


def differs(run: StoredRun) -> str | None:
    f = run.recorded.tool.fidelity or {}
    found = f.get("differs") or []
    if not found:
        return None
    return "the replay differs from its capture: " + "; ".join(map(str, found))


def marks(run: StoredRun) -> tuple[str, ...]:
    return tuple(m for m in (too_short(run), lagged(run), differs(run)) if m)
