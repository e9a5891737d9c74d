"""Reading a spec: TOML, `--set` overrides, validation, and one message per problem that
names the file, the key path and what is allowed.

Paths in a spec are read as follows (all documented in docs/safety.md):
custom pgbench scripts are resolved relative to the spec file and read by the benchmark,
which runs as the PostgreSQL OS user, never as root; `existing` storage paths only get a
directory created inside them; `pg_bindir` is executed.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from pgfsbench.jsonish import obj
from pgfsbench.spec.document import Spec
from pgfsbench.spec.kinds import STORAGE_KINDS, WORKLOAD_TOOLS, tool_choices
from pgfsbench.spec.models import Defaults
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


def _parse_override_value(raw: str) -> object:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_overrides(data: dict[str, object], sets: Sequence[str]) -> dict[tuple[str, ...], str]:
    """Apply --set KEY=VALUE. A bare key is a default, and the command line wins over
    the same key set inside any workload, so any example can be run small. Returns the
    key paths set, each with the option that set it (an error there is the option's)."""
    defaults_keys = set(Defaults.model_fields)
    origin: dict[tuple[str, ...], str] = {}
    for item in sets:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected KEY=VALUE (e.g. --set scale=2)")
        key, raw = (part.strip() for part in item.split("=", 1))
        value = _parse_override_value(raw)
        path = key.split(".")
        if not all(path):
            raise SpecError(f"--set {key}: an empty part in the key")
        origin[("defaults", key) if len(path) == 1 else tuple(path)] = f"--set {item}"
        if len(path) == 1:
            if key not in defaults_keys:
                raise SpecError(
                    f"--set {key}: unknown default{did_you_mean(key, defaults_keys)}"
                    f" (allowed: {', '.join(sorted(defaults_keys))})"
                )
            data.setdefault("defaults", {})
            if not isinstance(data["defaults"], dict):
                raise SpecError("--set: [defaults] in the spec is not a table")
            data["defaults"][key] = value
            workloads = data.get("workload")
            for workload in workloads.values() if isinstance(workloads, dict) else ():
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
    return origin


def did_you_mean(key: str, choices: Iterable[str]) -> str:
    """ ": did you mean X?" for a key close to one allowed, else nothing."""
    close = difflib.get_close_matches(key, list(choices), n=1, cutoff=0.75)
    return f": did you mean {close[0]!r}?" if close else ""


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
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start}); save the spec as UTF-8"
        ) from None


def examples_dir() -> Path | None:
    """The example specs shipped with pgfsbench: the wheel's package data, else the
    checkout's examples/ (a development install)."""
    from importlib import resources

    packaged = Path(str(resources.files("pgfsbench"))) / "examples"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / "examples"
    return checkout if checkout.is_dir() else None


def find_spec(path: Path) -> Path:
    """The spec file at ``path``; where there is none, the shipped example of that name
    ("quick", "quick.toml", "examples/quick.toml"), so an installed pgfsbench can plan and
    run its examples from any directory."""
    if path.exists():
        return path
    shipped = examples_dir()
    if shipped is not None:
        for candidate in (shipped / path.name, shipped / f"{path.name}.toml"):
            if candidate.is_file():
                return candidate
    return path


def load_spec(path: Path, sets: Sequence[str] = ()) -> LoadedSpec:
    """Read, override and validate a spec; every problem becomes one SpecError message."""
    path = find_spec(path)
    text = read_spec_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise SpecError(f"{path}: not valid TOML: nested too deeply") from None
    return validate_spec(path, text, data, sets)


def validate_spec(
    path: Path, text: str, data: dict[str, object], sets: Sequence[str] = ()
) -> LoadedSpec:
    """Overrides applied to parsed TOML, then validated (the spec's ``text`` is kept)."""
    origin = apply_overrides(data, sets)
    try:
        spec = Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(path, exc, data, text, origin)) from None
    return LoadedSpec(spec, path.resolve(), text, tuple(sets))


# ---------------------------------------------------------------- error messages

_STORAGE_MODELS: dict[str, type[BaseModel]] = {k.name: k.model for k in STORAGE_KINDS}
_TOOLS: dict[str, type[BaseModel]] = {t.name: t.model for t in WORKLOAD_TOOLS}
_TAGS = set(_STORAGE_MODELS)


def format_validation_error(
    path: Path,
    exc: ValidationError,
    data: Mapping[str, object],
    text: str = "",
    origin: Mapping[tuple[str, ...], str] | None = None,
) -> str:
    """One line per problem: where it is (the file and its line, or the --set option that
    gave the value), the key path, what is wrong and what is allowed. A value that fails
    every member of a union (a number or "auto") is one problem, not one per member."""
    errors = exc.errors()
    # a value that may be one or many fails both ways: keep the reason, not "not a list"
    located = {
        tuple(_drop_union_tags([str(p) for p in e["loc"]]))
        for e in errors
        if e["type"] not in ("list_type",)
    }
    merged: dict[tuple[str, ...], list[str]] = {}
    for err in errors:
        loc = _drop_union_tags([str(p) for p in err["loc"]])
        if err["type"] == "list_type" and tuple(loc) in located:
            continue
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = allowed_keys(loc[:-1], data)
            msg = (
                "unknown key"
                + (did_you_mean(loc[-1], allowed) if loc else "")
                + (f" (allowed: {', '.join(allowed)})" if allowed else "")
            )
        elif err["type"] == "union_tag_invalid":
            msg = "fs must be one of ext4, xfs, btrfs, tmpfs, zfs, existing"
        elif err["type"] == "union_tag_not_found":
            msg = "missing 'fs' (one of ext4, xfs, btrfs, tmpfs, zfs, existing)"
        elif err["type"] == "tool":
            msg = tool_choices()
        elif msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        elif msg.startswith("Input should be "):
            msg = "should be " + msg[len("Input should be ") :]
        if msg not in merged.setdefault(tuple(loc), []):
            merged[tuple(loc)].append(msg)
    lines = []
    for key, msgs in merged.items():
        where = ".".join(key) if key else "(top level)"
        given = _value_at(data, key)
        msg = (
            msgs[0]
            if len(msgs) == 1
            else ("should be " + " or ".join(m.removeprefix("should be ") for m in msgs))
        )
        if len(msgs) > 1 and given is not _MISSING:
            msg += f" (got {given!r})"
        source = _origin_of(key, origin or {})
        if source is None:
            line = line_of(text, key)
            source = f"{path}" + (f", line {line}" if line else "")
        lines.append(f"{source}: {where}: {msg}")
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems in the spec:\n  " + "\n  ".join(lines)


_MISSING = object()


def _value_at(data: Mapping[str, object], loc: Sequence[str]) -> object:
    node: object = data
    for part in loc:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _origin_of(loc: Sequence[str], origin: Mapping[tuple[str, ...], str]) -> str | None:
    """The --set option that gave the value at ``loc`` (or a table above it), if any."""
    for n in range(len(loc), 0, -1):
        if tuple(loc[:n]) in origin:
            return origin[tuple(loc[:n])]
    return None


def line_of(text: str, loc: Sequence[str]) -> int | None:
    """The line of the spec where the key at ``loc`` is written (best effort: a key in its
    [table], a dotted key, or a key inside an inline table on its parent's line)."""
    if not text or not loc:
        return None
    table: tuple[str, ...] = ()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            table = tuple(p.strip().strip('"') for p in line.strip("[] ").split("."))
            if table == tuple(loc):
                return number
            continue
        key, eq, rest = line.partition("=")
        if not eq:
            continue
        full = table + tuple(p.strip().strip('"') for p in key.split("."))
        if full == tuple(loc):
            return number
        # an inline table: limits = { write_mbpz = 3 }
        if (
            tuple(loc[: len(full)]) == full
            and len(loc) > len(full)
            and re.search(rf"[{{,]\s*{re.escape(loc[len(full)])}\s*=", rest)
        ):
            return number
    return None


def _drop_union_tags(loc: list[str]) -> list[str]:
    """pydantic puts the discriminator value or a union member's type into the path."""
    out: list[str] = []
    for i, part in enumerate(loc):
        if i == 2 and loc[0] == "storage" and part in _TAGS:
            continue
        if i == 2 and loc[0] == "workload" and part in _TOOLS:
            continue
        if i > 0 and part.startswith(
            (
                "str",
                "int",
                "float",
                "bool",
                "dict[",
                "list[",
                "function-",
                "constrained-",
                "is-instance",
                "literal[",
                "json-or-python",
                "tagged-union[",
                "union[",
            )
        ):
            continue
        out.append(part)
    return out


def allowed_keys(loc: Sequence[str], data: Mapping[str, object]) -> list[str]:
    """The keys the model at ``loc`` accepts, found by walking the Spec's annotations."""
    tp: object = Spec
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
                entry = obj(data.get("storage")).get(part) or {}
                fs = entry.get("fs") if isinstance(entry, dict) else None
                model = _STORAGE_MODELS.get(str(fs))
                if model is None:
                    return []
                tp = model
            elif i == 1 and loc[0] == "workload":  # the workload union: by its tool
                entry = obj(data.get("workload")).get(part) or {}
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


def _unwrap(tp: object) -> object:
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
