from pathlib import Path
from typing import Any, cast

import pytest

from pgfsbench.spec import ZfsDataset, ZfsPool, ZfsStorage
from pgfsbench.storage.zfs import (
    FUSE_PARAMETERS,
    PropertySupport,
    ZfsDriver,
    ZfsImplementation,
    fuse_daemon_options,
    parse_property_table,
    resolved_properties,
    zpool_create_argv,
)
from pgfsbench.storage.zfs.fuse import _holds_no_pool
from pgfsbench.system.errors import CapabilityError, CommandError
from pgfsbench.system.runner import Completed, Runner

DATA = Path(__file__).resolve().parents[1] / "data" / "zfs"


def fuse_impl() -> ZfsImplementation:
    table = parse_property_table((DATA / "fuse_zfs_get_usage.txt").read_text())
    return ZfsImplementation("fuse", "0.7.0-25+b1", "23", table, tuple(sorted(FUSE_PARAMETERS)))


def test_property_table_of_zfs_fuse() -> None:
    impl = fuse_impl()
    assert impl.properties["compression"].values == "on | off | lzjb | gzip | gzip-[1-9] | zle"
    assert impl.properties["recordsize"].editable
    assert not impl.properties["used"].editable
    assert "logicalused" not in impl.properties and "redundant_metadata" not in impl.properties


@pytest.mark.parametrize(
    ("prop", "value", "ok"),
    [
        ("compression", "lz4", False),
        ("compression", "gzip-6", True),
        ("compression", "gzip-10", False),
        ("recordsize", "16K", True),
        ("recordsize", "1M", False),
        ("recordsize", "24k", False),
        ("atime", "off", True),
        ("logbias", "throughput", True),
        ("primarycache", "metadata", True),
    ],
)
def test_values_accepted_by_zfs_fuse(prop: str, value: str, ok: bool) -> None:
    assert fuse_impl().properties[prop].accepts(value) is ok


def test_openzfs_style_tokens() -> None:
    s = PropertySupport(
        "compression", True, "on | off | lz4 | zstd | zstd-[1-19] | zstd-fast-[20-100,by 10]"
    )
    assert s.accepts("zstd-19") and s.accepts("zstd-fast-30")
    assert not s.accepts("zstd-20") and not s.accepts("zstd-fast-35")


def zfs(**data: object) -> ZfsStorage:
    return ZfsStorage(fs="zfs", data=ZfsDataset(properties=data))


def test_unsupported_value_is_refused_naming_what_is_supported() -> None:
    with pytest.raises(CapabilityError) as info:
        ZfsDriver().validate(zfs(compression="lz4"), fuse_impl())
    msg = str(info.value)
    assert "compression=lz4" in msg and "zfs-fuse" in msg and "lzjb" in msg


def test_per_implementation_values() -> None:
    spec = zfs(compression={"kernel": "lz4", "fuse": "gzip-1"}, recordsize="16K")
    impl = fuse_impl()
    ZfsDriver().validate(spec, impl)
    assert resolved_properties(spec.data.properties, impl, "data") == {
        "compression": "gzip-1",
        "recordsize": "16K",
    }


def test_unknown_property_and_module_parameter_on_fuse() -> None:
    with pytest.raises(CapabilityError, match="redundant_metadata"):
        ZfsDriver().validate(zfs(redundant_metadata="most"), fuse_impl())
    spec = ZfsStorage(fs="zfs", module_parameters={"zfs_txg_timeout": 1})
    with pytest.raises(CapabilityError, match="zfs_txg_timeout"):
        ZfsDriver().validate(spec, fuse_impl())


def test_fuse_daemon_options_from_module_parameters() -> None:
    assert fuse_daemon_options({"zfs_arc_max": "512M", "zfs_prefetch_disable": 1}) == [
        "--max-arc-size",
        "512",
        "--zfs-prefetch-disable",
    ]
    assert fuse_daemon_options({"zfs_prefetch_disable": 0}) == []


def test_zpool_create_argv_layouts() -> None:
    argv = zpool_create_argv(
        "pgfsb_x",
        "mirror",
        ["/dev/loop1", "/dev/loop2"],
        ["/dev/loop3", "/dev/loop4"],
        "mirror",
        ["/dev/loop5"],
        12,
        {},
    )
    assert argv[:6] == ["zpool", "create", "-o", "cachefile=none", "-m", "none"]
    tail = argv[argv.index("pgfsb_x") :]
    assert tail == [
        "pgfsb_x",
        "mirror",
        "/dev/loop1",
        "/dev/loop2",
        "log",
        "mirror",
        "/dev/loop3",
        "/dev/loop4",
        "cache",
        "/dev/loop5",
    ]
    assert "ashift=12" in argv
    raidz = zpool_create_argv("p", "raidz1", ["a", "b", "c"], [], "stripe", [], None, {})
    assert raidz[-4:] == ["raidz", "a", "b", "c"]


def test_pool_layout_validation() -> None:
    ZfsPool(layout="stripe", devices=["loop:1G", "loop:1G"])
    with pytest.raises(ValueError):
        ZfsPool(layout="single", devices=["loop:1G", "loop:1G"])


class _Zpool:
    """A runner whose `zpool list` answers as given (or fails to run)."""

    def __init__(self, code: int | None, out: str = "") -> None:
        self.code, self.out = code, out

    def run(self, argv: list[str], *, timeout: float, check: bool = True) -> Completed:
        assert argv[:2] == ["zpool", "list"]
        if self.code is None:
            raise CommandError(argv, None, "timed out")
        return Completed(tuple(argv), self.code, self.out, "", 0.01)


@pytest.mark.parametrize(
    ("code", "out", "empty"),
    [
        (0, "", True),  # no pool: nothing to write back, ended at once
        (0, "\n", True),
        (0, "pgfsb-1-data\n", False),  # a pool left (its destroy failed): asked to stop
        (1, "", False),  # no answer: asked to stop
        (None, "", False),
    ],
)
def test_zfs_fuse_is_ended_at_once_only_when_it_holds_no_pool(
    code: int | None, out: str, empty: bool
) -> None:
    assert _holds_no_pool(cast(Runner, _Zpool(code, out))) is empty


def test_zfs_fuse_sizes_are_read_as_it_prints_them() -> None:
    """zfs-fuse has no `zpool list -p`: its sizes come as "842M", "3.97G" (storage/zfs/txg.py
    reads the pool's size to commit at each eighth of it written)."""
    from pgfsbench.units import parse_human

    assert parse_human("842M") == 842 << 20
    assert parse_human("3.97G") == int(3.97 * (1 << 30))
    assert parse_human("556K\n") == 556 << 10
    assert parse_human("0") == 0
    assert parse_human("-") is None and parse_human("") is None


def test_a_zfs_fuse_pool_is_committed_when_an_eighth_of_it_is_written(monkeypatch: Any) -> None:
    """Every 5 s, and sooner once the pool's devices have been written an eighth of its size:
    on 2026-12-01 a 256 MiB pool hung within 5 s at 4,400 tps with commits every 5 s alone."""
    import threading
    import time

    from pgfsbench.storage.zfs import txg

    written = {"n": 0}
    commits: list[float] = []
    monkeypatch.setattr(txg, "POLL_S", 0.01)
    monkeypatch.setattr(txg, "allocated", lambda pool, prop="allocated": 256 << 20)
    monkeypatch.setattr(txg, "written", lambda dev: written["n"])

    def commit(pool: str) -> bool:
        commits.append(time.monotonic())
        return True

    monkeypatch.setattr(txg, "commit", commit)
    txg.start("pgfsb_t", ["/dev/loop9"])
    try:
        time.sleep(0.1)
        assert commits == []  # nothing written, 5 s not passed
        written["n"] = 31 << 20
        time.sleep(0.1)
        assert commits == []  # below an eighth (32 MiB)
        written["n"] = 33 << 20
        deadline = time.monotonic() + 2
        while not commits and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(commits) == 1
    finally:
        made = txg.stop("pgfsb_t")
    assert made == {"commits": 1, "failed": 0}
    assert txg.running() == [] and not any(t.name == "txg pgfsb_t" for t in threading.enumerate())
