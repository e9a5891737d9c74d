"""The spec: models (what may be written), the matrix (what it expands to), loading."""

from __future__ import annotations

from pgfsbench.spec.dimensions import DIMENSIONS, SWEEPS, TABLES, Dimension
from pgfsbench.spec.loading import LoadedSpec, apply_overrides, load_spec, validate_spec
from pgfsbench.spec.matrix import Cell, Workload, expand, resolve_workload
from pgfsbench.spec.models import (
    BUILTINS,
    BtrfsStorage,
    Defaults,
    DeviceLimits,
    ExistingStorage,
    Ext4Storage,
    FilesystemStorage,
    InitdbOptions,
    KernelConfig,
    PostgresConfig,
    Scalar,
    Spec,
    TmpfsStorage,
    WalVolume,
    WorkloadConfig,
    XfsStorage,
    ZfsDataset,
    ZfsPool,
    ZfsStorage,
    ZfsValue,
)

__all__ = [
    "BUILTINS", "DIMENSIONS", "SWEEPS", "TABLES", "BtrfsStorage", "Cell", "Defaults",
    "DeviceLimits",
    "Dimension", "ExistingStorage", "Ext4Storage", "FilesystemStorage", "InitdbOptions",
    "KernelConfig", "LoadedSpec", "PostgresConfig", "Scalar", "Spec", "TmpfsStorage",
    "WalVolume", "Workload", "WorkloadConfig", "XfsStorage", "ZfsDataset", "ZfsPool",
    "ZfsStorage", "ZfsValue", "apply_overrides", "expand", "load_spec", "resolve_workload",
    "validate_spec",
]
