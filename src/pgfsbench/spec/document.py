"""The spec as a whole: its tables of configurations, the matrix rules, the defaults."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, create_model, field_validator, model_validator

from pgfsbench.spec.cluster import KubernetesConfig
from pgfsbench.spec.dimensions import DIMENSIONS, TABLES
from pgfsbench.spec.kinds import StorageConfig, WorkloadConfig
from pgfsbench.spec.models import (
    NAME_RE,
    Defaults,
    KernelConfig,
    Model,
    PgbenchWorkload,
    PostgresConfig,
)


def _matrix_rule() -> type[BaseModel]:
    """`[[matrix.include]]` / `[[matrix.exclude]]`: a glob (or list of globs) per
    dimension, all dimensions from the one table."""
    fields: dict[str, Any] = {
        d.name: (str | int | float | list[str | int | float] | None, None) for d in DIMENSIONS
    }
    return create_model("MatrixRule", __base__=Model, **fields)


MatrixRule = _matrix_rule()


def rule_patterns(rule: BaseModel, dim: str) -> list[str] | None:
    value = getattr(rule, dim)
    if value is None:
        return None
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


class Matrix(Model):
    exclude: list[MatrixRule] = []  # type: ignore[valid-type]
    include: list[MatrixRule] = []  # type: ignore[valid-type]


# where a spec may not put its work directory (pgfsbench makes its directories there)
SYSTEM_DIRECTORIES = frozenset(
    [
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/tmp",
        "/usr",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/tmp",
    ]
)


class Spec(Model):
    name: str = ""
    description: str = ""
    defaults: Defaults = Defaults()
    storage: dict[str, StorageConfig]
    postgres: dict[str, PostgresConfig] = {"default": PostgresConfig()}
    kernel: dict[str, KernelConfig] = {"default": KernelConfig()}
    workload: dict[str, WorkloadConfig] = {"tpcb-like": PgbenchWorkload(builtin="tpcb-like")}
    matrix: Matrix = Matrix()
    # where the `pvc` cells run (spec/cluster.py)
    kubernetes: KubernetesConfig | None = None
    # where loop files, mount points and data directories go (the disk measured when the
    # storage is loop files): --workdir, when given, wins
    workdir: str | None = None

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.startswith("/") or len(v) > 1024 or any(ord(c) < 32 for c in v):
            raise ValueError(f"{v!r}: an absolute directory path (e.g. /srv/pgfsbench)")
        if any(part in (".", "..") for part in v.split("/")):
            raise ValueError(f"{v!r}: a path without . or .. in it")
        path = "/" + "/".join(p for p in v.split("/") if p)
        if path in SYSTEM_DIRECTORIES or path.startswith(("/proc/", "/sys/", "/dev/")):
            raise ValueError(
                f"{v!r}: a system directory; give a directory of its own (e.g. /srv/pgfsbench)"
            )
        return v

    @model_validator(mode="after")
    def _names(self) -> Spec:
        for dim in TABLES:
            configs: Mapping[str, object] = getattr(self, dim)
            if not configs:
                raise ValueError(f"[{dim}] needs at least one configuration")
            for name in configs:
                if not NAME_RE.match(name) or len(name) > 60:
                    raise ValueError(
                        f"{dim}.{name}: a name uses letters, digits, _ . + - (60 at most)"
                    )
        return self
