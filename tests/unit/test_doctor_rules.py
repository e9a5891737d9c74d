"""Every doctor rule on constructed facts: one case where it fires, one where it passes.
A rule without a row here fails `test_every_rule_has_its_cases` (adding a rule is adding
a row to the rules table and a row here)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pgfsbench.advisor.advise import advise, device_size, fitting_scale, to_toml
from pgfsbench.advisor.doctor import examine, exit_status, report_json, select_rules
from pgfsbench.advisor.facts import Facts, PathFacts, PgFacts, mount_of, parse_conf
from pgfsbench.advisor.rules import BY_ID, RULES, Severity
from pgfsbench.system.mountinfo import MountInfo

GiB = 1 << 30


def path(
    fs: str = "ext4",
    options: str = "rw,relatime",
    role: str = "data directory",
    zfs: dict[str, str] | None = None,
    devices: dict[str, dict[str, str]] | None = None,
) -> PathFacts:
    source = "tank/pg" if fs == "zfs" else "/dev/sdb1"
    p = PathFacts(role, "/srv/pg", MountInfo("/srv", source, fs, options, "8:17"))
    if fs == "zfs":
        p.zfs_dataset = source
        p.zfs = {
            "recordsize": "131072",
            "compression": "lz4",
            "primarycache": "all",
            "atime": "off",
            "sync": "standard",
            "logbias": "latency",
            "used": str(GiB),
            "available": str(9 * GiB),
            **(zfs or {}),
        }
    p.devices = devices or {}
    return p


def facts(
    paths: list[PathFacts] | None = None,
    pg: dict[str, str] | None = None,
    source: str = "server",
    version: int = 150018,
    evidence: dict[str, Any] | None = None,
    vm: dict[str, str] | None = None,
    zfs: dict[str, Any] | None = None,
    kernel: str = "6.1.0-27-amd64",
    sysctl: dict[str, str] | None = None,
    huge: dict[str, int] | None = None,
) -> Facts:
    f = Facts(root=True)
    f.host = {"hostname": "db1", "kernel": kernel, "cpus": 8}
    f.memory = {"MemTotal": 16 * 1024 * 1024, "SwapTotal": 4 * 1024 * 1024}  # in kB
    f.vm = {
        "vm.dirty_background_ratio": "0",
        "vm.dirty_ratio": "0",
        "vm.dirty_background_bytes": str(64 << 20),
        "vm.dirty_bytes": str(512 << 20),
        "vm.swappiness": "1",
        "vm.overcommit_memory": "2",
        "vm.nr_hugepages": "0",
        "transparent_hugepage.enabled": "never",
        **(vm or {}),
    }
    f.sysctl = sysctl or {}
    f.huge_pages = huge or {"Hugepagesize": 2048, "HugePages_Total": 0, "HugePages_Free": 0}
    f.paths = paths if paths is not None else [path()]
    f.zfs = zfs or {}
    if pg is not None:
        f.pg = PgFacts(
            source,
            version,
            {
                "full_page_writes": "on",
                "fsync": "on",
                "wal_init_zero": "on",
                "wal_recycle": "on",
                "data_sync_retry": "off",
                "huge_pages": "try",
                "shared_buffers": "4GB",
                "max_wal_size": "1GB",
                "server_version": "15.18",
                **pg,
            },
            evidence or {},
            "/srv/pg",
        )
    return f


PG: dict[str, str] = {}
KERNEL_ZFS = {
    "kind": "kernel",
    "version": "2.2.6",
    "parameters": {"zfs_bclone_enabled": "0"},
    "arc": {"c_max": str(4 * GiB)},
}
WB = {"sda": {"write_cache": "write back", "rotational": "0"}}
WT = {"sda": {"write_cache": "write through", "rotational": "0"}}

# rule id -> (facts where it fires, facts where it passes)
CASES: dict[str, tuple[Callable[[], Facts], Callable[[], Facts]]] = {
    "fpw-off-torn-pages": (
        lambda: facts(pg={"full_page_writes": "off"}),
        lambda: facts([path("zfs", zfs={"recordsize": "8192"})], pg={"full_page_writes": "off"}),
    ),
    "barrier-off": (
        lambda: facts([path(options="rw,nobarrier")]),
        lambda: facts([path(options="rw,relatime,data=ordered")]),
    ),
    "fsync-off": (lambda: facts(pg={"fsync": "off"}), lambda: facts(pg=PG)),
    "synchronous-commit-off": (
        lambda: facts(pg={"synchronous_commit": "off"}),
        lambda: facts(pg={"synchronous_commit": "remote_apply"}),
    ),
    "zfs-sync-disabled": (
        lambda: facts([path("zfs", zfs={"sync": "disabled"})]),
        lambda: facts([path("zfs")]),
    ),
    "volatile-write-cache": (lambda: facts([path(devices=WB)]), lambda: facts([path(devices=WT)])),
    "openzfs-corruption-bug": (
        lambda: facts(zfs={**KERNEL_ZFS, "version": "2.2.0"}),
        lambda: facts(zfs=KERNEL_ZFS),
    ),
    "zfs-bclone-enabled": (
        lambda: facts(
            zfs={**KERNEL_ZFS, "version": "2.2.3", "parameters": {"zfs_bclone_enabled": "1"}}
        ),
        lambda: facts(zfs=KERNEL_ZFS),
    ),
    "zfs-primarycache-metadata": (
        lambda: facts([path("zfs", zfs={"primarycache": "metadata"})]),
        lambda: facts([path("zfs")]),
    ),
    "zfs-recordsize-uncompressed": (
        lambda: facts([path("zfs", zfs={"compression": "off"})]),
        lambda: facts([path("zfs", zfs={"recordsize": "8192", "compression": "off"})]),
    ),
    "cow-wal-init-zero": (
        lambda: facts([path("btrfs")], pg=PG),
        lambda: facts([path("btrfs")], pg={"wal_init_zero": "off", "wal_recycle": "off"}),
    ),
    "zfs-compression-off": (
        lambda: facts([path("zfs", zfs={"compression": "off"})]),
        lambda: facts([path("zfs")]),
    ),
    "atime-updates": (
        lambda: facts([path(options="rw,strictatime")]),
        lambda: facts([path(options="rw,noatime")]),
    ),
    "tmpfs-not-durable": (lambda: facts([path("tmpfs")]), lambda: facts([path("xfs")])),
    "ext4-data-writeback": (
        lambda: facts([path(options="rw,data=writeback")]),
        lambda: facts([path(options="rw,data=ordered")]),
    ),
    "btrfs-nodatacow": (
        lambda: facts([path("btrfs", "rw,nodatacow")], pg={"full_page_writes": "off"}),
        lambda: facts([path("btrfs", "rw,nodatacow")], pg=PG),
    ),
    "thp-always": (lambda: facts(vm={"transparent_hugepage.enabled": "always"}), lambda: facts()),
    "dirty-gigabytes": (
        lambda: facts(vm={"vm.dirty_background_bytes": "0", "vm.dirty_background_ratio": "10"}),
        lambda: facts(),
    ),
    "huge-pages-short": (
        lambda: facts(pg={"huge_pages": "on", "shared_buffers": "1GB"}),
        lambda: facts(
            pg={"huge_pages": "on", "shared_buffers": "1GB"},
            huge={"Hugepagesize": 2048, "HugePages_Total": 600, "HugePages_Free": 10},
        ),
    ),
    "data-sync-retry-on": (lambda: facts(pg={"data_sync_retry": "on"}), lambda: facts(pg=PG)),
    "kernel-fsync-errors": (lambda: facts(kernel="4.9.0-8-amd64"), lambda: facts()),
    "postgres-fsync-retry": (
        lambda: facts(pg={"server_version": "10.6"}, version=100006),
        lambda: facts(pg={"server_version": "10.7"}, version=100007),
    ),
    "checkpoints-requested": (
        lambda: facts(pg=PG, evidence={"checkpoints_timed": 3, "checkpoints_requested": 40}),
        lambda: facts(pg=PG, evidence={"checkpoints_timed": 40, "checkpoints_requested": 3}),
    ),
    "backend-fsyncs": (
        lambda: facts(pg=PG, evidence={"backend_fsyncs": 12}),
        lambda: facts(pg=PG, evidence={"backend_fsyncs": 0}),
    ),
    "shared-buffers-memory": (
        lambda: facts(pg={"shared_buffers": "12GB"}),
        lambda: facts(pg={"shared_buffers": "4GB"}),
    ),
    "swappiness": (lambda: facts(pg=PG, vm={"vm.swappiness": "60"}), lambda: facts(pg=PG)),
    "overcommit": (lambda: facts(pg=PG, vm={"vm.overcommit_memory": "0"}), lambda: facts(pg=PG)),
    "io-uring-unavailable": (
        lambda: facts(
            pg={"io_method": "io_uring"}, version=180001, sysctl={"kernel.io_uring_disabled": "2"}
        ),
        lambda: facts(
            pg={"io_method": "io_uring"}, version=180001, sysctl={"kernel.io_uring_disabled": "0"}
        ),
    ),
    "zfs-fuse": (
        lambda: facts([path("zfs")], zfs={"kind": "fuse"}),
        lambda: facts([path("zfs")], zfs=KERNEL_ZFS),
    ),
    "zfs-logbias-wal": (
        lambda: facts([path("zfs", role="pg_wal", zfs={"logbias": "throughput"})]),
        lambda: facts([path("zfs", role="pg_wal")]),
    ),
    "zfs-pool-full": (
        lambda: facts([path("zfs", zfs={"used": str(95 * GiB), "available": str(5 * GiB)})]),
        lambda: facts([path("zfs")]),
    ),
    "ext4-direct-io-6.1.64": (lambda: facts(kernel="6.1.64-1-amd64"), lambda: facts()),
}


def test_every_rule_has_its_cases_and_a_source() -> None:
    assert set(CASES) == set(BY_ID), set(BY_ID) ^ set(CASES)
    assert len(BY_ID) == len(RULES)
    for rule in RULES:
        assert rule.source.startswith("https://") and rule.why and rule.remedy


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_its_case_and_passes_on_the_other(rule_id: str) -> None:
    rule = BY_ID[rule_id]
    bad, good = CASES[rule_id]
    seen = rule.check(bad())
    assert seen, f"{rule_id} did not fire"
    assert all(isinstance(s, str) and s for s in seen)
    assert rule.check(good()) == [], f"{rule_id} fired on its good case"


def test_a_distributions_build_that_carries_the_zfs_fix_is_not_called_corrupting() -> None:
    params = {"zfs_dmu_offset_next_sync": "1"}
    debian = facts(
        zfs={**KERNEL_ZFS, "version": "2.1.11", "build": "2.1.11-1+deb12u1", "parameters": params}
    )
    assert BY_ID["openzfs-corruption-bug"].check(debian) == []
    upstream = facts(
        zfs={**KERNEL_ZFS, "version": "2.1.11", "build": "2.1.11", "parameters": params}
    )
    (found,) = BY_ID["openzfs-corruption-bug"].check(upstream) or []
    assert "2.1.14" in found and "distribution" not in found
    other = facts(
        zfs={**KERNEL_ZFS, "version": "2.1.5", "build": "2.1.5-1ubuntu6", "parameters": params}
    )
    (hedged,) = BY_ID["openzfs-corruption-bug"].check(other) or []
    assert "may carry the fix" in hedged and "2.1.5-1ubuntu6" in hedged


def test_a_rule_without_its_facts_does_not_apply() -> None:
    bare = facts(paths=[])  # no PostgreSQL, no paths, no ZFS
    for rid in (
        "fpw-off-torn-pages",
        "fsync-off",
        "zfs-primarycache-metadata",
        "checkpoints-requested",
        "tmpfs-not-durable",
        "openzfs-corruption-bug",
    ):
        assert BY_ID[rid].check(bare) is None, rid


def test_settings_read_from_files_use_defaults_only_when_a_file_was_read() -> None:
    unread = PgFacts("files", 150000, {}, {}, "/srv/pg", defaults_apply=False)
    assert unread.get("full_page_writes") is None and unread.on("fsync") is None
    read = PgFacts("files", 150000, {"shared_buffers": "16384"}, {}, "/srv/pg", defaults_apply=True)
    assert read.on("full_page_writes") is True
    assert read.bytes("shared_buffers") == 16384 * 8192  # a bare number is in 8 kB pages


def test_exit_status_and_selection() -> None:
    f = facts(pg={"full_page_writes": "off"})
    found, skipped = examine(f, select_rules())
    assert exit_status(found, True) == 2 and exit_status(found, False) == 3
    only, _ = examine(f, select_rules(only=["thp-*"]))
    assert {x.rule for x in only} == {"thp-always"} and exit_status(only, True) == 0
    rest, _ = examine(f, select_rules(ignore=["fpw-*", "*overcommit*", "swappiness"]))
    assert max(x.severity for x in rest) < Severity.BAD
    doc: Any = report_json(f, found, skipped, 2)
    assert doc["counts"]["BAD"] >= 1 and doc["facts"]["postgresql"]["source"] == "server"


def test_parse_conf_later_lines_win_and_quotes_and_comments() -> None:
    text = (
        "# a comment\nfull_page_writes = on\nfull_page_writes=off   # tried\n"
        "shared_buffers '2GB'\nlog_line_prefix = '%m [%p] it''s'\ninclude 'x.conf'\n"
    )
    conf = parse_conf(text)
    assert conf == {
        "full_page_writes": "off",
        "shared_buffers": "2GB",
        "log_line_prefix": "%m [%p] it's",
    }


def test_mount_of_picks_the_deepest_mount() -> None:
    table = [
        MountInfo("/", "/dev/vda1", "ext4", "rw"),
        MountInfo("/srv", "/dev/sdb1", "xfs", "rw"),
        MountInfo("/srvx", "/dev/sdc1", "xfs", "rw"),
    ]
    assert mount_of("/srv/pg/data", table) == table[1]
    assert mount_of("/srvx/pg", table) == table[2]
    assert mount_of("/var/lib", table) == table[0]


def test_advice_for_unsafe_ext4_and_for_zfs_validates_as_a_spec(tmp_path: Any) -> None:
    from pgfsbench.spec.loading import load_spec

    f = facts([path(options="rw,nobarrier,data=writeback")], pg={"full_page_writes": "off"})
    found, skipped = examine(f, select_rules())
    advice = advise(report_json(f, found, skipped, 2), None, 40 * GiB, scale=2)
    spec: Any = advice.spec
    assert spec["storage"]["ext4-today"]["mount_options"] == ["nobarrier", "data=writeback"]
    assert "mount_options" not in spec["storage"]["ext4-safe-options"]
    assert spec["postgres"]["fpw-on"]["settings"]["full_page_writes"] == "on"
    # scale 2 needs 128 MiB with the load's WAL: a quarter more, rounded up to a GiB
    assert spec["storage"]["ext4-today"]["device"] == "loop:1G"
    target = tmp_path / "a.toml"
    target.write_text(to_toml(advice))
    loaded = load_spec(target)
    assert set(loaded.spec.storage) == {"ext4-today", "ext4-safe-options", "ext4-noatime"}

    z = facts(
        [path("zfs", zfs={"primarycache": "metadata", "recordsize": "131072"})],
        pg=PG,
        zfs={"kind": "fuse"},
    )
    zf, zs = examine(z, select_rules())
    zadvice = advise(report_json(z, zf, zs, 1), None, 8 * GiB)
    zspec: Any = zadvice.spec
    props = zspec["storage"]["rs16k-compressed"]["data"]["properties"]
    assert props["primarycache"] == "all" and props["compression"] == "lzjb"
    assert zspec["storage"]["zfs-today"]["data"]["properties"]["recordsize"] == "128K"
    assert "fpw-off" in zspec["postgres"]
    target.write_text(to_toml(zadvice))
    assert "rs8k-compressed" in load_spec(target).spec.storage


def test_sizes_fit_the_free_space() -> None:
    assert device_size(None) == 4 * GiB
    assert device_size(3 * GiB) == 1 * GiB  # never below 1 GiB
    assert device_size(10 * GiB) == 5 * GiB
    assert fitting_scale(1 * GiB, None) == 25
    assert fitting_scale(16 * GiB, 2 * GiB) == 32  # a quarter of RAM
    assert fitting_scale(100 * GiB, None) == 100


def test_ok_says_what_was_observed_and_skipped_rules_say_why() -> None:
    """`doctor --ok` printed the failure's title next to OK ("OK fsync-off: fsync off");
    swappiness warned on a host without swap."""
    from pgfsbench.advisor.doctor import why_skipped
    from pgfsbench.advisor.rules import BY_ID

    found, _ = examine(facts(pg=PG), select_rules(only=["fsync-off", "thp-always"]))
    seen = {x.rule: x.seen for x in found}
    assert seen == {"fsync-off": "fsync = on", "thp-always": "transparent_hugepage = never"}
    no_swap = facts(pg=PG, vm={"vm.swappiness": "60"})
    no_swap.memory = {"MemTotal": 16 * 1024 * 1024, "SwapTotal": 0}
    found, skipped = examine(no_swap, select_rules(only=["swappiness"]))
    assert found == [] and skipped == ["swappiness"]
    assert why_skipped(BY_ID["swappiness"], no_swap) == "no swap on this host"
    no_pg = facts()
    _, skipped = examine(no_pg, select_rules(only=["fsync-off"]))
    assert why_skipped(BY_ID[skipped[0]], no_pg).startswith("no PostgreSQL read")


def test_full_page_writes_off_is_safe_on_copy_on_write_btrfs_only() -> None:
    """Copy-on-write btrfs writes a page anew, never over itself: it cannot tear one."""
    rule = BY_ID["fpw-off-torn-pages"]
    cow = facts([path("btrfs", options="rw,ssd")], pg={"full_page_writes": "off"})
    nocow = facts([path("btrfs", options="rw,nodatacow")], pg={"full_page_writes": "off"})
    assert rule.check(cow) == []
    assert rule.check(nocow)
