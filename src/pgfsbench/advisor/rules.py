"""The doctor's rules, as data: one row per rule (id, layer, severity, what it checks,
why it matters, what to do, its source). Adding a rule is adding a row and its unit test.

A rule's ``check`` reads `Facts` and returns None when it does not apply (no ZFS here, no
PostgreSQL settings known), an empty list when all is well, or one line per thing seen
that breaks it. Sources are in ../shared/reference/storage-tuning-rules.md of the project.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from pgfsbench.advisor.facts import Facts, PathFacts
from pgfsbench.units import human_bytes


class Severity(IntEnum):
    OK = 0
    WARN = 1
    BAD = 2


Check = Callable[[Facts], "list[str] | None"]


class Passed(list[str]):
    """What a check returns when all is well: no problem, and what it observed ("fsync =
    on"), which `doctor --ok` prints instead of the rule's title."""

    def __init__(self, observed: str):
        super().__init__()
        self.observed = observed


@dataclass(frozen=True)
class Rule:
    id: str
    layer: str  # filesystem, zfs, block, kernel, postgresql, evidence
    severity: Severity  # when it fires
    title: str
    check: Check
    why: str
    remedy: str
    source: str


# ---------------------------------------------------------------- helpers


def _pg_paths(f: Facts) -> list[PathFacts]:
    return [p for p in f.paths if p.mount is not None]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def _zfs_paths(f: Facts) -> list[PathFacts]:
    return [p for p in f.paths if p.fstype == "zfs" and p.zfs]


def _per_path(
    f: Facts, paths: list[PathFacts], test: Callable[[PathFacts], str | None]
) -> list[str] | None:
    if not paths:
        return None
    return [f"{p.describe()}: {seen}" for p in paths if (seen := test(p)) is not None] or Passed(
        "checked " + ", ".join(p.describe() for p in paths)
    )


# ---------------------------------------------------------------- checks


def _fpw_off(f: Facts) -> list[str] | None:
    if f.pg is None or f.pg.on("full_page_writes") is None or not _pg_paths(f):
        return None
    if f.pg.on("full_page_writes"):
        return []
    seen = []
    for p in _pg_paths(f):
        if p.fstype == "btrfs" and p.copy_on_write:
            continue  # copy-on-write: a page is written anew and switched to whole, never torn
        if p.fstype != "zfs":
            seen.append(
                f"full_page_writes = off with {p.describe()}: {p.fstype} can tear "
                "an 8 kB page in a crash"
            )
        else:
            rs = p.zfs.get("recordsize")
            if rs is not None and rs.isdigit() and int(rs) < 8192:
                seen.append(
                    f"full_page_writes = off with {p.describe()}: recordsize "
                    f"{int(rs) // 1024}K is smaller than a page"
                )
    return seen


def _no_barrier(f: Facts) -> list[str] | None:
    def test(p: PathFacts) -> str | None:
        for opt in ("barrier=0", "nobarrier", "barrier=off"):
            if opt in p.options:
                return f"mounted with {opt}"
        return None

    return _per_path(f, [p for p in _pg_paths(f) if p.fstype != "zfs"], test)


def _fsync_off(f: Facts) -> list[str] | None:
    if f.pg is None or f.pg.on("fsync") is None:
        return None
    return Passed("fsync = on") if f.pg.on("fsync") else ["fsync = off"]


def _sync_commit_off(f: Facts) -> list[str] | None:
    if f.pg is None or f.pg.get("synchronous_commit") is None:
        return None
    value = str(f.pg.get("synchronous_commit")).strip().strip("'").lower()
    if value in ("off", "false", "no", "0"):
        return ["synchronous_commit = off"]
    return Passed(f"synchronous_commit = {value}")


def _zfs_sync_disabled(f: Facts) -> list[str] | None:
    return _per_path(
        f, _zfs_paths(f), lambda p: "sync=disabled" if p.zfs.get("sync") == "disabled" else None
    )


def _write_cache(f: Facts) -> list[str] | None:
    paths = [p for p in _pg_paths(f) if p.devices]
    if not paths:
        return None

    def test(p: PathFacts) -> str | None:
        volatile = [
            n
            for n, d in p.devices.items()
            if d.get("write_cache") == "write back" and not n.startswith("loop")
        ]
        if not volatile:
            return None
        return (
            f"volatile write cache (write back) on {', '.join(volatile)}: durability "
            "rests on every flush being honoured down to the media"
        )

    return _per_path(f, paths, test)


# OpenZFS releases with the block-cloning / dnode dirty-check corruption (#15526)
# Distribution builds of an affected release that carry the fix of openzfs/zfs#15526
# (CVE-2023-49298, "fix dnode dirty test"), as their changelogs say:
ZFS_15526_FIXED_BUILDS = {
    # Debian bookworm, changelog of zfs-linux 2.1.11-1+deb12u1 (2024-11-02): "cherry-pick
    # upstream fixes ... fix dnode dirty test (Closes: #1056752, #1063497, CVE-2023-49298)"
    "2.1.11-1+deb12u1",
}


def _zfs_version_bug(f: Facts) -> list[str] | None:
    if f.zfs.get("kind") != "kernel" or not f.zfs.get("version"):
        return None
    v = _version(str(f.zfs["version"]))
    build = str(f.zfs.get("build") or f.zfs["version"])
    params = f.zfs.get("parameters", {})
    affected = (2, 2, 0) <= v < (2, 2, 2) or (
        (2, 1, 0) <= v < (2, 1, 14) and params.get("zfs_dmu_offset_next_sync") == "1"
    )
    if not affected or build in ZFS_15526_FIXED_BUILDS:
        return []
    what = (
        f"OpenZFS {build}: silent corruption (zeros after a copy), fixed in 2.2.2"
        if v >= (2, 2, 0)
        else f"OpenZFS {build} with zfs_dmu_offset_next_sync=1: silent corruption, fixed in 2.1.14"
    )
    if build != str(f.zfs["version"]):
        what += (
            f" (a distribution's build of {f.zfs['version']}: it may carry the fix, "
            "CVE-2023-49298; its changelog says)"
        )
    return [what]


def _zfs_bclone(f: Facts) -> list[str] | None:
    params = f.zfs.get("parameters", {})
    if f.zfs.get("kind") != "kernel" or "zfs_bclone_enabled" not in params:
        return None
    v = _version(str(f.zfs.get("version", "")))
    if params["zfs_bclone_enabled"] == "1" and v < (2, 2, 4):
        return [
            f"zfs_bclone_enabled=1 on OpenZFS {f.zfs.get('version')}: block cloning "
            "corrupted data up to 2.2.3 (pg_upgrade --clone, file_copy_method=clone)"
        ]
    return []


def _primarycache(f: Facts) -> list[str] | None:
    return _per_path(
        f,
        _zfs_paths(f),
        lambda p: (
            f"primarycache={p.zfs['primarycache']}"
            if p.zfs.get("primarycache") in ("metadata", "none")
            else None
        ),
    )


def _recordsize_uncompressed(f: Facts) -> list[str] | None:
    def test(p: PathFacts) -> str | None:
        rs = p.zfs.get("recordsize", "")
        if rs.isdigit() and int(rs) > 32768 and p.zfs.get("compression") == "off":
            return f"recordsize {int(rs) // 1024}K without compression"
        return None

    return _per_path(f, _zfs_paths(f), test)


def _zfs_compression_off(f: Facts) -> list[str] | None:
    return _per_path(
        f, _zfs_paths(f), lambda p: "compression=off" if p.zfs.get("compression") == "off" else None
    )


def _cow_wal(f: Facts) -> list[str] | None:
    if f.pg is None or not _pg_paths(f):
        return None
    wal = [p for p in _pg_paths(f) if p.role == "pg_wal"] or [
        p for p in _pg_paths(f) if p.role == "data directory"
    ]
    on = [s for s in ("wal_init_zero", "wal_recycle") if f.pg.on(s)]
    if f.pg.major is not None and f.pg.major < 12:
        return None
    return [
        f"{' and '.join(s + ' = on' for s in on)} with WAL on {p.describe()}"
        for p in wal
        if p.copy_on_write and on
    ]


def _atime(f: Facts) -> list[str] | None:
    def test(p: PathFacts) -> str | None:
        if p.fstype == "zfs":
            if p.zfs.get("atime") == "on" and p.zfs.get("relatime") != "on":
                return "atime=on (relatime off)"
            return None
        if "strictatime" in p.options:
            return "mounted with strictatime"
        return None

    return _per_path(f, _pg_paths(f), test)


def _tmpfs(f: Facts) -> list[str] | None:
    return _per_path(
        f,
        _pg_paths(f),
        lambda p: f"{p.fstype}: lives in RAM" if p.fstype in ("tmpfs", "ramfs") else None,
    )


def _ext4_writeback(f: Facts) -> list[str] | None:
    return _per_path(
        f,
        [p for p in _pg_paths(f) if p.fstype == "ext4"],
        lambda p: "data=writeback" if p.option("data") == "writeback" else None,
    )


def _btrfs_nocow_fpw(f: Facts) -> list[str] | None:
    paths = [p for p in _pg_paths(f) if p.fstype == "btrfs"]
    if not paths:
        return None
    return [
        f"{p.describe()}: nodatacow (no checksums, no compression)"
        for p in paths
        if not p.copy_on_write and f.pg is not None and f.pg.on("full_page_writes") is False
    ]


def _thp(f: Facts) -> list[str] | None:
    mode = f.vm.get("transparent_hugepage.enabled")
    if mode is None:
        return None
    return (
        ["transparent_hugepage = always"]
        if mode == "always"
        else Passed(f"transparent_hugepage = {mode}")
    )


def _dirty(f: Facts) -> list[str] | None:
    total_kb = f.memory.get("MemTotal")
    if not total_kb or "vm.dirty_ratio" not in f.vm:
        return None
    ram = total_kb * 1024

    def limit(kind: str) -> int:
        b = int(f.vm.get(f"vm.{kind}_bytes", "0") or 0)
        return b if b > 0 else ram * int(f.vm.get(f"vm.{kind}_ratio", "0") or 0) // 100

    bg, fg = limit("dirty_background"), limit("dirty")
    seen = []
    if bg > 1 << 30:
        seen.append(
            f"the kernel starts writing back only at {human_bytes(bg)} dirty "
            "(vm.dirty_background_*)"
        )
    if fg > 4 << 30:
        seen.append(f"writers are throttled only at {human_bytes(fg)} dirty (vm.dirty_*)")
    return seen or Passed(
        f"writeback starts at {human_bytes(bg)} dirty, writers throttled at {human_bytes(fg)}"
    )


def _huge_pages(f: Facts) -> list[str] | None:
    if f.pg is None or not f.huge_pages.get("Hugepagesize"):
        return None
    setting = (f.pg.get("huge_pages") or "try").lower()
    if setting != "on":
        return Passed(f"huge_pages = {setting}")
    page = f.huge_pages["Hugepagesize"] * 1024
    need_text = f.pg.get("shared_memory_size_in_huge_pages")
    if need_text and need_text.lstrip("-").isdigit() and int(need_text) > 0:
        need = int(need_text)
    else:
        sb = f.pg.bytes("shared_buffers") or 128 << 20
        need = -(-int(sb * 1.1) // page)  # shared_buffers plus ~10% of other shared memory
    have = (
        f.huge_pages.get("HugePages_Total", 0)
        if f.pg.source == "server"
        else f.huge_pages.get("HugePages_Free", 0)
    )
    if have >= need:
        return Passed(f"huge_pages = on: {have} pages of {page >> 10} kB for about {need}")
    return [
        f"huge_pages = on needs about {need} pages of {page >> 10} kB; the kernel has "
        f"{have} {'reserved' if f.pg.source == 'server' else 'free'} (vm.nr_hugepages "
        f"{f.vm.get('vm.nr_hugepages', '?')})"
    ]


def _data_sync_retry(f: Facts) -> list[str] | None:
    if f.pg is None or f.pg.on("data_sync_retry") is None:
        return None
    return (
        ["data_sync_retry = on"] if f.pg.on("data_sync_retry") else Passed("data_sync_retry = off")
    )


def _old_kernel(f: Facts) -> list[str] | None:
    release = str(f.host.get("kernel", ""))
    if not release:
        return None
    v = _version(release)
    return (
        [f"kernel {release}: before 4.13's writeback error reporting"]
        if v < (4, 13)
        else Passed(f"kernel {release}")
    )


# the first minor release of each branch with the fsync PANIC fix (2019-02-14)
_PG_FSYNC_FIX = {904: 21, 905: 16, 906: 12, 10: 7, 11: 2}


def _old_pg(f: Facts) -> list[str] | None:
    if f.pg is None or f.pg.version_num is None or f.pg.source != "server":
        return None
    n = f.pg.version_num
    branch, minor = (n // 10000, n % 10000) if n >= 100000 else (n // 100, n % 100)
    version = f.pg.get("server_version") or n
    if n >= 120000:
        return Passed(f"PostgreSQL {version}")
    need = _PG_FSYNC_FIX.get(branch)
    if need is None or minor < need:
        return [f"PostgreSQL {version}: retries a failed fsync (before the 2019-02-14 fix)"]
    return Passed(f"PostgreSQL {version}")


def _checkpoints(f: Facts) -> list[str] | None:
    if f.pg is None or "checkpoints_requested" not in f.pg.evidence:
        return None
    timed, req = f.pg.evidence["checkpoints_timed"], f.pg.evidence["checkpoints_requested"]
    if req + timed < 5 or req <= timed:
        return Passed(f"{req} checkpoints requested, {timed} timed")
    return [
        f"{req} checkpoints requested vs {timed} timed (max_wal_size {f.pg.get('max_wal_size')})"
    ]


def _backend_fsyncs(f: Facts) -> list[str] | None:
    if f.pg is None or "backend_fsyncs" not in f.pg.evidence:
        return None
    n = f.pg.evidence["backend_fsyncs"]
    return (
        [f"client backends did {n} fsyncs themselves (pg_stat_io)"]
        if n > 0
        else Passed("client backends did no fsync themselves")
    )


def _shared_buffers(f: Facts) -> list[str] | None:
    total_kb = f.memory.get("MemTotal")
    sb = f.pg.bytes("shared_buffers") if f.pg else None
    if not total_kb or sb is None:
        return None
    ram = total_kb * 1024
    seen = []
    if sb > ram * 0.5:
        seen.append(f"shared_buffers {human_bytes(sb)} is over half of RAM ({human_bytes(ram)})")
    arc_max = f.zfs.get("arc", {}).get("c_max") if f.zfs else None
    if arc_max and sb + int(arc_max) > ram * 0.9:
        seen.append(
            f"shared_buffers {human_bytes(sb)} + ARC max {human_bytes(int(arc_max))} "
            f"leave little of {human_bytes(ram)} RAM for backends"
        )
    return seen or Passed(f"shared_buffers {human_bytes(sb)} of {human_bytes(ram)} RAM")


def _swappiness(f: Facts) -> list[str] | None:
    value = f.vm.get("vm.swappiness")
    if value is None or f.pg is None or not f.memory.get("SwapTotal"):
        return None  # without swap, swappiness swaps nothing out
    return [f"vm.swappiness = {value}"] if int(value) > 10 else Passed(f"vm.swappiness = {value}")


def _overcommit(f: Facts) -> list[str] | None:
    value = f.vm.get("vm.overcommit_memory")
    if value is None or f.pg is None:
        return None
    return (
        Passed("vm.overcommit_memory = 2")
        if value == "2"
        else [
            f"vm.overcommit_memory = {value}: the OOM killer may end a backend and force crash "
            "recovery"
        ]
    )


def _io_uring(f: Facts) -> list[str] | None:
    if f.pg is None or (f.pg.major or 0) < 18:
        return None
    if (f.pg.get("io_method") or "worker") != "io_uring":
        return []
    seen = []
    disabled = f.sysctl.get("kernel.io_uring_disabled")
    if disabled and disabled != "0":
        seen.append(f"io_method = io_uring but kernel.io_uring_disabled = {disabled}")
    return seen


def _zfs_fuse(f: Facts) -> list[str] | None:
    if not f.zfs:
        return None
    if f.zfs.get("kind") != "fuse":
        return Passed(f"OpenZFS {f.zfs.get('version', '')} in the kernel")
    return ["ZFS through FUSE (zfs-fuse): pool version 23, every I/O through user space"]


def _logbias_wal(f: Facts) -> list[str] | None:
    wal = [p for p in _zfs_paths(f) if p.role == "pg_wal"]
    return _per_path(
        f,
        wal,
        lambda p: (
            "logbias=throughput on the WAL dataset"
            if p.zfs.get("logbias") == "throughput"
            else None
        ),
    )


def _pool_full(f: Facts) -> list[str] | None:
    def test(p: PathFacts) -> str | None:
        used, avail = p.zfs.get("used", ""), p.zfs.get("available", "")
        if (
            used.isdigit()
            and avail.isdigit()
            and int(used) + int(avail) > 0
            and int(avail) < 0.1 * (int(used) + int(avail))
        ):
            return f"only {human_bytes(int(avail))} free of {human_bytes(int(used) + int(avail))}"
        return None

    return _per_path(f, _zfs_paths(f), test)


def _ext4_direct_io_bug(f: Facts) -> list[str] | None:
    release = str(f.host.get("kernel", ""))
    if not any(p.fstype == "ext4" for p in _pg_paths(f)) or not release:
        return None
    v = _version(release)
    return (
        [f"kernel {release} with ext4: O_SYNC direct I/O could land at the wrong offset"]
        if (6, 1, 64) <= v <= (6, 1, 65)
        else []
    )


PG_WAL = "https://www.postgresql.org/docs/current/runtime-config-wal.html"
PG_REL = "https://www.postgresql.org/docs/current/wal-reliability.html"
PG_KR = "https://www.postgresql.org/docs/current/kernel-resources.html"
OZ_WT = (
    "https://openzfs.github.io/openzfs-docs/Performance%20and%20Tuning/"
    "Workload%20Tuning.html#postgresql"
)
EXT4 = "https://www.kernel.org/doc/html/latest/admin-guide/ext4.html"

RULES: tuple[Rule, ...] = (
    Rule(
        "fpw-off-torn-pages",
        "postgresql",
        Severity.BAD,
        "full_page_writes off where pages can tear",
        _fpw_off,
        "Only a filesystem that never writes part of a page (ZFS with recordsize >= 8K, "
        "btrfs with copy-on-write) makes full_page_writes = off safe; elsewhere a crash "
        "mid-write leaves a torn page that WAL replay cannot repair: silent or "
        "unrecoverable corruption.",
        "Set full_page_writes = on (reload). Turn it off only on ZFS with recordsize >= 8K "
        "or copy-on-write btrfs.",
        PG_REL,
    ),
    Rule(
        "barrier-off",
        "filesystem",
        Severity.BAD,
        "write barriers disabled",
        _no_barrier,
        "Without barriers the filesystem does not flush the device's volatile cache, so "
        "an fsync'd commit or journal block may be lost or reordered in a power cut: "
        "filesystem and database corruption.",
        "Remove barrier=0/nobarrier from the mount options (unless every cache in the path "
        "is power-loss protected, and then say so in a comment).",
        EXT4,
    ),
    Rule(
        "fsync-off",
        "postgresql",
        Severity.BAD,
        "fsync off",
        _fsync_off,
        "With fsync = off, a crash of the OS or a power cut can corrupt the whole cluster.",
        "Set fsync = on; for speed on throwaway data use synchronous_commit = off instead.",
        PG_WAL,
    ),
    Rule(
        "synchronous-commit-off",
        "postgresql",
        Severity.WARN,
        "synchronous_commit off",
        _sync_commit_off,
        "A commit is acknowledged before its WAL is on disk: a crash loses the transactions "
        "of the last moments (up to 3 x wal_writer_delay), which clients were told had "
        "committed. No corruption: the cluster stays consistent.",
        "Keep it off only where losing the last commits is acceptable (set per transaction "
        "or per role for those); otherwise synchronous_commit = on.",
        PG_WAL,
    ),
    Rule(
        "zfs-sync-disabled",
        "zfs",
        Severity.BAD,
        "ZFS sync=disabled",
        _zfs_sync_disabled,
        "sync=disabled acknowledges fsync without writing through the ZIL: committed "
        "transactions are lost in a power cut.",
        "zfs set sync=standard on the dataset (add a power-loss-protected SLOG for speed).",
        "https://openzfs.github.io/openzfs-docs/Performance%20and%20Tuning/"
        "Workload%20Tuning.html#synchronous-i-o",
    ),
    Rule(
        "volatile-write-cache",
        "block",
        Severity.WARN,
        "volatile device write cache",
        _write_cache,
        "A write-back cache is safe only while every flush (fsync, journal commit) is "
        "honoured by each layer down to the media: a hypervisor, RAID controller or "
        "consumer SSD that acknowledges flushes early loses committed data in a power cut.",
        "Keep barriers on; check the device has power-loss protection (or the hypervisor "
        "honours flushes); never combine with barrier=0 or full_page_writes = off.",
        PG_REL,
    ),
    Rule(
        "openzfs-corruption-bug",
        "zfs",
        Severity.BAD,
        "OpenZFS version with a known corruption bug",
        _zfs_version_bug,
        "OpenZFS 2.2.0-2.2.1 (and 2.1.x with zfs_dmu_offset_next_sync=1) could return "
        "zeros after a copy (openzfs/zfs#15526).",
        "Upgrade to 2.2.2 or later (2.1.14 or later on 2.1); meanwhile set "
        "zfs_dmu_offset_next_sync=0.",
        "https://github.com/openzfs/zfs/issues/15526",
    ),
    Rule(
        "zfs-bclone-enabled",
        "zfs",
        Severity.BAD,
        "ZFS block cloning enabled on an affected release",
        _zfs_bclone,
        "Block cloning corrupted data in 2.2.x up to at least 2.2.3 (#15933); PostgreSQL "
        "clones files in pg_upgrade --clone, pg_combinebackup and file_copy_method=clone.",
        "Set zfs_bclone_enabled=0 until on a release with the fixes.",
        "https://github.com/openzfs/zfs/issues/15933",
    ),
    Rule(
        "zfs-primarycache-metadata",
        "zfs",
        Severity.WARN,
        "ARC caches metadata only",
        _primarycache,
        "PostgreSQL relies on the OS cache for most of its reads; with "
        "primarycache=metadata every shared_buffers miss goes to disk.",
        "zfs set primarycache=all on the data dataset.",
        OZ_WT,
    ),
    Rule(
        "zfs-recordsize-uncompressed",
        "zfs",
        Severity.WARN,
        "large records without compression",
        _recordsize_uncompressed,
        "A record much larger than PostgreSQL's 8 kB page is rewritten whole for each "
        "page: write amplification that compression would otherwise offset.",
        "Use recordsize=32K with compression=lz4 (or 8K-16K for write-heavy OLTP); "
        "benchmark it with `pgfsbench advise`. Only new files take the new recordsize.",
        OZ_WT,
    ),
    Rule(
        "cow-wal-init-zero",
        "postgresql",
        Severity.WARN,
        "WAL pre-zeroed or recycled on a copy-on-write filesystem",
        _cow_wal,
        "On copy-on-write filesystems zero-filling a new WAL segment writes it twice and "
        "recycling old segments gains nothing.",
        "Set wal_init_zero = off and wal_recycle = off (PostgreSQL 12+).",
        PG_WAL,
    ),
    Rule(
        "zfs-compression-off",
        "zfs",
        Severity.WARN,
        "ZFS compression off",
        _zfs_compression_off,
        "Compression (lz4) costs little CPU, stores incompressible blocks raw and cuts the "
        "bytes read and written.",
        "zfs set compression=lz4 (on zfs-fuse: lzjb).",
        OZ_WT,
    ),
    Rule(
        "atime-updates",
        "filesystem",
        Severity.WARN,
        "access-time updates on every read",
        _atime,
        "Updating atime turns reads into metadata writes.",
        "Mount with noatime (or relatime, the Linux default); on ZFS set atime=off.",
        OZ_WT,
    ),
    Rule(
        "tmpfs-not-durable",
        "filesystem",
        Severity.BAD,
        "data in RAM (tmpfs)",
        _tmpfs,
        "tmpfs lives in memory: every committed transaction and the whole cluster are "
        "gone at the next reboot or power cut, whatever fsync says.",
        "Move the data directory and pg_wal to a disk-backed filesystem; use tmpfs only "
        "for throwaway benchmarks (as pgfsbench's RAM ceiling).",
        PG_REL,
    ),
    Rule(
        "ext4-data-writeback",
        "filesystem",
        Severity.WARN,
        "ext4 data=writeback",
        _ext4_writeback,
        "data=writeback does not order data before metadata: after a crash, files written "
        "shortly before it may show stale data (PostgreSQL fsyncs its own files, so the "
        "risk is to what it does not fsync).",
        "Mount with data=ordered (the default).",
        EXT4,
    ),
    Rule(
        "btrfs-nodatacow",
        "filesystem",
        Severity.BAD,
        "btrfs nodatacow with full_page_writes off",
        _btrfs_nocow_fpw,
        "nodatacow updates in place without checksums, so a page can tear.",
        "Keep full_page_writes = on on btrfs nodatacow.",
        "https://btrfs.readthedocs.io/en/latest/ch-mount-options.html",
    ),
    Rule(
        "thp-always",
        "kernel",
        Severity.WARN,
        "transparent huge pages always",
        _thp,
        "PostgreSQL's documentation discourages THP: compaction and khugepaged cause "
        "latency spikes.",
        "echo never (or madvise) > "
        "/sys/kernel/mm/transparent_hugepage/enabled; use huge_pages for shared memory.",
        "https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-HUGE-PAGES",
    ),
    Rule(
        "dirty-gigabytes",
        "kernel",
        Severity.WARN,
        "gigabytes of dirty page cache allowed",
        _dirty,
        "With ratio-based limits on a large-memory host the kernel lets gigabytes of dirty "
        "data pile up, and a checkpoint's fsync must then write them all at once: TPS "
        "drops to 0 for seconds.",
        "Set vm.dirty_background_bytes = 64MB and vm.dirty_bytes = 512MB (sized to the "
        "device); prove it with `pgfsbench advise`.",
        "https://docs.kernel.org/admin-guide/sysctl/vm.html#dirty-background-bytes",
    ),
    Rule(
        "huge-pages-short",
        "kernel",
        Severity.BAD,
        "huge_pages = on without enough huge pages",
        _huge_pages,
        "With huge_pages = on the server refuses to start when the kernel cannot map its "
        "shared memory in huge pages.",
        "Reserve vm.nr_hugepages >= `postgres -C shared_memory_size_in_huge_pages`, or "
        "set huge_pages = try.",
        PG_KR + "#LINUX-HUGE-PAGES",
    ),
    Rule(
        "data-sync-retry-on",
        "postgresql",
        Severity.BAD,
        "data_sync_retry on",
        _data_sync_retry,
        "On Linux a failed fsync drops the dirty pages; retrying it reports success for "
        "data that never reached the disk.",
        "Set data_sync_retry = off (the default).",
        "https://wiki.postgresql.org/wiki/Fsync_Errors",
    ),
    Rule(
        "kernel-fsync-errors",
        "kernel",
        Severity.BAD,
        "kernel before writeback error reporting",
        _old_kernel,
        "Before Linux 4.13 a writeback error could be lost, so fsync reported success "
        "for data never written.",
        "Upgrade the kernel.",
        "https://wiki.postgresql.org/wiki/Fsync_Errors",
    ),
    Rule(
        "postgres-fsync-retry",
        "postgresql",
        Severity.BAD,
        "PostgreSQL before the fsync PANIC fix",
        _old_pg,
        "Releases before 11.2/10.7/9.6.12/9.5.16/9.4.21 retried a failed fsync and could "
        "lose writes.",
        "Upgrade to a current minor release.",
        "https://www.postgresql.org/docs/release/11.2/",
    ),
    Rule(
        "checkpoints-requested",
        "evidence",
        Severity.WARN,
        "checkpoints mostly requested",
        _checkpoints,
        "Checkpoints forced by WAL volume (not by checkpoint_timeout) come too often: more "
        "full-page images, more WAL and bursts of writes.",
        "Raise max_wal_size until most checkpoints are timed.",
        PG_WAL,
    ),
    Rule(
        "backend-fsyncs",
        "evidence",
        Severity.WARN,
        "backends fsync themselves",
        _backend_fsyncs,
        "Client backends fsync when the checkpointer's request queue is full: every such "
        "fsync stalls a query.",
        "Look at checkpoint settings and the device's write throughput.",
        "https://www.postgresql.org/docs/current/monitoring-stats.html#MONITORING-PG-STAT-IO-VIEW",
    ),
    Rule(
        "shared-buffers-memory",
        "postgresql",
        Severity.WARN,
        "shared_buffers vs memory",
        _shared_buffers,
        "shared_buffers over half of RAM (or with ZFS's ARC on top, over what the host "
        "has) leaves too little for backends and the OS cache; both layers cache the same "
        "pages.",
        "Size shared_buffers to about a quarter of RAM; cap zfs_arc_max so "
        "ARC + shared_buffers + backends fit.",
        OZ_WT,
    ),
    Rule(
        "swappiness",
        "kernel",
        Severity.WARN,
        "swappiness above 10",
        _swappiness,
        "A high swappiness lets the kernel swap out shared memory under cache pressure.",
        "Set vm.swappiness between 1 and 10.",
        "https://github.com/postgres-ai/postgres-howtos/blob/main/0088_how_to_tune_linux_"
        "parameters_for_oltp_postgres.md",
    ),
    Rule(
        "overcommit",
        "kernel",
        Severity.WARN,
        "memory overcommit allowed",
        _overcommit,
        "With heuristic overcommit the OOM killer may end a backend (or the postmaster), "
        "forcing crash recovery.",
        "Set vm.overcommit_memory = 2 with a suitable "
        "vm.overcommit_ratio, or protect the postmaster with oom_score_adj.",
        PG_KR + "#LINUX-MEMORY-OVERCOMMIT",
    ),
    Rule(
        "io-uring-unavailable",
        "postgresql",
        Severity.BAD,
        "io_method = io_uring where the kernel forbids it",
        _io_uring,
        "PostgreSQL 18 cannot use io_uring when the kernel disables it.",
        "Set io_method = worker, or allow io_uring (kernel.io_uring_disabled = 0).",
        "https://www.postgresql.org/docs/18/runtime-config-resource.html#GUC-IO-METHOD",
    ),
    Rule(
        "zfs-fuse",
        "zfs",
        Severity.WARN,
        "ZFS through FUSE",
        _zfs_fuse,
        "zfs-fuse is an old ZFS (pool version 23, no lz4) running in user space: its "
        "performance says nothing about OpenZFS in the kernel.",
        "Use OpenZFS's kernel module for production and for benchmarks that matter.",
        "https://openzfs.org",
    ),
    Rule(
        "zfs-logbias-wal",
        "zfs",
        Severity.WARN,
        "logbias=throughput on WAL",
        _logbias_wal,
        "logbias=throughput bypasses the SLOG and fragments small writes; WAL wants low latency.",
        "zfs set logbias=latency on the WAL dataset.",
        OZ_WT,
    ),
    Rule(
        "zfs-pool-full",
        "zfs",
        Severity.WARN,
        "ZFS pool over 90% full",
        _pool_full,
        "Above ~90% full ZFS switches to best-fit allocation and IOPS collapse.",
        "Free space or grow the pool; keep more than 10% free.",
        OZ_WT,
    ),
    Rule(
        "ext4-direct-io-6.1.64",
        "kernel",
        Severity.WARN,
        "kernel 6.1.64-65 with ext4",
        _ext4_direct_io_bug,
        "Linux 6.1.64 and 6.1.65 could write O_SYNC direct I/O at the wrong offset on ext4 "
        "(Debian bug #1057843).",
        "Upgrade to 6.1.66 or later.",
        "https://bugs.debian.org/1057843",
    ),
)

BY_ID = {r.id: r for r in RULES}
