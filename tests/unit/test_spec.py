from pathlib import Path

import pytest

from pgfsbench.plan import make_plan
from pgfsbench.spec import expand, load_spec
from pgfsbench.system.errors import SpecError, UsageError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def error_of(tmp_path: Path, text: str, sets: tuple[str, ...] = ()) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(write(tmp_path, text), sets)
    return str(info.value)


def test_examples_are_valid() -> None:
    specs = sorted(EXAMPLES.glob("*.toml"))
    assert {p.name for p in specs} >= {"quick.toml", "posette-2024.toml", "dbi-2024.toml"}
    for spec in specs:
        assert expand(load_spec(spec).spec), spec


def test_quick_example_is_the_five_cells_of_the_issue() -> None:
    cells = expand(load_spec(EXAMPLES / "quick.toml").spec)
    assert [c.fs for c in cells] == ["ext4", "ext4", "xfs", "btrfs", "tmpfs"]
    assert cells[1].storage.mount_options == ["noatime", "nodiratime"]


def test_dbi_example_pairs_zfs_with_its_settings_only() -> None:
    ids = [c.id for c in expand(load_spec(EXAMPLES / "dbi-2024.toml").spec)]
    assert ids == ["ext4/default/default/tpcb-like", "ext4/default/default/simple-update",
                   "zfs-compressed/zfs/default/tpcb-like",
                   "zfs-compressed/zfs/default/simple-update"]


def test_unknown_key_names_file_path_and_allowed_keys(tmp_path: Path) -> None:
    msg = error_of(tmp_path, '[storage.a]\nfs = "ext4"\nmount_opts = ["noatime"]\n')
    assert "spec.toml: storage.a.mount_opts: unknown key" in msg
    assert "mount_options" in msg and "mkfs_options" in msg


def test_unknown_key_inside_zfs_pool(tmp_path: Path) -> None:
    msg = error_of(tmp_path, '[storage.z]\nfs = "zfs"\n[storage.z.pool]\nlayuot = "mirror"\n')
    assert "storage.z.pool.layuot: unknown key" in msg and "layout" in msg


def test_bad_fs_and_device(tmp_path: Path) -> None:
    assert "fs must be one of" in error_of(tmp_path, '[storage.a]\nfs = "ext5"\n')
    msg = error_of(tmp_path, '[storage.a]\nfs = "xfs"\ndevice = "sdb"\n')
    assert "storage.a.device" in msg and "loop:SIZE" in msg


def test_invalid_toml_is_one_line_with_position(tmp_path: Path) -> None:
    msg = error_of(tmp_path, "[storage.a\nfs = 1\n")
    assert "not valid TOML" in msg and "line 1" in msg


def test_reserved_postgres_settings_are_refused(tmp_path: Path) -> None:
    msg = error_of(tmp_path, '[storage.a]\nfs = "tmpfs"\n[postgres.p]\n'
                             'settings = { listen_addresses = "*" }\n')
    assert "postgres.p.settings" in msg and "private socket" in msg


def test_zfs_layout_needs_enough_devices(tmp_path: Path) -> None:
    msg = error_of(tmp_path, '[storage.z]\nfs = "zfs"\n[storage.z.pool]\nlayout = "raidz2"\n'
                             'devices = ["loop:1G", "loop:1G"]\n')
    assert "raidz2" in msg and "at least 3" in msg


def test_exclude_and_include_express_zfs_only_with_cow_settings(tmp_path: Path) -> None:
    text = """
[storage.ext4]
fs = "ext4"
[storage.zfs-a]
fs = "zfs"
[storage.zfs-b]
fs = "zfs"
[postgres.default]
[postgres.cow]
settings = { full_page_writes = false }
[[matrix.exclude]]
storage = "zfs-*"
[[matrix.include]]
storage = "zfs-*"
postgres = "cow"
"""
    ids = [c.id for c in expand(load_spec(write(tmp_path, text)).spec)]
    assert ids == ["ext4/default/default/tpcb-like", "ext4/cow/default/tpcb-like",
                   "zfs-a/cow/default/tpcb-like", "zfs-b/cow/default/tpcb-like"]


def test_set_overrides_defaults_and_wins_over_workload_values(tmp_path: Path) -> None:
    text = '[storage.a]\nfs = "tmpfs"\n[workload.w]\nduration = "10m"\nclients = 64\n'
    loaded = load_spec(write(tmp_path, text), ("duration=5s", "scale=3", "clients=2"))
    (cell,) = expand(loaded.spec)
    assert cell.workload.duration_s == 5.0
    assert cell.workload.clients == 2
    assert cell.workload.threads == 2  # threads never exceed clients
    assert loaded.spec.defaults.scale == 3


def test_set_with_a_dotted_path(tmp_path: Path) -> None:
    loaded = load_spec(write(tmp_path, '[storage.a]\nfs = "ext4"\n'),
                       ("storage.a.device=loop:512M",))
    assert loaded.spec.storage["a"].device == "loop:512M"  # type: ignore[union-attr]


def test_bad_set_is_explained(tmp_path: Path) -> None:
    p = write(tmp_path, '[storage.a]\nfs = "tmpfs"\n')
    with pytest.raises(SpecError, match="unknown default"):
        load_spec(p, ("scael=2",))
    with pytest.raises(SpecError, match="KEY=VALUE"):
        load_spec(p, ("scale",))
    with pytest.raises(SpecError, match=r"defaults\.duration"):
        load_spec(p, ("duration=soon",))


def test_plan_order_interleaves_repetitions_and_only_filters() -> None:
    loaded = load_spec(EXAMPLES / "posette-2024.toml", ("repetitions=2",))
    plan = make_plan(loaded, only=["zfs*"])
    assert {c.fs for c in plan.cells} == {"zfs"} and len(plan.cells) == 5
    # repetition-major: every cell once before any cell twice
    assert [r.repetition for r in plan.runs] == [1] * 5 + [2] * 5
    assert plan.needs_root and plan.estimated_seconds > 0
    with pytest.raises(UsageError, match="no cell matches"):
        make_plan(loaded, only=["nothing*"])
