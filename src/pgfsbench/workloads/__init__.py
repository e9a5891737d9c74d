"""Load generators behind one protocol (base.Workload): argv builders and pure parsers per
tool, and the driver that runs them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import cast

from pgfsbench.spec import Cell, Defaults
from pgfsbench.spec.kinds import resolve, workload_tool
from pgfsbench.workloads.base import Workload
from pgfsbench.workloads.pgbench import Pgbench


def workload_for(cell: Cell, defaults: Defaults) -> Workload:
    """The driver for a cell's workload tool (spec/kinds.py names each tool's factory)."""
    factory = cast(
        "Callable[[Cell, Defaults], Workload]", resolve(workload_tool(cell.workload.tool).workload)
    )
    return factory(cell, defaults)


def unobserved(workload: Workload) -> Workload:
    """The same workload without its per-transaction log (a run the samplers do not
    watch: pgbench without -l)."""
    if isinstance(workload, Pgbench) and workload.log_transactions:
        return dataclasses.replace(workload, log_transactions=False)
    return workload
