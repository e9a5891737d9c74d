"""Unsafe settings never win: the doctor's rules, asked of a cell's stack, mark what can
lose or corrupt committed data; such a cell is a reference (what safety costs), never the
baseline, never the best, never bold."""

from __future__ import annotations

import dataclasses

import pytest

from pgfsbench.advisor.safety import unsafe_settings
from pgfsbench.analysis.summary import highlights, summarise
from pgfsbench.report.html import table_rows
from pgfsbench.report.terminal import fmt_vs
from pgfsbench.results.records import StoredRun
from tests.unit.test_best import runs


@pytest.mark.parametrize(
    ("fs", "options", "zfs", "settings", "rules"),
    [
        ("ext4", [], {}, {}, []),
        ("ext4", [], {}, {"fsync": False}, ["fsync-off"]),
        ("ext4", [], {}, {"full_page_writes": "off"}, ["fpw-off-torn-pages"]),
        ("xfs", [], {}, {"full_page_writes": False}, ["fpw-off-torn-pages"]),
        ("btrfs", [], {}, {"full_page_writes": False}, []),  # copy-on-write: never torn
        ("btrfs", ["nodatacow"], {}, {"full_page_writes": False}, ["fpw-off-torn-pages"]),
        ("zfs", [], {}, {"full_page_writes": False}, []),  # recordsize 128K by default
        ("zfs", [], {"recordsize": "8K"}, {"full_page_writes": False}, []),
        ("zfs", [], {"recordsize": "4K"}, {"full_page_writes": False}, ["fpw-off-torn-pages"]),
        ("zfs", [], {"sync": "disabled"}, {}, ["zfs-sync-disabled"]),
        ("ext4", ["nobarrier"], {}, {}, ["barrier-off"]),
        ("ext4", [], {}, {"synchronous_commit": "off"}, ["synchronous-commit-off"]),
    ],
)
def test_the_doctors_rules_decide_what_is_unsafe(
    fs: str, options: list[str], zfs: dict[str, str], settings: dict[str, object], rules: list[str]
) -> None:
    assert [u.rule for u in unsafe_settings(fs, options, zfs, settings)] == rules


def test_lost_commits_are_said_apart_from_corruption() -> None:
    (sync,) = unsafe_settings("ext4", [], {}, {"synchronous_commit": "off"})
    assert not sync.corrupts and "no corruption" in sync.text()
    (fsync,) = unsafe_settings("ext4", [], {}, {"fsync": False})
    assert fsync.corrupts and "corrupt the cluster" in fsync.text()


def with_postgres(rows: list[StoredRun], name: str, settings: dict[str, object]) -> list[StoredRun]:
    return [
        dataclasses.replace(
            r,
            postgres=name,
            cell=r.cell.replace("/pg/", f"/{name}/"),
            params={"storage": {"fs": "ext4"}, "postgres": {"settings": settings}},
        )
        for r in rows
    ]


def test_the_fastest_cell_with_fsync_off_is_never_baseline_best_nor_bold() -> None:
    """The yohgaki example: fsync = off is the fastest; it is shown as what safety costs."""
    unsafe = with_postgres(runs("ext4", [5000, 5010, 4990]), "nofsync", {"fsync": False})
    safe = with_postgres(runs("ext4", [2500, 2510, 2490]), "default", {})
    xfs = with_postgres(runs("xfs", [2000, 2010, 1990]), "default", {})
    cells = summarise(unsafe + safe + xfs)
    by = {c.label: c for c in cells}
    fast = next(c for c in cells if c.unsafe)
    assert fast.reference and fast.baseline is not None  # measured against, never the base
    assert all(c.baseline != fast.label for c in cells)
    assert fmt_vs(fast).endswith("unsafe")
    rows = table_rows(cells)
    assert not any(r["best_tps"] for r in rows if "nofsync" in str(r["id"]))
    text = "\n".join(highlights(cells).lines)
    assert "unsafe" in text and "what safety costs" in text and "fsync = off" in text
    assert "best" not in text.split("\n")[0] or "nofsync" not in text.split("\n")[0]
    assert by  # every label summarised
