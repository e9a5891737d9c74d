"""A root tool that trusts only what root wrote: work directories, journals, templates and
images prepared by an unprivileged user (the `postgres` account) are refused, never used."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import find_binaries
from pgfsbench.postgres.instance import Instance
from pgfsbench.postgres.template import MANIFEST, Templates
from pgfsbench.spec import InitdbOptions
from pgfsbench.storage.devices import attach_loop
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import UntrustedPath
from tests.func.conftest import ROOT, pgfsbench

GUARD_EXIT = 4


def as_postgres(*argv: str) -> None:
    subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, timeout=60)


def shared_dir(base: Path) -> Path:
    """A sticky, world-writable directory, as /var/tmp is."""
    shared = base / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared


def planted_journal(workdir: Path, victim: Path, other: Path) -> Path:
    """The journal of the issue, as a local user would write it: remove a root file,
    write another path."""
    lines = [
        {"t": "meta", "pid": 1, "host": "x", "started": 0, "argv": []},
        {
            "t": "step",
            "seq": 1,
            "what": "x",
            "undo": {"kind": "remove_path", "args": {"path": str(victim)}},
        },
        {
            "t": "step",
            "seq": 2,
            "what": "y",
            "undo": {"kind": "restore_value", "args": {"path": str(other), "value": "owned"}},
        },
    ]
    return write_lines(workdir / "journal" / "20260101-000000-1.jsonl", lines)


def write_lines(path: Path, records: list[dict[str, object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_journal_planted_by_another_user_deletes_and_writes_nothing(base: Path) -> None:
    victim = base / "root-file"
    victim.write_text("root's")
    other = base / "other-file"
    shared = shared_dir(base)
    work = shared / "work"
    # postgres makes the work directory and its journal (what /var/tmp allows anyone)
    as_postgres("mkdir", "-p", str(work / "journal"))
    # the journal's lines, written by postgres (a copy it makes is its own file)
    staged = base / "staged.jsonl"
    planted_journal(base / "stage", victim, other).rename(staged)
    staged.chmod(0o644)
    as_postgres("cp", str(staged), str(work / "journal" / "20260101-000000-1.jsonl"))
    done = pgfsbench("cleanup", "--workdir", str(work), check=False)
    assert done.returncode == GUARD_EXIT, done.stdout + done.stderr
    assert "owned by postgres" in done.stderr and str(work) in done.stderr
    assert victim.read_text() == "root's" and not other.exists()
    # the same journal in a directory of root's that someone else could write into
    work.chmod(0o777)
    shutil.chown(work, "root", "root")
    done = pgfsbench("cleanup", "--workdir", str(work), check=False)
    assert done.returncode == GUARD_EXIT and "writable by" in done.stderr
    assert victim.read_text() == "root's" and not other.exists()


def test_a_journal_of_roots_that_names_what_pgfsbench_cannot_have_done_is_refused(
    base: Path,
) -> None:
    """Root's own file, in root's own directory, but its steps reach outside the work
    directory and to a file that is no kernel setting: nothing of it is done, and cleanup
    says which step and why; a journal of another user's uid is refused too."""
    victim = base / "root-file"
    victim.write_text("root's")
    other = base / "other-file"
    work = base / "work"
    planted_journal(work, victim, other).chmod(0o600)
    done = pgfsbench("cleanup", "--workdir", str(work), check=False)
    assert done.returncode == GUARD_EXIT, done.stdout + done.stderr
    out = " ".join((done.stdout + done.stderr).split())
    assert "is neither inside the work directory" in out
    assert "is not a kernel setting pgfsbench changes" in out
    assert victim.read_text() == "root's" and not other.exists()
    for journal in (work / "journal").iterdir():
        journal.unlink()
    # a journal whose header names another writer
    records = [
        {"t": "meta", "uid": 108, "pid": 1},
        {
            "t": "step",
            "seq": 1,
            "what": "m",
            "undo": {"kind": "remove_path", "args": {"path": str(work / "x")}},
        },
    ]
    (work / "x").write_text("kept")
    write_lines(work / "journal" / "a.jsonl", records).chmod(0o600)
    done = pgfsbench("cleanup", "--workdir", str(work), check=False)
    assert done.returncode == GUARD_EXIT and "written by uid 108" in " ".join(
        (done.stdout + done.stderr).split()
    )
    assert (work / "x").read_text() == "kept"


@pytest.mark.parametrize("how", ["owned by postgres", "group-writable", "parent of postgres's"])
def test_run_plan_and_cleanup_refuse_a_work_directory_others_can_write(
    base: Path, how: str
) -> None:
    spec = ROOT / "examples" / "quick.toml"
    if how == "owned by postgres":
        work = base / "work"
        work.mkdir()
        shutil.chown(work, "postgres", "postgres")
        expected = "owned by postgres"
    elif how == "group-writable":
        work = base / "work"
        work.mkdir()
        work.chmod(0o775)
        expected = "writable by its group"
    else:
        parent = base / "theirs"
        parent.mkdir()
        shutil.chown(parent, "postgres", "postgres")
        work = parent / "work"  # not there yet: pgfsbench would make it in their directory
        expected = "owned by postgres"
    before = sorted(p.name for p in work.parent.iterdir())
    for argv in (
        ["plan", str(spec), "--workdir", str(work)],
        [
            "run",
            str(spec),
            "--workdir",
            str(work),
            "--results",
            str(base / "r.sqlite"),
            "--only",
            "tmpfs*",
        ],
        ["cleanup", "--workdir", str(work)],
    ):
        done = pgfsbench(*argv, check=False)
        assert done.returncode == GUARD_EXIT, (argv, done.stdout, done.stderr)
        assert expected in done.stderr and "--workdir" in done.stderr
    assert sorted(p.name for p in work.parent.iterdir()) == before  # nothing made
    assert not (base / "r.sqlite").exists()


def test_a_symlink_in_place_of_a_loop_image_is_not_followed(base: Path) -> None:
    work = base / "work"
    target = base / "precious"
    target.write_bytes(b"x" * 4096)
    runner = Runner()
    journal = Journal.create(work, runner)
    try:
        with journal.scope():
            image = work / "cells" / "data-1.img"
            image.parent.mkdir(parents=True)
            image.symlink_to(target)
            with pytest.raises(FileExistsError):
                attach_loop(journal, runner, image, 1 << 20)
    finally:
        journal.close()
    assert target.read_bytes() == b"x" * 4096  # neither truncated nor attached
    assert target.exists() and not image.exists()  # the link went with the undo
    listed = subprocess.run(["losetup", "-l", "-n"], capture_output=True, text=True).stdout
    assert str(target) not in listed


def test_a_template_is_used_only_as_root_made_it(base: Path) -> None:
    """A template that was changed, replaced by a symlink, or planted without root's
    manifest is passed over: initdb runs."""
    runner = Runner()
    journal = Journal.create(base, runner)
    binaries = find_binaries()
    templates = Templates(base / "work" / "initdb-templates")
    try:
        with journal.scope():

            def cluster(name: str) -> tuple[Path, str]:
                pgdata = base / name / "pgdata"
                pgdata.parent.mkdir()
                shutil.chown(pgdata.parent, "postgres", "postgres")
                instance = Instance(
                    binaries, pgdata, None, base / "sock", base / f"{name}.log", "postgres"
                )
                return pgdata, instance.init(journal, runner, InitdbOptions(), templates)

            cluster("first")
            (template,) = (t for t in templates.root.iterdir() if not t.name.startswith("."))
            assert (template / MANIFEST).stat().st_uid == 0
            _, output = cluster("copied")
            assert output.startswith("(a copy of the initdb template")
            # a changed file (a configuration someone wrote): passed over
            conf = template / "pgdata" / "postgresql.conf"
            conf.write_text(conf.read_text() + "\nshared_preload_libraries = 'evil'\n")
            assert templates.distrust(template.name) is not None
            _, output = cluster("after-change")
            assert not output.startswith("(a copy")
            # the template replaced by a symlink to a cluster of someone else's
            shutil.rmtree(template)
            elsewhere = base / "after-change"
            template.symlink_to(elsewhere)
            assert "symbolic link" in (templates.distrust(template.name) or "") or (
                "not a directory" in (templates.distrust(template.name) or "")
            )
            _, output = cluster("after-link")
            assert not output.startswith("(a copy")
            # the link was discarded, not followed, and initdb's cluster is the new template
            assert not template.is_symlink() and (template / MANIFEST).is_file()
            assert (elsewhere / "pgdata" / "PG_VERSION").is_file()  # untouched
            shutil.rmtree(template)
            # a template planted without a manifest of root's
            shutil.copytree(base / "after-link", template / "pgdata", symlinks=True)
            template.chmod(0o700)
            assert "manifest" in (templates.distrust(template.name) or "")
            _, output = cluster("after-plant")
            assert not output.startswith("(a copy")
    finally:
        journal.close()


def test_a_step_outside_its_bound_is_never_recorded(base: Path) -> None:
    """Ours must keep to the bounds cleanup checks: a step that would not is a bug,
    refused when it is recorded, before it is done."""
    from pgfsbench.system.actions import make_dir, write_value

    journal = Journal.create(base / "work", Runner())
    (base / "file").write_text("0\n")
    try:
        with pytest.raises(PgfsbenchError, match="outside its bound"):
            make_dir(journal, base / "outside")
        with pytest.raises(PgfsbenchError, match="outside its bound"):
            write_value(journal, base / "file", "1", what="not a kernel file")
        assert not (base / "outside").exists() and (base / "file").read_text() == "0\n"
    finally:
        journal.close()


def test_the_journal_says_who_wrote_it(base: Path) -> None:
    journal = Journal.create(base / "work", Runner())
    try:
        header = json.loads(journal.path.read_text().splitlines()[0])
        assert journal.path.stat().st_mode & 0o077 == 0
        assert journal.path.parent.stat().st_mode & 0o077 == 0
    finally:
        journal.close()
    assert header["uid"] == os.geteuid() and header["pid"] == os.getpid()
    assert isinstance(header["pid_start"], int) and len(header["boot_id"]) == 36


def test_untrusted_path_is_a_guard_refusal() -> None:
    assert issubclass(UntrustedPath, PgfsbenchError) and UntrustedPath.exit_code == GUARD_EXIT
