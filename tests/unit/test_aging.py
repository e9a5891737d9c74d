"""Aged filesystems' parts that need no device: the files recipe (seeded, bounded, its
churn), the cache's key, the block-level copy (every allocated block, every hole, a
tampered entry refused), and the fragmentation tools' output read."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from pgfsbench.spec.models import Aging
from pgfsbench.storage.aging import (
    Entry,
    ImageCache,
    checksum,
    copy_into,
    files_recipe,
    image_key,
    parse_e2freefrag,
    parse_xfs_freesp,
)
from pgfsbench.system.errors import ProvisionError
from pgfsbench.system.held import Held
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner

MiB = 1 << 20


def tree(root: Path) -> list[tuple[str, int, str]]:
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in root.rglob("*")
        if p.is_file()
    )


def test_the_files_recipe_is_its_seed_and_writes_what_it_is_asked(tmp_path: Path) -> None:
    age = Aging(recipe="files", seed=7, overwritten=2.0, fullness=0.4, file_size="16K")
    capacity = 8 * MiB
    made = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        with Held.open(tmp_path / name) as root:
            churn = files_recipe(root, "none", age, capacity)
        made.append(churn)
        # as much as asked written (the device not counted here: the recipe's own bytes)
        assert churn.written_bytes >= 2.0 * capacity
        assert churn.files_deleted > 0 and churn.overwrites > 0 and churn.files_made > 0
        kept = churn.extra["bytes_kept"]
        assert 0.3 * capacity <= kept <= 0.4 * capacity + 420 * 1024, kept  # a file over
    # the same seed: the same files, the same bytes
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert made[0].as_dict()["files_made"] == made[1].as_dict()["files_made"]
    (tmp_path / "c").mkdir()
    with Held.open(tmp_path / "c") as root:
        files_recipe(root, "none", age.model_copy(update={"seed": 8}), capacity)
    assert tree(tmp_path / "c") != tree(tmp_path / "a")


def test_the_key_is_everything_the_image_depends_on() -> None:
    age = Aging(recipe="files")
    base = image_key("ext4", [], ["noatime"], 1 << 30, "loop", age, "15.8")
    assert base == image_key("ext4", [], ["noatime"], 1 << 30, "loop", age, "16.1")
    for other in (
        image_key("xfs", [], ["noatime"], 1 << 30, "loop", age, "15.8"),
        image_key("ext4", ["-b", "1024"], ["noatime"], 1 << 30, "loop", age, "15.8"),
        image_key("ext4", [], [], 1 << 30, "loop", age, "15.8"),
        image_key("ext4", [], ["noatime"], 2 << 30, "loop", age, "15.8"),
        image_key("ext4", [], ["noatime"], 1 << 30, "model:hdd-7200", age, "15.8"),
        image_key("ext4", [], ["noatime"], 1 << 30, "loop", Aging(recipe="files", seed=2), None),
    ):
        assert other != base
    pg = Aging(recipe="postgres")
    # the postgres recipe's files are its server's: another version, another image
    assert image_key("ext4", [], [], 1 << 30, "loop", pg, "15.8") != image_key(
        "ext4", [], [], 1 << 30, "loop", pg, "16.1"
    )


def sparse_image(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, 64 * MiB)
        os.pwrite(fd, b"a" * MiB, 0)
        os.pwrite(fd, os.urandom(3 * MiB + 123), 20 * MiB)
        os.pwrite(fd, b"z" * 4096, 64 * MiB - 4096)
    finally:
        os.close(fd)


def test_a_copy_is_the_image_block_for_block_holes_kept(tmp_path: Path) -> None:
    journal = Journal.create(tmp_path / "work", Runner())
    cache = ImageCache(tmp_path / "work" / "aged-images")
    partial = cache.begin(journal, "k1")
    sparse_image(partial / "image")
    entry = cache.commit(partial, "k1", {"recipe": {"recipe": "files"}})
    assert cache.find("k1") is not None and not partial.exists()
    assert json.loads((entry.path / "manifest.json").read_text())["checksum"] == checksum(
        entry.image
    )
    copy = tmp_path / "copy.img"
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        copy_into(entry, fd)
    finally:
        os.close(fd)
    assert copy.read_bytes() == entry.image.read_bytes()  # byte for byte
    # holes kept: the copy allocates what the image allocates, no more
    # (a copy writes whole 64 KiB blocks: at most one more a run of data)
    assert copy.stat().st_blocks <= entry.image.stat().st_blocks + 3 * 128
    # a cache entry changed after it was made is refused, never copied as the image
    with open(entry.image, "r+b") as fh:
        fh.seek(20 * MiB + 5)
        fh.write(b"!")
    tampered = Entry("k1", entry.path, entry.manifest)
    fd = os.open(tmp_path / "copy2.img", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with pytest.raises(ProvisionError, match="checksum"):
            copy_into(tampered, fd)
    finally:
        os.close(fd)
    journal.close()


# what the tools print (e2freefrag 1.47, xfs_db 6.1 on Debian 12)
E2FREEFRAG = """Device: /dev/loop7
Blocksize: 4096 bytes
Total blocks: 65536
Free blocks: 40000 (61.0%)

Min. free extent: 4 KB \nMax. free extent: 126956 KB
Avg. free extent: 3200 KB
Num. free extent: 50

HISTOGRAM OF FREE EXTENT SIZES:
Extent Size Range :  Free extents   Free Blocks  Percent
    4K...    8K-  :            10            10    0.03%
   64K...  128K-  :            20           500    1.25%
  512K... 1024K-  :            10          2490    6.22%
    1M...    2M-  :             5          3000    7.50%
   64M...  128M-  :             5         34000   85.00%
"""

XFS_FREESP = """   from      to extents  blocks    pct
      1       1      10      10   0.03
      2       3      20      50   0.13
    128     255      10    2000   5.00
  16384   32767       2   37940  94.85
total free extents 42
total free blocks 40000
average free extent size 952.381
"""


def test_the_tools_figures_read() -> None:
    e2 = parse_e2freefrag(E2FREEFRAG)
    assert e2["free_extent_avg_kib"] == 3200
    assert e2["free_in_extents_below_1mib_pct"] == round(3000 / 40000 * 100, 1)  # 10+500+2490
    xfs = parse_xfs_freesp(XFS_FREESP, 4096)
    assert xfs["free_in_extents_below_1mib_pct"] == round(2060 / 40000 * 100, 1)
    assert xfs["free_extent_avg_kib"] == round(952.381 * 4, 1)


def test_a_pools_key_and_the_plans_cost_follow_what_zfs_ages(tmp_path: Path) -> None:
    """A ZFS pool's image depends on its pool and dataset properties and on which ZFS makes
    it (zfs-fuse's pool v23 is not OpenZFS's); `plan` prices its aging at zfs-fuse's pace
    (measured 2026-12-02: about half the block filesystems'); a pool of two devices is
    refused (the image is one device's)."""
    from pgfsbench.plan import make_plan
    from pgfsbench.spec import load_spec
    from pgfsbench.spec.models import ZfsStorage
    from pgfsbench.storage.aging import aged_key

    age = '{ recipe = "files", overwritten = 2.0 }'
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[defaults]\nscale = 1\nduration = "2s"\nrepetitions = 1\n'
        f'[storage.e]\nfs = "ext4"\ndevice = "loop:1G"\nage = {age}\n'
        f'[storage.z]\nfs = "zfs"\npool = {{ devices = ["loop:1G"] }}\nage = {age}\n'
    )
    plan = make_plan(load_spec(spec), tmp_path / "work")
    words = " ".join(plan.aging)
    ext4_s = float(words.split("e: ")[1].split("(about ")[1].split(" s")[0])
    zfs_s = float(words.split("z: ")[1].split("(about ")[1].split(" s")[0])
    assert zfs_s > 1.8 * (ext4_s - 10) + 10, words

    def key(**kw: object) -> str:
        z = ZfsStorage.model_validate(
            {"fs": "zfs", "pool": {"devices": ["loop:1G"]}, "age": {"recipe": "files"}, **kw}
        )
        assert z.age is not None
        return aged_key("zfs", z, z.age, "15.18")[0]

    assert key() == key()
    assert key(data={"properties": {"recordsize": "8K"}}) != key()
    assert key(pool={"devices": ["loop:1G"], "ashift": 12}) != key()
    assert key(implementation="kernel") != key(implementation="fuse")
    with pytest.raises(ValueError, match="one device"):
        key(pool={"devices": ["loop:1G", "loop:1G"], "layout": "mirror"})


ZDB_MM = """
Metaslabs:
\tvdev          0
\tmetaslabs   125   offset                spacemap          free
\t---------------   -------------------   ---------------   -------------
\tmetaslab      0   offset            0   spacemap     26   free    1.85M
\t                  segments          5   maxsize   1.80M   freepct   92%
\tmetaslab      1   offset       200000   spacemap      0   free       2M
\t                  segments          1   maxsize      2M   freepct  100%
\tmetaslab      2   offset       400000   spacemap     31   free     512K
\t                  segments         64   maxsize     64K   freepct   25%
"""


def test_zfs_fuse_free_space_read_from_zdbs_metaslabs() -> None:
    """zfs-fuse's pool v23 has no `frag`: its free segments are read from `zdb -mm` (captured
    from zfs-fuse 0.7 on a 250 MiB pool, one metaslab made to look aged)."""
    from pgfsbench.storage.aging import parse_zdb_metaslabs

    found = parse_zdb_metaslabs(ZDB_MM)
    free = int(1.85 * MiB) + 2 * MiB + 512 * 1024
    assert found["free_segments"] == 70 and found["metaslabs"] == 3
    assert found["free_extent_avg_kib"] == round(free / 70 / 1024, 1)
    assert parse_zdb_metaslabs("zdb: can't open 'x': No such file or directory") == {}
