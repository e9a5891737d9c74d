"""OpenZFS in the kernel, the code path users take: detected as the kernel module with its
version, lz4 and zstd accepted, properties applied and read back, module parameters set
through /sys/module/zfs/parameters and restored, arcstats read, the cold cache's
export/import evicting the ARC, and a SIGKILL then cleanup. Runs in the VM
(scripts/test-vm.sh); skipped where the kernel has no ZFS module."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pgfsbench.storage.zfs import arc_bytes
from pgfsbench.storage.zfs.capabilities import detect, kernel_zfs_present
from pgfsbench.system.runner import Runner
from tests.func.conftest import (
    leftovers,
    pgfsbench,
    runs_of,
    show,
    signal_mid_measurement,
    write_spec,
)
from tests.func.test_zfs import SMALL as ZFS_SMALL
from tests.func.test_zfs import pools

PARAMS = Path("/sys/module/zfs/parameters")

pytestmark = [
    pytest.mark.zfs,
    pytest.mark.skipif(not kernel_zfs_present(), reason="no OpenZFS kernel module here"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
]

# the functional ZFS tests' spec head and pool listing, 3 s runs here
SMALL = ZFS_SMALL.replace('duration = "2s"', 'duration = "3s"')


def test_the_kernel_module_is_detected_with_what_it_accepts() -> None:
    impl = detect(Runner())
    assert impl is not None and impl.kind == "kernel" and not impl.fuse
    assert impl.version.startswith("2."), impl.version
    assert impl.label() == f"OpenZFS {impl.version} (kernel module)"
    assert impl.pool_version is None  # feature flags, not a pool version
    compression = impl.properties["compression"]
    for value in ("lz4", "zstd", "zstd-3", "gzip-1", "off"):
        assert compression.accepts(value), value
    assert impl.properties["recordsize"].accepts("16K")
    assert not impl.properties["recordsize"].accepts("3K")
    assert "zfs_arc_max" in impl.module_parameters and "zfs_txg_timeout" in impl.module_parameters
    assert arc_bytes() is not None  # /proc/spl/kstat/zfs/arcstats


def test_properties_module_parameters_and_the_cold_cache(base: Path) -> None:
    arc_max = (PARAMS / "zfs_arc_max").read_text().strip()
    txg = (PARAMS / "zfs_txg_timeout").read_text().strip()
    spec = write_spec(
        base / "zfs.toml",
        SMALL
        + """
[storage.zstd-16k]
fs = "zfs"
pool = { devices = ["loop:1G"] }
module_parameters = { zfs_arc_max = "536870912", zfs_txg_timeout = "3" }
[storage.zstd-16k.data.properties]
compression = "zstd"
recordsize = "16K"
atime = "off"
logbias = "throughput"

[workload.cold]
builtin = "select-only"
cache = "cold"
""",
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    detail = show(results, run["run_id"])
    details = detail["storage_details"]
    assert details["implementation"].startswith("OpenZFS 2.") and details["fuse"] is False
    props = (
        details["data"]["properties"]
        if "properties" in details.get("data", {})
        else details["properties"]
    )
    assert props["compression"] == "zstd" and props["recordsize"] in ("16K", "16384")
    assert props["atime"] == "off" and props["logbias"] == "throughput"
    assert details["module_parameters"]["zfs_arc_max"] == "536870912"
    # the cold cache: the pool exported and imported, the ARC read before and after
    cache = detail["metrics"]["cache"]
    assert "exported and imported" in str(cache), cache
    # everything undone: parameters back, no pool, nothing mounted or attached
    assert (PARAMS / "zfs_arc_max").read_text().strip() == arc_max
    assert (PARAMS / "zfs_txg_timeout").read_text().strip() == txg
    assert pools() == []
    assert leftovers(base) == []


def test_sigkill_mid_run_then_cleanup_leaves_no_pool(base: Path) -> None:
    spec = write_spec(
        base / "zfs.toml",
        SMALL.replace('duration = "3s"', 'duration = "60s"')
        + """
[storage.z]
fs = "zfs"
pool = { devices = ["loop:512M"] }
""",
    )
    rc, _out, _err = signal_mid_measurement(spec, base / "r.sqlite", base / "work", signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert pools() != []  # the kill left the pool
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert pools() == []
    assert leftovers(base) == []
