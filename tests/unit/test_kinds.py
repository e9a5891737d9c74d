"""The registry of storage kinds and workload tools: every row resolves to what it names, and
what is built from the rows (the spec's unions, messages, choices) follows them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from pgfsbench.engine.campaign import ARTIFACT_KINDS
from pgfsbench.engine.measure import SERIES_UNITS
from pgfsbench.spec import STORAGE_KINDS, WORKLOAD_TOOLS, Spec, expand, storage_kind
from pgfsbench.spec.kinds import filesystem_model, host_fstypes, resolve, syncs_before_measure
from pgfsbench.spec.loading import load_spec
from pgfsbench.storage import driver_for, needs_root
from pgfsbench.storage.base import StorageDriver
from pgfsbench.system.errors import SpecError
from pgfsbench.workloads import workload_for

MINIMAL = {
    "ext4": {},
    "xfs": {},
    "btrfs": {},
    "tmpfs": {},
    "existing": {"path": "/srv"},
    "zfs": {},
    "pvc": {"storage_class": "standard"},
}


def test_every_storage_row_names_a_driver_and_a_model_the_spec_accepts() -> None:
    assert {k.name for k in STORAGE_KINDS} == set(MINIMAL)
    for kind in STORAGE_KINDS:
        assert isinstance(driver_for(kind.name), StorageDriver), kind.name
        spec = Spec.model_validate({"storage": {"s": {"fs": kind.name, **MINIMAL[kind.name]}}})
        assert type(spec.storage["s"]) is kind.model
        assert needs_root(kind.name) == kind.needs_root


def test_every_tool_row_builds_its_workload_for_a_cell_of_it() -> None:
    assert {t.name for t in WORKLOAD_TOOLS} == {"pgbench", "sysbench", "pg_dump", "copy", "replay"}
    for tool in WORKLOAD_TOOLS:
        own = {"capture": "/var/lib/capture", "warmup": "0s"} if tool.name == "replay" else {}
        spec = Spec.model_validate(
            {"storage": {"s": {"fs": "tmpfs"}}, "workload": {"w": {"tool": tool.name, **own}}}
        )
        (cell,) = expand(spec)
        assert type(cell.workload.config) is tool.model
        workload = workload_for(cell, spec.defaults)
        assert workload.tool == tool.name
        assert callable(resolve(tool.workload))
        for name, kind in tool.artifacts.items():
            assert ARTIFACT_KINDS[name] == kind
        for name, unit in tool.series_units.items():
            assert SERIES_UNITS[name] == unit


def test_an_unknown_tool_or_kind_is_refused_with_the_registry_s_names(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[storage.a]\nfs = "ext4"\n[workload.w]\ntool = "hammerdb"\n')
    with pytest.raises(SpecError) as tool_error:
        load_spec(spec)
    for tool in WORKLOAD_TOOLS:
        assert tool.name in str(tool_error.value)
    spec.write_text('[storage.a]\nfs = "ext5"\n')
    with pytest.raises(SpecError) as fs_error:
        load_spec(spec)
    assert "ext4" in str(fs_error.value) and "zfs" in str(fs_error.value)
    with pytest.raises(SpecError, match="kinds: ext4, xfs"):
        storage_kind("ext5")


def test_capabilities_come_from_the_rows() -> None:
    # snapshots: only the kinds that have them, named from the rows
    with pytest.raises(ValidationError, match="take snapshots on btrfs or zfs"):
        Spec.model_validate({"storage": {"s": {"fs": "ext4", "snapshots": {"every": "5s"}}}})
    Spec.model_validate({"storage": {"s": {"fs": "btrfs", "snapshots": {"every": "5s"}}}})
    # a WAL volume of any kind that can hold one, and nothing else
    Spec.model_validate({"storage": {"s": {"fs": "xfs", "wal": {"fs": "tmpfs"}}}})
    with pytest.raises(ValidationError, match="one of ext4, xfs, btrfs, tmpfs, not 'zfs'"):
        Spec.model_validate({"storage": {"s": {"fs": "xfs", "wal": {"fs": "zfs"}}}})
    assert "existing" not in host_fstypes() and "zfs" in host_fstypes()
    assert syncs_before_measure("ext4") and not syncs_before_measure("zfs")
    assert not syncs_before_measure("tmpfs") and syncs_before_measure("nfs4")
    assert driver_for("zfs").cache_eviction and not driver_for("ext4").cache_eviction


def test_a_filesystem_made_by_mkfs_needs_no_model_of_its_own() -> None:
    model = filesystem_model("bcachefs")
    made = model.model_validate(
        {"fs": "bcachefs", "device": "loop:1G", "mkfs_options": ["--compression=lz4"]}
    )
    assert made.fs == "bcachefs" and made.devices() == [("data", "loop:1G")]
    with pytest.raises(ValidationError):
        model.model_validate({"fs": "ext4"})
