"""Root acting where the `postgres` OS user can write: each attack of a hostile local user
(any database superuser acts as `postgres`), as a test, against a real `postgres` user.

A victim is a file or a directory of root's that the attack tries to make root write,
chown or copy over. After each act, the victim must be as it was: root's, its mode and
content unchanged. Planting is done as `postgres` (runuser), as the attacker would.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.postgres import pgbouncer
from pgfsbench.postgres.binaries import find_binaries
from pgfsbench.postgres.instance import Instance
from pgfsbench.postgres.template import Templates
from pgfsbench.spec import Cell, InitdbOptions, Pooler, Spec
from pgfsbench.spec.matrix import expand
from pgfsbench.storage import base as storage_base
from pgfsbench.storage.base import ProvisionContext
from pgfsbench.storage.devices import DeviceFactory, DevicePolicy
from pgfsbench.storage.existing import own_directory
from pgfsbench.system import actions
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from pgfsbench.workloads import workload_for
from pgfsbench.workloads.base import Endpoint, Phase, Workload, WorkloadContext

POSTGRES = pwd.getpwnam("postgres")


def as_postgres(script: str) -> None:
    subprocess.run(["runuser", "-u", "postgres", "--", "sh", "-c", script], check=True, timeout=60)


@contextlib.contextmanager
def victim_file(base: Path, mode: int = 0o600) -> Iterator[Path]:
    """A file of root's that no act of pgfsbench may change; checked on the way out."""
    vault = base / "vault"
    vault.mkdir(mode=0o755, exist_ok=True)
    victim = vault / f"secret-{len(list(vault.iterdir()))}"
    victim.write_text("root's own\n")
    victim.chmod(mode)
    yield victim
    st = victim.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == 0, f"{victim} changed owner"
    assert stat.S_IMODE(st.st_mode) == mode, f"{victim} changed mode"
    assert victim.read_text() == "root's own\n", f"{victim} was written"


@contextlib.contextmanager
def victim_dir(base: Path) -> Iterator[Path]:
    victim = base / "vault-dir"
    victim.mkdir(mode=0o700)
    yield victim
    st = victim.lstat()
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700, f"{victim} was handed over"
    assert list(victim.iterdir()) == [], f"something was made in {victim}"


def postgres_dir(path: Path, mode: int = 0o755) -> Path:
    path.mkdir(mode=mode)
    os.chown(path, POSTGRES.pw_uid, POSTGRES.pw_gid)
    return path


def swap_after_mkdir(
    monkeypatch: pytest.MonkeyPatch, victim: Path, wanted: Callable[[str], bool]
) -> list[str]:
    """After root makes a directory whose name ``wanted`` accepts, `postgres` moves it
    aside and puts a link to ``victim`` in its place: the window between a mkdir and a
    chown by path, made certain instead of raced."""
    real_mkdir = os.mkdir
    swapped: list[str] = []

    def mkdir(path: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(path, mode, dir_fd=dir_fd)
        name = os.fsdecode(path)
        full = Path(os.readlink(f"/proc/self/fd/{dir_fd}")) / name if dir_fd else Path(name)
        if wanted(full.name):
            as_postgres(f"mv '{full}' '{full}.gone' && ln -s '{victim}' '{full}'")
            swapped.append(str(full))

    monkeypatch.setattr(os, "mkdir", mkdir)
    return swapped


def context(base: Path, scratch: Path, journal: Journal) -> WorkloadContext:
    nowhere = Endpoint(str(base / "no-server"), 5432, "postgres", "postgres")
    artifacts = base / "artifacts"
    artifacts.mkdir(exist_ok=True)
    return WorkloadContext(
        journal.runner,
        journal,
        find_binaries(),
        nowhere,
        nowhere,
        scratch,
        artifacts,
        "postgres",
        base,
    )


def workload_of(config: dict[str, object]) -> tuple[Cell, Workload]:
    spec = Spec.model_validate({"storage": {"s": {"fs": "tmpfs"}}, "workload": {"w": config}})
    (cell,) = expand(spec)
    return cell, workload_for(cell, spec.defaults)


# ---- the data directory


def test_settings_are_not_written_through_links_in_the_data_directory(base: Path) -> None:
    """configure(): pgfsbench.conf and postgresql.conf are the server user's files; links
    planted there must not make root write (or hand over) root's files."""
    pgdata = postgres_dir(base / "pgdata", 0o700)
    binaries = find_binaries()
    instance = Instance(binaries, pgdata, None, base / "sock", base / "log", "postgres")
    with victim_file(base, 0o644) as conf_victim, victim_file(base) as main_victim:
        as_postgres(f"ln -s '{conf_victim}' '{pgdata}/pgfsbench.conf'")
        as_postgres(f"echo '# initdb' > '{pgdata}/postgresql.conf'")
        instance.configure({"fsync": "on"})
        made = pgdata / "pgfsbench.conf"
        assert not made.is_symlink() and made.stat().st_uid == POSTGRES.pw_uid
        assert "fsync = 'on'" in made.read_text()
        assert "include 'pgfsbench.conf'" in (pgdata / "postgresql.conf").read_text()
        # the main file a link: refused, nothing appended to root's file
        as_postgres(
            f"rm '{pgdata}/postgresql.conf' && ln -s '{main_victim}' '{pgdata}/postgresql.conf'"
        )
        with pytest.raises(PgfsbenchError, match="symbolic link"):
            instance.configure({"fsync": "on"})


def test_a_template_is_not_copied_into_a_data_directory_the_server_user_made(
    base: Path,
) -> None:
    """The volume's root was the server user's: it made pgdata first, with a link where the
    template's PG_VERSION goes. Root must neither copy through it nor adopt the directory."""
    runner = Runner()
    journal = Journal.create(base, runner)
    binaries = find_binaries()
    templates = Templates(base / "templates")
    try:
        with journal.scope():
            first = base / "first"
            first.mkdir()
            Instance(
                binaries, first / "pgdata", None, base / "sock", base / "a.log", "postgres"
            ).init(journal, runner, InitdbOptions(), templates)
            volume = postgres_dir(base / "volume")
            with victim_file(base) as victim:
                planted = volume / "pgdata"
                as_postgres(f"mkdir -m 700 '{planted}' && ln -s '{victim}' '{planted}/PG_VERSION'")
                second = Instance(
                    binaries, volume / "pgdata", None, base / "sock", base / "b.log", "postgres"
                )
                with pytest.raises(PgfsbenchError):
                    second.init(journal, runner, InitdbOptions(), templates)
    finally:
        journal.close()


def test_a_link_planted_in_a_fresh_cluster_is_not_vouched_for_by_a_template(
    base: Path,
) -> None:
    """save(): a cluster initdb made is the server user's until root copies it; a link in
    it fails the save (the next cell runs initdb), it never enters a template."""
    pgdata = postgres_dir(base / "pgdata", 0o700)
    with victim_file(base) as victim:
        as_postgres(
            f"echo 15 > '{pgdata}/PG_VERSION' && ln -s '{victim}' '{pgdata}/postgresql.auto.conf'"
        )
        templates = Templates(base / "templates")
        with pytest.raises(PgfsbenchError, match="not a regular file or a directory"):
            templates.save("k", pgdata, None, "")
        assert templates.find("k") is None
        assert not any(p.is_symlink() for p in (base / "templates").rglob("*"))


# ---- directories handed over by pgfsbench


def test_a_directory_swapped_after_its_mkdir_is_not_chowned(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prepare_dir(): made in a directory the server user owns, swapped for a link between
    the mkdir and the chown: root must not chown (or chmod) where the link points."""
    parent = postgres_dir(base / "volume")
    with victim_dir(base) as victim:
        swapped = swap_after_mkdir(monkeypatch, victim, lambda n: n == "pg_wal")
        with pytest.raises(PgfsbenchError):
            storage_base.prepare_dir(parent / "pg_wal", "postgres")
        assert swapped


def test_existing_storage_makes_its_directory_without_a_chown_by_path(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fs = "existing" in a base the server user owns (/var/lib/postgresql/...): its own
    directory, swapped for a link after the mkdir, is refused, never handed over."""
    store = postgres_dir(base / "postgres-owned")
    runner = Runner()
    journal = Journal.create(base, runner)
    celldir = base / "cells" / "run-1"
    celldir.mkdir(parents=True)
    try:
        with journal.scope(), victim_dir(base) as victim:
            swapped = swap_after_mkdir(monkeypatch, victim, lambda n: n.startswith("pgfsbench-"))
            devices = DeviceFactory(journal, runner, celldir / "devices", DevicePolicy())
            ctx = ProvisionContext(journal, runner, celldir, devices, "postgres")
            with pytest.raises(PgfsbenchError):
                own_directory("s", store, "data", ctx)
            assert swapped
            monkeypatch.undo()
    finally:
        journal.close()


def test_the_copy_source_is_not_chowned_through_a_link(base: Path) -> None:
    """copy: work/copy-source a link to a directory of root's: not handed over."""
    runner = Runner()
    journal = Journal.create(base, runner)
    scratch = postgres_dir(base / "scratch")
    try:
        with victim_dir(base) as victim:
            as_postgres(f"ln -s '{victim}' '{scratch}/copy-source'")
            cell, workload = workload_of({"tool": "copy", "rows_per_scale": 1000})
            with pytest.raises(PgfsbenchError):
                workload.load(context(base, scratch, journal), cell)
    finally:
        journal.close()


def test_the_seqscan_script_is_not_written_through_a_link(base: Path) -> None:
    """pgbench seqscan: work/seqscan.sql a link to a file of root's: not written, not
    made readable by all."""
    runner = Runner()
    journal = Journal.create(base, runner)
    scratch = postgres_dir(base / "scratch")
    try:
        with victim_file(base) as victim:
            as_postgres(f"ln -s '{victim}' '{scratch}/seqscan.sql'")
            cell, workload = workload_of({"tool": "pgbench", "builtin": "seqscan"})

            def never(*_: object) -> None:
                return None

            phase = Phase(1.0, True, never, lambda: None)
            with pytest.raises(Exception, match=r"no-server|connection|No such file"):
                workload.run(context(base, scratch, journal), cell, phase)
            assert not (scratch / "seqscan.sql").is_symlink()
    finally:
        journal.close()


def test_pgbouncer_files_are_not_written_through_links(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pgbouncer: its directory is the server user's; links planted in it as soon as it is
    made (the race a loop of that user won 3 times of 3) must not be written through."""
    runner = Runner()
    journal = Journal.create(base, runner)
    celldir = base / "cell"
    celldir.mkdir()
    real_make_dir = actions.make_dir
    try:
        with journal.scope(), victim_file(base) as ini_victim, victim_file(base) as users_victim:

            def make_dir_then_plant(j: Journal, path: Path, **kw: Any) -> Path:
                made = real_make_dir(j, path, **kw)
                if path.name == "pgbouncer":
                    as_postgres(
                        f"ln -s '{ini_victim}' '{made}/pgbouncer.ini' && "
                        f"ln -s '{users_victim}' '{made}/userlist.txt' && "
                        f"ln -s '{users_victim}' '{made}/stdout.txt'"
                    )
                return made

            monkeypatch.setattr(pgbouncer, "make_dir", make_dir_then_plant)
            bouncer = pgbouncer.start(
                journal,
                runner,
                Pooler(),
                celldir,
                base / "no-server",
                5432,
                "postgres",
                "postgres",
            )
            try:
                assert not (bouncer.directory / "pgbouncer.ini").is_symlink()
            finally:
                pgbouncer.stop(bouncer)
    finally:
        journal.close()


# ---- what children inherit


def test_no_secret_of_pgfsbench_reaches_a_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """PGPASSWORD (the documented way to give the results store's password) and its kin
    are pgfsbench's own connection's: the server, pgbench, every child runs without them."""
    monkeypatch.setenv("PGPASSWORD", "store-secret")
    monkeypatch.setenv("PGPASSFILE", "/root/.pgpass")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "cloud-secret")
    done = Runner().run(["cat", "/proc/self/environ"], timeout=10, user="postgres")
    seen = done.stdout.replace("\0", "\n")
    assert "store-secret" not in seen and "PGPASSFILE" not in seen and "cloud-secret" not in seen
    assert "LC_ALL=C.UTF-8" in seen


def test_a_childs_output_file_is_not_opened_through_a_link(base: Path) -> None:
    """Runner.spawn's stdout file in a directory of the server user's: made anew, never
    truncated through a link planted there."""
    directory = postgres_dir(base / "bouncer")
    with victim_file(base) as victim:
        as_postgres(f"ln -s '{victim}' '{directory}/stdout.txt'")
        child = Runner().spawn(["echo", "hello"], stdout_path=directory / "stdout.txt")
        child.wait(timeout=10)
        assert (directory / "stdout.txt").read_text() == "hello\n"


# ---- what root reads where the server's user writes


def test_a_fifo_named_postmaster_pid_does_not_hang_teardown(base: Path) -> None:
    """A FIFO in place of postmaster.pid blocked every reader (teardown, cleanup)."""
    from pgfsbench.postgres.instance import postmaster_pid

    pgdata = postgres_dir(base / "pgdata", 0o700)
    as_postgres(f"mkfifo '{pgdata}/postmaster.pid'")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from pgfsbench.postgres.instance import postmaster_pid; "
            "print(postmaster_pid(Path(sys.argv[1])))",
            str(pgdata),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    )
    assert done.stdout.strip() == "None"
    assert postmaster_pid(pgdata) is None


def test_a_kubeconfig_in_a_directory_the_server_user_owns_is_refused(base: Path) -> None:
    """The check looked at the file only: a user owning a directory on its path swapped it
    between the check and the read, and root ran that user's exec plugin."""
    from pgfsbench.kube.client import read_kubeconfig

    theirs = postgres_dir(base / "kube")
    config = theirs / "config"
    config.write_text("apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n")
    config.chmod(0o600)
    with pytest.raises(PgfsbenchError, match="owned by postgres"):
        read_kubeconfig(config)
    ours = base / "kube-root"
    ours.mkdir(mode=0o700)
    (ours / "config").write_text("apiVersion: v1\nclusters: []\ncontexts: []\nusers: []\n")
    (ours / "config").chmod(0o600)
    assert read_kubeconfig(ours / "config")["apiVersion"] == "v1"


def test_an_emulated_disk_is_roots_alone(base: Path) -> None:
    """As postgres, the whole device under test was read and raw blocks written beneath a
    mounted filesystem: its directory is 0700 and its FUSE mount checks permissions."""
    from pgfsbench.spec.models import EmulatedDevice
    from pgfsbench.storage.devices import DeviceFactory

    runner = Runner()
    journal = Journal.create(base, runner)
    try:
        with journal.scope():
            DeviceFactory(journal, runner, base / "devices").get(
                EmulatedDevice(size="64M", model="zero"), "data"
            )
            assert stat.S_IMODE((base / "devices").stat().st_mode) == 0o700
            (disk,) = (base / "devices").glob("*.disk")
            os.chmod(base / "devices", 0o711)  # even with the way open: the mount refuses
            try:
                read = subprocess.run(
                    ["runuser", "-u", "postgres", "--", "head", "-c", "512", str(disk / "disk")],
                    capture_output=True,
                    timeout=20,
                    check=False,
                )
                assert read.returncode != 0 and b"denied" in read.stderr, read
            finally:
                os.chmod(base / "devices", 0o700)
    finally:
        journal.close()
