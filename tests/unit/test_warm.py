"""The imports a run needs after its measurement, done in a thread during the preparation."""

from __future__ import annotations

import sys

from pgfsbench.engine.warm import AFTER_MEASUREMENT, WarmImports


def test_imports_happen_in_a_thread_and_a_failure_is_kept_not_raised() -> None:
    warm = WarmImports(["colorsys", "pgfsbench_no_such_module"])
    warm.wait()
    assert "colorsys" in sys.modules
    assert "ModuleNotFoundError" in warm.failed["pgfsbench_no_such_module"]


def test_every_module_named_exists() -> None:
    warm = WarmImports()
    warm.wait()
    assert warm.failed == {}
    assert all(name in sys.modules for name in AFTER_MEASUREMENT)
