"""The matrix: the product of every dimension, trimmed by `[[matrix.exclude]]` and
extended by `[[matrix.include]]`, as cells in a stable order.

A cell's id names its table dimensions (`storage/postgres/kernel/workload`), followed by
the swept values that vary in this matrix (`@clients=32,scale=10`).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pgfsbench.spec.dimensions import SWEEPS, TABLES
from pgfsbench.spec.document import Spec, rule_patterns
from pgfsbench.spec.kinds import StorageConfig, workload_tool
from pgfsbench.spec.models import (
    Defaults,
    KernelConfig,
    PgbenchWorkload,
    PostgresConfig,
    WorkloadBase,
)


@dataclass(frozen=True)
class Workload:
    """A workload with the defaults and the cell's swept values folded in: one run."""

    name: str
    tool: str
    builtin: str | None
    scripts: tuple[str, ...]
    clients: int
    threads: int
    duration_s: float
    warmup_s: float
    rate: float | None  # transactions per second (absolute)
    protocol: str
    extra_args: tuple[str, ...]
    sampling_rate: float = 1.0
    rate_fraction: float | None = None  # a share of the cell's own maximum ("75%")
    config: WorkloadBase | None = None  # the tool's spec model (its own fields)
    # the measured phase as whole checkpoint cycles (0: a window of duration_s), and the
    # cycle's length: the cell's checkpoint_timeout
    cycles: int = 0
    cycle_s: float | None = None
    # the window starts as the load ends, its writes still on their way (write_out = false,
    # no warm-up): the seed's "right after the load"
    after_load: bool = False

    def estimand(self) -> str:
        """What a run of this workload measures, in words every output uses."""
        if self.cycles and self.cycle_s:
            n = self.cycles
            return (
                f"steady state over {n} checkpoint cycle{'s' if n != 1 else ''} "
                f"({self.cycle_s:g} s each)"
            )
        if self.after_load:
            return f"{self.duration_s:g} s right after the load"
        return f"a {self.duration_s:g} s window"


W = TypeVar("W", bound=WorkloadBase)


def workload_config(workload: Workload, model: type[W]) -> W:
    """The workload's own spec model, typed: a renamed field fails type-checking (a
    workload made without a spec gets the model's defaults)."""
    config = workload.config
    if isinstance(config, model):
        return config
    if config is None:
        return model.model_validate({"tool": workload.tool})
    raise TypeError(
        f"internal: workload {workload.name} is a {type(config).__name__}, not a {model.__name__}"
    )


@dataclass(frozen=True)
class Cell:
    """One point of the matrix."""

    storage_name: str
    storage: StorageConfig  # the model its kind's row names (spec/kinds.py)
    postgres_name: str
    postgres: PostgresConfig
    kernel_name: str
    kernel: KernelConfig
    workload: Workload
    scale: int
    swept: tuple[tuple[str, str], ...] = field(default=())  # the values that vary, for the id
    scale_spec: str | None = None  # "fits_ram", "2x_shared_buffers"... as the spec said
    scale_basis: dict[str, Any] | None = None  # how it became a number (memory, sizes)

    @property
    def base_id(self) -> str:
        return "/".join(
            (self.storage_name, self.postgres_name, self.kernel_name, self.workload.name)
        )

    @property
    def id(self) -> str:
        if not self.swept:
            return self.base_id
        return self.base_id + "@" + ",".join(f"{k}={v}" for k, v in self.swept)

    @property
    def fs(self) -> str:
        return str(self.storage.fs)

    def coordinates(self) -> dict[str, str]:
        """The cell's value in every dimension (what matrix rules and globs match)."""
        return {
            "storage": self.storage_name,
            "postgres": self.postgres_name,
            "kernel": self.kernel_name,
            "workload": self.workload.name,
            "scale": self.scale_spec or str(self.scale),
            "clients": str(self.workload.clients),
            "rate": (
                f"{self.workload.rate_fraction * 100:g}%"
                if self.workload.rate_fraction
                else _fmt(self.workload.rate)
            ),
        }


def _fmt(v: float | int | None) -> str:
    if v is None:
        return "max"
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _values(w: WorkloadBase, d: Defaults, dim: str) -> list[Any]:
    """A workload's values for a swept dimension (the workload's own, else the default)."""
    pairs: dict[str, tuple[object, object]] = {
        "scale": (w.scale, d.scale),
        "clients": (w.clients, d.clients),
        "rate": (w.rate, d.rate),
    }
    if dim not in pairs:
        raise KeyError(f"internal: {dim} is not a dimension a workload sweeps")
    own, default = pairs[dim]
    chosen = own if own is not None else default
    if chosen is None:
        return [None]
    return list(chosen) if isinstance(chosen, list) else [chosen]


def resolve_workload(
    name: str, w: WorkloadBase, d: Defaults, clients: int, rate: float | str | None
) -> Workload:
    threads = w.threads or d.threads
    if rate == "max":
        rate = None
    fraction = float(rate[:-1]) / 100 if isinstance(rate, str) else None
    pg = w if isinstance(w, PgbenchWorkload) else None
    return Workload(
        name=name,
        tool=w.tool,
        builtin=(pg.builtin or (None if pg.scripts else "tpcb-like")) if pg else None,
        scripts=tuple(pg.scripts) if pg else (),
        clients=clients,
        threads=min(threads, clients),  # pgbench refuses more threads than clients
        duration_s=w.duration if w.duration is not None else d.duration,
        warmup_s=w.warmup if w.warmup is not None else d.warmup,
        rate=float(rate) if rate is not None and fraction is None else None,
        protocol=pg.protocol if pg else "simple",
        extra_args=tuple(w.extra_args),
        sampling_rate=(pg.sampling_rate if pg and pg.sampling_rate else d.sampling_rate),
        rate_fraction=fraction,
        config=w,
        after_load=not d.write_out and (w.warmup if w.warmup is not None else d.warmup) == 0,
    )


def _matches(rule: Any, coords: Mapping[str, str]) -> bool:
    for dim in (*TABLES, *SWEEPS):
        pats = rule_patterns(rule, dim)
        if pats is not None and not any(fnmatch.fnmatchcase(coords[dim], p) for p in pats):
            return False
    return True


ScaleResolver = Callable[["Cell", str], tuple[int, dict[str, Any]]]


def expand(spec: Spec, resolve_scale: ScaleResolver | None = None) -> list[Cell]:
    """Every cell, in the order of the spec (tables first, then swept values). A scale
    given relative to memory ("fits_ram") is made a number by ``resolve_scale`` (plan knows
    the machine and each workload's size per scale unit)."""
    d = spec.defaults
    combos: list[Cell] = []
    for s, p, k, wname in itertools.product(
        spec.storage, spec.postgres, spec.kernel, spec.workload
    ):
        w = spec.workload[wname]
        # only a transaction workload can be paced: a dump or a bulk load has no rate
        rates = _values(w, d, "rate") if _paced(w) else [None]
        for scale, clients, rate in itertools.product(
            _values(w, d, "scale"), _values(w, d, "clients"), rates
        ):
            cell = Cell(
                s,
                spec.storage[s],
                p,
                spec.postgres[p],
                k,
                spec.kernel[k],
                resolve_workload(wname, w, d, int(clients), rate),
                scale if isinstance(scale, int) else 1,
                scale_spec=None if isinstance(scale, int) else str(scale),
            )
            cell = dataclasses.replace(
                cell, workload=with_window(cell.workload, w, d, spec.postgres[p])
            )
            if cell.scale_spec is not None:
                if resolve_scale is None:
                    raise ValueError(f"scale {cell.scale_spec!r} needs the machine's memory")
                n, basis = resolve_scale(cell, cell.scale_spec)
                cell = dataclasses.replace(cell, scale=n, scale_basis=basis)
            combos.append(cell)
    kept = [c for c in combos if not any(_matches(r, c.coordinates()) for r in spec.matrix.exclude)]
    for rule in spec.matrix.include:
        for c in combos:
            if _matches(rule, c.coordinates()) and c not in kept:
                kept.append(c)
    order = {id(c): i for i, c in enumerate(combos)}
    kept.sort(key=lambda c: order[id(c)])
    varying = [dim for dim in SWEEPS if len({c.coordinates()[dim] for c in kept}) > 1]
    return [
        dataclasses.replace(
            c,
            swept=tuple(
                (dim, c.coordinates()[dim])
                for dim in varying
                if dim != "rate" or workload_tool(c.workload.tool).paced
            ),
        )
        for c in kept
    ]


DEFAULT_CHECKPOINT_TIMEOUT_S = 300.0  # PostgreSQL's own


def checkpoint_timeout_s(postgres: PostgresConfig) -> float:
    """The cell's checkpoint_timeout in seconds (PostgreSQL's default unless set)."""
    from pgfsbench.units import parse_duration

    for name, value in postgres.settings.items():
        if name.lower() == "checkpoint_timeout":
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)  # a bare number is seconds, as PostgreSQL reads it
            try:
                return parse_duration(str(value))
            except ValueError:
                break  # PostgreSQL will say what is wrong with it when the server starts
    return DEFAULT_CHECKPOINT_TIMEOUT_S


def with_window(
    workload: Workload, w: WorkloadBase, d: Defaults, postgres: PostgresConfig
) -> Workload:
    """The measured phase as the spec asks: N whole checkpoint cycles (then the duration is
    N x checkpoint_timeout and the warm-up at least one cycle), or a window of duration.
    Unset, a transaction workload (pgbench, sysbench) whose duration is not given measures
    one whole cycle: each run then holds the same checkpoints, where a shorter window holds
    the checkpoint's writes in some runs and not others (a mixture no verdict survives)."""
    if not workload_tool(w.tool).paced:
        return workload
    cycles = w.cycles if w.cycles is not None else d.cycles
    if cycles is None:
        duration_given = w.duration is not None or "duration" in d.model_fields_set
        cycles = 0 if duration_given else 1
    if not cycles:
        return workload
    cycle = checkpoint_timeout_s(postgres)
    return dataclasses.replace(
        workload,
        cycles=cycles,
        cycle_s=cycle,
        duration_s=cycles * cycle,
        warmup_s=max(workload.warmup_s, cycle),
    )


def _paced(w: WorkloadBase) -> bool:
    """Whether a workload can run at a rate (pgbench -R, sysbench --rate)."""
    return workload_tool(w.tool).paced
