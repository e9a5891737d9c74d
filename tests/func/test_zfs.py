"""ZFS on this machine's implementation (zfs-fuse here; OpenZFS where the module is loaded),
aged pools among them (the other filesystems' aging: test_aging.py), and the ZFS tests of
other subjects (caps, snapshots, the doctor): every test of ZFS in this one module, so that
they run on one worker, one after the other, and none waits for ZFS's lock."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pgfsbench.storage.aging import CACHE_DIR, ImageCache
from tests.func.conftest import (
    kill,
    leftovers,
    pgfsbench,
    refused,
    run_until_phase,
    runs_of,
    show,
    signal_mid_measurement,
    wait_for,
    write_spec,
)
from tests.func.test_doctor import doctor, fired, sh
from tests.func.test_limits import NO_CAPS, no_loop_caps, signal_when_capped
from tests.func.test_snapshots import SPEC as SNAPSHOT_SPEC
from tests.func.test_snapshots import check_snapshots

pytestmark = [
    pytest.mark.zfs,  # one test of ZFS at a time (tests/func/conftest.py)
    pytest.mark.skipif(shutil.which("zpool") is None, reason="no ZFS installed"),
]

SMALL = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "2s"
warmup = "0s"
repetitions = 1
"""


def zfs_fuse_pids() -> list[int]:
    out = subprocess.run(
        ["pgrep", "-x", "zfs-fuse"], capture_output=True, text=True, check=False
    ).stdout
    return [int(p) for p in out.split()]


def pools() -> list[str]:
    if not zfs_fuse_pids() and not Path("/sys/module/zfs").exists():
        return []
    out = subprocess.run(
        ["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True, check=False
    ).stdout
    return out.split()


@pytest.fixture(autouse=True)
def no_foreign_daemon() -> None:
    if zfs_fuse_pids():
        pytest.skip("a zfs-fuse daemon not started by the tests is running")


def test_pools_datasets_properties_and_compression(base: Path) -> None:
    spec = write_spec(
        base / "zfs.toml",
        SMALL
        + """
[storage.plain]
fs = "zfs"
pool = { devices = ["loop:512M"] }

[storage.gzip]
fs = "zfs"
pool = { devices = ["loop:512M"] }
[storage.gzip.data.properties]
compression = { kernel = "lz4", fuse = "gzip-1" }
recordsize = "8K"
atime = "off"

[storage.mirror-log-walds]
fs = "zfs"
pool = { layout = "mirror", devices = ["loop:512M", "loop:512M"], log = ["loop:256M"], ashift = 12 }
wal = { properties = { recordsize = "128K", logbias = "latency" } }

[storage.raidz-cache]
fs = "zfs"
[storage.raidz-cache.pool]
layout = "raidz1"
devices = ["loop:256M", "loop:256M", "loop:256M"]
cache = ["loop:128M"]
""",
    )
    results = base / "r.sqlite"
    out = pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    runs = {r["storage"]: r for r in runs_of(results)}
    assert all(r["status"] == "ok" and r["tps"] > 0 for r in runs.values()), runs
    fuse = Path("/sys/module/zfs").exists() is False
    if fuse:
        assert "not kernel OpenZFS numbers" in out.stdout
        assert all(r["fuse"] and "zfs-fuse" in r["implementation"] for r in runs.values())
        assert "pool version 23" in runs["plain"]["implementation"]

    plain, gz = show(results, runs["plain"]["run_id"]), show(results, runs["gzip"]["run_id"])
    # the host's CPU and the storage's daemons' during the measured phase
    cpu = plain["metrics"]["cpu"]
    assert cpu["cpus"] == os.cpu_count() and 0 < cpu["busy_pct"] <= 100
    if fuse:
        assert cpu["daemons_cpus"]["zfs-fuse"] > 0
    # compression measurably shrinks the data directory (WAL included in both)
    assert runs["gzip"]["space_bytes"] < 0.6 * runs["plain"]["space_bytes"]
    assert float(gz["space"]["after_load"]["compressratio"].rstrip("x")) > 1.5
    # a number on both implementations (OpenZFS -p says 1.00, zfs-fuse 1.00x: normalised)
    assert plain["space"]["after_load"]["zfs"]["data"]["compressratio"] == "1.00"
    assert int(gz["space"]["after_load"]["zfs"]["data"]["used"]) > 0
    # the space column is ZFS's own accounting (`zfs get used`), not du's
    after = gz["space"]["after_load"]
    assert after["space_source"] == "zfs get used"
    assert after["space_bytes"] == after["zfs_used_bytes"] and "du_bytes" in after

    props = gz["storage_details"]["data"]["properties"]
    assert props["compression"] == ("gzip-1" if fuse else "lz4")
    assert props["recordsize"] == "8192" and props["atime"] == "off"
    mirror = show(results, runs["mirror-log-walds"]["run_id"])
    wal = mirror["storage_details"]["wal"]
    assert wal["properties"]["logbias"] == "latency" and wal["source"].endswith("/wal")
    assert mirror["space"]["after_load"]["wal_dir_bytes"] > 0
    assert "wal" in mirror["space"]["after_load"]["zfs"]
    status = mirror["storage_details"]["pool"]["status"]
    assert "mirror-0" in status and "logs" in status
    raidz = show(results, runs["raidz-cache"]["run_id"])["storage_details"]["pool"]
    assert "raidz1-0" in raidz["status"] and "cache" in raidz["status"]

    text = pgfsbench(
        "results", "show", str(runs["plain"]["run_id"]), "--results", str(results)
    ).stdout
    if fuse:
        assert "FUSE" in text and "zfs-fuse" in text
    assert pools() == [] and zfs_fuse_pids() == []


def test_unsupported_value_is_refused_before_anything_is_created(base: Path) -> None:
    if Path("/sys/module/zfs").exists():
        pytest.skip("kernel OpenZFS supports lz4")
    spec = write_spec(
        base / "zfs.toml",
        SMALL
        + """
[storage.z]
fs = "zfs"
data = { properties = { compression = "lz4" } }
""",
    )
    stderr = refused(base, spec)
    assert "compression=lz4" in stderr and "lzjb" in stderr
    assert not (base / "work" / "cells").exists() or not any((base / "work" / "cells").iterdir())
    assert pools() == [] and zfs_fuse_pids() == []


def test_sigkill_mid_run_then_cleanup_leaves_no_pool_loop_or_daemon(base: Path) -> None:
    spec = write_spec(
        base / "zfs.toml",
        SMALL.replace('"2s"', '"120s"')
        + """
[storage.z]
fs = "zfs"
pool = { layout = "mirror", devices = ["loop:512M", "loop:512M"], log = ["loop:128M"] }
wal = { properties = { recordsize = "64K" } }
[workload.cold]
builtin = "tpcb-like"
cache = "cold"
""",
    )
    results = base / "r.sqlite"
    # killed after the cold cache exported and imported the pool (journaled)
    code, _, _ = signal_mid_measurement(spec, results, base / "work", signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert any(p.startswith("pgfsb_") for p in pools())
    assert leftovers(base)
    out = pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert "zpool create" in out.stdout
    if not Path("/sys/module/zfs").exists():  # zfs-fuse: the daemon pgfsbench started
        assert "start zfs-fuse" in out.stdout
    assert "zpool export" in out.stdout
    assert pools() == [] and zfs_fuse_pids() == []
    assert leftovers(base) == []
    assert [r["status"] for r in runs_of(results)] == ["aborted"]


def test_an_fsync_load_longer_than_the_pool_holds_of_intent_log_runs_to_its_end(
    base: Path,
) -> None:
    """zfs-fuse commits no transaction group on its own timer here: under PostgreSQL's
    commits its intent log filled a 256 MiB pool and every backend hung in fdatasync after
    about 10 s ("no transaction completed for 60 s"), and until then the pool held the log,
    never the data. pgfsbench commits one every 5 s, as OpenZFS's timer would, and says so."""
    if shutil.which("zfs-fuse") is None or Path("/sys/module/zfs").exists():
        pytest.skip("the fault is zfs-fuse's")
    spec = write_spec(
        base / "zfs.toml",
        """
[defaults]
scale = 1
clients = 8
threads = 2
duration = "15s"
warmup = "0s"
repetitions = 1
[storage.small]
fs = "zfs"
pool = { devices = ["loop:256M"] }
[workload.updates]
builtin = "simple-update"
""",
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    detail = show(results, run["run_id"])
    assert "committed by pgfsbench every 5 s" in detail["storage_details"]["transaction_groups"]
    # every second of the window had transactions: no stall of the log filling the pool
    assert detail["stalls"] == [], detail["stalls"]
    assert detail["transactions"] > 15 * 100
    assert pools() == [] and zfs_fuse_pids() == []


ZFS_SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "2s"
warmup = "0s"
repetitions = 2

[storage.zfs-aged]
fs = "zfs"
pool = { devices = ["loop:384M"] }
data = { properties = { recordsize = "8K" } }
age = { recipe = "files", seed = 5, overwritten = 0.6, fullness = 0.4, file_size = "64K" }
"""


def test_an_aged_zfs_pool_made_once_imported_from_a_copy_for_each_run(base: Path) -> None:
    """ZFS (zfs-fuse here): the pool of one device aged into the cache once, exported;
    each run imports a block-level copy under a name of its own, its dataset mounted where
    the run says, with the properties it was aged with; the pool's fragmentation read;
    no pool, loop device or mount left, and the cache entry never imported."""
    spec = base / "zfs-aged.toml"
    spec.write_text(ZFS_SPEC)
    work, results = base / "work", base / "r.sqlite"
    before = pools()
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(work), timeout=900)
    runs = runs_of(results)
    assert [r["status"] for r in runs] == ["ok", "ok"], runs
    (entry_name,) = [p.name for p in (work / CACHE_DIR).iterdir()]
    assert entry_name.startswith("zfs-files-")
    entry = ImageCache(work / CACHE_DIR).find(entry_name)
    assert entry is not None
    made = entry.manifest
    assert made["pool"].startswith("pgfsb_") and made["data_properties"]["recordsize"] == "8K"
    assert made["churn"]["written_bytes"] >= 0.6 * made["churn"]["filesystem_bytes"] > 0
    # zfs-fuse (pool v23) has no `frag`: the metaslabs' free segments, read by zdb
    assert made["state"]["free_space"]["tool"] in (
        "zpool list -o frag",
        "zdb -mm (the metaslabs' free segments)",
    ), made["state"]
    details = [show(results, int(r["run_id"]))["storage_details"] for r in runs]
    names = [d["pool"]["name"] for d in details]
    assert names[0] != names[1] and all(p != made["pool"] for p in names)
    for d in details:
        age = d["data"]["age"]
        assert age["image"] == entry_name and age["copy_seconds"] is not None
        assert d["pool"]["import_argv"][:2] == ["zpool", "import"]
        assert d["data"]["properties"]["recordsize"] in ("8K", "8192")
        state = d["state_after_load"]
        free = state["free_space"]
        assert free.get("pool_frag_pct") is not None or free["free_extent_avg_kib"] > 0, state
        assert state["fullness"] is not None and state["fullness"] > 0.2, state
    assert pools() == before  # every run's copy destroyed; the image never imported
    # imported with cachefile=none: no pool of a run comes back at zfs-fuse's next start
    cachefile = Path("/var/lib/zfs/zpool.cache")
    assert not cachefile.exists() or not any(p.encode() in cachefile.read_bytes() for p in names)
    assert str(base) not in Path("/proc/self/mounts").read_text()


def test_a_killed_pool_aging_leaves_no_pool_loop_or_image(base: Path) -> None:
    spec = base / "long.toml"
    spec.write_text(
        '[defaults]\nscale = 1\nduration = "2s"\nrepetitions = 1\n'
        '[storage.zfs-aged]\nfs = "zfs"\npool = { devices = ["loop:512M"] }\n'
        'age = { recipe = "files", overwritten = 40.0, fullness = 0.5 }\n'
    )
    work = base / "work"
    before = pools()
    proc = run_until_phase(spec, base, "aging")
    wait_for(lambda: len(pools()) > len(before), 60, "the aging's pool")
    time.sleep(2)  # the dataset mounted and churning
    code, _, _ = kill(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL
    out = pgfsbench("cleanup", "--workdir", str(work)).stdout
    assert "zpool" in out
    assert pools() == before
    assert leftovers(base) == []  # nothing mounted, attached or running
    cache = work / CACHE_DIR
    assert not cache.exists() or list(cache.iterdir()) == []


@pytest.mark.caps  # looks at every loop device's caps (tests/func/conftest.py)
@pytest.mark.skipif(NO_CAPS, reason="needs cgroup v1 blkio throttling")
def test_a_pools_roles_capped_as_their_profiles_then_killed_and_cleaned_up(base: Path) -> None:
    # a ZFS pool of "HDDs" with its log on "an SSD": each role capped as its profile says
    assert no_loop_caps()
    spec = write_spec(
        base / "z.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "120s"
warmup = "0s"
repetitions = 1
[storage.zfs]
fs = "zfs"
[storage.zfs.pool]
devices = ["loop:512M"]
log = ["loop:256M"]
limits = { profile = "hdd-5400" }
log_limits = { profile = "sata-ssd" }
""",
    )
    seen: list[dict[str, dict[str, int]]] = []
    code, _, _ = signal_when_capped(
        spec, base / "z.sqlite", base / "work", signal.SIGKILL, seen, devices=2
    )
    assert code == -signal.SIGKILL
    iops = {v for d, v in seen[0]["blkio.throttle.write_iops_device"].items() if d.startswith("7:")}
    assert iops == {56, 88_000}  # the pool member as a 5400 rpm HDD, the log as a SATA SSD
    assert not no_loop_caps()  # the killed run left them
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert no_loop_caps()
    assert leftovers(base) == [] and pools() == []


def test_zfs_snapshots_on_the_timeline_and_none_left(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        SNAPSHOT_SPEC.format(
            storage="""
[storage.z]
fs = "zfs"
pool = { devices = ["loop:512M"] }
snapshots = { every = "2s", keep = 1 }
"""
        ),
    )
    results = base / "r.sqlite"
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--set",
        "workload.rw.cache=cold",
    )
    full = check_snapshots(results, "zfs")
    # a cold cache on ZFS: the pool exported and imported, so the ARC holds none of it
    cache = full["metrics"]["cache"]  # type: ignore[index]
    assert cache["state"] == "cold" and "exported and imported" in cache["zfs_arc"], cache
    listed = subprocess.run(
        ["zfs", "list", "-H", "-t", "snapshot"], capture_output=True, text=True, check=False
    ).stdout
    assert "pgfsb-snap-" not in listed


def test_zfs_primarycache_metadata_warns_and_the_doctor_never_starts_zfs_fuse(base: Path) -> None:
    if shutil.which("zfs-fuse") is None:
        pytest.skip("zfs-fuse is not installed")
    # the doctor with no daemon: it must not start one
    doctor("--path", str(base))
    assert zfs_fuse_pids() == []
    pidfile = base / "zfs-fuse.pid"
    subprocess.run(["zfs-fuse", "--pidfile", str(pidfile)], check=True, timeout=60)
    pool = f"pgfsbdoc{os.getpid()}"
    image = base / "pool.img"
    sh("truncate", "-s", "256M", str(image))
    try:
        wait_for(
            lambda: (
                subprocess.run(["zpool", "list"], capture_output=True, check=False).returncode == 0
            ),
            60,
            "zfs-fuse",
        )
        sh("zpool", "create", "-m", str(base / "pool"), pool, str(image))
        sh(
            "zfs",
            "create",
            "-o",
            "primarycache=metadata",
            "-o",
            f"mountpoint={base / 'ds'}",
            f"{pool}/data",
        )
        status, report = doctor("--path", str(base / "ds"))
    finally:
        subprocess.run(
            ["zpool", "destroy", "-f", pool], capture_output=True, check=False, timeout=120
        )
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, 15)
        deadline = time.monotonic() + 60
        while pid in zfs_fuse_pids() and time.monotonic() < deadline:
            time.sleep(0.2)
    (path,) = report["facts"]["paths"]
    assert path["fstype"] == "zfs" and path["zfs_dataset"] == f"{pool}/data"
    warn = fired(report, "WARN")
    assert "zfs-primarycache-metadata" in warn and "zfs-fuse" in warn, warn
    assert status == 1
