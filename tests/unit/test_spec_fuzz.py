"""Property: whatever a user writes, `plan` answers with one of our errors or a plan,
never a traceback. The examples are mutated at random: leaves replaced by values of
every type (huge, negative, NaN, control characters...), keys removed, renamed and added,
and --set options made up."""

from __future__ import annotations

import copy
import math
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgfsbench.plan import make_plan
from pgfsbench.spec import load_spec, validate_spec
from pgfsbench.system.errors import PgfsbenchError, SpecError

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.toml"))
TEXTS = {p: p.read_text() for p in EXAMPLES}

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "loop:1G",
            "loop:0",
            "loop:-5G",
            "/dev/null",
            "/dev/../etc",
            "5s",
            "1h",
            "lots",
            "64MB",
            "*",
            "ext4",
            "zfs",
            "tmpfs",
            "\n",
            "a'b",
            "NaN",
            "75%",
            "fits_ram",
            "x" * 300,
        ]
    ),
    st.lists(st.integers(min_value=-5, max_value=10**7), max_size=4),
    st.dictionaries(st.text(max_size=10), st.integers(), max_size=3),
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += paths(v, (*prefix, i))
    return out


def parent_of(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


@st.composite
def mutated(draw: st.DrawFn) -> tuple[Path, dict[str, Any], list[str]]:
    path = draw(st.sampled_from(EXAMPLES))
    data = tomllib.loads(TEXTS[path])
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        targets = [p for p in paths(data) if p]
        where = draw(st.sampled_from(targets))
        parent = parent_of(data, where)
        action = draw(st.sampled_from(["replace", "replace", "delete", "rename", "add"]))
        key = where[-1]
        if action == "replace":
            parent[key] = draw(leaves)
        elif action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = parent.pop(key)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(leaves)
    sets = draw(
        st.lists(
            st.one_of(
                st.text(max_size=20),
                st.builds(
                    lambda k, v: f"{k}={v}",
                    st.sampled_from(
                        [
                            "scale",
                            "clients",
                            "duration",
                            "repetitions",
                            "storage.x.device",
                            "defaults",
                            "workload.w.rate",
                            "matrix.include",
                            "stall_timeout",
                            "threads",
                        ]
                    ),
                    st.sampled_from(
                        [
                            "2",
                            "-1",
                            "0",
                            "1e400",
                            "nan",
                            "[1, 2]",
                            "[]",
                            '"5s"',
                            "{a = 1}",
                            "loop:1M",
                            "true",
                            "''",
                        ]
                    ),
                ),
            ),
            max_size=3,
        )
    )
    return path, copy.deepcopy(data), sets


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_plan_never_raises_anything_but_our_errors(
    case: tuple[Path, dict[str, Any], list[str]],
) -> None:
    path, data, sets = case
    try:
        loaded = validate_spec(path, TEXTS[path], data, sets)
        plan = make_plan(loaded)
    except PgfsbenchError:
        return
    # what plan accepted is something run can use: finite, in range, named
    for cell in plan.cells:
        w = cell.workload
        assert math.isfinite(w.duration_s) and w.duration_s >= 1
        assert math.isfinite(w.warmup_s) and w.warmup_s >= 0
        assert 1 <= w.threads <= w.clients and cell.scale >= 1
        assert w.rate is None or (math.isfinite(w.rate) and w.rate > 0)
    assert math.isfinite(plan.estimated_seconds)


def test_settings_that_are_not_sizes_or_durations_leave_the_plan_to_postgresql(
    tmp_path: Path,
) -> None:
    """shared_buffers = false: the dirty-page warning skips the cell (PostgreSQL refuses the
    value, and says why); a scale that needs shared_buffers says it cannot be resolved."""
    spec = tmp_path / "s.toml"
    spec.write_text(
        """
[storage.a]
fs = "tmpfs"
size = "1G"
[postgres.bad]
settings = { shared_buffers = false, checkpoint_timeout = false }
[kernel.low]
sysctl = { "vm.dirty_background_bytes" = "33554432" }
[kernel.high]
sysctl = { "vm.dirty_background_bytes" = "1073741824" }
"""
    )
    make_plan(load_spec(spec))
    spec.write_text(
        spec.read_text().replace(
            "[storage.a]", '[defaults]\nscale = "2x_shared_buffers"\n[storage.a]'
        )
    )
    with pytest.raises(SpecError, match="needs shared_buffers: 'False' is not a size"):
        make_plan(load_spec(spec))
