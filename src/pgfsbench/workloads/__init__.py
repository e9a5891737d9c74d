"""Load generators behind one protocol (base.Workload): argv builders and pure parsers per
tool, and the driver that runs them."""

from __future__ import annotations

import dataclasses

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
        return Pgbench(defaults.generation, defaults.foreign_keys,
                       bool(defaults.samplers) and defaults.txlog is not False)
    if tool == "sysbench":
        return Sysbench()
    if tool == "copy":
        return Copy()
    if tool == "pg_dump":
        return Dump(Pgbench(defaults.generation, defaults.foreign_keys, False))
    raise ValueError(f"no workload driver for {tool!r}")


def unobserved(workload: Workload) -> Workload:
    """The same workload without its per-transaction log (a run the samplers do not
    watch: pgbench without -l)."""
    if isinstance(workload, Pgbench) and workload.log_transactions:
        return dataclasses.replace(workload, log_transactions=False)
    return workload
