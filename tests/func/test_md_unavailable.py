"""md RAID where the kernel (or the host) has no md: `run` refuses before anything is made,
saying why (the arrays themselves are made in the test VM, tests/vm/test_md.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.storage import md
from pgfsbench.system.runner import Runner
from tests.func.conftest import leftovers, refused, write_spec

SPEC = """
[defaults]
scale = 1
clients = 1
duration = "2s"
warmup = "0s"
repetitions = 1

[storage.mirror]
fs = "ext4"
md = { level = "raid1", devices = ["loop:256M", "loop:256M"] }

[workload.rw]
builtin = "tpcb-like"
"""


def test_md_where_there_is_none_is_refused_saying_why(base: Path) -> None:
    why = md.unavailable(Runner(), "raid1")
    if why is None:
        pytest.skip("this host has md: tests/vm/test_md.py makes arrays")
    stderr = refused(base, write_spec(base / "s.toml", SPEC))
    assert f"md raid1: not possible here: {why}" in stderr
    assert not (base / "work").exists() and leftovers(base) == []
