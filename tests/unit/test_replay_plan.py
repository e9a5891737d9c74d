"""`plan` refuses a replay whose capture is missing or not a capture of root's before it
prints anything (it printed a made-up estimate; `run` failed only after the plan)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pgfsbench.plan import make_plan
from pgfsbench.spec.loading import load_spec
from pgfsbench.system.errors import CapabilityError
from tests.func.conftest import pgfsbench


def spec(tmp_path: Path, capture: Path) -> Path:
    target = tmp_path / "replay.toml"
    target.write_text(
        '[storage.ext4]\nfs = "ext4"\ndevice = "loop:1G"\n'
        f'[workload.mine]\ntool = "replay"\ncapture = "{capture}"\n'
    )
    return target


def test_a_missing_capture_is_refused_by_plan(tmp_path: Path) -> None:
    with pytest.raises(CapabilityError, match="does not exist"):
        make_plan(load_spec(spec(tmp_path, tmp_path / "nowhere")), tmp_path)
    done = pgfsbench("plan", str(spec(tmp_path, tmp_path / "nowhere")), check=False)
    assert done.returncode != 0 and "does not exist" in " ".join(done.stderr.split())
    assert "cells x" not in done.stdout  # nothing of a plan printed first


def test_a_directory_that_is_not_a_capture_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir(mode=0o700)
    (foreign / "manifest.json").write_text('{"version": 2, "seconds": 30}')
    if os.geteuid() == 0:
        os.chown(foreign / "manifest.json", 65534, 65534)  # another user's manifest
    with pytest.raises(CapabilityError, match="workload mine: capture"):
        make_plan(load_spec(spec(tmp_path, foreign)), tmp_path)
