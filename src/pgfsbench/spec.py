"""The experiment spec (TOML, validated by pydantic) and its expansion into cells.

A spec names lists of storage, postgres, kernel and workload configurations; the matrix
is their product, trimmed by `[[matrix.exclude]]` and extended by `[[matrix.include]]`.
Unknown keys are errors; every error names the file, the key path and what is allowed.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from pgfsbench.system.errors import SpecError
from pgfsbench.units import parse_duration, parse_size

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
DIMENSIONS = ("storage", "postgres", "kernel", "workload")
Scalar = str | int | float | bool


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_device(value: str) -> str:
    if value.startswith("loop:"):
        parse_size(value[5:])
        return value
    if value.startswith("/dev/"):
        return value
    raise ValueError("a device is 'loop:SIZE' (e.g. loop:4G) or a block device path under /dev/")


Device = Annotated[str, Field(description="loop:SIZE or /dev/...")]


# ---------------------------------------------------------------- storage


class BlockVolume(Model):
    """A filesystem made on a device: what mkfs and mount get."""

    device: Device = "loop:4G"
    mkfs_options: list[str] = []
    mount_options: list[str] = []

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        return _check_device(v)


class WalVolume(BlockVolume):
    """A separate volume for pg_wal (initdb --waldir)."""

    fs: Literal["ext4", "xfs", "btrfs", "tmpfs"]
    device: Device = "loop:2G"
    size: str = "1G"  # tmpfs only

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        parse_size(v)
        return v


class FilesystemStorage(BlockVolume):
    """A filesystem made on a device for the data directory (and optionally its WAL)."""

    description: str = ""
    wal: WalVolume | None = None
    ceiling: bool = False  # measure pg_test_fsync and fio on it first (cached)


class Ext4Storage(FilesystemStorage):
    fs: Literal["ext4"]


class XfsStorage(FilesystemStorage):
    fs: Literal["xfs"]


class BtrfsStorage(FilesystemStorage):
    fs: Literal["btrfs"]


class TmpfsStorage(Model):
    """RAM as the ceiling (the seeds' /tmp baseline)."""

    fs: Literal["tmpfs"]
    description: str = ""
    size: str = "2G"
    mount_options: list[str] = []
    wal: WalVolume | None = None
    ceiling: bool = False

    @field_validator("size")
    @classmethod
    def _size(cls, v: str) -> str:
        parse_size(v)
        return v


class ExistingStorage(Model):
    """A directory on a filesystem the user already mounted: never formatted or remounted."""

    fs: Literal["existing"]
    description: str = ""
    path: str
    ceiling: bool = False

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("path must be absolute")
        return v


# A ZFS property value may depend on the implementation found at run time:
# compression = { kernel = "lz4", fuse = "lzjb" }
ZfsValue = Scalar | dict[Literal["kernel", "fuse"], Scalar]


class ZfsPool(Model):
    layout: Literal["single", "stripe", "mirror", "raidz1", "raidz2", "raidz3"] = "single"
    devices: list[Device] = ["loop:4G"]
    log: list[Device] = []
    log_layout: Literal["stripe", "mirror"] = "stripe"
    cache: list[Device] = []
    ashift: int | None = None
    properties: dict[str, ZfsValue] = {}

    @field_validator("devices", "log", "cache")
    @classmethod
    def _devices(cls, v: list[str]) -> list[str]:
        return [_check_device(d) for d in v]

    @field_validator("ashift")
    @classmethod
    def _ashift(cls, v: int | None) -> int | None:
        if v is not None and not 9 <= v <= 16:
            raise ValueError("ashift is between 9 and 16 (12 for 4K sectors, 13 for 8K flash)")
        return v

    @model_validator(mode="after")
    def _layout(self) -> ZfsPool:
        need = {"single": 1, "stripe": 1, "mirror": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}
        n = len(self.devices)
        if self.layout == "single" and n != 1:
            raise ValueError(f"layout 'single' takes exactly one device, got {n}")
        if n < need[self.layout]:
            raise ValueError(f"layout {self.layout!r} needs at least {need[self.layout]} devices")
        if self.log_layout == "mirror" and len(self.log) < 2:
            raise ValueError("log_layout 'mirror' needs at least two log devices")
        return self


class ZfsDataset(Model):
    properties: dict[str, ZfsValue] = {}


class ZfsStorage(Model):
    fs: Literal["zfs"]
    description: str = ""
    implementation: Literal["any", "kernel", "fuse"] = "any"
    pool: ZfsPool = ZfsPool()
    data: ZfsDataset = ZfsDataset()
    wal: ZfsDataset | None = None
    module_parameters: dict[str, ZfsValue] = {}
    ceiling: bool = False


StorageConfig = Annotated[
    Ext4Storage | XfsStorage | BtrfsStorage | TmpfsStorage | ExistingStorage | ZfsStorage,
    Field(discriminator="fs"),
]

# ---------------------------------------------------------------- postgres, kernel, workload


class InitdbOptions(Model):
    wal_segsize: int | None = None  # MB, power of two 1..1024
    data_checksums: bool = False
    locale: str = "C.UTF-8"
    extra_args: list[str] = []

    @field_validator("wal_segsize")
    @classmethod
    def _segsize(cls, v: int | None) -> int | None:
        if v is not None and (v < 1 or v > 1024 or v & (v - 1)):
            raise ValueError("wal_segsize is a power of two between 1 and 1024 (MB)")
        return v


class PostgresConfig(Model):
    description: str = ""
    settings: dict[str, Scalar] = {}
    initdb: InitdbOptions = InitdbOptions()

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        reserved = {"listen_addresses", "unix_socket_directories", "port", "data_directory"}
        bad = sorted(reserved & set(v))
        if bad:
            raise ValueError(f"{', '.join(bad)} are set by pgfsbench (private socket only)")
        return v


class KernelConfig(Model):
    description: str = ""
    sysctl: dict[str, Scalar] = {}
    transparent_hugepage: Literal["always", "madvise", "never"] | None = None
    transparent_hugepage_defrag: (
        Literal["always", "defer", "defer+madvise", "madvise", "never"] | None
    ) = None

    @field_validator("sysctl")
    @classmethod
    def _sysctl(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        for key in v:
            if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", key):
                raise ValueError(f"{key!r} is not a sysctl name (e.g. vm.dirty_background_ratio)")
        return v


BUILTINS = ("tpcb-like", "simple-update", "select-only")


class WorkloadConfig(Model):
    description: str = ""
    tool: Literal["pgbench"] = "pgbench"
    builtin: Literal["tpcb-like", "simple-update", "select-only"] | None = None
    scripts: list[str] = []  # pgbench -f FILE[@WEIGHT], relative to the spec file
    clients: int | None = None
    threads: int | None = None
    duration: str | None = None
    warmup: str | None = None
    rate: float | None = None  # pgbench -R, transactions per second
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    sampling_rate: float | None = Field(None, gt=0, le=1)
    extra_args: list[str] = []

    @model_validator(mode="after")
    def _what(self) -> WorkloadConfig:
        if self.builtin and self.scripts:
            raise ValueError("give either builtin or scripts, not both")
        return self


class Defaults(Model):
    scale: int = Field(1, ge=1)
    clients: int = Field(8, ge=1)
    threads: int = Field(2, ge=1)
    duration: str = "60s"
    warmup: str = "10s"
    repetitions: int = Field(3, ge=1)
    generation: Literal["client", "server"] = "client"
    foreign_keys: bool = False
    load_per: Literal["repetition", "cell"] = "repetition"
    order: Literal["interleaved", "sequential"] = "interleaved"
    database: str = "pgbench"
    pg_bindir: str | None = None
    samplers: bool = True  # PostgreSQL, wait-event and OS samplers during every run
    sampling_rate: float = Field(1.0, gt=0, le=1)  # pgbench --sampling-rate of the -l log
    wait_event_hz: float = Field(10.0, gt=0, le=50)
    startup_timeout: str = "120s"

    @field_validator("duration", "warmup", "startup_timeout")
    @classmethod
    def _dur(cls, v: str) -> str:
        parse_duration(v)
        return v


class MatrixRule(Model):
    storage: str | list[str] | None = None
    postgres: str | list[str] | None = None
    kernel: str | list[str] | None = None
    workload: str | list[str] | None = None

    def patterns(self, dim: str) -> list[str] | None:
        value: str | list[str] | None = getattr(self, dim)
        if value is None:
            return None
        return [value] if isinstance(value, str) else value


class Matrix(Model):
    exclude: list[MatrixRule] = []
    include: list[MatrixRule] = []


class Spec(Model):
    name: str = ""
    description: str = ""
    defaults: Defaults = Defaults()
    storage: dict[str, StorageConfig]
    postgres: dict[str, PostgresConfig] = {"default": PostgresConfig()}
    kernel: dict[str, KernelConfig] = {"default": KernelConfig()}
    workload: dict[str, WorkloadConfig] = {"tpcb-like": WorkloadConfig(builtin="tpcb-like")}
    matrix: Matrix = Matrix()

    @model_validator(mode="after")
    def _names(self) -> Spec:
        for dim in DIMENSIONS:
            configs: Mapping[str, object] = getattr(self, dim)
            if not configs:
                raise ValueError(f"[{dim}] needs at least one configuration")
            for name in configs:
                if not NAME_RE.match(name):
                    raise ValueError(f"{dim}.{name}: a name uses letters, digits, _ . + -")
        return self


# ---------------------------------------------------------------- cells


@dataclass(frozen=True)
class Workload:
    """A workload with the defaults folded in: what one pgbench run does."""

    name: str
    builtin: str | None
    scripts: tuple[str, ...]
    clients: int
    threads: int
    duration_s: float
    warmup_s: float
    rate: float | None
    protocol: str
    extra_args: tuple[str, ...]
    sampling_rate: float = 1.0


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: a storage x postgres x kernel x workload combination."""

    storage_name: str
    storage: Any  # one of the *Storage models
    postgres_name: str
    postgres: PostgresConfig
    kernel_name: str
    kernel: KernelConfig
    workload: Workload

    @property
    def id(self) -> str:
        return "/".join((self.storage_name, self.postgres_name, self.kernel_name,
                         self.workload.name))

    @property
    def fs(self) -> str:
        return str(self.storage.fs)


def resolve_workload(name: str, w: WorkloadConfig, d: Defaults) -> Workload:
    threads = w.threads or d.threads
    clients = w.clients or d.clients
    return Workload(
        name=name,
        builtin=w.builtin or (None if w.scripts else "tpcb-like"),
        scripts=tuple(w.scripts),
        clients=clients,
        threads=min(threads, clients),  # pgbench refuses more threads than clients
        duration_s=parse_duration(w.duration or d.duration),
        warmup_s=parse_duration(w.warmup if w.warmup is not None else d.warmup),
        rate=w.rate,
        protocol=w.protocol,
        extra_args=tuple(w.extra_args),
        sampling_rate=w.sampling_rate or d.sampling_rate,
    )


def _matches(rule: MatrixRule, names: Mapping[str, str]) -> bool:
    for dim in DIMENSIONS:
        pats = rule.patterns(dim)
        if pats is not None and not any(fnmatch.fnmatchcase(names[dim], p) for p in pats):
            return False
    return True


def expand(spec: Spec) -> list[Cell]:
    """The matrix: product of the four dimensions, minus excludes, plus includes (in order)."""
    combos: list[dict[str, str]] = [
        {"storage": s, "postgres": p, "kernel": k, "workload": w}
        for s in spec.storage for p in spec.postgres for k in spec.kernel for w in spec.workload
    ]
    kept = [c for c in combos if not any(_matches(r, c) for r in spec.matrix.exclude)]
    for rule in spec.matrix.include:
        for combo in combos:
            if _matches(rule, combo) and combo not in kept:
                kept.append(combo)
    order = {tuple(c.values()): i for i, c in enumerate(combos)}
    kept.sort(key=lambda c: order[tuple(c.values())])
    return [
        Cell(c["storage"], spec.storage[c["storage"]], c["postgres"], spec.postgres[c["postgres"]],
             c["kernel"], spec.kernel[c["kernel"]],
             resolve_workload(c["workload"], spec.workload[c["workload"]], spec.defaults))
        for c in kept
    ]


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: Path
    text: str
    overrides: tuple[str, ...]

    @property
    def base_dir(self) -> Path:
        return self.path.parent


def _parse_override_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_overrides(data: dict[str, Any], sets: Sequence[str]) -> None:
    """Apply --set KEY=VALUE. A bare key is a default, and the command line wins over
    the same key set inside any workload, so any example can be run small."""
    defaults_keys = set(Defaults.model_fields)
    for item in sets:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected KEY=VALUE (e.g. --set scale=2)")
        key, raw = (part.strip() for part in item.split("=", 1))
        value = _parse_override_value(raw)
        path = key.split(".")
        if len(path) == 1:
            if key not in defaults_keys:
                raise SpecError(f"--set {key}: unknown default (allowed: "
                                f"{', '.join(sorted(defaults_keys))})")
            data.setdefault("defaults", {})[key] = value
            for workload in (data.get("workload") or {}).values():
                if isinstance(workload, dict):
                    workload.pop(key, None)
            continue
        node = data
        for part in path[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise SpecError(f"--set {key}: {part} is not a table")
            node = child
        node[path[-1]] = value


def load_spec(path: Path, sets: Sequence[str] = ()) -> LoadedSpec:
    """Read, override and validate a spec; every problem becomes one SpecError message."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    apply_overrides(data, sets)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(path, exc, data)) from None
    return LoadedSpec(spec, path.resolve(), text, tuple(sets))


# ---------------------------------------------------------------- error messages

_TAGS = {"ext4", "xfs", "btrfs", "tmpfs", "existing", "zfs"}
_STORAGE_MODELS: dict[str, type[BaseModel]] = {
    "ext4": Ext4Storage, "xfs": XfsStorage, "btrfs": BtrfsStorage, "tmpfs": TmpfsStorage,
    "existing": ExistingStorage, "zfs": ZfsStorage,
}


def format_validation_error(path: Path, exc: ValidationError, data: Mapping[str, Any]) -> str:
    lines = []
    for err in exc.errors():
        loc = _drop_union_tags([str(p) for p in err["loc"]])
        where = ".".join(loc) if loc else "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1], data)
            msg = "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif err["type"] == "union_tag_invalid":
            msg = "fs must be one of ext4, xfs, btrfs, tmpfs, zfs, existing"
        elif err["type"] == "union_tag_not_found":
            msg = "missing 'fs' (one of ext4, xfs, btrfs, tmpfs, zfs, existing)"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        lines.append(f"{path}: {where}: {msg}")
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems in the spec:\n  " + "\n  ".join(lines)


def _drop_union_tags(loc: list[str]) -> list[str]:
    """pydantic puts the discriminator value or a union member's type into the path."""
    out: list[str] = []
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "storage" and part in _TAGS:
            continue
        if i > 0 and part.startswith(("str", "int", "float", "bool", "dict[", "list[")):
            continue
        out.append(part)
    return out


def allowed_keys(loc: Sequence[str], data: Mapping[str, Any]) -> list[str]:
    """The keys the model at ``loc`` accepts, found by walking the Spec's annotations."""
    tp: Any = Spec
    for i, part in enumerate(loc):
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return []
            tp = field.annotation
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
            if i == 1 and loc[0] == "storage":  # the storage union: pick the model by its fs
                entry = (data.get("storage") or {}).get(part) or {}
                fs = entry.get("fs") if isinstance(entry, dict) else None
                model = _STORAGE_MODELS.get(str(fs))
                if model is None:
                    return []
                tp = model
        elif get_origin(tp) is list:
            tp = get_args(tp)[0]
        else:
            return []
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return sorted(tp.model_fields)
    return []


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(models) == 1:
                tp = models[0]
            elif len(args) == 1:
                tp = args[0]
            else:
                return tp
        else:
            return tp
