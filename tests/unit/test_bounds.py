"""Every undo action keeps to a bound: what pgfsbench can have done, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

import pgfsbench.cleanup  # noqa: F401  (registers every undo action)
from pgfsbench.system.journal import Scope, Undo, out_of_bounds, registered_actions

WORK = Path("/var/tmp/pgfsbench")
SCOPE = Scope(WORK, ("/dev/sdz",), writer_pid=4242, writer_start=1000, boot_id="b")
W = str(WORK)

# kind -> (arguments pgfsbench writes, arguments it never would)
CASES: dict[str, tuple[dict[str, object], dict[str, object]]] = {
    "remove_path": ({"path": f"{W}/cells/run-1"}, {"path": "/etc/shadow"}),
    "restore_value": (
        {"path": "/proc/sys/vm/dirty_ratio", "value": "20"},
        {"path": "/etc/cron.d/x", "value": "* * * * * root sh"},
    ),
    "kill_process_group": ({"pid": 5000, "start_time": 1200}, {"pid": 1, "start_time": 2}),
    "release_server_memory": ({"pgdata": f"{W}/cells/run-1/mnt/pgdata"}, {"pgdata": "/srv/pg"}),
    "restore_server_settings": (
        {"dsn": "host=/run/postgresql", "settings": [{"name": "log_statement", "value": None}]},
        {"dsn": "host=/run/postgresql", "settings": [{"name": "archive_command", "value": "sh"}]},
    ),
    "stop_instance": (
        {"pgdata": f"{W}/c/pgdata", "bindir": "/usr/lib/postgresql/15/bin", "user": "postgres"},
        {"pgdata": f"{W}/c/pgdata", "bindir": "/usr/bin", "user": "root"},
    ),
    "umount": ({"target": f"{W}/cells/run-1/mnt"}, {"target": "/home"}),
    "detach_loop": ({"backing_file": f"{W}/cells/run-1/a.img"}, {"backing_file": "/x.img"}),
    "stop_disk_daemon": (
        {"pidfile": f"{W}/c/d.pid", "mountpoint": f"{W}/c/d.disk"},
        {"pidfile": "/run/sshd.pid", "mountpoint": f"{W}/c/d.disk"},
    ),
    "md_stop": (
        {"path": "/dev/md/pgfsb-0123abcd-data", "members": ["/dev/sdz"]},
        {"path": "/dev/md/pgfsb-0123abcd-data", "members": ["/dev/sda"]},
    ),
    "lvm_lvremove": ({"lv": "pgfsb-run-1-data/data"}, {"lv": "vg0/root"}),
    "lvm_vgremove": ({"group": "pgfsb-run-1-data"}, {"group": "vg0"}),
    "lvm_pvremove": ({"device": "/dev/sdz"}, {"device": "/dev/sda2"}),
    "stop_zfs_fuse": ({"pidfile": f"{W}/zfs-fuse.pid"}, {"pidfile": "/run/zfs-fuse.pid"}),
    "umount_dangling_fuse": ({"target": f"{W}/c/mnt/data"}, {"target": "/mnt/backup"}),
    "zpool_destroy": ({"name": "pgfsb_run_1_abc123", "guid": "123"}, {"name": "tank"}),
    "zpool_import": ({"name": "pgfsb_run_1_abc123", "dir": f"{W}/c/links"}, {"name": "rpool"}),
    "delete_snapshot": (
        {"kind": "zfs", "target": "pgfsb_run_1/data", "name": "pgfsb-snap-3", "snapdir": None},
        {"kind": "zfs", "target": "tank/home", "name": "pgfsb-snap-3", "snapdir": None},
    ),
    "restore_blkio_v1": (
        {"path": "/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device", "dev": "7:0", "value": 0},
        {"path": "/etc/passwd", "dev": "7:0", "value": 0},
    ),
    "restore_io_max": (
        {"path": "/sys/fs/cgroup/pgfsbench/io.max", "dev": "7:0"},
        {"path": "/sys/fs/cgroup/pgfsbench/io.max", "dev": "7:0\n8:0 wbps=1"},
    ),
    "leave_cgroup": ({"pid": 4242, "back": "/sys/fs/cgroup/user.slice"}, {"pid": 1, "back": "/"}),
    "remove_cgroup": (
        {"path": "/sys/fs/cgroup/pgfsbench"},
        {"path": "/sys/fs/cgroup/system.slice"},
    ),
    "disable_io_controller": (
        {"path": "/sys/fs/cgroup/cgroup.subtree_control"},
        {"path": "/sys/fs/cgroup/x/../../../etc/cgroup.subtree_control"},
    ),
    "restore_dirty_pair": (
        {"vm.dirty_bytes": "0", "vm.dirty_ratio": "20"},
        {"kernel.core_pattern": "|/tmp/x", "vm.dirty_ratio": "20"},
    ),
    # a kubeconfig only root can write (any such file: the bound checks who can write it)
    "delete_kube_object": (
        {
            "kubeconfig": "/etc/passwd",
            "namespace": "bench",
            "kind": "Job",
            "name": "pgfsbench-1a2b3c4d-7",
            "campaign": "1a2b3c4d-0000-4000-8000-000000000001",
        },
        {
            "kubeconfig": "/etc/passwd",
            "namespace": "kube-system",
            "kind": "Deployment",
            "name": "coredns",
            "campaign": "1a2b3c4d-0000-4000-8000-000000000001",
        },
    ),
    "delete_kube_campaign": (
        {
            "kubeconfig": "/etc/passwd",
            "namespace": "bench",
            "campaign": "1a2b3c4d-0000-4000-8000-000000000001",
        },
        {
            "kubeconfig": "/tmp/someones/kubeconfig",
            "namespace": "bench",
            "campaign": "1a2b3c4d-0000-4000-8000-000000000001",
        },
    ),
    "remove_memory_cgroup": (
        {"path": "/sys/fs/cgroup/memory/pgfsbench-run-3", "root": "/sys/fs/cgroup/memory"},
        {"path": "/sys/fs/cgroup/memory/system.slice", "root": "/sys/fs/cgroup/memory"},
    ),
    # the benchmark's own cgroup (kernel.join_cpu_group): v1 cpuacct, or beside ours in v2
    "remove_cpu_cgroup": (
        {"path": "/sys/fs/cgroup/cpuacct/pgfsbench-cpu-4242", "root": "/sys/fs/cgroup/cpuacct"},
        {"path": "/sys/fs/cgroup/cpuacct/user.slice", "root": "/sys/fs/cgroup/cpuacct"},
    ),
}


def test_every_undo_action_is_in_the_table() -> None:
    ours = {k for k in registered_actions() if not k.startswith("test_")}  # tests add some
    assert ours == set(CASES)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_bound_takes_what_pgfsbench_writes_and_refuses_the_rest(kind: str) -> None:
    ours, foreign = CASES[kind]
    assert out_of_bounds(Undo(kind, ours), SCOPE) is None
    why = out_of_bounds(Undo(kind, foreign), SCOPE)
    assert why is not None and why.strip()


def test_a_path_that_climbs_out_of_the_work_directory_is_refused() -> None:
    assert out_of_bounds(Undo("remove_path", {"path": f"{W}/../../etc"}), SCOPE) is not None
    assert out_of_bounds(Undo("remove_path", {"path": W}), SCOPE) is not None  # not itself
    assert out_of_bounds(Undo("remove_path", {"path": "cells/run-1"}), SCOPE) is not None


def test_the_short_socket_directory_in_tmp_is_removable_and_nothing_else_there() -> None:
    assert out_of_bounds(Undo("remove_path", {"path": "/tmp/pgfsb-89d833b0"}), SCOPE) is None
    for other in ("/tmp/pgfsb-89d833b0/../x", "/tmp/pgfsb-xyz", "/tmp/.X11-unix", "/tmp"):
        assert out_of_bounds(Undo("remove_path", {"path": other}), SCOPE) is not None


def test_a_directory_on_a_named_filesystem_is_the_writers_own_only() -> None:
    mine = "/srv/data/pgfsbench-20261127-101010-4242-run-3"
    theirs = "/srv/data/pgfsbench-20261127-101010-999-run-3"
    assert out_of_bounds(Undo("remove_path", {"path": mine}), SCOPE) is None
    assert out_of_bounds(Undo("remove_path", {"path": theirs}), SCOPE) is not None
    assert out_of_bounds(Undo("umount", {"target": mine + "/mnt"}), SCOPE) is None


def test_a_process_started_before_the_writer_or_without_its_start_time_is_refused() -> None:
    before: dict[str, object] = {"pid": 5000, "start_time": 999}
    assert "before the run" in (out_of_bounds(Undo("kill_process_group", before), SCOPE) or "")
    anonymous: dict[str, object] = {"pid": 5000, "start_time": None}
    assert out_of_bounds(Undo("kill_process_group", anonymous), SCOPE) is not None


def test_malformed_arguments_are_refused_not_raised() -> None:
    assert "malformed" in (out_of_bounds(Undo("restore_value", {}), SCOPE) or "")
    assert out_of_bounds(Undo("no_such_action", {}), SCOPE) is not None


def test_fuses_ring_switch_is_restored_only_to_a_boolean() -> None:
    """fuse's enable_uring (on while an emulated disk mounts over io_uring) is a kernel
    file pgfsbench writes; only Y or N (or 1, 0) go back into it."""
    path = "/sys/module/fuse/parameters/enable_uring"
    for value in ("Y", "N", "1", "0"):
        assert out_of_bounds(Undo("restore_value", {"path": path, "value": value}), SCOPE) is None
    for value in ("yes", "Y N", "2", ""):
        assert out_of_bounds(Undo("restore_value", {"path": path, "value": value}), SCOPE)
    other = "/sys/module/fuse/parameters/max_user_bgreq"
    assert out_of_bounds(Undo("restore_value", {"path": other, "value": "1"}), SCOPE)


@pytest.mark.parametrize(
    ("undo", "why"),
    [
        (
            Undo("restore_value", {"path": "/proc/sys/vm/mmap_min_addr", "value": "0"}),
            "not a sysctl",
        ),
        (Undo("restore_value", {"path": "/proc/sys/vm/swappiness", "value": "900"}), "outside"),
        (
            Undo("restore_dirty_pair", {"vm.dirty_bytes": "0", "vm.dirty_ratio": "101"}),
            "outside",
        ),
        (
            Undo("kill_process_group", {"pid": 5000, "start_time": 1200, "boot_id": "other"}),
            "another boot",
        ),
        (Undo("umount", {"target": f"{W}/cells/pgfsbench-20260101-000000-4242-a/../../etc"}), ".."),
        (Undo("remove_path", {"path": f"{W}/cells/run-1/../../../etc"}), ".."),
    ],
)
def test_what_a_journal_may_not_ask_whatever_it_says(undo: Undo, why: str) -> None:
    """A vm.* value outside its range (or a key pgfsbench never sets), a kill on another
    boot, a '..' before any normalising: each refused, with why."""
    found = out_of_bounds(undo, SCOPE)
    assert found is not None and why in found


def test_a_kill_needs_the_writers_start_to_be_known() -> None:
    blind = Scope(WORK, (), writer_pid=4242, writer_start=None, boot_id="b")
    found = out_of_bounds(Undo("kill_process_group", {"pid": 5000, "start_time": 1}), blind)
    assert found is not None and "when its writer started" in found


def test_a_work_directory_with_dot_dot_is_refused_as_given(tmp_path: Path) -> None:
    from pgfsbench.system.trust import path_problem

    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "deep")
    # lexically tmp_path/x; for the kernel, tmp_path/real/x
    found = path_problem(tmp_path / "link" / ".." / "x")
    assert found is not None and "'..'" in found


def test_a_vm_sysctl_pgfsbench_cannot_restore_is_refused_before_the_run() -> None:
    from pgfsbench.kernel import check
    from pgfsbench.spec.models import KernelConfig

    problems = check(KernelConfig(sysctl={"vm.mmap_min_addr": 0}))
    assert any("not a sysctl pgfsbench sets" in p for p in problems), problems


def test_the_spec_refuses_a_vm_sysctl_its_undo_could_not_restore() -> None:
    from pydantic import ValidationError

    from pgfsbench.spec import Spec

    for sysctl in ({"vm.swappiness": 500}, {"vm.dirty_ratio": 101}):
        with pytest.raises(ValidationError, match=r"outside"):
            Spec.model_validate(
                {"storage": {"s": {"fs": "tmpfs"}}, "kernel": {"k": {"sysctl": sysctl}}}
            )


def test_the_cpu_cgroups_undo_stays_in_a_cgroup_hierarchy() -> None:
    """Its root must be a cgroup hierarchy (v2: the cgroup pgfsbench was in), its path a
    pgfsbench-cpu-PID directory right beneath it."""
    cases: list[dict[str, object]] = [
        {"path": "/etc/pgfsbench-cpu-1", "root": "/etc"},
        {"path": "/sys/fs/cgroup/cpuacct/x/pgfsbench-cpu-1", "root": "/sys/fs/cgroup/cpuacct"},
        {"path": "/sys/fs/cgroup/cpuacct/pgfsbench-cpu-1/..", "root": "/sys/fs/cgroup/cpuacct"},
    ]
    for args in cases:
        assert out_of_bounds(Undo("remove_cpu_cgroup", args), SCOPE) is not None, args
    v2: dict[str, object] = {
        "path": "/sys/fs/cgroup/user.slice/pgfsbench-cpu-7",
        "root": "/sys/fs/cgroup/user.slice",
    }
    assert out_of_bounds(Undo("remove_cpu_cgroup", v2), SCOPE) is None
