"""Reading a spec: TOML, `--set` overrides, validation, and one message per problem that
names the file, the key path and what is allowed.

Paths in a spec are read as follows (all documented in the README's Safety section):
custom pgbench scripts are resolved relative to the spec file and read by the benchmark,
which runs as the PostgreSQL OS user, never as root; `existing` storage paths only get a
directory created inside them; `pg_bindir` is executed.
"""

from __future__ import annotations

import tomllib
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from pgfsbench.spec.models import (
    BtrfsStorage,
    Defaults,
    ExistingStorage,
    Ext4Storage,
    PgbenchWorkload,
    Spec,
    SysbenchWorkload,
    TmpfsStorage,
    XfsStorage,
    ZfsStorage,
)
from pgfsbench.system.errors import SpecError

MAX_SPEC_BYTES = 1 << 20


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
        if not all(path):
            raise SpecError(f"--set {key}: an empty part in the key")
        if len(path) == 1:
            if key not in defaults_keys:
                raise SpecError(f"--set {key}: unknown default (allowed: "
                                f"{', '.join(sorted(defaults_keys))})")
            data.setdefault("defaults", {})
            if not isinstance(data["defaults"], dict):
                raise SpecError("--set: [defaults] in the spec is not a table")
            data["defaults"][key] = value
            workloads = data.get("workload")
            for workload in (workloads.values() if isinstance(workloads, dict) else ()):
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


def read_spec_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a spec file") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: {len(raw)} bytes; a spec is at most {MAX_SPEC_BYTES}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                        f"{exc.start}); save the spec as UTF-8") from None


def load_spec(path: Path, sets: Sequence[str] = ()) -> LoadedSpec:
    """Read, override and validate a spec; every problem becomes one SpecError message."""
    text = read_spec_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{path}: not valid TOML: nested too deeply") from None
    return validate_spec(path, text, data, sets)


def validate_spec(path: Path, text: str, data: dict[str, Any],
                  sets: Sequence[str] = ()) -> LoadedSpec:
    """Overrides applied to parsed TOML, then validated (the spec's ``text`` is kept)."""
    apply_overrides(data, sets)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(path, exc, data)) from None
    return LoadedSpec(spec, path.resolve(), text, tuple(sets))


# ---------------------------------------------------------------- error messages

_TAGS = {"ext4", "xfs", "btrfs", "tmpfs", "existing", "zfs"}
_TOOLS: dict[str, type[BaseModel]] = {"pgbench": PgbenchWorkload, "sysbench": SysbenchWorkload}
_STORAGE_MODELS: dict[str, type[BaseModel]] = {
    "ext4": Ext4Storage, "xfs": XfsStorage, "btrfs": BtrfsStorage, "tmpfs": TmpfsStorage,
    "existing": ExistingStorage, "zfs": ZfsStorage,
}


def format_validation_error(path: Path, exc: ValidationError, data: Mapping[str, Any]) -> str:
    lines = []
    errors = exc.errors()
    # a value that may be one or many fails both ways: keep the reason, not "not a list"
    located = {tuple(_drop_union_tags([str(p) for p in e["loc"]])) for e in errors
               if e["type"] not in ("list_type",)}
    for err in errors:
        loc = _drop_union_tags([str(p) for p in err["loc"]])
        if err["type"] == "list_type" and tuple(loc) in located:
            continue
        where = ".".join(loc) if loc else "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1], data)
            msg = "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        elif err["type"] == "union_tag_invalid":
            msg = "fs must be one of ext4, xfs, btrfs, tmpfs, zfs, existing"
        elif err["type"] == "union_tag_not_found":
            msg = "missing 'fs' (one of ext4, xfs, btrfs, tmpfs, zfs, existing)"
        elif err["type"] == "tool":
            msg = "tool must be pgbench or sysbench"
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        line = f"{path}: {where}: {msg}"
        if line not in lines:
            lines.append(line)
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems in the spec:\n  " + "\n  ".join(lines)


def _drop_union_tags(loc: list[str]) -> list[str]:
    """pydantic puts the discriminator value or a union member's type into the path."""
    out: list[str] = []
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "storage" and part in _TAGS:
            continue
        if i == 2 and loc[0] == "workload" and part in _TOOLS:
            continue
        if i > 0 and part.startswith(("str", "int", "float", "bool", "dict[", "list[",
                                      "function-", "constrained-", "is-instance")):
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
            elif i == 1 and loc[0] == "workload":  # the workload union: by its tool
                entry = (data.get("workload") or {}).get(part) or {}
                tool = entry.get("tool", "pgbench") if isinstance(entry, dict) else None
                picked = _TOOLS.get(str(tool))
                if picked is None:
                    return []
                tp = picked
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
