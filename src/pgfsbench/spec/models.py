"""The experiment spec (TOML, validated by pydantic): what a user may write, and nothing else.

Unknown keys are errors; values that would pass here and fail later (a size where a sysctl
wants bytes, a duration without a unit, a setting that would open a TCP port) are refused
or normalised here, so that a spec `plan` accepts is a spec `run` can execute.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from pgfsbench.system.bounds import VM_SYSCTLS, vm_value_problem
from pgfsbench.system.cpus import parse_cpu_list
from pgfsbench.units import human_bytes, parse_duration, parse_size

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
Scalar = str | int | float | bool
INT64_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class KindFacts:
    """What the models' validators need of the storage kinds (spec/kinds.py is the registry
    and fills this in when it is imported, which the spec package always does first: the
    kinds are built from these models, so the models cannot import them)."""

    ram: Callable[[str], bool]  # the kind lives in memory (no device beneath)
    snapshots: Callable[[str], bool]  # it takes native snapshots
    volume_kinds: Callable[[], list[str]]  # the kinds that can hold a volume of their own
    snapshot_kinds: Callable[[], list[str]]


_kinds: list[KindFacts] = []


def register_kinds(facts: KindFacts) -> None:
    """Called once by spec/kinds.py."""
    _kinds[:] = [facts]


def kinds() -> KindFacts:
    if not _kinds:  # pragma: no cover - the spec package imports kinds before any model
        raise RuntimeError("pgfsbench.spec.kinds was not imported: import pgfsbench.spec")
    return _kinds[0]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _seconds(value: object) -> float:
    """A duration as seconds: '30s', '2m', '1h', '500ms', or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a text such as 30s, 2m, 1h")
    if isinstance(value, int | float | str):
        return parse_duration(value)
    raise ValueError("a duration is a number of seconds or a text such as 30s, 2m, 1h")


Duration = Annotated[float, BeforeValidator(_seconds)]


def _check_device(value: str) -> str:
    if value.startswith("loop:"):
        if parse_size(value[5:]) < (16 << 20):
            raise ValueError("a loop device needs at least 16M")
        return value
    if value.startswith("/dev/") and ".." not in value.split("/"):
        return value
    raise ValueError(
        "a device is 'loop:SIZE' (e.g. loop:4G), a block device path under /dev/, or an "
        'emulated disk { size = "4G", model = "hdd-7200" }'
    )


class EmulatedDevice(BaseModel):
    """A loop device over an emulated disk: a device model (seek, rotation, write cache,
    per-operation latency) answers every block request (spec/device_models.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the emulated disk's size ("1T", "500G"; binary); its image file stays sparse
    size: str
    # the device model: hdd-7200, hdd-5400, sata-ssd, nvme-ssd (spec/device_models.py)
    model: str
    # hdd: the drive's volatile write cache (default: on, as drives ship)
    write_cache: bool | None = None
    # hdd: the whole drive, of which this device is the outer part (default 1T);
    # cloud: the volume's size, which its IOPS and MB/s follow (default: `size`)
    drive: str | None = None
    # what carries the block requests to the daemon: /dev/fuse, or FUSE over io_uring
    # (Linux 6.14 and later; pgfsbench turns fuse's enable_uring parameter on while the
    # daemon mounts, journaled). No cheaper on a 2-vCPU VM: docs/validation/emulated-disks.md
    transport: Literal["dev_fuse", "io_uring"] = "dev_fuse"

    @field_validator("size", "drive")
    @classmethod
    def _sizes(cls, v: str | None) -> str | None:
        if v is not None and parse_size(v) < (16 << 20):
            raise ValueError("an emulated disk needs at least 16M")
        return v

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        from pgfsbench.spec.device_models import MODELS

        if v not in MODELS:
            raise ValueError(f"model {v!r} is unknown (models: {', '.join(MODELS)})")
        return v

    @model_validator(mode="after")
    def _applies(self) -> EmulatedDevice:
        from pgfsbench.spec.device_models import MODELS

        if self.write_cache is not None and MODELS[self.model].kind != "hdd":
            raise ValueError("write_cache is a hard disk's (an hdd-* model)")
        return self

    def label(self) -> str:
        return f"{self.size} emulated ({self.model})"


def _device_value(value: object) -> object:
    if isinstance(value, str):
        return _check_device(value)
    return value


Device = Annotated[
    str | EmulatedDevice,
    BeforeValidator(_device_value),
    Field(description='loop:SIZE, /dev/..., or { size = "4G", model = "hdd-7200" }'),
]


def loop_bytes(device: str | EmulatedDevice) -> int | None:
    """The size of a device pgfsbench creates (a loop file, an emulated disk); None for a
    real device."""
    if isinstance(device, EmulatedDevice):
        return parse_size(device.size)
    return parse_size(device[5:]) if device.startswith("loop:") else None


def device_text(device: str | EmulatedDevice) -> str:
    """As the spec named it: loop:1G, /dev/sdb, 4G emulated (hdd-7200)."""
    return device.label() if isinstance(device, EmulatedDevice) else device


def _size_text(v: str) -> str:
    parse_size(v)
    return v


def _size_value(v: object) -> str:
    return _size_text(str(v))


SizeText = Annotated[str, BeforeValidator(_size_value)]
# below this, PostgreSQL cannot even start its backends inside the memory cgroup (its
# shared memory is outside it, but each backend's private memory and the page cache are in)
MIN_MEMORY_LIMIT = 64 << 20


# ---------------------------------------------------------------- storage


class DeviceLimits(Model):
    """Caps on a device's IOPS and bandwidth (MB/s): a named profile (an HDD, a SATA SSD, a
    cloud volume at a capacity) and/or explicit figures, which override the profile's."""

    # a named device (hdd-7200, sata-ssd) or cloud volume (ebs-gp3, essd-pl1...) whose caps apply
    profile: str | None = None
    capacity: SizeText | None = None  # the emulated device's size (default: the device's)
    # read operations a second at most (overrides the profile's)
    read_iops: Annotated[int, Field(ge=1, le=10**9)] | None = None
    # write operations a second at most (overrides the profile's)
    write_iops: Annotated[int, Field(ge=1, le=10**9)] | None = None
    # read MB/s at most (overrides the profile's)
    read_mbps: Annotated[float, Field(gt=0, le=10**6)] | None = None
    # write MB/s at most (overrides the profile's)
    write_mbps: Annotated[float, Field(gt=0, le=10**6)] | None = None

    @model_validator(mode="after")
    def _known(self) -> DeviceLimits:
        from pgfsbench.spec.profiles import PROFILES

        if self.profile is not None and self.profile not in PROFILES:
            raise ValueError(
                f"profile {self.profile!r} is unknown (profiles: {', '.join(PROFILES)})"
            )
        if self.profile is None and all(
            v is None for v in (self.read_iops, self.write_iops, self.read_mbps, self.write_mbps)
        ):
            raise ValueError(
                "give a profile or at least one of read_iops, write_iops, read_mbps, write_mbps"
            )
        return self


class BlockVolume(Model):
    """A filesystem made on a device: what mkfs and mount get."""

    # "loop:SIZE" (a loop file in the work directory), a real device ("/dev/nvme1n1", erased:
    # needs --destroy-data-on) or an emulated disk ({ size, model })
    device: Device = "loop:4G"
    # extra mkfs arguments, as mkfs takes them (e.g. ["-E", "stride=16"])
    mkfs_options: list[str] = []
    # mount options (e.g. ["noatime", "data=writeback"])
    mount_options: list[str] = []
    limits: DeviceLimits | None = None  # emulate another kind of device on this one


class WalVolume(BlockVolume):
    """A separate volume for pg_wal (initdb --waldir)."""

    fs: str  # a kind of storage that can hold a volume of its own (spec/kinds.py)

    def devices(self) -> list[tuple[str, Device]]:
        return [] if kinds().ram(self.fs) else [("wal", self.device)]

    device: Device = "loop:2G"
    size: SizeText = "1G"  # tmpfs only

    @field_validator("fs")
    @classmethod
    def _fs(cls, v: str) -> str:
        names = kinds().volume_kinds()
        if v not in names:
            raise ValueError(f"a WAL volume's fs is one of {', '.join(names)}, not {v!r}")
        return v


class Snapshots(Model):
    """Snapshots taken during the measured phase, every `every`, the last `keep` kept
    until the phase ends (then all deleted)."""

    # a snapshot this often during the measured phase ("4s", "1m")
    every: Duration
    # the snapshots kept at once (older ones deleted as new ones come)
    keep: Annotated[int, Field(ge=1, le=1000)] = 4

    @field_validator("every")
    @classmethod
    def _every(cls, v: float) -> float:
        if v < 1:
            raise ValueError("snapshots come at most once a second")
        return v


NO_SNAPSHOTS = (
    "{fs} has no native snapshots: take snapshots on {kinds}, or put {fs} on LVM "
    "(lvm = {{}}, where the kernel has device-mapper)"
)


class Lvm(Model):
    """The filesystem on an LVM logical volume of its own group on the device, with
    `snapshot_pct` percent of the group kept for the snapshots `snapshots` takes."""

    # the share of the volume group left for an LVM snapshot (%)
    snapshot_pct: Annotated[int, Field(ge=5, le=90)] = 30


class MdRaid(Model):
    """The filesystem on a Linux software RAID array (mdadm) of these members, each a
    device as `device` takes one (loop:SIZE, /dev/..., an emulated disk); `limits` and
    emulated models apply to each member, as to a ZFS pool's."""

    # the RAID level: raid0, raid1 or raid10
    level: Literal["raid0", "raid1", "raid10"]
    # its member devices (loop:SIZE or real devices), at least as many as the level needs
    devices: list[Device]
    chunk: SizeText | None = None  # raid0/raid10 stripe unit (mdadm's default: 512K)
    # the members of a run start zeroed: nothing to resync; false: resync, wait, then mkfs
    assume_clean: bool = True

    @model_validator(mode="after")
    def _members(self) -> MdRaid:
        need = {"raid0": 2, "raid1": 2, "raid10": 2}[self.level]
        if len(self.devices) < need:
            raise ValueError(f"{self.level} needs at least {need} devices, got {len(self.devices)}")
        if len(self.devices) > 64:
            raise ValueError("at most 64 members")
        if self.chunk is not None:
            if self.level == "raid1":
                raise ValueError("raid1 has no chunk (it does not stripe)")
            kib = parse_size(self.chunk) / 1024
            if kib < 4 or kib != int(kib) or int(kib) & (int(kib) - 1):
                raise ValueError(f"chunk must be a power of two of at least 4K, not {self.chunk}")
        return self

    def chunk_kib(self) -> int | None:
        return None if self.chunk is None else parse_size(self.chunk) // 1024

    def capacity(self) -> int | None:
        """Usable bytes (None: a member's size is not known before it exists)."""
        sizes = [loop_bytes(d) for d in self.devices]
        known = [b for b in sizes if b is not None]
        if len(known) != len(sizes):
            return None
        if self.level == "raid1":
            return min(known)
        total = min(known) * len(known)  # md uses the smallest member's size on each
        return total if self.level == "raid0" else total // 2  # raid10: two copies


class StorageCommon(Model):
    """What every kind of storage has (each kind narrows `fs` to its name)."""

    # the kind of storage (ext4, xfs, btrfs, zfs, tmpfs, existing, pvc)
    fs: str
    # what this storage stands for, in words: shown in plans and reports
    description: str = ""
    ceiling: bool = False  # measure pg_test_fsync and fio on it first (cached)
    # a reference, not a candidate (RAM, say): shown as the ceiling in charts and marked in
    # tables, never the best and never a group's baseline
    reference: bool = False

    def devices(self) -> list[tuple[str, Device]]:
        """(role, device) for every device it asks for (loop:SIZE or /dev/...)."""
        return []

    def data_capacity(self) -> int | None:
        """Usable bytes for the data directory, when the spec says."""
        return None

    def device_limits(self) -> dict[str, DeviceLimits]:
        """The limits asked for, by device role (data, wal; pool, log, cache)."""
        return {}

    def layers(self) -> list[str]:
        """What stands between the filesystem and its devices ("LVM", "md raid1 of 2")."""
        return []


class Aging(Model):
    """A filesystem aged before the benchmark's cluster is made on it (storage/aging.py):
    made once per filesystem, options, device, recipe, seed and size, kept in the work
    directory's cache, and copied block by block for each run."""

    # "files": a file-system aging (files of sizes from a distribution, in a tree, made,
    # overwritten and deleted); "postgres": a database churned (non-HOT updates, deletes,
    # VACUUM, tables dropped and made), its cluster then removed, its holes left
    recipe: Literal["files", "postgres"]
    # the random generator's seed: the same seed, the same sequence of operations
    seed: Annotated[int, Field(ge=0, le=2**31)] = 1
    # the age: bytes written per byte of the filesystem (3 = three times its size)
    overwritten: Annotated[float, Field(gt=0, le=50)] = 3.0
    # the share of the filesystem the recipe's files keep full, its churn around it
    fullness: Annotated[float, Field(gt=0, le=0.9)] = 0.5
    # files: the files' mean size (log-normal, from a few KiB to 64 times this)
    file_size: SizeText = "256K"

    def text(self) -> str:
        return (
            f"aged by {self.recipe} (seed {self.seed}): {self.overwritten:g}x its size "
            f"written, {self.fullness:.0%} full"
        )


class FilesystemStorage(BlockVolume, StorageCommon):
    """A filesystem made on a device for the data directory (and optionally its WAL)."""

    # the data volume aged before each run's cluster is made on it (fresh without)
    age: Aging | None = None

    # pg_wal on a volume of its own (initdb --waldir)
    wal: WalVolume | None = None
    # btrfs (the data directory is a subvolume), or ext4/xfs on LVM (`lvm`)
    snapshots: Snapshots | None = None
    lvm: Lvm | None = None  # ext4, xfs: the data volume on an LVM logical volume
    md: MdRaid | None = None  # the data volume on a software RAID array of its devices

    def device_limits(self) -> dict[str, DeviceLimits]:
        out = {"data": self.limits} if self.limits is not None else {}
        if self.wal is not None and self.wal.limits is not None:
            out["wal"] = self.wal.limits
        return out

    def devices(self) -> list[tuple[str, Device]]:
        data = [("data", d) for d in self.md.devices] if self.md else [("data", self.device)]
        return [*data, *(self.wal.devices() if self.wal else [])]

    def data_capacity(self) -> int | None:
        return self.md.capacity() if self.md else loop_bytes(self.device)

    def layers(self) -> list[str]:
        return [
            *(["LVM"] if self.lvm else []),
            *([f"md {self.md.level} of {len(self.md.devices)}"] if self.md else []),
        ]

    @model_validator(mode="after")
    def _snapshots(self) -> FilesystemStorage:
        if self.lvm is not None and self.fs not in ("ext4", "xfs"):
            raise ValueError(f"lvm is for ext4 and xfs, not {self.fs}")
        if self.md is not None and "device" in self.model_fields_set:
            raise ValueError(
                "give the array's members in md.devices, not device (md = { level = "
                '"raid1", devices = ["loop:2G", "loop:2G"] })'
            )
        if self.age is not None and (self.lvm is not None or self.md is not None):
            raise ValueError(
                "age: the data volume is aged as one device's image (not on lvm or md)"
            )
        if self.snapshots is not None and not (kinds().snapshots(self.fs) or self.lvm):
            raise ValueError(
                NO_SNAPSHOTS.format(fs=self.fs, kinds=" or ".join(kinds().snapshot_kinds()))
            )
        return self


class Ext4Storage(FilesystemStorage):
    fs: Literal["ext4"]


class XfsStorage(FilesystemStorage):
    fs: Literal["xfs"]


class BtrfsStorage(FilesystemStorage):
    fs: Literal["btrfs"]


class TmpfsStorage(StorageCommon):
    """RAM as the ceiling (the seeds' /tmp baseline)."""

    fs: Literal["tmpfs"]
    # the tmpfs size ("4G"): RAM, a ceiling for the others
    size: SizeText = "2G"
    # more tmpfs mount options
    mount_options: list[str] = []
    # pg_wal on a volume of its own (initdb --waldir)
    wal: WalVolume | None = None

    def devices(self) -> list[tuple[str, Device]]:
        return self.wal.devices() if self.wal else []

    def device_limits(self) -> dict[str, DeviceLimits]:
        return {"wal": self.wal.limits} if self.wal and self.wal.limits else {}

    def data_capacity(self) -> int | None:
        return parse_size(self.size)


class ExistingStorage(StorageCommon):
    """A directory on a filesystem the user already mounted: never formatted or remounted."""

    fs: Literal["existing"]
    # a directory of a filesystem you mounted: runs in it, never formatted or remounted
    path: str

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError("path must be absolute")
        return v


# A ZFS property value may depend on the implementation found at run time:
# compression = { kernel = "lz4", fuse = "lzjb" }
ZfsValue = Scalar | dict[Literal["kernel", "fuse"], Scalar]


class ZfsPool(Model):
    # how the devices are combined: single, stripe, mirror, raidz1-3
    layout: Literal["single", "stripe", "mirror", "raidz1", "raidz2", "raidz3"] = "single"
    # the pool's devices (loop:SIZE, real or emulated)
    devices: list[Device] = ["loop:4G"]
    # separate intent-log (SLOG) devices
    log: list[Device] = []
    # stripe or mirror the log devices
    log_layout: Literal["stripe", "mirror"] = "stripe"
    # L2ARC cache devices
    cache: list[Device] = []
    # the pool's sector size as a power of two (12: 4 KiB); default: ZFS's choice
    ashift: int | None = None
    # pool properties (zpool create -o)
    properties: dict[str, ZfsValue] = {}
    limits: DeviceLimits | None = None  # on every member ("HDDs")
    log_limits: DeviceLimits | None = None  # on the log devices ("an SSD")
    # device caps for the cache devices
    cache_limits: DeviceLimits | None = None

    @field_validator("ashift")
    @classmethod
    def _ashift(cls, v: int | None) -> int | None:
        if v is not None and not 9 <= v <= 16:
            raise ValueError("ashift is between 9 and 16 (12 for 4K sectors, 13 for 8K flash)")
        return v

    @model_validator(mode="after")
    def _layout(self) -> ZfsPool:
        need = {"single": 1, "stripe": 1, "mirror": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}
        n = len(self.devices)
        if self.layout == "single" and n != 1:
            raise ValueError(f"layout 'single' takes exactly one device, got {n}")
        if n < need[self.layout]:
            raise ValueError(f"layout {self.layout!r} needs at least {need[self.layout]} devices")
        if self.log_layout == "mirror" and len(self.log) < 2:
            raise ValueError("log_layout 'mirror' needs at least two log devices")
        return self


# every dataset property OpenZFS 2.x or zfs-fuse knows: a name outside it is refused when
# the spec is read (which the installed ZFS supports, and which values, is checked before
# a run against `zfs get`)
ZFS_DATASET_PROPERTIES = frozenset(
    {
        "aclinherit",
        "aclmode",
        "acltype",
        "atime",
        "canmount",
        "casesensitivity",
        "checksum",
        "compression",
        "context",
        "copies",
        "dedup",
        "defcontext",
        "devices",
        "direct",
        "dnodesize",
        "encryption",
        "exec",
        "filesystem_limit",
        "fscontext",
        "keyformat",
        "keylocation",
        "logbias",
        "longname",
        "mlslabel",
        "mountpoint",
        "nbmand",
        "normalization",
        "overlay",
        "pbkdf2iters",
        "prefetch",
        "primarycache",
        "quota",
        "readonly",
        "recordsize",
        "redundant_metadata",
        "refquota",
        "refreservation",
        "relatime",
        "reservation",
        "rootcontext",
        "secondarycache",
        "setuid",
        "sharenfs",
        "sharesmb",
        "snapdev",
        "snapdir",
        "snapshot_limit",
        "special_small_blocks",
        "sync",
        "utf8only",
        "version",
        "volblocksize",
        "volmode",
        "volsize",
        "vscan",
        "xattr",
        "zoned",
        "jailed",
        "defaultuserquota",
        "defaultgroupquota",
        "defaultprojectquota",
    }
)


class ZfsDataset(Model):
    # dataset properties (recordsize, compression, logbias...): a value, or { kernel = ..., fuse =
    # ... } per implementation
    properties: dict[str, ZfsValue] = {}

    @field_validator("properties")
    @classmethod
    def _known(cls, v: dict[str, ZfsValue]) -> dict[str, ZfsValue]:
        for name in v:
            if ":" not in name and name not in ZFS_DATASET_PROPERTIES:
                close = difflib.get_close_matches(name, sorted(ZFS_DATASET_PROPERTIES), n=1)
                raise ValueError(
                    f"{name!r} is not a ZFS dataset property"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + "; a user property needs a colon in its name (com.example:note)"
                )
        return v


class ZfsStorage(StorageCommon):
    fs: Literal["zfs"]
    # which ZFS to use: "any" (what is installed), "kernel" (OpenZFS) or "fuse" (zfs-fuse)
    implementation: Literal["any", "kernel", "fuse"] = "any"
    # the pool: its devices and layout
    pool: ZfsPool = ZfsPool()
    # the dataset of the data directory
    data: ZfsDataset = ZfsDataset()
    # a dataset of its own for pg_wal (in the same pool)
    wal: ZfsDataset | None = None
    # OpenZFS module parameters (/sys/module/zfs/parameters), put back afterwards
    module_parameters: dict[str, ZfsValue] = {}
    snapshots: Snapshots | None = None  # of the data and WAL datasets
    # the pool aged before each run's cluster is made on it (fresh without): a pool of one
    # device, its image made once and copied block by block for each run
    age: Aging | None = None

    @model_validator(mode="after")
    def _aged_pool(self) -> ZfsStorage:
        p = self.pool
        if self.age is not None and (len(p.devices) != 1 or p.log or p.cache):
            raise ValueError(
                "age: the pool is aged as one device's image: a pool of one device, with no "
                "log or cache device"
            )
        return self

    def device_limits(self) -> dict[str, DeviceLimits]:
        roles = (
            ("pool", self.pool.limits),
            ("log", self.pool.log_limits),
            ("cache", self.pool.cache_limits),
        )
        return {role: limits for role, limits in roles if limits is not None}

    def devices(self) -> list[tuple[str, Device]]:
        return (
            [("pool", d) for d in self.pool.devices]
            + [("log", d) for d in self.pool.log]
            + [("cache", d) for d in self.pool.cache]
        )

    def data_capacity(self) -> int | None:
        sizes = [b for d in self.pool.devices if (b := loop_bytes(d)) is not None]
        if len(sizes) != len(self.pool.devices):
            return None
        data_disks = {
            "single": 1,
            "stripe": len(sizes),
            "mirror": 1,
            "raidz1": len(sizes) - 1,
            "raidz2": len(sizes) - 2,
            "raidz3": len(sizes) - 3,
        }[self.pool.layout]
        return min(sizes) * data_disks


# ---------------------------------------------------------------- postgres


class InitdbOptions(Model):
    wal_segsize: int | None = None  # MB, power of two 1..1024
    # initdb --data-checksums
    data_checksums: bool = False
    # initdb --locale (default: C)
    locale: str = "C.UTF-8"
    # more initdb arguments
    extra_args: list[str] = []

    @field_validator("wal_segsize")
    @classmethod
    def _segsize(cls, v: int | None) -> int | None:
        if v is not None and (v < 1 or v > 1024 or v & (v - 1)):
            raise ValueError("wal_segsize is a power of two between 1 and 1024 (MB)")
        return v


SETTING_NAME_RE = re.compile(r"^[a-z_][a-z0-9_.]*$")
_PRIVATE = "pgfsbench sets it: the server listens on a private socket only (unix, no TCP)"
_LOG = "pgfsbench sets it: it reads checkpoints and failures from the server log"
RESERVED_SETTINGS: Mapping[str, str] = {
    "listen_addresses": _PRIVATE,
    "port": _PRIVATE,
    "unix_socket_directories": _PRIVATE,
    "unix_socket_permissions": _PRIVATE,
    "unix_socket_group": _PRIVATE,
    "data_directory": "pgfsbench sets it",
    "config_file": "pgfsbench sets it",
    "hba_file": _PRIVATE,
    "ident_file": _PRIVATE,
    "external_pid_file": "pgfsbench sets it",
    "include": "a configuration directive, not a setting",
    "include_if_exists": "a configuration directive, not a setting",
    "include_dir": "a configuration directive, not a setting",
    "log_line_prefix": _LOG,
    "log_checkpoints": _LOG,
    "lc_messages": _LOG,
    "log_timezone": _LOG,
    "logging_collector": _LOG,
    "log_destination": _LOG,
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_setting_value(name: str, value: Scalar) -> None:
    if isinstance(value, str) and _CONTROL.search(value):
        raise ValueError(f"{name}: control characters (newline, tab...) cannot be in a value")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT64_MAX:
        raise ValueError(f"{name}: {value} is too large")


class Pooler(Model):
    """A connection pooler between the clients and PostgreSQL (Debian's pgbouncer): started
    on a private unix socket, the workload connects through it, the samplers do not."""

    # the pooler in front of PostgreSQL (pgbouncer)
    kind: Literal["pgbouncer"] = "pgbouncer"
    # session, transaction or statement pooling
    pool_mode: Literal["session", "transaction", "statement"] = "transaction"
    # server connections a pool keeps
    default_pool_size: Annotated[int, Field(ge=1, le=10_000)] = 20
    # client connections it accepts
    max_client_conn: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    settings: dict[str, Scalar] = {}  # more pgbouncer.ini settings

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        reserved = {
            "listen_addr",
            "listen_port",
            "unix_socket_dir",
            "auth_type",
            "auth_file",
            "admin_users",
            "stats_users",
            "pidfile",
            "logfile",
            "user",
            "stats_period",
        }
        for name, value in v.items():
            if not re.fullmatch(r"[a-z_]+", name):
                raise ValueError(f"{name!r} is not a pgbouncer setting name")
            if name in reserved:
                raise ValueError(f"{name}: pgfsbench sets it (a private unix socket only)")
            check_setting_value(name, value)
        return v


class PostgresConfig(Model):
    # what this configuration stands for, in words
    description: str = ""
    # a reference, not a candidate (fsync = off, say): as a storage's `reference`
    reference: bool = False
    # this configuration's own PostgreSQL (another major version): its bindir; the default
    # is defaults.pg_bindir, else the newest installed
    bindir: str | None = None
    # postgresql.conf settings (a value each: shared_buffers = "4GB", fsync = false)
    settings: dict[str, Scalar] = {}
    # how initdb makes the cluster
    initdb: InitdbOptions = InitdbOptions()
    # a connection pooler between the workload and the server
    pooler: Pooler | None = None

    @field_validator("bindir")
    @classmethod
    def _bindir(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError("bindir must be an absolute path (e.g. /usr/lib/postgresql/17/bin)")
        return v

    @field_validator("settings")
    @classmethod
    def _settings(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        seen: dict[str, str] = {}
        for name, value in v.items():
            key = name.lower()  # PostgreSQL setting names are case-insensitive
            if not SETTING_NAME_RE.match(key):
                raise ValueError(f"{name!r} is not a setting name (letters, digits, _ and .)")
            if key in RESERVED_SETTINGS:
                raise ValueError(f"{name}: {RESERVED_SETTINGS[key]}")
            if key in seen:
                raise ValueError(f"{name} and {seen[key]} are the same setting")
            seen[key] = name
            check_setting_value(name, value)
        return v


# ---------------------------------------------------------------- kernel


def sysctl_value(name: str, value: Scalar) -> int | str:
    """A sysctl value as the kernel takes it: an integer (sizes with units accepted for
    *_bytes and *_kbytes), or whitespace-separated integers."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= (1 << 64) - 1:
            raise ValueError(f"{name}: {value} does not fit in a kernel integer")
        return value
    if isinstance(value, float):
        if value.is_integer():
            return sysctl_value(name, int(value))
        raise ValueError(f"{name}: {value} is not an integer")
    text = value.strip()
    if re.fullmatch(r"-?\d+(\s+-?\d+)*", text):
        for part in text.split():
            sysctl_value(name, int(part))
        return text
    for suffix, unit in (("_kbytes", 1024), ("_bytes", 1)):
        if name.endswith(suffix):
            try:
                return sysctl_value(name, parse_size(text) // unit)
            except ValueError:
                break
    hint = " or a size such as 64MB" if name.endswith(("_bytes", "_kbytes")) else ""
    raise ValueError(f"{name} = {value!r}: a sysctl value here is an integer{hint}")


class KernelConfig(Model):
    # what this kernel configuration stands for, in words
    description: str = ""
    # sysctls for the runs (e.g. "vm.dirty_background_bytes" = 67108864), put back afterwards
    sysctl: dict[str, int | str] = {}
    # /sys/kernel/mm/transparent_hugepage/enabled: always, madvise or never
    transparent_hugepage: Literal["always", "madvise", "never"] | None = None
    # /sys/kernel/mm/transparent_hugepage/defrag
    transparent_hugepage_defrag: (
        Literal["always", "defer", "defer+madvise", "madvise", "never"] | None
    ) = None

    @field_validator("sysctl", mode="before")
    @classmethod
    def _sysctl(cls, v: object) -> object:
        if not isinstance(v, dict):
            return v
        out: dict[str, int | str] = {}
        for key, value in v.items():
            if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", str(key)):
                raise ValueError(f"{key!r} is not a sysctl name (e.g. vm.dirty_background_ratio)")
            if not isinstance(value, str | int | float | bool):
                raise ValueError(f"{key}: a sysctl value is a number")
            out[str(key)] = sysctl_value(str(key), value)
            name = str(key).removeprefix("vm.")
            if str(key).startswith("vm.") and name in VM_SYSCTLS:
                # what pgfsbench may set on a host is what its undo may restore (a vm.*
                # key it does not know is refused before the run, said against the kernel)
                why = vm_value_problem(name, str(out[str(key)]))
                if why is not None:
                    raise ValueError(why)
        return out


# ---------------------------------------------------------------- workload

BUILTINS = ("tpcb-like", "simple-update", "select-only", "seqscan")
SYSBENCH_SCRIPTS = (
    "oltp_read_write",
    "oltp_read_only",
    "oltp_write_only",
    "oltp_point_select",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "oltp_delete",
    "select_random_points",
    "select_random_ranges",
)
Clients = Annotated[int, Field(ge=1, le=100_000)]
SCALE_TEXT_RE = re.compile(
    r"^(fits_shared_buffers|fits_ram|exceeds_ram|(\d+(?:\.\d+)?)x_(ram|shared_buffers))$"
)


def _scale_text(v: str) -> str:
    text = v.strip().lower()
    m = SCALE_TEXT_RE.match(text)
    if not m or (m.group(2) is not None and float(m.group(2)) <= 0):
        raise ValueError(
            f"{v!r} is not a scale: a number, or fits_shared_buffers, fits_ram, "
            "exceeds_ram, Nx_ram, Nx_shared_buffers (e.g. 0.5x_ram)"
        )
    return text


# a number, or a size relative to memory resolved per cell by plan ("fits_ram", "2x_ram")
Scale = Annotated[int, Field(ge=1, le=1_000_000)] | Annotated[str, AfterValidator(_scale_text)]


def _rate(v: object) -> object:
    """A rate is transactions per second, or a share of the cell's own maximum: "75%"."""
    if isinstance(v, str):
        text = v.strip()
        if text == "max":
            return text  # no limit: as fast as it goes (the reference for shares)
        if text.endswith("%"):
            pct = float(text[:-1])
            if not 0 < pct <= 100:
                raise ValueError(f"{v!r}: a share of the maximum is between 0% and 100%")
            return f"{pct:g}%"
        raise ValueError(
            f"{v!r} is not a rate: a number of transactions per second, a share "
            'of the cell\'s maximum such as "75%", or "max"'
        )
    return v


Rate = Annotated[float | str, BeforeValidator(_rate)]


def _share(value: object) -> float:
    """A share: 0.02, or "2%"; between 0 (excluded) and 0.5."""
    if isinstance(value, str):
        text = value.strip()
        number = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    else:
        raise ValueError(f'{value!r}: a share, such as 0.02 or "2%"')
    if not 0 < number <= 0.5:
        raise ValueError(f"{value!r}: between 0 and 50%")
    return number


def _one_or_many(v: object) -> object:
    """A sweep value may be written as one value or a list of values."""
    if isinstance(v, list):
        if not v:
            raise ValueError("an empty list sweeps over nothing")
        if len(set(map(str, v))) != len(v):
            raise ValueError("a value appears twice in the list")
    return v


def _check_rate(v: object) -> object:
    for r in v if isinstance(v, list) else [v]:
        if isinstance(r, int | float) and not isinstance(r, bool) and not 0 < r <= 1e9:
            raise ValueError("a rate is above 0 and at most 1e9 transactions per second")
    return v


class WorkloadBase(Model):
    """What every workload has: its clients, size, duration and pace (each tool narrows
    `tool` to its name)."""

    # the tool that runs it: pgbench, sysbench, pg_dump or copy
    tool: str
    # what this workload stands for, in words
    description: str = ""
    # client connections (a list: one cell each); default: [defaults] clients
    clients: Annotated[Clients | list[Clients] | None, BeforeValidator(_one_or_many)] = None
    # the tool's threads; default: [defaults] threads
    threads: Annotated[int, Field(ge=1, le=10_000)] | None = None
    # the data's size, in the tool's units (pgbench: 100,000 rows a unit), or relative to memory
    # ("fits_ram", "2x_shared_buffers"); a list: one cell each
    scale: Annotated[Scale | list[Scale] | None, BeforeValidator(_one_or_many)] = None
    # the measured phase of a run; default: [defaults] duration
    duration: Duration | None = None
    # the measured phase as whole checkpoint cycles (see [defaults] cycles); default: its
    cycles: Annotated[int, Field(ge=0, le=1000)] | None = None
    # run, not counted, before the measured phase; default: [defaults] warmup
    warmup: Duration | None = None
    # a fixed pace (transactions a second, or "75%" of the cell's measured maximum) instead of as
    # fast as possible
    rate: Annotated[
        Rate | list[Rate] | None, BeforeValidator(_one_or_many), AfterValidator(_check_rate)
    ] = None
    # "cold": before the measured phase PostgreSQL is restarted (its buffers emptied) and the
    # OS page cache dropped; no warm-up then (it would warm the cache again)
    cache: Literal["warm", "cold"] = "warm"
    # more arguments for the tool, as it takes them
    extra_args: list[str] = []


class PgbenchWorkload(WorkloadBase):
    """pgbench: a builtin script or your own, with -l for exact latencies."""

    tool: Literal["pgbench"] = "pgbench"
    # "seqscan": full scans of pgbench_accounts, each a transaction; reported in MB/s
    builtin: Literal["tpcb-like", "simple-update", "select-only", "seqscan"] | None = None
    parallel_workers: Annotated[int, Field(ge=0, le=64)] = 0  # seqscan: per Gather
    scripts: list[str] = []  # pgbench -f FILE[@WEIGHT], relative to the spec file
    # pgbench -M: simple, extended or prepared statements
    protocol: Literal["simple", "extended", "prepared"] = "simple"
    # pgbench --sampling-rate for its transaction log (default: every transaction, up to
    # txlog_max_tps_per_cpu)
    sampling_rate: float | None = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _what(self) -> PgbenchWorkload:
        if self.builtin and self.scripts:
            raise ValueError("give either builtin or scripts, not both")
        for script in self.scripts:
            name, _, weight = script.partition("@")
            if not name or (weight and not weight.isdigit()):
                raise ValueError(f"{script!r}: a script is FILE or FILE@WEIGHT (an integer)")
        return self


class SysbenchWorkload(WorkloadBase):
    """sysbench's OLTP scripts (pgsql driver). Size: `tables` x `table_size` rows; without
    table_size, the cell's scale counts rows in units of 10,000 (sysbench's default)."""

    tool: Literal["sysbench"]
    script: Literal[SYSBENCH_SCRIPTS] = "oltp_read_write"  # type: ignore[valid-type]
    # sysbench's --tables
    tables: Annotated[int, Field(ge=1, le=10_000)] = 1
    # rows a table (default: the cell's scale x 10,000)
    table_size: Annotated[int, Field(ge=1, le=10**10)] | None = None
    # reads/writes per transaction, e.g. "80/20": point selects vs index + non-index updates
    mix: str | None = None
    options: dict[str, Scalar] = {}  # more --name=value options of the script
    # the latency percentile sysbench reports
    percentile: Annotated[int, Field(ge=1, le=100)] = 99

    @field_validator("mix")
    @classmethod
    def _mix(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = v.split("/")
        if (
            len(parts) != 2
            or not all(p.strip().isdigit() for p in parts)
            or sum(int(p) for p in parts) != 100
            or (int(parts[0]) == 0 and int(parts[1]) == 0)
        ):
            raise ValueError(f'mix {v!r}: reads/writes in %, adding up to 100 (e.g. "80/20")')
        return v

    @field_validator("options")
    @classmethod
    def _options(cls, v: dict[str, Scalar]) -> dict[str, Scalar]:
        for name, value in v.items():
            if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
                raise ValueError(f"{name!r} is not a sysbench option name")
            check_setting_value(name, value)
        return v


class DumpWorkload(WorkloadBase):
    """pg_dump as a read-throughput workload: the pgbench data (scale) dumped again and
    again for the duration, to /dev/null (custom format) or to a scratch directory
    (directory format, `jobs` in parallel); reported in MB/s of the database's size."""

    tool: Literal["pg_dump"]
    # pg_dump's format: custom (to /dev/null) or directory (to a scratch directory)
    format: Literal["custom", "directory"] = "custom"
    # pg_dump -j (directory format)
    jobs: Annotated[int, Field(ge=1, le=64)] = 1
    # pg_dump -Z: 0 (none) to 9
    compress: Annotated[int, Field(ge=0, le=9)] = 0

    @model_validator(mode="after")
    def _jobs(self) -> DumpWorkload:
        if self.jobs > 1 and self.format != "directory":
            raise ValueError('jobs > 1 needs format = "directory" (pg_dump -Fd -j N)')
        return self


class CopyWorkload(WorkloadBase):
    """Bulk load: COPY of scale x rows_per_scale generated rows (pgbench_accounts' shape) in
    `streams` parallel COPYs, the index built before, after, or not at all; reported in
    MB/s and rows/s, with each phase timed and the WAL written per MB loaded."""

    tool: Literal["copy"]
    # rows COPY'd a scale unit
    rows_per_scale: Annotated[int, Field(ge=1, le=100_000_000)] = 100_000
    # COPYs in parallel
    streams: Annotated[int, Field(ge=1, le=64)] = 1
    # the primary key built before the load, after it, or not at all
    indexes: Literal["none", "before", "after"] = "after"


class ReplayWorkload(WorkloadBase):
    """Your own workload: a capture (`pgfsbench capture`) replayed by pgfsbench's replayer
    on each cell's storage, from a copy of the capture's data; sessions, transactions and
    each session's order kept, prepared statements as the client made them. Its clients
    and scale are the capture's; its duration, the capture's length (timed), or as long as
    the work takes (fast). No warm-up: it would run the work twice."""

    tool: Literal["replay"]
    # the capture's directory (`pgfsbench capture -o DIR`), root's
    capture: str
    # timed: each statement at its captured time (divided by speed); think: the captured think
    # time between a session's statements (times think_scale); fast: no waits, the storage's
    # capacity for this work
    mode: Literal["timed", "think", "fast"] = "timed"
    # timed: the captured times divided by this (2: twice as fast)
    speed: Annotated[float, Field(gt=0, le=100)] = 1.0
    # think: the captured think times multiplied by this
    think_scale: Annotated[float, Field(ge=0, le=100)] = 1.0
    # a lock wait the replay's reordering causes ends after this (the statement fails, is
    # counted and named): a conflict never hangs a run
    lock_timeout: Duration = 10.0
    # hold each COMMIT until the commits captured before it are done (the capture's commit
    # order; a commit whose turn does not come within a second goes, counted)
    commit_order: bool = False
    # fast: how far apart in the capture's time the sessions may get (each transaction waits
    # until it is within this of every other session's place; 0: no bound, each session as
    # fast as it goes alone)
    drift: Duration = 1.0
    # the roles the statements run as: "replay" (a superuser's session as pgfsbench_replay,
    # a non-superuser that owns what superusers owned; a captured server's code never runs
    # as a superuser here), or "captured" (each session as its captured role: a capture you
    # trust, whose superusers replay as superusers)
    roles: Literal["replay", "captured"] = "replay"

    @model_validator(mode="after")
    def _no_warmup(self) -> ReplayWorkload:
        if self.warmup:
            raise ValueError("a replay has no warm-up (it would run the captured work twice)")
        if self.rate is not None:
            raise ValueError("a replay keeps its captured pace (mode, speed), not a rate")
        return self


class Defaults(Model):
    # the data's size for every workload that does not say (a list: one cell each; or "fits_ram",
    # "exceeds_ram", "2x_shared_buffers"...)
    scale: Annotated[Scale | list[Scale], BeforeValidator(_one_or_many)] = 1
    # client connections (a list: one cell each)
    clients: Annotated[Clients | list[Clients], BeforeValidator(_one_or_many)] = 8
    # a fixed pace for every workload (transactions a second, or "75%" of each cell's maximum)
    rate: Annotated[
        Rate | list[Rate] | None, BeforeValidator(_one_or_many), AfterValidator(_check_rate)
    ] = None
    # the tools' threads
    threads: Annotated[int, Field(ge=1, le=10_000)] = 2
    # each run's measured phase, when given as a time: a window of that length (the seed's
    # "right after the load" with write_out = false); unless cycles says otherwise
    duration: Duration = 60.0
    # each run's measured phase as N whole checkpoint cycles of the cell's
    # checkpoint_timeout: a CHECKPOINT starts the first cycle (its end the warm-up's), timed
    # checkpoints follow, the window ends on a cycle boundary, so every run holds the same
    # checkpoints (its steady state). 0: a window of `duration`. Unset: 1 for pgbench and
    # sysbench workloads whose duration is not given, else 0 (docs/guide/answers.md)
    cycles: Annotated[int, Field(ge=0, le=1000)] | None = None
    # each run's warm-up, not counted (0: none); with cycles, at least one cycle long
    warmup: Duration = 10.0
    # a number, or "auto": repeat until each cell's comparison with its group's baseline is
    # settled by an anytime-valid confidence sequence (faster, slower, or equivalent), from
    # repetitions_min to repetitions_max runs a cell, within the budget (analysis/sequential)
    repetitions: Annotated[int, Field(ge=1, le=1000)] | Literal["auto"] = 3
    # with repetitions = "auto": runs a cell at least
    repetitions_min: Annotated[int, Field(ge=2, le=1000)] = 3
    # with repetitions = "auto": runs a cell at most
    repetitions_max: Annotated[int, Field(ge=2, le=1000)] = 8
    # a cell compared with nothing (alone in its group) stops when its own 95% interval is
    # within this share of its mean
    ci_target_pct: float = Field(2.0, gt=0, le=100)
    # "equivalent" means within this of the baseline ("2%", or 0.02): a comparison whose
    # interval lies inside it is equivalent; one that straddles 0 and reaches past it is
    # undecided (too noisy to tell)
    equivalence_margin: Annotated[float, BeforeValidator(_share)] = 0.02
    # repetitions = "auto": no new round starts once the campaign has run this long
    budget: Duration | None = None
    # pgbench -i's data generation: on the client, or on the server (-I ...G)
    generation: Literal["client", "server"] = "client"
    # pgbench -i --foreign-keys
    foreign_keys: bool = False
    # a fresh filesystem and load for each repetition, or one per cell ("cell": its repetitions
    # share them)
    load_per: Literal["repetition", "cell"] = "repetition"
    # after the load, a checkpoint and a sync of the filesystems under test, timed as the
    # load's last phase, so that the warm-up and the measurement start with the load on
    # the disk. false: the warm-up (or, without one, the measurement) starts as soon as
    # pgbench -i ends, the load's dirty pages and its checkpoints still on their way to
    # the disk, as most published pgbench runs were made (the space after the load is
    # then not read: the filesystem has not allocated it all yet)
    write_out: bool = True
    # the runs' order: "interleaved" (a round of every cell, then the next: drift spread over all)
    # or "sequential"
    order: Literal["interleaved", "sequential"] = "interleaved"
    # the database the workload runs in
    database: Annotated[str, Field(pattern=r"^[a-z_][a-z0-9_]{0,62}$")] = "pgbench"
    # PostgreSQL's binaries for every configuration that does not give its own
    pg_bindir: str | None = None
    # PostgreSQL, wait-event and OS samplers (and pgbench's transaction log) during every
    # run; "alternate": off and on in turns (pairs in ABBA order: off on, on off, ...), to
    # measure what observing costs on this stack (with load_per = "cell": in one server's
    # lifetime, so the server's own run-to-run noise does not hide it)
    samplers: bool | Literal["alternate"] = True
    # pgbench's per-transaction log (-l) on watched runs: latency percentiles per run and
    # per second. false keeps the samplers and drops only the log (latency: average and
    # stddev). -l costs pgbench CPU on every transaction whatever the sampling rate: at
    # ~44,000 select-only TPS on 2 vCPUs (bench/txlog_turns.py) the throughput was 0.993
    # [0.985, 1.002] of none with almost no line written, 0.991 [0.984, 0.997] at ~750
    # lines a second. "auto" keeps it unless the run is expected above
    # txlog_max_tps_per_cpu transactions a second per CPU (there the log's share of each
    # transaction's CPU would pass ~0.5%): such a run goes without it and says why. Paced
    # runs (rate) always keep it: the schedule, not the CPU, sets their throughput, and
    # their latency is what they are for
    txlog: bool | Literal["auto"] = "auto"
    # pgbench's per-transaction log is kept up to this many transactions a second a CPU (sampled
    # above)
    txlog_max_tps_per_cpu: Annotated[int, Field(ge=1)] = 10_000
    sampling_rate: float = Field(1.0, gt=0, le=1)  # pgbench --sampling-rate of the -l log
    # at high rates the log is sampled to keep at most this many lines a second (the rate
    # used is recorded, so counts and percentiles stay right in expectation); 0: never
    txlog_max_lines_per_s: Annotated[int, Field(ge=0, le=10_000_000)] = 1000
    # how often a second the samplers read the backends' wait events
    wait_event_hz: float = Field(10.0, gt=0, le=50)
    # the sampler thread and its backend run under SCHED_BATCH: same fair share of the CPU
    # (unlike nice 19, which starved them under 175 clients), but their wake-ups do not
    # preempt pgbench or a backend mid-transaction. "normal": the default policy
    observer_sched: Literal["batch", "normal"] = "batch"
    # how long PostgreSQL may take to start
    startup_timeout: Duration = 120.0
    # a storage's ceiling (`ceiling = true`): seconds per pg_test_fsync test (about 18
    # tests) and a third of fio's run time; longer is steadier, 1 is enough to see a cap
    ceiling_seconds: Annotated[int, Field(ge=1, le=60)] = 2
    # a run whose workload completes no transaction for this long is ended and failed
    # (a filesystem frozen for good); 0 turns the watchdog off
    stall_timeout: Duration = 60.0
    # episodes in a run's per-second throughput: a stall is a second below stall_fraction
    # of the run's median (0 included); a slowdown, slowdown_min_seconds or more below
    # slowdown_fraction of it. Each is explained from the evidence of its seconds
    stall_fraction: float = Field(0.1, ge=0, lt=1)
    # a second below this share of the run's level is part of a slowdown
    slowdown_fraction: float = Field(0.5, gt=0, lt=1)
    # a slowdown lasts at least this long (a stall, below stall_fraction, from one second)
    slowdown_min_seconds: Annotated[int, Field(ge=1, le=3600)] = 2
    # serve Prometheus metrics on 127.0.0.1:metrics_port while the campaign runs
    # (`run --metrics-port` wins); None: not served
    metrics_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    # a cgroup memory limit for PostgreSQL (its backends and the page cache they charge):
    # "exceeds_ram" reachable at a small size; scales relative to RAM use it as the RAM
    memory_limit: SizeText | None = None
    # PostgreSQL (the postmaster and all it forks) and its pooler on these CPUs ("0", "0-3,8"),
    # pgfsbench and the clients it starts (pgbench, sysbench, the replayer) on the others: a
    # client's own CPU then takes nothing from the server, as with clients on another
    # machine, and two clients that spend different CPU on a transaction measure the same
    # server. None: every process may run on every CPU
    server_cpus: str | None = None
    # CPU busy outside the benchmark (excluding idle and iowait) or steal above these, in
    # % of the whole machine, over the warm-up, the measured phase or (a run without
    # samplers) a second before it, makes the run carry a "busy host" warning
    busy_cpu_pct: float = Field(25.0, ge=0, le=100)
    # CPU steal above this (% of the machine) makes a run's host busy
    busy_steal_pct: float = Field(5.0, ge=0, le=100)

    @field_validator("duration")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v < 1:
            raise ValueError("the measured phase lasts at least 1 s")
        return v

    @field_validator("server_cpus")
    @classmethod
    def _server_cpus(cls, v: str | None) -> str | None:
        if v is not None:
            parse_cpu_list(v)  # the host's CPUs are checked before the campaign (preflight)
        return v

    @field_validator("memory_limit")
    @classmethod
    def _memory_limit(cls, v: str | None) -> str | None:
        if v is not None and parse_size(v) < MIN_MEMORY_LIMIT:
            raise ValueError(
                f"{v!r} is {human_bytes(parse_size(v))}: PostgreSQL's processes and the page "
                f"cache they use need at least {human_bytes(MIN_MEMORY_LIMIT)} (a bare "
                'number is bytes: write a unit, e.g. memory_limit = "512M")'
            )
        return v

    @model_validator(mode="after")
    def _auto(self) -> Defaults:
        if self.stall_fraction >= self.slowdown_fraction:
            raise ValueError(
                f"stall_fraction ({self.stall_fraction:g}) must be below "
                f"slowdown_fraction ({self.slowdown_fraction:g}): a stall is a "
                "deeper slowdown"
            )
        if self.repetitions_min > self.repetitions_max:
            raise ValueError(
                f"repetitions_min ({self.repetitions_min}) is above "
                f"repetitions_max ({self.repetitions_max})"
            )
        if self.samplers == "alternate" and (self.repetitions == "auto" or self.repetitions % 2):
            raise ValueError(
                'samplers = "alternate" compares pairs of runs: give an even '
                f"number of repetitions (not {self.repetitions!r})"
            )
        return self

    def observed(self, repetition: int) -> bool:
        """Whether the samplers watch this repetition. "alternate" pairs repetitions
        (1, 2), (3, 4)... in ABBA order: off then on, on then off, off then on..., so a
        steady drift over the cell's runs weighs on both sides alike."""
        if self.samplers != "alternate":
            return bool(self.samplers)
        pair = (repetition + 1) // 2
        return (repetition % 2 == 1) == (pair % 2 == 0)

    @property
    def budget_s(self) -> float:
        """The budget in seconds (infinite without one)."""
        return float(self.budget) if self.budget is not None else math.inf

    @property
    def auto_repetitions(self) -> bool:
        return self.repetitions == "auto"

    @property
    def first_repetitions(self) -> int:
        """How many repetitions every cell gets before any adaptive decision."""
        return self.repetitions_min if self.repetitions == "auto" else int(self.repetitions)
