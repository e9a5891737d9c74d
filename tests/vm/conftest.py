"""Tests that run inside the test VM (scripts/test-vm.sh): a kernel with OpenZFS,
device-mapper and md. On a host without them they skip."""

from __future__ import annotations

from tests.func.conftest import base  # noqa: F401  (the fixture: a directory made and checked)
