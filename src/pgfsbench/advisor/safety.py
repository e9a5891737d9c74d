"""Which cells can lose or corrupt committed data: the doctor's own rules (advisor/rules.py),
asked of the stack a cell builds (its filesystem, mount options, ZFS properties and
PostgreSQL settings) instead of a live host. One source: `doctor` on the host a run built
and this module on its spec say the same.

A cell that is unsafe is never a group's baseline, never the best and never bold: it is
shown as a reference, what safety costs (fsync = off in the first seed's campaign,
full_page_writes = off where a page can tear).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pgfsbench.advisor.facts import Facts, PathFacts, PgFacts
from pgfsbench.advisor.rules import RULES, Passed
from pgfsbench.system.mountinfo import MountInfo

# the doctor's rules about losing committed data, and whether what they find can corrupt
# the cluster (True) or loses the last commits only (False)
SAFETY_RULES: dict[str, bool] = {
    "fsync-off": True,
    "fpw-off-torn-pages": True,
    "zfs-sync-disabled": False,
    "barrier-off": True,
    "synchronous-commit-off": False,
}


@dataclass(frozen=True)
class Unsafe:
    """One way a cell's settings can lose data, as the doctor's rule says it."""

    rule: str
    seen: str  # what the rule found, e.g. "fsync = off"
    corrupts: bool  # True: a crash can corrupt the cluster; False: lose the last commits

    def text(self) -> str:
        cost = (
            "a crash can corrupt the cluster"
            if self.corrupts
            else "a crash may lose the last commits (no corruption)"
        )
        return f"{self.seen}: {cost} (doctor rule {self.rule})"


def unsafe_settings(
    fs: str,
    mount_options: list[str],
    zfs_properties: Mapping[str, object],
    settings: Mapping[str, object],
) -> list[Unsafe]:
    """What the doctor's data-safety rules find in this stack (empty: safe)."""
    props = {k: str(v) for k, v in zfs_properties.items()}
    if fs == "zfs":
        props.setdefault("recordsize", str(128 * 1024))  # OpenZFS's default
        props["recordsize"] = str(_bytes(props["recordsize"]))
    path = PathFacts(
        "data directory",
        "/pgdata",
        mount=MountInfo("/pgdata", "", "zfs" if fs == "zfs" else fs, ",".join(mount_options)),
        zfs_dataset="pool/data" if fs == "zfs" else None,
        zfs=props,
    )
    pg = PgFacts(
        "files", settings={k: _setting(v) for k, v in settings.items()}, defaults_apply=True
    )
    facts = Facts(paths=[path], pg=pg)
    found: list[Unsafe] = []
    for rule in RULES:
        if rule.id not in SAFETY_RULES:
            continue
        seen = rule.check(facts)
        if seen and not isinstance(seen, Passed):
            found += [Unsafe(rule.id, _plain(s), SAFETY_RULES[rule.id]) for s in seen]
    return found


def unsafe_of_params(storage: Mapping[str, object], postgres: Mapping[str, object]) -> list[Unsafe]:
    """The same, from a run's stored configurations (its params)."""
    fs = str(storage.get("fs") or "")
    options = storage.get("mount_options")
    data = storage.get("data")
    props = data.get("properties") if isinstance(data, Mapping) else None
    settings = postgres.get("settings")
    return unsafe_settings(
        fs,
        [str(o) for o in options] if isinstance(options, list) else [],
        props if isinstance(props, Mapping) else {},
        settings if isinstance(settings, Mapping) else {},
    )


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _bytes(value: str) -> int:
    from pgfsbench.units import parse_size

    try:
        return parse_size(value)
    except ValueError:
        return 0


def _plain(seen: str) -> str:
    """A rule's finding without the host path it names (a cell has none yet)."""
    text = re.sub(r"\s*(with )?data directory /pgdata \([^)]*\)", "", seen)
    return text.removeprefix(": ").replace(" :", ":")
