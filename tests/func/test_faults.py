"""Faults done for real at tiny scale: a killed postmaster, a full disk, a filesystem frozen
for good, a second campaign, a killed campaign resumed, huge pages that are not there,
and the device guard against partitions and pools. A run that fails is a recorded result,
the matrix goes on, nothing is left behind, and no traceback reaches the user."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.func.conftest import (
    leftovers,
    measuring_pgbench_of,
    new_shared_memory,
    pgfsbench,
    runs_of,
    shared_memory,
    show,
    start,
    wait_for,
    wait_measuring,
    write_spec,
)

TWO_CELLS = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "{duration}"
warmup = "0s"
repetitions = 1
stall_timeout = "{stall}"
[storage.first]
{first}
[storage.second]
fs = "tmpfs"
size = "512M"
"""

# the first cell runs long enough to be hurt while it measures; the second, there to show
# that the matrix goes on, is short
SECOND_SHORT = """
[workload.long]
[workload.short]
duration = "2s"
[[matrix.exclude]]
storage = "first"
workload = "short"
[[matrix.exclude]]
storage = "second"
workload = "long"
"""


def status_of(results: Path, run_id: int) -> str | None:
    if not results.exists():
        return None
    try:
        with sqlite3.connect(f"file:{results}?mode=ro", uri=True, timeout=5) as conn:
            row = conn.execute("SELECT status FROM run WHERE id = ?", (run_id,)).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def campaign_status(results: Path, campaign_id: int = 1) -> str:
    with sqlite3.connect(results) as conn:
        return str(
            conn.execute("SELECT status FROM campaign WHERE id = ?", (campaign_id,)).fetchone()[0]
        )


def test_a_killed_postmaster_fails_its_run_and_the_matrix_goes_on(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(duration="30s", stall="20s", first='fs = "tmpfs"\nsize = "512M"')
        + SECOND_SHORT,
    )
    results = base / "r.sqlite"
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    try:
        wait_measuring(proc, 120)
        time.sleep(1)
        pidfile = base / "work" / "cells" / "run-1" / "mnt" / "data" / "pgdata" / "postmaster.pid"
        os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 6, err
    assert "Traceback" not in out + err
    first, second = runs_of(results)
    assert first["status"] == "failed"
    assert "PostgreSQL server terminated" in first["error"], first["error"]
    assert "postmaster exit" in first["error"] or "terminated by signal" in first["error"]
    assert second["status"] == "ok" and second["tps"] > 0
    detail = show(results, first["run_id"])
    assert detail["metrics"]["evidence"]["server_log_tail"]
    assert "pgbench_stderr" in detail["artifacts"] and "server_log" in detail["artifacts"]
    assert detail["environment"]["vm"]["vm.swappiness"]  # kernel settings of a failed run
    assert detail["series"]["tps"]["values"]  # what was measured before it died is kept
    assert campaign_status(results) == "done"


def test_a_run_killed_with_its_server_leaves_no_shared_memory_after_cleanup(base: Path) -> None:
    """The host ends the whole job: pgfsbench and its postmaster die by SIGKILL. The
    server's System V segment and its dynamic shared memory in /dev/shm would stay until
    reboot (1 MiB and more each time); cleanup removes them and nothing else."""
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(duration="60s", stall="30s", first='fs = "ext4"\ndevice = "loop:256M"'),
    )
    memory = shared_memory()
    proc = start(
        "run", str(spec), "--results", str(base / "r.sqlite"), "--workdir", str(base / "work")
    )
    try:
        wait_measuring(proc, 120)
        pidfile = base / "work" / "cells" / "run-1" / "mnt" / "data" / "pgdata" / "postmaster.pid"
        postmaster = int(pidfile.read_text().split()[0])
        proc.kill()
        proc.communicate(timeout=60)
        os.kill(postmaster, signal.SIGKILL)
        wait_for(lambda: not os.path.exists(f"/proc/{postmaster}"), 30, "the postmaster to die")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    left = shared_memory() - memory  # what the test is about: there is something to remove
    assert any(x.startswith("/dev/shm/") for x in left), left
    assert any(x.startswith("System V") for x in left), left
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert new_shared_memory(memory) == set()
    assert leftovers(base) == []


def initdb_server_in(base: Path) -> int | None:
    """The pid of initdb's own server (postgres --boot or --single) working under base."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if not (cmd[0].endswith(b"/postgres") and (b"--boot" in cmd or b"--single" in cmd)):
                continue
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd.startswith(str(base)):
            return int(entry.name)
    return None


def test_a_run_killed_during_initdb_leaves_no_shared_memory_after_cleanup(base: Path) -> None:
    """Killed while initdb's own server runs: cleanup ends initdb, whose server dies with
    it, and removes the shared memory that server made (found by the data directory's
    device and inode: initdb's own cleanup may have removed postmaster.pid)."""
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(duration="5s", stall="30s", first='fs = "tmpfs"\nsize = "256M"'),
    )
    proc = start(
        "run", str(spec), "--results", str(base / "r.sqlite"), "--workdir", str(base / "work")
    )

    try:
        # initdb's servers live a second or so: looked for every 5 ms (wait_for's 0.2 s
        # missed them twice in CI runs), the run's output said if it ends first
        deadline = time.monotonic() + 120
        while initdb_server_in(base) is None:
            if proc.poll() is not None:
                said, err = proc.communicate()
                raise AssertionError(f"pgfsbench ended before initdb was seen:\n{said}\n{err}")
            assert time.monotonic() < deadline, "initdb's server not seen in 120 s"
            time.sleep(0.005)
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    out = pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert "initdb" in out.stdout
    assert leftovers(base) == []  # and the fixture checks the shared memory


def test_a_full_disk_names_the_device_not_the_symptom(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(
            duration="2s", stall="60s", first='fs = "ext4"\ndevice = "loop:300M"'
        ).replace(
            # the data (176 MiB) fits, so plan lets it through with a warning; the WAL of the
            # load on top of it does not
            "scale = 1",
            "scale = 11",
        ),
    )
    results = base / "r.sqlite"
    proc = pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--only",
        "first/*",
        check=False,
    )
    assert proc.returncode == 6, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    (run,) = runs_of(results)
    assert run["status"] == "failed"
    error = run["error"]
    assert error.startswith("No space left on device on "), error
    assert "/mnt/data (ext4 on /dev/loop" in error
    assert "the data directory needed about" in error and "the device has" in error
    assert "PQendcopy" not in error


def test_a_filesystem_frozen_for_good_fails_the_run_and_is_never_stranded(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "120s"
warmup = "0s"
repetitions = 1
stall_timeout = "10s"
[storage.first]
fs = "ext4"
device = "loop:512M"
[storage.second]
fs = "tmpfs"
size = "512M"
"""
        + SECOND_SHORT,
    )
    results = base / "r.sqlite"
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    mnt = base / "work" / "cells" / "run-1" / "mnt" / "data"
    frozen = False
    try:
        wait_measuring(proc, 120)
        time.sleep(2)
        subprocess.run(["fsfreeze", "--freeze", str(mnt)], check=True)
        frozen = True
        started = time.monotonic()
        wait_for(lambda: status_of(results, 1) == "failed", 120, "run 1 to be recorded failed")
        failed = time.monotonic()
        assert failed - started < 60  # 10 s of stall, then diagnosis
        # stays frozen until pgfsbench has given up on it and ended
        out, err = proc.communicate(timeout=600)
        # the frozen filesystem is said at once, not after waiting for users that sleep
        # until it thaws (the second cell runs 2 s)
        print(f"from the failure to the end: {time.monotonic() - failed:.1f} s")
        assert time.monotonic() - failed < 20
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
        left_frozen = leftovers(base)
        if frozen:
            subprocess.run(["fsfreeze", "--unfreeze", str(mnt)], check=False)
    assert proc.returncode == 6, err
    assert "Traceback" not in out + err
    first, second = runs_of(results)
    assert first["status"] == "failed"
    assert first["error"] == "no transaction completed for 10 s"
    assert second["status"] == "ok"
    # a frozen filesystem is left mounted (visible, thawable), never lazily detached
    assert f"mount: {mnt}" in left_frozen
    assert "could not undo" in out + err and "thaw" in out + err
    detail = show(results, first["run_id"])
    assert 0 in detail["series"]["tps"]["values"]  # the freeze is in the evidence
    # thawed: the stuck server processes get their SIGKILL; cleanup finishes the undo
    wait_for(
        lambda: not any("postgres" in x for x in leftovers(base)),
        60,
        "the stuck server processes to end",
    )
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert leftovers(base) == []


def test_a_second_campaign_on_the_host_is_refused_at_once(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(duration="60s", stall="60s", first='fs = "tmpfs"\nsize = "512M"'),
    )
    proc = start(
        "run", str(spec), "--results", str(base / "r.sqlite"), "--workdir", str(base / "work")
    )
    try:
        wait_measuring(proc, 120)
        second = pgfsbench(
            "run",
            str(spec),
            "--results",
            str(base / "r2.sqlite"),
            "--workdir",
            str(base / "work2"),
            check=False,
            timeout=60,
        )
        assert second.returncode == 7, second.stderr
        assert f"pid {proc.pid}" in second.stderr and str(base / "work") in second.stderr
        assert "one campaign per host" in second.stderr
        assert not (base / "work2").exists() and not (base / "r2.sqlite").exists()
        cleanup = pgfsbench("cleanup", "--workdir", str(base / "work"), check=False)
        assert cleanup.returncode == 7
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=180)
    assert proc.returncode == 130


def test_resume_completes_a_matrix_killed_half_way(base: Path) -> None:
    spec = write_spec(
        base / "s.toml",
        """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "4s"
warmup = "0s"
repetitions = 1
[storage.a]
fs = "tmpfs"
size = "256M"
[storage.b]
fs = "tmpfs"
size = "256M"
[storage.c]
fs = "tmpfs"
size = "256M"
""",
    )
    results = base / "r.sqlite"
    work = ["--results", str(results), "--workdir", str(base / "work")]
    proc = start("run", str(spec), *work)
    try:
        wait_for(
            lambda: status_of(results, 2) == "running" and measuring_pgbench_of(proc.pid),
            180,
            "the second cell to measure",
        )
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    pgfsbench("cleanup", "--workdir", str(base / "work"))
    assert campaign_status(results) == "aborted"
    assert [r["status"] for r in runs_of(results)] == ["ok", "aborted"]
    refused = pgfsbench(
        "run", str(spec), *work, "--resume", "1", "--set", "duration=2s", check=False
    )
    assert refused.returncode == 2 and "same --set" in refused.stderr
    pgfsbench("run", str(spec), *work, "--resume", "1")
    runs = runs_of(results)
    assert [(r["cell"].split("/")[0], r["status"], r["superseded_by"]) for r in runs] == [
        ("a", "ok", None),
        ("b", "aborted", 3),
        ("b", "ok", None),
        ("c", "ok", None),
    ]
    assert {r["campaign_id"] for r in runs} == {1}
    assert campaign_status(results) == "done"
    again = pgfsbench("run", str(spec), *work, "--resume", "1")  # nothing left to do
    assert "0 run(s) this time" in again.stdout


@pytest.mark.exclusive  # host-wide settings: run alone
def test_huge_pages_that_are_not_there_say_how_many(base: Path) -> None:
    """The kernel configuration pins vm.nr_hugepages to 0, so pgfsbench does not reserve
    any (the user's count is taken as given) and the server cannot start."""
    if Path("/proc/sys/vm/nr_hugepages").read_text().strip() != "0":
        pytest.skip("this host has huge pages reserved")
    spec = write_spec(
        base / "s.toml",
        TWO_CELLS.format(duration="2s", stall="60s", first='fs = "tmpfs"\nsize = "512M"').replace(
            "[storage.second]",
            '[postgres.hp]\nsettings = { huge_pages = "on", shared_buffers = '
            '"128MB" }\n[kernel.none]\nsysctl = { "vm.nr_hugepages" = 0 }\n[storage.second]',
        ),
    )
    results = base / "r.sqlite"
    proc = pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(base / "work"),
        "--only",
        "first/*",
        check=False,
    )
    assert proc.returncode == 6
    (run,) = runs_of(results)
    assert run["status"] == "failed"
    assert "huge_pages = on" in run["error"] and "the server asked for" in run["error"]
    assert "the kernel has 0 (vm.nr_hugepages), 0 free" in run["error"]


def test_refusals_change_nothing(base: Path) -> None:
    work = base / "work"
    work.mkdir(mode=0o700)
    spec = write_spec(
        base / "s.toml",
        '[storage.a]\nfs = "tmpfs"\n[kernel.k]\nsysctl = { "vm.pgfsb_no_such_knob" = 1 }\n',
    )
    proc = pgfsbench(
        "run", str(spec), "--results", str(base / "r.sqlite"), "--workdir", str(work), check=False
    )
    assert proc.returncode == 2 and "does not exist on this kernel" in proc.stderr
    assert oct(work.stat().st_mode & 0o777) == "0o700" and list(work.iterdir()) == []
    ro = base / "ro"
    ro.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8M", "tmpfs", str(ro)], check=True)
    try:
        (ro / "r.sqlite").write_text("")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        ok_spec = write_spec(base / "ok.toml", '[storage.a]\nfs = "tmpfs"\n')
        proc = pgfsbench(
            "run",
            str(ok_spec),
            "--results",
            str(ro / "r.sqlite"),
            "--workdir",
            str(work),
            check=False,
        )
        assert proc.returncode == 2 and "read-only filesystem" in proc.stderr
        proc = pgfsbench(
            "run", str(ok_spec), "--results", "mysql://u@h/db", "--workdir", str(work), check=False
        )
        assert proc.returncode == 2 and "mysql:// is not supported" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        subprocess.run(["umount", str(ro)], check=False)


@pytest.fixture
def partitioned(base: Path) -> Iterator[tuple[str, Path]]:
    """A loop device with a GPT of two partitions (partx adds them: this kernel parses
    no partition tables itself); p2 holds ext4 with a marker file."""
    image = base / "disk.img"
    with image.open("wb") as fh:
        fh.truncate(320 << 20)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        subprocess.run(
            ["sfdisk", "-q", dev],
            input="label: gpt\n,120M\n,\n",
            text=True,
            capture_output=True,
            check=False,
        )
        subprocess.run(["partx", "-a", dev], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", f"{dev}p2"], check=True)
        yield dev, image
    finally:
        subprocess.run(["partx", "-d", dev], check=False)
        subprocess.run(["losetup", "--detach", dev], check=False)


@pytest.mark.exclusive  # a link in /dev/disk/by-id: run alone
@pytest.mark.zfs
def test_the_guard_checks_every_partition_and_pools_behind_links(
    base: Path, partitioned: tuple[str, Path]
) -> None:
    dev, _ = partitioned
    if shutil.which("zfs-fuse") is None or Path("/sys/module/zfs").exists():
        pytest.skip("needs zfs-fuse (the test starts its own daemon)")
    mnt = base / "p2"
    mnt.mkdir()
    subprocess.run(["mount", f"{dev}p2", str(mnt)], check=True)
    (mnt / "marker").write_text("precious")
    link = Path("/dev/disk/by-id") / f"pgfsb-test-{secrets.token_hex(3)}"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(f"../../{Path(dev).name}p1")
    pool = f"pgfsbtest_{secrets.token_hex(3)}"
    pidfile = base / "zfs-fuse.pid"
    subprocess.run(["zfs-fuse", "--pidfile", str(pidfile), "--no-kstat-mount"], check=True)
    try:
        wait_for(
            lambda: (
                subprocess.run(["zpool", "list"], capture_output=True, check=False).returncode == 0
            ),
            30,
            "zfs-fuse",
        )
        subprocess.run(
            ["zpool", "create", "-o", "cachefile=none", "-m", "none", pool, str(link)], check=True
        )
        work = ["--results", str(base / "r.sqlite"), "--workdir", str(base / "work")]
        whole = write_spec(base / "whole.toml", f'[storage.d]\nfs = "xfs"\ndevice = "{dev}"\n')
        proc = pgfsbench("run", str(whole), *work, "--destroy-data-on", dev, "--force", check=False)
        assert proc.returncode == 4, proc.stderr
        assert f"its partition {dev}p1 belongs to an imported zpool" in proc.stderr
        assert f"its partition {dev}p2 is mounted on {mnt}" in proc.stderr
        subprocess.run(["umount", str(mnt)], check=True)
        proc = pgfsbench("run", str(whole), *work, "--destroy-data-on", dev, "--force", check=False)
        assert proc.returncode == 4 and "belongs to an imported zpool" in proc.stderr
        linked = write_spec(base / "link.toml", f'[storage.d]\nfs = "xfs"\ndevice = "{link}"\n')
        proc = pgfsbench(
            "run", str(linked), *work, "--destroy-data-on", str(link), "--force", check=False
        )
        assert proc.returncode == 4 and "belongs to an imported zpool" in proc.stderr
        assert "Traceback" not in proc.stderr
        status = subprocess.run(
            ["zpool", "status", pool], capture_output=True, text=True, check=True
        ).stdout
        assert "ONLINE" in status  # the pool is untouched
    finally:
        subprocess.run(["zpool", "destroy", "-f", pool], check=False, capture_output=True)
        if pidfile.exists():
            pid = int(pidfile.read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: not Path(f"/proc/{pid}/exe").exists(), 60, "zfs-fuse to exit")
        link.unlink(missing_ok=True)
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)
    subprocess.run(["mount", f"{dev}p2", str(mnt)], check=True)
    try:
        assert (mnt / "marker").read_text() == "precious"
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_missing_and_doubled_devices_are_refused_before_confirmation(base: Path) -> None:
    missing = write_spec(
        base / "m.toml", '[storage.d]\nfs = "xfs"\ndevice = "/dev/pgfsb-no-such-disk"\n'
    )
    for command in (
        ["plan", str(missing)],
        ["run", str(missing), "--results", str(base / "r.sqlite")],
    ):
        proc = pgfsbench(*command, "--workdir", str(base / "work"), check=False)
        assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
        assert "--destroy-data-on" not in proc.stderr
    twice = write_spec(
        base / "t.toml",
        '[storage.z]\nfs = "zfs"\n[storage.z.pool]\n'
        'layout = "mirror"\ndevices = ["/dev/zero", "/dev/zero"]\n',
    )
    proc = pgfsbench("plan", str(twice), check=False)
    assert proc.returncode == 2 and "named twice" in proc.stderr


@pytest.mark.exclusive  # a disconnected mount on the host fails every mkfs.btrfs: run alone
def test_a_disconnected_mount_elsewhere_is_named_when_mkfs_btrfs_fails(base: Path) -> None:
    """An emulated disk's daemon that died under a mounted filesystem (a host restarted
    mid-run, a daemon killed) leaves mounts that stat() answers with ENOTCONN; mkfs.btrfs
    reads the whole mount table and fails on any of them, whatever device it was given.
    The run says which mounts and what to do, not only the tool's last line."""
    served, mnt = base / "served", base / "m"
    served.mkdir()
    mnt.mkdir()
    daemon = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "pgfsbench-disk"),
            "-image",
            str(base / "img"),
            "-mountpoint",
            str(served),
            "-size",
            str(256 << 20),
            "-ready",
            str(base / "ready"),
        ]
    )
    loop = ""
    try:
        wait_for(lambda: (base / "ready").exists(), 30, "the disk daemon")
        (disk,) = [p for p in served.iterdir() if p.is_file()]
        loop = subprocess.run(
            ["losetup", "--find", "--show", str(disk)], capture_output=True, text=True, check=True
        ).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", loop], check=True)
        subprocess.run(["mount", loop, str(mnt)], check=True)
        daemon.kill()
        daemon.wait()
        spec = write_spec(
            base / "s.toml",
            TWO_CELLS.format(
                duration="2s", stall="30s", first='fs = "btrfs"\ndevice = "loop:512M"'
            ),
        )
        out = pgfsbench(
            "run", str(spec), "--results", str(base / "r.sqlite"),
            "--workdir", str(base / "work"), check=False,
        )  # fmt: skip
        assert out.returncode == 6, out.stdout + out.stderr
        failed = [r for r in runs_of(base / "r.sqlite") if r["status"] != "ok"]
        assert len(failed) == 1, failed
        text = out.stdout + out.stderr
        assert "disconnected" in text and str(mnt) in text and str(served) in text, text
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        subprocess.run(["umount", str(mnt)], check=False, capture_output=True)
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)
        subprocess.run(["umount", "-l", str(served)], check=False, capture_output=True)
