"""Aged filesystems: the image cache, the block-level copy, and the state measured.

Aging a filesystem takes minutes to hours (engine/aging.py runs a recipe on it), so an aged
filesystem is made once per (filesystem and its options, device kind and size, recipe, seed,
parameters) and kept as an image in the work directory's ``aged-images/``, with its recipe,
the figures of its aging and its checksum. Each run's device is then a block-level copy of
it (every allocated block copied at its offset, every hole kept a hole: the on-disk layout
the aging left, which a file-level copy would undo), its checksum checked while it is copied:
a copy that differs from its cache entry fails the run, and the entry is discarded.

The cache is root's alone and used only as root made it (``directory_problem`` of every
level, a manifest of root's naming its key), as the initdb templates are. An image is made
under a name of its own (``.KEY.PID``), journaled so a killed aging is removed by
``cleanup``, and renamed into place only whole.

The state of a filesystem is measured, not only its recipe: free-space fragmentation
(``e2freefrag`` for ext4, ``xfs_spaceman -c 'freesp -s'`` for xfs, ``zpool list -o frag`` for
ZFS; btrfs has no free-space histogram: said as not measured), extents per GiB of the data
directory's relation files (FIEMAP), and fullness.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.spec.models import Aging, EmulatedDevice, FilesystemStorage, ZfsStorage
from pgfsbench.system.errors import CapabilityError, PgfsbenchError, ProvisionError
from pgfsbench.system.held import Held, make_dirs
from pgfsbench.system.journal import Journal, Undo
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import directory_problem, read_trusted
from pgfsbench.units import parse_human, parse_size

CACHE_DIR = "aged-images"  # in the work directory
IMAGE = "image"
MANIFEST = "manifest.json"
FORMAT = 1  # of an entry: its manifest's fields, the checksum's definition
KEEP = 6  # the images used last are kept; older ones are removed when a new one is made
_CHUNK = 4 << 20


def image_key(
    fs: str,
    mkfs_options: list[str],
    mount_options: list[str],
    size: int,
    device_kind: str,
    age: Aging,
    server: str | None,
) -> str:
    """The cache key of an aged image: everything the aging's result depends on (the
    server's version for the postgres recipe: its files are its own)."""
    material = {
        "format": FORMAT,
        "fs": fs,
        "mkfs": mkfs_options,
        "mount": sorted(mount_options),
        "size": size,
        "device": device_kind,
        "age": age.model_dump(mode="json"),
        "server": server if age.recipe == "postgres" else None,
    }
    blob = json.dumps(material, sort_keys=True).encode()
    return f"{fs}-{age.recipe}-{hashlib.sha256(blob).hexdigest()[:16]}"


def zfs_options(storage: ZfsStorage) -> list[str]:
    """What a ZFS pool's aged image depends on besides its device: the implementation that
    makes it (zfs-fuse's pool v23 is not OpenZFS's), the pool's and the data dataset's
    properties, the module's parameters."""
    impl = storage.implementation
    if impl == "any":  # what storage/zfs detects: the kernel's module when it is loaded
        impl = "kernel" if Path("/sys/module/zfs").is_dir() else "fuse"
    dump = json.dumps(
        {
            "pool": storage.pool.model_dump(mode="json", include={"ashift", "properties"}),
            "data": storage.data.model_dump(mode="json"),
            "module_parameters": storage.module_parameters,
        },
        sort_keys=True,
    )
    return [f"implementation={impl}", dump]


def aged_key(
    fs: str, storage: FilesystemStorage | ZfsStorage, age: Aging, server: str | None
) -> tuple[str, int, bool]:
    """(key, size, rotational) of a storage's aged image (engine/aging.py makes it, plan
    says whether it is cached)."""
    size, kind, rotational = device_facts(storage)
    if isinstance(storage, ZfsStorage):
        options, mount_options = zfs_options(storage), []
    else:
        options, mount_options = list(storage.mkfs_options), list(storage.mount_options)
    return image_key(fs, options, mount_options, size, kind, age, server), size, rotational


def device_facts(storage: FilesystemStorage | ZfsStorage) -> tuple[int, str, bool]:
    """(size, kind, rotational) of a storage's data device (a ZFS pool's one member): the
    cache key's device part."""
    dev = storage.pool.devices[0] if isinstance(storage, ZfsStorage) else storage.device
    if isinstance(dev, EmulatedDevice):
        from pgfsbench.spec.device_models import resolve_model

        size = parse_size(dev.size) // 4096 * 4096
        model = resolve_model(dev.model, size)
        return size, f"model:{model.name}", model.params.get("kind") == "hdd"
    if dev.startswith("loop:"):
        return parse_size(dev[5:]), "loop", False
    rotational = False
    name = Path(os.path.realpath(dev)).name
    with contextlib.suppress(OSError):
        rotational = (Path("/sys/block") / name / "queue/rotational").read_text().strip() == "1"
    try:
        size = int((Path("/sys/class/block") / name / "size").read_text()) * 512
    except OSError:
        size = 0
    return size, f"device:{'hdd' if rotational else 'ssd'}", rotational


# ---------------------------------------------------------------- the image's data


def data_segments(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of allocated blocks of ``fd`` (SEEK_DATA, SEEK_HOLE)."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a hole to the end
                return
            raise
        end = min(size, os.lseek(fd, start, os.SEEK_HOLE))
        yield start, end
        pos = end


_BLOCK = 64 << 10  # what a checksum and a copy see: a block of zeros is a hole
_ZEROS = bytes(_BLOCK)


def _copy(src: int, dst: int | None, size: int) -> str:
    """The checksum of ``src`` (its size, then each aligned 64 KiB block that is not all
    zeros, with its offset, in order: the same content gives the same checksum however the
    filesystem beneath lays out holes and unwritten extents, before or after it writes
    them back), those blocks copied into ``dst`` at the same offsets when one is given
    (the rest left holes: read as the zeros they were)."""
    digest = hashlib.sha256(str(size).encode())
    done_to = 0  # every block below is hashed
    for start, end in data_segments(src, size):
        pos = max(start - start % _BLOCK, done_to)
        stop = min(size, -(-end // _BLOCK) * _BLOCK)
        while pos < stop:
            chunk = os.pread(src, min(_CHUNK, stop - pos), pos)
            if not chunk:
                break
            for i in range(0, len(chunk), _BLOCK):
                block = chunk[i : i + _BLOCK]
                if block == _ZEROS[: len(block)]:
                    continue
                at = pos + i
                digest.update(struct.pack("<Q", at))
                digest.update(block)
                if dst is not None:
                    view = memoryview(block)
                    while view:
                        n = os.pwrite(dst, view, at)
                        view, at = view[n:], at + n
            pos += len(chunk)
        done_to = max(done_to, pos)
    if dst is not None:
        os.ftruncate(dst, size)
    return digest.hexdigest()


def checksum(path: Path) -> str:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return _copy(fd, None, os.fstat(fd).st_size)
    finally:
        os.close(fd)


@dataclass
class Entry:
    """An aged image in the cache."""

    key: str
    path: Path  # its directory
    manifest: dict[str, Any]

    @property
    def image(self) -> Path:
        return self.path / IMAGE

    @property
    def size(self) -> int:
        return int(self.manifest["size"])

    @property
    def checksum(self) -> str:
        return str(self.manifest["checksum"])


@dataclass(frozen=True)
class ImageCache:
    root: Path  # WORKDIR/aged-images
    keep: int = KEEP

    def find(self, key: str) -> Entry | None:
        """The entry of ``key`` when one is complete and root made it (marked as used now)."""
        path = self.root / key
        for directory in (self.root, path):
            try:
                if directory_problem(os.lstat(directory), directory, last=True) is not None:
                    return None
            except OSError:
                return None
        try:
            manifest = json.loads(read_trusted(path / MANIFEST))
        except (OSError, ValueError, PgfsbenchError):
            return None
        if not isinstance(manifest, dict) or manifest.get("key") != key:
            return None
        if manifest.get("format") != FORMAT or not (path / IMAGE).is_file():
            return None
        with contextlib.suppress(OSError, PgfsbenchError), Held.open(path) as held:
            held.mark_used()  # used now: kept the longest
        return Entry(key, path, manifest)

    def begin(self, journal: Journal, key: str) -> Path:
        """A directory of its own for an image being made (removed by the journal's undo
        and by ``cleanup`` if the aging is killed; a killed run's older ones go first)."""
        make_dirs(self.root, 0o700)
        partial = self.root / f".{key}.{os.getpid()}"
        with Held.open(self.root) as root:
            for stale in root.names():
                if stale.startswith(f".{key}."):
                    root.remove(stale)
            journal.record(f"aging {key} in {partial}", Undo("remove_path", {"path": str(partial)}))
            root.make_dir(partial.name, 0o700).close()
        return partial

    def commit(self, partial: Path, key: str, manifest: dict[str, Any]) -> Entry:
        """The image made in ``partial`` checksummed, described and renamed into place."""
        image = partial / IMAGE
        manifest = {
            **manifest,
            "format": FORMAT,
            "key": key,
            "size": image.stat().st_size,
            "checksum": checksum(image),
        }
        with Held.open(partial) as made:
            made.create(MANIFEST, json.dumps(manifest, indent=1) + "\n")
            made.sync_filesystem()
        with Held.open(self.root) as root:
            root.remove(key)  # one not to be used (an older format, changed)
            os.rename(partial.name, key, src_dir_fd=root.fd, dst_dir_fd=root.fd)
            self._evict(root)
        return Entry(key, self.root / key, manifest)

    def discard(self, entry: Entry) -> None:
        with Held.open(self.root) as root:
            root.remove(entry.key)

    def _evict(self, root: Held) -> None:
        done = [n for n in root.names() if not n.startswith(".")]
        done.sort(key=lambda n: root.lstat(n).st_mtime, reverse=True)
        for old in done[self.keep :]:
            root.remove(old)


def copy_into(entry: Entry, fd: int) -> float:
    """The entry's image copied block by block into ``fd`` (a new loop file, or a device
    the guard allowed), its checksum checked as it is read: a copy that differs from the
    entry fails (the entry is not what was made). Returns the seconds it took."""
    started = time.monotonic()
    src = os.open(entry.image, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if os.fstat(src).st_size != entry.size:
            raise ProvisionError(f"aged image {entry.key}: its size changed since it was made")
        found = _copy(src, fd, entry.size)
    finally:
        os.close(src)
    if found != entry.checksum:
        with contextlib.suppress(OSError, PgfsbenchError):
            ImageCache(entry.path.parent).discard(entry)
        raise ProvisionError(
            f"aged image {entry.key}: its checksum is not the one it was made with "
            "(the cache entry was changed); it is removed, and the next run ages again"
        )
    return time.monotonic() - started


# ---------------------------------------------------------------- the files recipe

# the files' sizes: log-normal around the mean, as file-system studies find them
# (Agrawal et al., FAST'07); from 4 KiB to 64 times the mean
SIGMA = 1.4
FANOUT = 24  # directories a level, two levels


@dataclass
class Churn:
    """What an aging did: bytes written (as the device counted them), operations, time."""

    written_bytes: int = 0
    files_made: int = 0
    files_deleted: int = 0
    overwrites: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "written_bytes": self.written_bytes,
            "files_made": self.files_made,
            "files_deleted": self.files_deleted,
            "overwrites": self.overwrites,
            "seconds": round(self.seconds, 1),
            **self.extra,
        }


def device_written(device: str) -> int:
    """Bytes written to a block device since it was attached (/sys/block/NAME/stat)."""
    name = Path(os.path.realpath(device)).name
    try:
        fields = (Path("/sys/block") / name / "stat").read_text().split()
        return int(fields[6]) * 512
    except (OSError, IndexError, ValueError):
        return 0


def _pattern(seed: int) -> bytes:
    """4 MiB of seeded random bytes: what files hold (incompressible, as data is to a
    compressing filesystem; the same for the same seed)."""
    import random

    return random.Random(seed).randbytes(4 << 20)  # noqa: S311 (a seeded sequence)


def files_recipe(
    mnt: Held, device: str, age: Aging, capacity: int, stop: Callable[[], bool] | None = None
) -> Churn:
    """Geriatrix-like aging of the filesystem whose root ``mnt`` holds: files of
    log-normal sizes spread over a tree, made until ``fullness`` of the filesystem is used,
    then churned around that (a file deleted and another made, a part of one overwritten,
    one made) until ``overwritten`` times the filesystem's size has been written to its
    device; synced (syncfs) every 64 MiB, so allocation interleaves as a server's does.
    The same seed makes the same sequence of operations. Every file is made and removed
    through its held directory (the filesystem is pgfsbench's own, new)."""
    import math
    import random

    from pgfsbench.units import parse_size

    rng = random.Random(age.seed)  # noqa: S311 (a seeded sequence, not a secret)
    pattern = _pattern(age.seed)
    mean = parse_size(age.file_size)
    mu = math.log(mean) - SIGMA**2 / 2
    biggest = max(4096, min(64 * mean, capacity // 20))
    target_used = int(capacity * age.fullness)
    target_written = int(capacity * age.overwritten)
    files: list[tuple[int, str, int]] = []  # (directory index, name, size)
    used = 0
    start_written = device_written(device)
    since_sync = 0
    own_written = 0  # what the recipe wrote (a lower bound, when the device is not counted)

    def written() -> int:
        return max(device_written(device) - start_written, own_written)

    churn = Churn()
    started = time.monotonic()
    serial = 0
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(mnt.make_dir("aging", 0o700))
        dirs = [stack.enter_context(root.make_dir(f"{i:02d}", 0o700)) for i in range(FANOUT)]

        def size_of() -> int:
            return int(min(biggest, max(4096, rng.lognormvariate(mu, SIGMA))))

        def write(fd: int, offset: int, length: int) -> None:
            nonlocal since_sync, own_written
            own_written += length
            at, left = offset, length
            while left > 0:
                k = at % len(pattern)
                n = min(left, len(pattern) - k)
                os.pwrite(fd, pattern[k : k + n], at)
                at, left = at + n, left - n
            since_sync += length

        def make() -> None:
            nonlocal used, serial
            size = size_of()
            serial += 1
            d = rng.randrange(FANOUT)
            name = f"f{serial}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, 0o600, dir_fd=dirs[d].fd)
            try:
                write(fd, 0, size)
            finally:
                os.close(fd)
            files.append((d, name, size))
            used += size
            churn.files_made += 1

        def delete() -> None:
            nonlocal used
            i = rng.randrange(len(files))
            d, name, size = files[i]
            files[i] = files[-1]
            files.pop()
            os.unlink(name, dir_fd=dirs[d].fd)
            used -= size
            churn.files_deleted += 1

        def overwrite() -> None:
            d, name, size = files[rng.randrange(len(files))]
            length = max(4096, min(size, int(size * rng.uniform(0.05, 0.5))))
            offset = rng.randrange(max(1, size - length + 1)) // 4096 * 4096
            fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirs[d].fd)
            try:
                write(fd, offset, min(length, size - offset))
            finally:
                os.close(fd)
            churn.overwrites += 1

        def sync(force: bool = False) -> None:
            nonlocal since_sync
            if force or since_sync >= 64 << 20:
                mnt.sync_filesystem()
                since_sync = 0

        def full() -> bool:
            st = os.fstatvfs(mnt.fd)
            return st.f_bavail * st.f_frsize < capacity * 0.05

        while used < target_used and not full():
            make()
            sync()
        while written() < target_written:
            if stop is not None and stop():
                raise KeyboardInterrupt
            roll = rng.random()
            if files and (used > target_used or full() or roll < 0.35):
                delete()
                if used < target_used and not full():
                    make()
            elif files and roll < 0.75:
                overwrite()
            else:
                make()
            sync()
        sync(force=True)
    churn.written_bytes = written()
    churn.seconds = time.monotonic() - started
    churn.extra = {
        "files_kept": len(files),
        "bytes_kept": used,
        "bytes_written_by_files": own_written,
    }
    return churn


# ---------------------------------------------------------------- the state, measured


def _fiemap_extents(fd: int) -> int | None:
    """The number of extents of an open file (FIEMAP with no room: the count alone)."""
    fs_ioc_fiemap = 0xC020660B
    header = struct.pack("=QQLLLL", 0, 0xFFFFFFFFFFFFFFFF, 1, 0, 0, 0)  # FIEMAP_FLAG_SYNC
    try:
        out = fcntl.ioctl(fd, fs_ioc_fiemap, header)
    except OSError:
        return None
    return int(struct.unpack("=QQLLLL", out)[3])


def extents_per_gib(pgdata: Path) -> dict[str, Any]:
    """Extents per GiB of the data directory's relation files (base/ and global/)."""
    extents = 0
    size = 0
    files = 0
    for sub in ("base", "global"):
        for path in (pgdata / sub).rglob("*"):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                    continue
                n = _fiemap_extents(fd)
                if n is None:
                    return {"extents_per_gib": None, "why": "the filesystem has no FIEMAP"}
                extents += n
                size += st.st_size
                files += 1
            finally:
                os.close(fd)
    return {
        "extents_per_gib": round(extents / (size / (1 << 30)), 1) if size else None,
        "extents": extents,
        "files": files,
        "bytes": size,
    }


# "    2M...    4M-  :             1          3808    6.80%"
_E2_HIST = re.compile(
    r"^\s*(\d+)([KMGT]?)\.\.\.\s*(\d+)([KMGT]?)-?\s*:\s*(\d+)\s+(\d+)\s+([\d.]+)%?\s*$",
    re.M,
)
_UNIT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_e2freefrag(text: str) -> dict[str, Any]:
    """e2freefrag's free extents: their average size and the share of free space in
    extents smaller than 1 MiB."""
    out: dict[str, Any] = {}
    m = re.search(r"Avg\. free extent:\s*(\d+)\s*KB", text)
    if m:
        out["free_extent_avg_kib"] = int(m.group(1))
    small = total = 0.0
    for _lo, _lo_u, hi, hi_u, _count, blocks, _pct in _E2_HIST.findall(text):
        # a bucket below 1 MiB ends at 1M at most ("512K... 1024K-")
        total += int(blocks)
        if int(hi) * _UNIT[hi_u] <= (1 << 20):
            small += int(blocks)
    if total:
        out["free_in_extents_below_1mib_pct"] = round(small / total * 100, 1)
    return out


_XFS_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s*$", re.M)


def parse_xfs_freesp(text: str, block_size: int) -> dict[str, Any]:
    """xfs_spaceman's (or xfs_db's) freesp -s: free extents by size (in blocks), their
    average size, and the share of free space in extents smaller than 1 MiB."""
    out: dict[str, Any] = {}
    small = total = 0.0
    for _lo, hi, _extents, blocks, _pct in _XFS_ROW.findall(text):
        total += int(blocks)
        if (int(hi) + 1) * block_size <= (1 << 20):
            small += int(blocks)
    if total:
        out["free_in_extents_below_1mib_pct"] = round(small / total * 100, 1)
    m = re.search(r"average free extent size\s+([\d.]+)", text)
    if m:
        out["free_extent_avg_kib"] = round(float(m.group(1)) * block_size / 1024, 1)
    return out


_METASLAB = re.compile(r"metaslab\s+\d+\s+offset\s+\S+\s+spacemap\s+\d+\s+free\s+(\S+)")
_SEGMENTS = re.compile(r"segments\s+(\d+)\s+maxsize\s+(\S+)")


def parse_zdb_metaslabs(text: str) -> dict[str, Any]:
    """`zdb -mm`'s metaslabs: their free space and its segments, the average free segment
    (bounded by a metaslab's size: ZFS never allocates across one)."""
    free = [parse_human(m) for m in _METASLAB.findall(text)]
    segments = [int(n) for n, _ in _SEGMENTS.findall(text)]
    total = sum(f for f in free if f)
    count = sum(segments)
    if not free or not count:
        return {}
    return {
        "free_segments": count,
        "free_extent_avg_kib": round(total / count / 1024, 1),
        "metaslabs": len(free),
    }


def zdb_free_space(runner: Runner, pool: str, members: Sequence[str]) -> dict[str, Any]:
    """Free space of a pool whose ZFS has no `frag` property (zfs-fuse), from its space
    maps as its devices hold them (`zdb -e`, read only, through a private directory of
    links to its very devices: no other device is read)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pgfsb-zdb-") as tmp:
        with Held.open(Path(tmp)) as held:
            for i, dev in enumerate(members):
                held.symlink(f"{i}-{Path(dev).name}", Path(dev))
        done = runner.run(["zdb", "-e", "-p", tmp, "-mm", pool], timeout=300, check=False)
    found = parse_zdb_metaslabs(done.stdout)
    if not found:
        return {"why": f"not measured: zdb -mm gave no metaslab ({done.stderr.strip()[:120]})"}
    return {"tool": "zdb -mm (the metaslabs' free segments)", **found}


def free_space_fragmentation(
    runner: Runner,
    fs: str,
    device: str,
    mountpoint: Path,
    pool: str | None = None,
    members: Sequence[str] = (),
) -> dict[str, Any]:
    """Free-space fragmentation of a mounted filesystem by its own tool, or why it is not
    measured."""
    try:
        if fs == "ext4":
            done = runner.run(["e2freefrag", device], timeout=120, check=False)
            return {"tool": "e2freefrag", **parse_e2freefrag(done.stdout)}
        if fs == "xfs":
            block = os.statvfs(mountpoint).f_frsize
            # online (GETFSMAP): xfs_db reads the device, whose free-space btrees lag the
            # log on a mounted filesystem (it gave mkfs's 21 extents where there were 204)
            argv = ["xfs_spaceman", "-c", "freesp -s", str(mountpoint)]
            done = runner.run(argv, timeout=120, check=False)
            return {"tool": "xfs_spaceman freesp", **parse_xfs_freesp(done.stdout, block)}
        if fs == "zfs" and pool:
            done = runner.run(["zpool", "list", "-H", "-o", "frag", pool], timeout=60, check=False)
            value = done.stdout.strip().rstrip("%")
            if (done.returncode != 0 or not value.isdigit()) and members:
                # zfs-fuse's pool version 23 predates the space maps' histograms: its
                # free segments as zdb reads them, after the open transaction group
                snap = f"{pool}@pgfsb_txg_state"  # a snapshot commits the open group
                if runner.run(["zfs", "snapshot", snap], timeout=300, check=False).returncode == 0:
                    runner.run(["zfs", "destroy", snap], timeout=300, check=False)
                return zdb_free_space(runner, pool, members)
            if done.returncode != 0 or not value.isdigit():
                return {
                    "tool": "zpool list -o frag",
                    "why": "not measured: this ZFS has no pool fragmentation property "
                    "(zfs-fuse's pool version 23 predates it)",
                }
            return {"tool": "zpool list -o frag", "pool_frag_pct": int(value)}
    except (OSError, PgfsbenchError) as exc:
        return {"why": f"not measured: {exc}"}
    return {"why": f"not measured: {fs} has no free-space histogram pgfsbench reads"}


def fullness(mountpoint: Path) -> float | None:
    try:
        st = os.statvfs(mountpoint)
    except OSError:
        return None
    if not st.f_blocks:
        return None
    return round(1 - st.f_bfree / st.f_blocks, 3)


def state_of(
    runner: Runner,
    fs: str,
    device: str,
    mountpoint: Path,
    pgdata: Path | None,
    pool: str | None = None,
    members: Sequence[str] = (),
) -> dict[str, Any]:
    """The filesystem's state as measured now: free-space fragmentation, fullness, and
    extents per GiB of the data directory's files."""
    out: dict[str, Any] = {
        "free_space": free_space_fragmentation(runner, fs, device, mountpoint, pool, members),
        "fullness": fullness(mountpoint),
    }
    if pgdata is not None:
        out["data_files"] = extents_per_gib(pgdata)
    return out


def require_tools(fs: str) -> None:
    """The tools the state is measured with, for the filesystems that have one."""
    tool = {"ext4": "e2freefrag", "xfs": "xfs_spaceman"}.get(fs)
    if tool and shutil.which(tool) is None:
        raise CapabilityError(f"age: {tool} is not installed (it measures {fs}'s free space)")
