"""The doctor on a host with the OpenZFS kernel module and LVM (in the test VM): a live
PostgreSQL whose data directory is on a real dataset, and one on ext4 on a logical volume.
It reads; it changes nothing. Skipped where the kernel has neither."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pgfsbench.storage.zfs.capabilities import kernel_zfs_present
from tests.func.test_doctor import doctor, fired, initdb, running, sh

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


@pytest.mark.skipif(not kernel_zfs_present(), reason="no OpenZFS kernel module here")
def test_doctor_reads_the_kernel_module_its_arc_and_a_real_dataset(base: Path) -> None:
    image = base / "pool.img"
    sh("truncate", "-s", "512M", str(image))
    pool = f"pgfsbdoc{os.getpid()}"
    sh("zpool", "create", "-m", "none", pool, str(image))
    try:
        sh(
            "zfs",
            "create",
            "-o",
            f"mountpoint={base / 'ds'}",
            "-o",
            "recordsize=128K",
            "-o",
            "compression=off",
            "-o",
            "primarycache=metadata",
            f"{pool}/pg",
        )
        pgdata = initdb(base / "ds")
        with running(pgdata, base / "sock"):
            _status, report = doctor("--pgdata", str(pgdata))
    finally:
        sh("zpool", "destroy", "-f", pool)
    zfs = report["facts"]["zfs"]
    assert zfs["kind"] == "kernel" and zfs["version"].startswith("2.")
    assert zfs["build"] == Path("/sys/module/zfs/version").read_text().strip()
    assert zfs["arc"]["size"] > 0 and zfs["arc"]["c_max"] > 0
    assert "zfs_arc_max" in zfs["parameters"]
    paths = [p for p in report["facts"]["paths"] if p.get("zfs_dataset")]
    assert paths and paths[0]["zfs_dataset"] == f"{pool}/pg"
    props = paths[0]["zfs"]
    assert props["recordsize"] == "131072" and props["compression"] == "off"
    everything = {**fired(report, "BAD"), **fired(report, "WARN"), **fired(report, "INFO")}
    assert "zfs-primarycache-metadata" in everything, everything
    assert "zfs-fuse" not in everything  # the kernel module is not zfs-fuse
    # Debian's 2.1.11-1+deb12u1 carries the fix of the 2.1 corruption bug: not called corrupt
    if zfs["build"] == "2.1.11-1+deb12u1":
        assert "openzfs-corruption-bug" not in everything, everything


@pytest.mark.skipif(
    not Path("/dev/mapper/control").exists() or shutil.which("lvcreate") is None,
    reason="no device-mapper or no lvm2 here",
)
def test_doctor_on_ext4_on_a_logical_volume(base: Path) -> None:
    image = base / "pv.img"
    sh("truncate", "-s", "512M", str(image))
    dev = sh("losetup", "--find", "--show", str(image)).strip()
    group = f"pgfsbdoc{os.getpid()}"
    mnt = base / "mnt"
    try:
        sh("pvcreate", "-ff", "-y", dev)
        sh("vgcreate", group, dev)
        sh("lvcreate", "-y", "-n", "pg", "-l", "80%VG", group)
        sh("mkfs.ext4", "-q", "-F", f"/dev/{group}/pg")
        mnt.mkdir()
        sh("mount", f"/dev/{group}/pg", str(mnt))
        try:
            pgdata = initdb(mnt)
            with running(pgdata, base / "sock"):
                status, report = doctor("--pgdata", str(pgdata))
        finally:
            sh("umount", str(mnt))
    finally:
        sh("vgremove", "-f", "-y", group)
        sh("pvremove", "-ff", "-y", dev)
        sh("losetup", "-d", dev)
    (path,) = [p for p in report["facts"]["paths"] if p["path"].startswith(str(mnt))][:1]
    assert path["fstype"] == "ext4"
    assert status in (0, 1, 2), report
    # the logical volume's device and the loop device beneath it are both read
    devices = " ".join(str(d) for d in path.get("devices", []))
    assert "dm-" in devices and "loop" in devices, path
