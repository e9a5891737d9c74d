"""The bulk-load workload's pure parts: how rows split into streams, the SQL it sends,
and its spec model."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgfsbench.spec.models import CopyWorkload
from pgfsbench.workloads.copy import copy_from_sql, generate_sql, stream_ranges


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=64))
def test_streams_cover_every_row_once_in_near_equal_parts(rows: int, streams: int) -> None:
    ranges = stream_ranges(rows, streams)
    covered = [i for a, b in ranges for i in range(a, b + 1)]
    assert covered == list(range(1, rows + 1))
    sizes = [b - a + 1 for a, b in ranges]
    assert not sizes or max(sizes) - min(sizes) <= 1
    assert len(ranges) <= streams


def test_paths_are_quoted_as_literals() -> None:
    gen = generate_sql(Path("/scratch/it's/part-000.txt"), 1, 5).as_string(None)
    assert gen.endswith("TO '/scratch/it''s/part-000.txt'")
    assert "generate_series(1, 5)" in gen
    assert copy_from_sql(Path("/s/p.txt")).as_string(None) == "COPY \"copy_target\" FROM '/s/p.txt'"


def test_copy_model() -> None:
    w = CopyWorkload(tool="copy", streams=4, indexes="before")
    assert (w.rows_per_scale, w.streams, w.indexes) == (100_000, 4, "before")
    with pytest.raises(ValueError):
        CopyWorkload(tool="copy", streams=0)
    with pytest.raises(ValueError):
        CopyWorkload(tool="copy", indexes="later")
