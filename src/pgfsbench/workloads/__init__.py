"""Load generators behind one protocol (base.Workload): argv builders and pure parsers per
tool, and the driver that runs them."""

from __future__ import annotations

from pgfsbench.spec import Cell, Defaults
from pgfsbench.workloads.base import Workload
from pgfsbench.workloads.copy import Copy
from pgfsbench.workloads.dump import Dump
from pgfsbench.workloads.pgbench import Pgbench
from pgfsbench.workloads.sysbench import Sysbench


def workload_for(cell: Cell, defaults: Defaults) -> Workload:
    """The driver for a cell's workload tool."""
    tool = cell.workload.tool
    if tool == "pgbench":
        return Pgbench(defaults.generation, defaults.foreign_keys, defaults.samplers)
    if tool == "sysbench":
        return Sysbench()
    if tool == "copy":
        return Copy()
    if tool == "pg_dump":
        return Dump(Pgbench(defaults.generation, defaults.foreign_keys, False))
    raise ValueError(f"no workload driver for {tool!r}")
