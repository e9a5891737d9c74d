"""A run's metrics, typed: read by attribute whatever version wrote them, written with
their format and the shape the readers expect."""

from __future__ import annotations

from pgfsbench.results.metrics import METRICS_FORMAT, checked_metrics, read_metrics
from pgfsbench.results.records import StoredRun


def test_metrics_from_before_formats_read_by_attribute_with_unknown_parts_kept() -> None:
    old = {
        "observer": {"on": True, "alternating": True, "sampler_cpu_pct_of_a_core": 1.5},
        "block_stack": {"under_test": ["loop0"], "beneath": ["vda"]},
        "episodes": {"stall_fraction": 0.1, "slowdown_fraction": 0.5, "slowdown_min_seconds": 2},
        "events": [{"kind": "snapshot", "start_s": 3.0, "label": "zfs snapshot 1"}],
        "latency_log": {"transactions": 100, "sampling_rate": 0.5, "p99": 3.2},
        "stat_io": [{"backend_type": "client backend"}],
    }
    run = StoredRun(metrics=old)
    m = run.recorded
    assert m.format == 0 and m.observer.on and m.observer.sampler_cpu_pct_of_a_core == 1.5
    assert m.block_stack.beneath == ["vda"]
    assert m.episodes.given() == {
        "stall_fraction": 0.1,
        "slowdown_fraction": 0.5,
        "slowdown_min_seconds": 2.0,
    }
    assert m.events[0].end_s is None and m.events[0].label == "zfs snapshot 1"
    assert m.latency_log is not None and m.latency_log.sampling_rate == 0.5
    assert (m.model_extra or {})["stat_io"] == [{"backend_type": "client backend"}]


def test_a_part_of_another_shape_is_left_out_not_an_error() -> None:
    m = read_metrics({"observer": "garbage", "block_stack": {"beneath": ["vda"]}})
    assert m.observer.on is None and m.block_stack.beneath == ["vda"]
    assert read_metrics(None).format == 0


def test_what_the_engine_stores_is_stamped_and_checked() -> None:
    stored = checked_metrics({"observer": {"on": False}, "tool": {"name": "pgbench"}})
    assert stored["format"] == METRICS_FORMAT
    assert read_metrics(stored).tool.name == "pgbench"
    wrong = checked_metrics({"block_stack": {"under_test": 5}})
    assert wrong["format_problems"] == ["block_stack.under_test: Input should be a valid list"]
    assert read_metrics(wrong).block_stack.under_test == []  # left out, not an error
    paced = checked_metrics({"latency_log": {"schedule_lag_ms": {"p50": 0.1, "p99": 2.0}}})
    assert "format_problems" not in paced
