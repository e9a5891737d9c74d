"""Reading JSON-shaped values (a doctor's report, a stored column, a parsed TOML table)
with types mypy checks: each accessor returns what it promises, and an empty value or None when
the value is something else. A report written by another version of pgfsbench, or by
hand, then reads as "not recorded" instead of failing half-way."""

from __future__ import annotations

from collections.abc import Mapping

Table = dict[str, object]
"""A JSON object or TOML table as read or being built: keys are optional."""


def obj(value: object) -> Table:
    """The value as an object ({} when it is not one)."""
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def arr(value: object) -> list[object]:
    """The value as a list ([] when it is not one)."""
    return list(value) if isinstance(value, list | tuple) else []


def objs(value: object) -> list[Table]:
    """The objects of a list (other items left out)."""
    return [obj(v) for v in arr(value) if isinstance(v, Mapping)]


def text(value: object, default: str = "") -> str:
    """The value as text (``default`` when absent)."""
    return default if value is None else str(value)


def whole(value: object) -> int | None:
    """The value as an integer, when it is one or a text of one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
