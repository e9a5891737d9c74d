from pathlib import Path

import pytest

from pgfsbench.plan import make_plan
from pgfsbench.spec import Ext4Storage, expand, load_spec
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
    assert isinstance(cells[1].storage, Ext4Storage)
    assert cells[1].storage.mount_options == ["noatime", "nodiratime"]


def test_dbi_example_pairs_zfs_with_its_settings_only() -> None:
    ids = [c.id for c in expand(load_spec(EXAMPLES / "dbi-2024.toml").spec)]
    assert ids == [
        "ext4/default/default/tpcb-like",
        "ext4/default/default/simple-update",
        "zfs-compressed/zfs/default/tpcb-like",
        "zfs-compressed/zfs/default/simple-update",
    ]


def test_unknown_key_names_file_path_and_allowed_keys(tmp_path: Path) -> None:
    msg = error_of(tmp_path, '[storage.a]\nfs = "ext4"\nmount_opts = ["noatime"]\n')
    assert (
        "spec.toml, line 3: storage.a.mount_opts: unknown key: did you mean 'mount_options'?" in msg
    )
    assert "mount_options" in msg and "mkfs_options" in msg


def test_a_bad_value_from_the_command_line_blames_the_option_in_words(tmp_path: Path) -> None:
    """--set repetitions=three: the option is at fault, not the file, and pydantic's union
    internals (literal['auto']) are not the message."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[storage.a]\nfs = "ext4"\n')
    with pytest.raises(SpecError) as err:
        load_spec(spec, ["repetitions=three"])
    msg = str(err.value)
    assert msg.startswith(
        "--set repetitions=three: defaults.repetitions: should be a valid integer"
    ), msg
    assert "or 'auto' (got 'three')" in msg and "literal" not in msg
    assert str(spec) not in msg
    with pytest.raises(SpecError, match="did you mean 'repetitions'"):
        load_spec(spec, ["repetiton=3"])


def test_an_error_inside_an_inline_table_says_its_line(tmp_path: Path) -> None:
    msg = error_of(
        tmp_path, '[defaults]\nscale = 2\n[storage.e]\nfs = "ext4"\nlimits = { write_mbpz = 3 }\n'
    )
    assert (
        "spec.toml, line 5: storage.e.limits.write_mbpz: unknown key: did you mean "
        "'write_mbps'?" in msg
    )


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
    msg = error_of(
        tmp_path, '[storage.a]\nfs = "tmpfs"\n[postgres.p]\nsettings = { listen_addresses = "*" }\n'
    )
    assert "postgres.p.settings" in msg and "private socket" in msg


def test_zfs_layout_needs_enough_devices(tmp_path: Path) -> None:
    msg = error_of(
        tmp_path,
        '[storage.z]\nfs = "zfs"\n[storage.z.pool]\nlayout = "raidz2"\n'
        'devices = ["loop:1G", "loop:1G"]\n',
    )
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
    assert ids == [
        "ext4/default/default/tpcb-like",
        "ext4/cow/default/tpcb-like",
        "zfs-a/cow/default/tpcb-like",
        "zfs-b/cow/default/tpcb-like",
    ]


def test_set_overrides_defaults_and_wins_over_workload_values(tmp_path: Path) -> None:
    text = '[storage.a]\nfs = "tmpfs"\n[workload.w]\nduration = "10m"\nclients = 64\n'
    loaded = load_spec(write(tmp_path, text), ("duration=5s", "scale=3", "clients=2"))
    (cell,) = expand(loaded.spec)
    assert cell.workload.duration_s == 5.0
    assert cell.workload.clients == 2
    assert cell.workload.threads == 2  # threads never exceed clients
    assert loaded.spec.defaults.scale == 3


def test_set_with_a_dotted_path(tmp_path: Path) -> None:
    loaded = load_spec(
        write(tmp_path, '[storage.a]\nfs = "ext4"\n'), ("storage.a.device=loop:512M",)
    )
    storage = loaded.spec.storage["a"]
    assert isinstance(storage, Ext4Storage) and storage.device == "loop:512M"


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


def test_setting_names_are_case_insensitive_and_checked(tmp_path: Path) -> None:
    for name in (
        "Listen_Addresses",
        "LISTEN_ADDRESSES",
        "Port",
        "unix_socket_DIRECTORIES",
        "include",
        "log_line_prefix",
    ):
        msg = error_of(
            tmp_path, f'[storage.a]\nfs = "tmpfs"\n[postgres.p]\nsettings = {{ {name} = "*" }}\n'
        )
        assert "postgres.p.settings" in msg and name in msg, msg
    msg = error_of(
        tmp_path,
        '[storage.a]\nfs = "tmpfs"\n[postgres.p]\nsettings = { "shared buffers" = "1GB" }\n',
    )
    assert "not a setting name" in msg
    msg = error_of(
        tmp_path,
        '[storage.a]\nfs = "tmpfs"\n[postgres.p]\n'
        'settings = { shared_buffers = "1GB", Shared_Buffers = "2GB" }\n',
    )
    assert "the same setting" in msg


def test_a_value_cannot_inject_a_line(tmp_path: Path) -> None:
    msg = error_of(
        tmp_path,
        '[storage.a]\nfs = "tmpfs"\n[postgres.p]\n'
        "settings = { work_mem = \"4MB\\nlisten_addresses = '*'\" }\n",
    )
    assert "control characters" in msg
    from pgfsbench.postgres.instance import conf_value, render_conf
    from pgfsbench.system.errors import InstanceError

    assert conf_value("it's \\ here") == "'it''s \\\\ here'"
    with pytest.raises(InstanceError):
        render_conf(Path("/s"), 5432, {"work_mem": "4MB\nport = 1"})
    with pytest.raises(InstanceError):
        render_conf(Path("/s"), 5432, {"Listen_Addresses": "*"})


def test_byte_sysctls_take_sizes_and_others_take_integers(tmp_path: Path) -> None:
    base = '[storage.a]\nfs = "tmpfs"\n[kernel.k]\nsysctl = { '
    spec = load_spec(
        write(
            tmp_path,
            base + '"vm.dirty_background_bytes" = "32MB", '
            '"vm.min_free_kbytes" = "64M", '
            '"vm.swappiness" = 1.0, '
            '"kernel.sched_x" = "1 2 3" }\n',
        )
    ).spec
    assert spec.kernel["k"].sysctl == {
        "vm.dirty_background_bytes": 33554432,
        "vm.min_free_kbytes": 65536,
        "vm.swappiness": 1,
        "kernel.sched_x": "1 2 3",
    }
    assert "integer" in error_of(tmp_path, base + '"vm.swappiness" = "low" }\n')
    assert "size such as 64MB" in error_of(tmp_path, base + '"vm.dirty_bytes" = "lots" }\n')
    assert "does not fit" in error_of(tmp_path, base + '"vm.dirty_bytes" = 1e30 }\n')
    assert "does not fit" in error_of(
        tmp_path, base + '"vm.dirty_bytes" = 99999999999999999999999 }\n'
    )


def test_durations_are_seconds_everywhere(tmp_path: Path) -> None:
    text = (
        '[defaults]\nduration = 30\nwarmup = 2.5\nstall_timeout = "1m"\n'
        '[storage.a]\nfs = "tmpfs"\n[workload.w]\nduration = "90s"\n'
    )
    spec = load_spec(write(tmp_path, text)).spec
    assert spec.defaults.duration == 30.0 and spec.defaults.warmup == 2.5
    assert spec.defaults.stall_timeout == 60.0 and spec.workload["w"].duration == 90.0
    loaded = load_spec(write(tmp_path, '[storage.a]\nfs = "tmpfs"\n'), ("duration=45",))
    assert expand(loaded.spec)[0].workload.duration_s == 45.0
    assert "duration" in error_of(
        tmp_path, '[defaults]\nduration = true\n[storage.a]\nfs = "tmpfs"\n'
    )
    assert "at least 1 s" in error_of(
        tmp_path, '[defaults]\nduration = 0\n[storage.a]\nfs = "tmpfs"\n'
    )


def test_integers_are_bounded_before_the_store_sees_them(tmp_path: Path) -> None:
    for key, value in (("scale", 10**20), ("clients", 0), ("repetitions", 10**6), ("threads", -1)):
        msg = error_of(tmp_path, f'[defaults]\n{key} = {value}\n[storage.a]\nfs = "tmpfs"\n')
        assert f"defaults.{key}" in msg, msg


def test_a_spec_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    p = tmp_path / "latin1.toml"
    p.write_bytes('name = "caf\xe9"\n[storage.a]\nfs = "tmpfs"\n'.encode("latin-1"))
    with pytest.raises(SpecError, match=r"not UTF-8 text \(byte 0xe9 at offset 11\)"):
        load_spec(p)
    with pytest.raises(SpecError, match="is a directory"):
        load_spec(tmp_path)


def test_sweeps_expand_into_cells_named_by_what_varies(tmp_path: Path) -> None:
    text = (
        '[defaults]\nclients = [4, 32]\nscale = 2\n[storage.a]\nfs = "tmpfs"\n'
        '[storage.b]\nfs = "tmpfs"\n[workload.w]\n[workload.r]\nbuiltin = "select-only"\n'
        'scale = [1, 3]\n[[matrix.exclude]]\nstorage = "b"\nclients = 32\n'
    )
    cells = expand(load_spec(write(tmp_path, text)).spec)
    ids = [c.id for c in cells]
    assert ids[:2] == [
        "a/default/default/w@scale=2,clients=4",
        "a/default/default/w@scale=2,clients=32",
    ]
    assert "b/default/default/r@scale=3,clients=4" in ids
    assert not any(i.startswith("b/") and "clients=32" in i for i in ids)
    assert len(ids) == 2 * 1 + 2 * 2 + 1 + 2  # a: w x2 clients, r x2 scales x2; b: w, r x2
    assert {c.workload.threads for c in cells if c.workload.clients == 4} == {2}
    msg = error_of(tmp_path, '[defaults]\nclients = [4, 4]\n[storage.a]\nfs = "tmpfs"\n')
    assert "appears twice" in msg


def test_devices_named_twice_or_missing_are_refused_by_plan(tmp_path: Path) -> None:
    twice = (
        '[storage.a]\nfs = "ext4"\ndevice = "/dev/null"\n[storage.a.wal]\nfs = "xfs"\n'
        'device = "/dev/null"\n'
    )
    with pytest.raises(UsageError, match="named twice"):
        make_plan(load_spec(write(tmp_path, twice)))
    missing = '[storage.a]\nfs = "ext4"\ndevice = "/dev/pgfsb-no-such-disk"\n'
    with pytest.raises(UsageError, match="does not exist"):
        make_plan(load_spec(write(tmp_path, missing)))
    assert "loop:SIZE" in error_of(
        tmp_path, '[storage.a]\nfs = "ext4"\ndevice = "/dev/../etc/passwd"\n'
    )


def test_observer_scheduling_policy_is_batch_unless_told(tmp_path: Path) -> None:
    base = '[storage.a]\nfs = "tmpfs"\n'
    assert load_spec(write(tmp_path, base)).spec.defaults.observer_sched == "batch"
    told = load_spec(write(tmp_path, base), ("observer_sched=normal",)).spec
    assert told.defaults.observer_sched == "normal"
    msg = error_of(tmp_path, '[defaults]\nobserver_sched = "idle"\n' + base)
    assert "observer_sched" in msg


def test_a_dump_or_a_bulk_load_has_no_rate_in_its_id(tmp_path: Path) -> None:
    """rate = ["max", "75%"] sweeps the transaction workloads only."""
    loaded = load_spec(
        write(
            tmp_path,
            '[defaults]\nrate = ["max", "75%"]\n'
            '[storage.e]\nfs = "ext4"\n[workload.tpcb]\n'
            'builtin = "tpcb-like"\n[workload.dump]\n'
            'tool = "pg_dump"\n[workload.load]\ntool = "copy"\n',
        )
    )
    ids = [c.id for c in expand(loaded.spec)]
    assert [i for i in ids if "/tpcb" in i] == [
        "e/default/default/tpcb@rate=max",
        "e/default/default/tpcb@rate=75%",
    ]
    assert [i for i in ids if "/tpcb" not in i] == [
        "e/default/default/dump",
        "e/default/default/load",
    ]


def test_the_estimate_counts_what_a_capped_device_takes_to_prepare(tmp_path: Path) -> None:
    """On an emulated HDD (78 write IOPS) mkfs, initdb and the load take about a minute a
    run: the yohgaki example was estimated at 5.8 min and took 800 s."""
    text = (
        '[defaults]\nscale = 5\nduration = "20s"\nwarmup = "0s"\nrepetitions = 1\n'
        '[storage.e]\nfs = "ext4"\ndevice = "loop:4G"\n'
    )
    plain = make_plan(load_spec(write(tmp_path, text)))
    hdd = make_plan(load_spec(write(tmp_path, text + 'limits = { profile = "hdd-7200" }\n')))
    assert hdd.estimated_seconds - plain.estimated_seconds >= 60
    ssd = make_plan(load_spec(write(tmp_path, text + 'limits = { profile = "sata-ssd" }\n')))
    assert ssd.estimated_seconds == plain.estimated_seconds


def test_plan_says_when_dirty_thresholds_cannot_matter(tmp_path: Path) -> None:
    """The Vondra example at scale 10: its data in a 1 GB shared_buffers and no checkpoint
    due in the run, so 32 MB and 1 GB of vm.dirty_background_bytes cannot differ."""
    text = (
        '[defaults]\nscale = {scale}\nduration = "20s"\nwarmup = "5s"\nrepetitions = 1\n'
        '[storage.e]\nfs = "ext4"\ndevice = "loop:4G"\n'
        '[postgres.p]\nsettings = {{ shared_buffers = "{sb}", checkpoint_timeout = "30min" }}\n'
        '[kernel.small]\nsysctl = {{ "vm.dirty_background_bytes" = "32MB" }}\n'
        '[kernel.big]\nsysctl = {{ "vm.dirty_background_bytes" = "1GB" }}\n'
    )
    warned = make_plan(load_spec(write(tmp_path, text.format(scale=10, sb="1GB")))).warnings
    assert any("differ in vm.dirty_* but cannot differ here" in w for w in warned), warned
    fine = make_plan(load_spec(write(tmp_path, text.format(scale=10, sb="16MB")))).warnings
    assert not any("vm.dirty" in w for w in fine), fine


def test_btrfs_gets_more_headroom_in_the_plan(tmp_path: Path) -> None:
    """A 4 GiB btrfs held scale 100 after the load and ran out of space in the run; the
    same device with ext4 did not: plan warns for the copy-on-write one only."""
    text = """
[defaults]
scale = 100
[storage.b]
fs = "btrfs"
device = "loop:4G"
[storage.e]
fs = "ext4"
device = "loop:4G"
[workload.rw]
builtin = "tpcb-like"
"""
    warnings = make_plan(load_spec(write(tmp_path, text))).warnings
    (said,) = [w for w in warnings if "may be too small" in w]
    assert said.startswith("b: 4.0 GiB") and "btrfs needs 1.5x the room of ext4" in said


def test_plan_refuses_a_cell_whose_data_cannot_fit_naming_the_workload(tmp_path: Path) -> None:
    from pgfsbench.system.errors import CapabilityError

    text = """
[defaults]
scale = 100
[storage.small-btrfs]
fs = "btrfs"
device = "loop:2G"
[workload.rw]
builtin = "tpcb-like"
"""
    with pytest.raises(CapabilityError) as err:
        make_plan(load_spec(write(tmp_path, text)))
    said = str(err.value)
    assert err.value.exit_code == 5
    assert "small-btrfs (2.0 GiB) cannot hold workload rw at scale 100" in said
    assert "btrfs needing 1.5x the room of ext4" in said
