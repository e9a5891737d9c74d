"""Functional tests: real loop devices, filesystems, PostgreSQL and pgbench (needs root).

Every test works in directories it creates, and checks afterwards that nothing it (or
pgfsbench) created is still mounted, attached or running.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.postgres.binaries import find_binaries

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.func


# the modules that take longest, as measured beside each other (seconds a module's tests
# took, scripts/test.sh on the test VM): started first, longest first, so that no worker is
# left with one of them at the end while the others have nothing to do (pytest-xdist hands
# out whole modules in collection order with --no-loadscope-reorder; every test of ZFS that
# runs beside others is in test_zfs.py: no other module waits for ZFS's lock)
LONGEST = {
    "test_zfs.py": 270,
    "test_fleet.py": 115,
    "test_replay.py": 115,
    "test_limits.py": 107,
    "test_faults.py": 97,
    "test_workloads.py": 83,
    "test_pipeline.py": 82,
    "test_report.py": 72,
    "test_cycles.py": 66,
    "test_aging.py": 43,
    "test_capture_hostile.py": 43,
    "test_reads.py": 40,
    "test_cli_answers.py": 34,
    "test_observation.py": 31,
    "test_wire.py": 24,
    "test_snapshots.py": 23,
    "test_doctor.py": 22,
    "test_capture_debian.py": 21,
    "test_versions.py": 21,
}


# beside other tests (scripts/test.sh: four at a time on two cores), or alone: a figure
# that CPU contention can only lower is asserted with room for it beside others
BESIDE = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/func" in str(item.fspath):
            item.add_marker(pytest.mark.func)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="functional tests need root"))
    # the longest first, the rest in their order (a stable sort)
    items.sort(key=lambda item: -LONGEST.get(Path(str(item.fspath)).name, 0))


def leftovers(base: Path) -> list[str]:
    """Anything under ``base`` still attached, mounted or running."""
    found = []
    b = str(base)
    out = subprocess.run(
        ["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found += [f"loop: {line.strip()}" for line in out.splitlines() if b in line]
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4]
        if target.startswith(b):
            found.append(f"mount: {target}")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(b) or (b in cmd and "pytest" not in cmd):
            found.append(f"process {entry.name}: {cmd.strip()[:120]}")
    return found


def _mapped() -> set[str]:
    """Every /dev/shm file some process has mapped now."""
    found: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (entry / "maps").read_text().splitlines():
                if "/dev/shm/" in line:
                    found.add(line.rsplit(None, 1)[-1].replace(" (deleted)", ""))
    return found


def shared_memory() -> set[str]:
    """The System V segments and the POSIX segments PostgreSQL names in /dev/shm that no
    process holds: what a killed postmaster leaves until reboot unless someone removes it
    (a running server's own, another test's, are held: not counted)."""
    rows = [r.split() for r in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    # key shmid perms size cpid lpid nattch ...: attached by no one
    found = {f"System V shared memory {r[1]} ({r[3]} bytes)" for r in rows if r[6] == "0"}
    held = _mapped()
    found |= {
        f"/dev/shm/{p.name}"
        for p in Path("/dev/shm").glob("PostgreSQL.*")
        if f"/dev/shm/{p.name}" not in held
    }
    return found


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker's campaigns take a host lock of their own: the
    tests that must have the host to themselves are marked `exclusive` and run alone,
    after the others (scripts/test.sh)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ["PGFSBENCH_HOST_LOCK"] = f"/run/pgfsbench-test-{worker}.lock"


# the tests that take turns, each kind under one lock (root's /run), taken in this order
TURNS = {
    # zfs-fuse is one daemon for the host, and the tests of ZFS look at every pool and
    # every daemon
    "zfs": "/run/pgfsbench-test-zfs.lock",
    # the kernel's blkio rules are the host's: a test of caps looks at every loop device's
    "caps": "/run/pgfsbench-test-caps.lock",
}


@pytest.fixture(autouse=True)
def _take_turns(request: pytest.FixtureRequest) -> Iterator[None]:
    """Two at a time, the tests marked `zfs` take turns under one lock, those marked
    `caps` under another (a test marked both takes them in TURNS' order: no deadlock)."""
    with contextlib.ExitStack() as stack:
        for marker, path in TURNS.items():
            if request.node.get_closest_marker(marker) is not None:
                held = stack.enter_context(open(path, "a+b"))  # released with the file
                fcntl.flock(held, fcntl.LOCK_EX)
        yield


def new_shared_memory(before: set[str]) -> set[str]:
    """Segments no process holds that were not there before the test. Alone, what is new is
    the test's own; two at a time, a test on the other worker may have killed a server and
    not yet run its cleanup: what that cleanup removes within a minute was not ours."""
    new = shared_memory() - before
    deadline = time.monotonic() + (60 if os.environ.get("PYTEST_XDIST_WORKER") else 0)
    while new and time.monotonic() < deadline:
        time.sleep(2)
        new &= shared_memory()
    return new


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the test creates (not pytest's tmp_path, whose root another pytest
    session may make private at any moment, locking PostgreSQL's OS user out); at the end
    nothing may be left under it, and it is removed."""
    d = Path(tempfile.mkdtemp(prefix="pgfsb-test-", dir="/var/tmp"))
    d.chmod(0o755)
    memory = shared_memory()
    try:
        yield d
        left = leftovers(d) + sorted(new_shared_memory(memory))
        if left:  # clean up for the next tests, then fail loudly
            pgfsbench("cleanup", "--workdir", str(d / "work"), check=False)
        assert left == [], f"left behind: {left}"
    finally:
        if not leftovers(d):
            shutil.rmtree(d, ignore_errors=True)


def pgfsbench(
    *args: str, check: bool = True, timeout: float = 600, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"pgfsbench {' '.join(args)} exited {proc.returncode}:\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def runs_of(results: Path | str) -> list[dict[str, Any]]:
    out = pgfsbench("results", "list", "--results", str(results), "--json").stdout
    return json.loads(out)  # type: ignore[no-any-return]


def run_in(
    base: Path, spec: Path, *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """`pgfsbench run SPEC` with its results (r.sqlite) and work directory (work) in ``base``."""
    return pgfsbench(
        "run",
        str(spec),
        "--results",
        str(base / "r.sqlite"),
        "--workdir",
        str(base / "work"),
        *args,
        check=check,
    )


def refused(base: Path, spec: Path, status: int = 5) -> str:
    """A run refused before it made anything: its stderr (no run stored, no traceback)."""
    proc = run_in(base, spec, check=False)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (base / "r.sqlite").exists() or runs_of(base / "r.sqlite") == []
    return proc.stderr


def show(results: Path | str, run_id: int) -> dict[str, Any]:
    out = pgfsbench("results", "show", str(run_id), "--results", str(results), "--json").stdout
    shown: dict[str, Any] = json.loads(out)
    # every run any test shows has metrics of the shape the readers expect
    assert "format_problems" not in (shown.get("metrics") or {}), shown["metrics"]
    return shown


def wait_for(probe: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def wait_measuring(proc: subprocess.Popen[str], timeout: float = 180) -> None:
    """Until pgfsbench's measured pgbench runs; fail at once with its output if it ends."""

    def probe() -> bool:
        if proc.poll() is not None:
            out, err = proc.communicate(timeout=30)
            raise AssertionError(
                f"pgfsbench ended ({proc.returncode}) before measuring:\n"
                f"{out[-2000:]}\n{err[-2000:]}"
            )
        return measuring_pgbench_of(proc.pid)

    wait_for(probe, timeout, "the measured pgbench")


def pgbench_children(parent: int) -> Iterator[tuple[list[bytes], list[str]]]:
    """The pgbench processes pgfsbench process ``parent`` started: their command line and
    the fields of their /proc/PID/stat after the name."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == parent and cmd and cmd[0].endswith(b"pgbench"):
            yield cmd, fields


def measuring_pgbench_of(parent: int) -> bool:
    """A pgbench run (not the load) started by pgfsbench process ``parent``."""
    return any(b"-T" in cmd for cmd, _ in pgbench_children(parent))


def measured_start(parent_of: int) -> float | None:
    """Wall clock of the measured pgbench's start (after a warm-up, the measured run is the
    one without vacuum, -n), or None before it."""
    boot = time.time() - float(Path("/proc/uptime").read_text().split()[0])
    hz = os.sysconf("SC_CLK_TCK")
    for cmd, fields in pgbench_children(parent_of):
        if b"-n" in cmd:
            return boot + int(fields[19]) / hz
    return None


def pgfsbench_runs() -> list[Path]:
    """The `pgfsbench run` processes of this machine (the test started one)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(cmd) > 3 and cmd[1:3] == [b"-m", b"pgfsbench"] and cmd[3] == b"run":
            out.append(entry)
    return out


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pgfsbench", *args],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def run_until_phase(spec: Path, base: Path, word: str) -> subprocess.Popen[str]:
    """`pgfsbench run SPEC` (results and work directory in ``base``), returned once its
    progress file names a phase with ``word`` in it (say "aging")."""
    progress = base / "progress.json"
    proc = start(
        "run",
        str(spec),
        "--results",
        str(base / "r.sqlite"),
        "--workdir",
        str(base / "work"),
        "--progress-file",
        str(progress),
    )

    def reached() -> bool:
        try:
            return word in json.loads(progress.read_text()).get("phase", "")
        except (OSError, ValueError):
            return False

    wait_for(reached, 120, f"the {word} phase")
    return proc


def kill(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)
    return proc.returncode, out, err


def write_spec(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def signal_mid_measurement(
    spec: Path,
    results: Path,
    workdir: Path,
    sig: signal.Signals,
    before: Callable[[], None] | None = None,
) -> tuple[int, str, str]:
    """Start `pgfsbench run`, and once pgbench measures (and ``before`` has checked what it
    wants to see mid-run), send ``sig`` to pgfsbench."""
    proc = start("run", str(spec), "--results", str(results), "--workdir", str(workdir))
    try:
        wait_measuring(proc)
        if before is not None:
            before()
        return kill(proc, sig)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)


@pytest.fixture
def results_server(base: Path) -> Iterator[str]:
    b = find_binaries()
    data, sock = base / "resultsdb", base / "rsock"
    for d in (sock, data):
        d.mkdir(mode=0o700)
        shutil.chown(d, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_pg, b.tool("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
        cwd="/",
    )
    subprocess.run(
        [
            *as_pg,
            b.tool("pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-l",
            str(data / "log"),
            "-o",
            f"-c listen_addresses='' -c unix_socket_directories={sock}",
            "start",
        ],
        check=True,
        capture_output=True,
        cwd="/",
    )
    try:
        subprocess.run(
            [b.tool("psql"), "-h", str(sock), "-U", "postgres", "-c", "CREATE DATABASE results"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql://postgres@/results?host={sock}"
    finally:
        subprocess.run(
            [*as_pg, b.tool("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
            cwd="/",
        )


@pytest.fixture
def sshd(base: Path) -> Iterator[dict[str, str]]:
    """A real OpenSSH server of the test's own on 127.0.0.1 (a free port, its own host key,
    a key of the test's in its authorized keys), for a fleet host reached over SSH; ended by
    its pid. Yields the inventory variables that reach it."""
    binary = shutil.which("sshd") or "/usr/sbin/sshd"
    if not Path(binary).exists():
        pytest.skip("no OpenSSH server installed (scripts/bootstrap.sh --with-tests)")
    d = base / "ssh"
    d.mkdir(mode=0o700)
    for key in ("host_key", "client_key"):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)],
            check=True,
            capture_output=True,
        )
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\n"
        f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "Subsystem sftp internal-sftp\n"
    )
    privsep = Path("/run/sshd")  # sshd refuses to start without it
    made = not privsep.exists()
    privsep.mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen(
        [binary, "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=(d / "sshd.log").open("w"),
        start_new_session=True,
    )
    try:

        def listening() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"sshd ended: {(d / 'sshd.log').read_text()}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_for(listening, 30, "sshd to listen")
        # its key, known as the inventory says (pgfsbench checks every host's key)
        host_key = (d / "host_key.pub").read_text().split()[:2]
        (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_key)}\n")
        yield {
            "ansible_host": "127.0.0.1",
            "ansible_port": str(port),
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(d / "client_key"),
            "ansible_ssh_args": "-o ControlMaster=no -o StrictHostKeyChecking=yes "
            f"-o UserKnownHostsFile={d / 'known_hosts'} -o BatchMode=yes",
            "ansible_python_interpreter": "/usr/bin/python3",
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        if made:
            with contextlib.suppress(OSError):
                privsep.rmdir()
