"""The spec's reference, written from the pydantic models themselves (so it cannot drift):
every table and field with its type, its default and the comment the code gives it.

The docs site renders it into docs/reference/spec.md at build time (docs/hooks.py);
`mkdocs build --strict` runs in the tests.
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from pgfsbench.spec.cluster import (
    ClusterTarget,
    KubernetesConfig,
    PodResources,
    PvcVolume,
    Toleration,
)
from pgfsbench.spec.kinds import STORAGE_KINDS, WORKLOAD_TOOLS
from pgfsbench.spec.models import (
    Aging,
    Defaults,
    DeviceLimits,
    EmulatedDevice,
    InitdbOptions,
    KernelConfig,
    Lvm,
    MdRaid,
    Pooler,
    PostgresConfig,
    Snapshots,
    WalVolume,
    ZfsDataset,
    ZfsPool,
)


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment in the class's source: the lines of `#` just above it and the
    one after it on its line."""
    out: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        above: list[str] = []
        for raw in source.splitlines():
            line = raw.strip()
            if line.startswith("#"):
                above.append(line.lstrip("# ").rstrip())
                continue
            m = re.match(r"^([a-z_][a-z0-9_]*)\s*:", line)
            if m and raw.startswith("    ") and not raw.startswith("     "):
                name = m.group(1)
                inline = line.split("  # ", 1)[1] if "  # " in line else ""
                text = " ".join([*above, inline]).strip()
                if text:
                    out[name] = text
            above = []
    return out


# values a validator reads from text, by the validator's name
_VALIDATED = {
    "_seconds": 'duration (seconds, or "30s", "2m", "1h")',
    "_quantity": 'Kubernetes size ("20Gi", "500G")',
    "_scale_text": "scale",
    "_size_value": 'size ("512M", "4G", "1GiB")',
}


def type_text(annotation: Any, metadata: typing.Sequence[Any] = ()) -> str:
    """A field's type in a reader's words (str, int, 1-4 choices, a table...);
    ``metadata``: what pydantic took out of the field's Annotated (its validators)."""
    for meta in metadata:
        named = _VALIDATED.get(getattr(getattr(meta, "func", None), "__name__", ""))
        if named:
            return named
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        for meta in args[1:]:
            named = _VALIDATED.get(getattr(getattr(meta, "func", None), "__name__", ""))
            if named:
                return named
        return type_text(args[0])
    if origin is typing.Literal:
        return " or ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [type_text(a) for a in args if a is not type(None)]
        text = " or ".join(dict.fromkeys(parts))
        return text + (" (optional)" if type(None) in args else "")
    if origin in (list, tuple):
        return f"list of {type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {type_text(args[1])}" if len(args) == 2 else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in names:
        return names[annotation]
    return str(annotation).replace("typing.", "")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(its defaults)"
    if value is None:
        return "-"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def model_table(model: type[BaseModel], heading: str, intro: str = "") -> Iterator[str]:
    comments = _comments(model)
    yield f"### {heading} {{#{model.__name__.lower()}}}\n"
    own = model.__dict__.get("__doc__")  # its own, not a base class's
    if isinstance(own, str) and own.strip():
        yield " ".join(inspect.cleandoc(own).split()) + "\n"
    if intro:
        yield intro + "\n"
    yield "| key | type | default | what it is |"
    yield "|---|---|---|---|"
    for name, field in model.model_fields.items():
        yield (
            f"| `{name}` | {_cell(type_text(field.annotation, field.metadata))} | "
            f"{_cell(_default(field))} | {_cell(comments.get(name, ''))} |"
        )
    yield ""


def render() -> str:
    """The whole reference, as Markdown."""
    out: list[str] = [
        "Generated from pgfsbench's own models when the site is built: what you read here "
        "is what `plan` accepts. Unknown keys are errors.\n",
        "## Top level\n",
        "| table | what it holds |",
        "|---|---|",
        "| `name`, `description` | the campaign's name and what it is for |",
        "| `[defaults]` | what every cell gets unless its workload says otherwise |",
        "| `[storage.NAME]` | a storage stack; `fs` chooses its kind |",
        "| `[postgres.NAME]` | settings, initdb options, a pooler, a bindir |",
        "| `[kernel.NAME]` | sysctls and transparent huge pages |",
        "| `[workload.NAME]` | a load generator; `tool` chooses it |",
        "| `[[matrix.include]]`, `[[matrix.exclude]]` | which combinations run |",
        "| `[kubernetes]` | where `pvc` cells run (a cluster) |",
        "",
        "## Defaults\n",
        *model_table(Defaults, "[defaults]"),
        "## Storage kinds\n",
    ]
    for kind in STORAGE_KINDS:
        out += model_table(kind.model, f'fs = "{kind.name}"', kind.summary)
    nested: tuple[type[BaseModel], ...] = (
        WalVolume,
        Aging,
        DeviceLimits,
        EmulatedDevice,
        Snapshots,
        Lvm,
        MdRaid,
        ZfsPool,
        ZfsDataset,
        PvcVolume,
    )
    for model in nested:
        out += model_table(model, model.__name__)
    out.append("## PostgreSQL\n")
    postgres: tuple[type[BaseModel], ...] = (PostgresConfig, InitdbOptions, Pooler)
    for model in postgres:
        out += model_table(model, model.__name__)
    out.append("## Kernel\n")
    out += model_table(KernelConfig, "KernelConfig")
    out.append("## Workloads\n")
    for tool in WORKLOAD_TOOLS:
        out += model_table(tool.model, f'tool = "{tool.name}"', tool.summary)
    out.append("## Kubernetes\n")
    cluster: tuple[type[BaseModel], ...] = (
        KubernetesConfig,
        ClusterTarget,
        PodResources,
        Toleration,
    )
    for model in cluster:
        out += model_table(model, model.__name__)
    return "\n".join(out) + "\n"


def _column_comments() -> dict[tuple[str, str], str]:
    """Each column's comment in results/schema.py's source, by (table, column)."""
    from pgfsbench.results import schema

    out: dict[tuple[str, str], str] = {}
    table = ""
    for line in inspect.getsource(schema).splitlines():
        m = re.match(r"^(\w+) = Table\(\s*$", line)
        if m:
            table = ""
            continue
        m = re.match(r'^\s+"(\w+)",\s*$', line)
        if m and not table:
            table = m.group(1)
            continue
        m = re.match(r'^\s+Column\("(\w+)".*?#\s*(.*)$', line)
        if m and table:
            out[(table, m.group(1))] = m.group(2).strip()
    return out


def render_schema() -> str:
    """The results store's tables and columns, from results/schema.py (the head revision)."""
    from pgfsbench.results import schema

    comments = _column_comments()
    out = [
        f"Schema version {schema.SCHEMA_VERSION} (alembic migrations upgrade older files in "
        "place). Generated from the code when the site is built.\n"
    ]
    for table in schema.metadata.sorted_tables:
        out += [f"## {table.name}\n", "| column | type | what it holds |", "|---|---|---|"]
        for col in table.columns:
            kind = str(col.type).split("(")[0].lower()
            flags = [
                f
                for f, on in (
                    ("key", col.primary_key),
                    ("not null", not col.nullable and not col.primary_key),
                )
                if on
            ]
            ref = ", ".join(f"→ {fk.column.table.name}.{fk.column.name}" for fk in col.foreign_keys)
            text = comments.get((table.name, col.name), "")
            detail = ", ".join([*flags, ref] if ref else flags)
            out.append(
                f"| `{col.name}` | {kind}{f' ({detail})' if detail else ''} | {_cell(text)} |"
            )
        out.append("")
    return "\n".join(out) + "\n"
