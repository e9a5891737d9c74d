"""Tests that run inside the test VM (scripts/test-vm.sh): a kernel with OpenZFS,
device-mapper and md. On a host without them they skip."""

from __future__ import annotations

from tests.func.conftest import base  # noqa: F401  (the fixture: a directory made and checked)

# a one-cell tpcb-like run at scale 1, its duration and storage tables filled in by each test
SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "{duration}"
warmup = "0s"
repetitions = 1
{storage}
[workload.rw]
builtin = "tpcb-like"
"""
