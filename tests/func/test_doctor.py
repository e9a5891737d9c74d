"""pgfsbench doctor and advise on real loop-mounted filesystems with real PostgreSQL
clusters: a server that is down (files only), one that runs (queried), tmpfs, xfs with
defaults, the host alone, a non-root user (zfs-fuse with primarycache=metadata:
test_zfs.py, where ZFS's tests take turns)."""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pgfsbench.postgres.binaries import find_binaries
from tests.func.conftest import ROOT, pgfsbench, runs_of

PG_USER = "postgres"


def sh(*argv: str, user: str | None = None) -> str:
    cmd = ["runuser", "-u", user, "--", *argv] if user else list(argv)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout


@contextmanager
def loop_fs(base: Path, fs: str, options: str = "", size: str = "300M") -> Iterator[Path]:
    """A filesystem on a loop device on a file under ``base``, mounted at base/mnt."""
    image, mnt = base / "disk.img", base / "mnt"
    sh("truncate", "-s", size, str(image))
    dev = sh("losetup", "--find", "--show", str(image)).strip()
    try:
        sh(f"mkfs.{fs}", "-q", *(["-F"] if fs == "ext4" else ["-f"]), dev)
        mnt.mkdir()
        sh("mount", "-t", fs, *(["-o", options] if options else []), dev, str(mnt))
        try:
            yield mnt
        finally:
            sh("umount", str(mnt))
    finally:
        sh("losetup", "-d", dev)


@contextmanager
def tmpfs(base: Path) -> Iterator[Path]:
    mnt = base / "mnt"
    mnt.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=256M", "tmpfs", str(mnt))
    try:
        yield mnt
    finally:
        sh("umount", str(mnt))


def initdb(mnt: Path, settings: str = "") -> Path:
    bindir = find_binaries().bindir
    pgdata = mnt / "pgdata"
    pgdata.mkdir()
    shutil.chown(pgdata, PG_USER, PG_USER)
    sh(str(bindir / "initdb"), "-D", str(pgdata), "--auth=trust", "-U", PG_USER, user=PG_USER)
    with (pgdata / "postgresql.conf").open("a") as f:
        f.write(settings)
    return pgdata


@contextmanager
def running(pgdata: Path, sockdir: Path) -> Iterator[None]:
    bindir = find_binaries().bindir
    sockdir.mkdir()
    shutil.chown(sockdir, PG_USER, PG_USER)
    opts = f"-c listen_addresses='' -c unix_socket_directories={sockdir} -c port=5999"
    sh(
        str(bindir / "pg_ctl"),
        "-D",
        str(pgdata),
        "-o",
        opts,
        "-w",
        "-t",
        "60",
        "-l",
        str(pgdata / "server.log"),
        "start",
        user=PG_USER,
    )
    try:
        yield
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop", user=PG_USER)


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    proc = pgfsbench("doctor", *args, "--json", check=False)
    assert proc.returncode in (0, 1, 2, 3), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def fired(report: dict[str, Any], severity: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in report["findings"]:
        if f["severity"] == severity:
            out.setdefault(f["rule"], []).append(f["seen"])
    return out


def test_ext4_without_barriers_and_full_page_writes_off_is_bad_then_advised(base: Path) -> None:
    with loop_fs(base, "ext4", "data=writeback,barrier=0") as mnt:
        pgdata = initdb(mnt, "full_page_writes = off\n")
        status, report = doctor("--pgdata", str(pgdata))
        assert status == 2, report
        assert report["facts"]["postgresql"]["source"] == "files"
        bad = fired(report, "BAD")
        assert set(bad) >= {"fpw-off-torn-pages", "barrier-off"}, bad
        assert "ext4" in bad["fpw-off-torn-pages"][0]
        assert "nobarrier" in bad["barrier-off"][0]  # how the kernel reports barrier=0
        assert "ext4-data-writeback" in fired(report, "WARN")
        for f in report["findings"]:
            assert f["source"].startswith("https://") and f["why"] and f["remedy"]
        (path,) = report["facts"]["paths"]
        assert path["fstype"] == "ext4" and any(d.startswith("loop") for d in path["devices"])

        # the same cluster running: the server is asked, and its evidence read
        with running(pgdata, base / "sock"):
            status, live = doctor("--pgdata", str(pgdata))
            # advise from the live server copies its settings (its own, not at their
            # defaults), adds what --try asks, sizes from its databases
            live_spec = base / "live.toml"
            dsn = f"host={base / 'sock'} port=5999 dbname=postgres user={PG_USER}"
            advised = pgfsbench(
                "advise", "--dsn", dsn, "-o", str(live_spec), "--try", "wal_compression=on"
            )
        assert status == 2
        live_text = live_spec.read_text()
        spec_data = tomllib.loads(live_text)
        today = spec_data["postgres"]["settings-today"]["settings"]
        assert today["full_page_writes"] == "off", today
        assert spec_data["postgres"]["wal_compression-on"]["settings"] == {
            **today,
            "wal_compression": "on",
        }
        assert "your databases hold" in advised.stdout and "loop files under" in advised.stdout
        assert spec_data["workdir"] == "/var/tmp/pgfsbench"
        # a server that is not there: libpq's reason, not "could not inspect"
        wrong = pgfsbench(
            "advise",
            "--dsn",
            f"host={base / 'sock'} port=5998 dbname=postgres user={PG_USER} password=sekrit",
            "-o",
            str(base / "never.toml"),
            check=False,
        )
        assert wrong.returncode == 2
        said = " ".join(wrong.stderr.split())
        assert "No such file or directory" in said and ".s.PGSQL.5998" in said, said
        assert "sekrit" not in said and not (base / "never.toml").exists()
        assert live["facts"]["postgresql"]["source"] == "server"
        assert "checkpoints_timed" in live["facts"]["postgresql"]["evidence"]
        assert set(fired(live, "BAD")) >= {"fpw-off-torn-pages", "barrier-off"}

        # advice from those findings: a spec plan accepts and run completes (2 of its cells)
        (base / "doctor.json").write_text(json.dumps(report))
        spec = base / "advice.toml"
        work = base / "work"
        pgfsbench(
            "advise",
            "--from",
            str(base / "doctor.json"),
            "-o",
            str(spec),
            "--scale",
            "1",
            "--duration",
            "2s",
            "--repetitions",
            "1",
            "--workdir",
            str(work),
        )
        text = spec.read_text()
        assert "[storage.ext4-safe-options]" in text and "[postgres.fpw-on.settings]" in text
        # the spec carries its work directory: plan and run take it
        plan = pgfsbench("plan", str(spec))
        assert "ext4-today/settings-today" in plan.stdout
        assert f"under {work}: " in " ".join(plan.stdout.split())
    results = base / "r.sqlite"
    only = "ext4-today/*" if "[kernel." not in text else "ext4-today/*/kernel-today/*"
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--only",
        only,
        "--set",
        "warmup=0s",
        timeout=600,
    )
    runs = runs_of(results)
    assert len(runs) == 2 and all(r["status"] == "ok" for r in runs), runs


def test_tmpfs_is_not_durable_and_says_why(base: Path) -> None:
    with tmpfs(base) as mnt:
        pgdata = initdb(mnt)
        status, report = doctor("--pgdata", str(pgdata))
        text = pgfsbench("doctor", "--pgdata", str(pgdata), check=False).stdout
    assert status == 2
    (seen,) = fired(report, "BAD")["tmpfs-not-durable"]
    assert "tmpfs" in seen
    (rule,) = [f for f in report["findings"] if f["rule"] == "tmpfs-not-durable"]
    assert "reboot or power cut" in rule["why"]
    assert "tmpfs-not-durable" in text and "reboot or power cut" in " ".join(text.split())
    # advice: tmpfs as found against ext4 and xfs on disks, a spec plan accepts
    (base / "doctor.json").write_text(json.dumps(report))
    spec = base / "advice.toml"
    advised = pgfsbench(
        "advise",
        "--from",
        str(base / "doctor.json"),
        "-o",
        str(spec),
        "--scale",
        "1",
        "--workdir",
        str(base / "work"),
    )
    # the command it prints next runs as printed (from where it was run)
    (nxt,) = [ln for ln in advised.stdout.splitlines() if ln.startswith("next: ")]
    argv = shlex.split(nxt.removeprefix("next: "))
    plan = subprocess.run(
        [*argv, "--workdir", str(base / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert plan.returncode == 0, (nxt, plan.stderr)
    assert "tmpfs-today" in plan.stdout and "ext4/" in plan.stdout and "xfs/" in plan.stdout


def test_xfs_with_defaults_has_no_bad_finding(base: Path) -> None:
    with loop_fs(base, "xfs") as mnt:
        pgdata = initdb(mnt)
        status, report = doctor("--pgdata", str(pgdata))
    assert status in (0, 1) and fired(report, "BAD") == {}, fired(report, "BAD")
    oks = {f["rule"] for f in report["findings"] if f["severity"] == "OK"}
    assert {"fpw-off-torn-pages", "barrier-off", "fsync-off", "tmpfs-not-durable"} <= oks


def test_the_host_alone_and_the_rule_catalogue() -> None:
    status, report = doctor()
    assert status in (0, 1, 2)
    assert report["facts"]["postgresql"] is None and report["facts"]["paths"] == []
    assert all(f["layer"] not in ("postgresql", "evidence") for f in report["findings"])
    listed = json.loads(pgfsbench("doctor", "list", "--json").stdout)
    assert len(listed) == len({r["id"] for r in listed}) >= 25
    explained = pgfsbench("doctor", "explain", "fpw-off-torn-pages").stdout
    assert "full_page_writes" in explained and "https://" in explained
    assert pgfsbench("doctor", "explain", "no-such-rule", check=False).returncode == 2
    status, only = doctor("--only", "thp-*")
    assert {f["rule"] for f in only["findings"]} <= {"thp-always"}
    missing = pgfsbench("doctor", "--pgdata", "/nonexistent/pgfsb", "--json", check=False)
    assert missing.returncode == 3


def test_a_non_root_user_reads_what_it_can_and_says_what_it_could_not(base: Path) -> None:
    """The doctor in a child that dropped to nobody (the venv lives under /root, which
    nobody cannot enter, so the child is forked with the modules already loaded)."""
    from pgfsbench.advisor import doctor as doc
    from pgfsbench.advisor import facts as facts_mod
    from pgfsbench.advisor import rules  # noqa: F401

    nobody = pwd.getpwnam("nobody")
    with loop_fs(base, "ext4", "barrier=0") as mnt:
        pgdata = initdb(mnt, "full_page_writes = off\n")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop root for good, then audit
            try:
                os.close(read_end)
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
                facts = facts_mod.gather(pgdata)
                found, skipped = doc.examine(facts, doc.select_rules())
                out = doc.report_json(facts, found, skipped, doc.exit_status(found, True))
                os.write(write_end, json.dumps(out, default=str).encode())
            except BaseException:
                import traceback

                os.write(write_end, traceback.format_exc().encode())
            finally:
                os._exit(0)
        os.close(write_end)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
        os.close(read_end)
        os.waitpid(pid, 0)
    raw = b"".join(chunks).decode()
    assert raw.startswith("{"), raw
    report = json.loads(raw)
    assert report["facts"]["root"] is False
    unread = " ".join(report["could_not_read"])
    assert "Permission denied" in unread or "permission denied" in unread, unread
    assert "not root" in unread
    # what the mount table shows is still judged; the settings it could not read are not
    assert "barrier-off" in fired(report, "BAD")
    assert "fpw-off-torn-pages" in report["not_applicable"]
