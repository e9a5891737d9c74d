"""The one rule of system/held.py, kept: root never opens, creates, chowns, chmods or copies
by a path where another user can write. Outside that module, a call that writes, chowns,
chmods or copies by path is an error, unless the place is listed below with why the path
is one no other user can write (the kernel's own files, root's work directory).

And the module itself, on a real directory: links, FIFOs, hard links and '..' refused.
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import pytest

from pgfsbench.system.held import Held, Owner, make_dirs, new_dir, write_file
from pgfsbench.system.trust import UntrustedPath

SRC = Path(__file__).resolve().parents[2] / "src" / "pgfsbench"
THE_MODULE = "system/held.py"

# calls that act on what a path names (the method's or function's name)
BY_PATH = {"chown", "lchown", "chmod", "lchmod", "write_text", "write_bytes", "symlink_to"}
BY_PATH |= {"hardlink_to"}
OS_BY_PATH = {"symlink", "link", "mkfifo", "mknod"}  # os.symlink(...) and its kin
# shutil's copies (``shutil.copy(...)``; a dict's or a dataclass's copy is no act)
SHUTIL = {"copy", "copy2", "copyfile", "copytree", "copystat", "copymode", "move"}
# programs that copy or change owners, as the first word of an argv list
COPYING_PROGRAMS = {"cp", "install", "rsync", "chown", "chmod", "tar", "ln"}

# where a by-path act is allowed, and why no other user can write the path's directories
ALLOWED: dict[tuple[str, str], str] = {
    ("kernel.py", "write_text"): "/proc/sys, /sys and the memory cgroup: the kernel's files",
    ("storage/limits.py", "write_text"): "the blkio and io cgroups' files: the kernel's",
    ("system/actions.py", "write_text"): "write_value: /proc/sys and /sys, bounded by "
    "system/bounds.KERNEL_FILES",
    ("storage/devices.py", "write_text"): "fuse's enable_uring under /sys/module",
    ("system/trust.py", "chmod"): "make_trusted_dir: directories pgfsbench has just made "
    "under a checked parent",
    ("report/terminal.py", "open:w"): "/dev/null, for a console that measures text",
}


def _mode_of_open(call: ast.Call) -> str | None:
    """'w', 'a' or 'x' when ``call`` is an open() (builtin or Path.open) for writing."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name != "open" or (isinstance(call.func, ast.Attribute) and _is_os(call.func.value)):
        return None
    args = list(call.args)
    mode_node = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode_node is None:
        is_method = isinstance(call.func, ast.Attribute)
        position = 0 if is_method else 1
        mode_node = args[position] if len(args) > position else None
    if isinstance(mode_node, ast.Constant) and isinstance(mode_node.value, str):
        for letter in "wax":
            if letter in mode_node.value:
                return letter
    return None


def _is_os(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in {"os", "gzip", "tarfile"}


def by_path_acts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every call in ``tree`` that writes, chowns, chmods or copies by a path."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            receiver = func.value if isinstance(func, ast.Attribute) else None
            on_shutil = isinstance(receiver, ast.Name) and receiver.id == "shutil"
            on_os = isinstance(receiver, ast.Name) and receiver.id == "os"
            if (
                name in BY_PATH
                or (on_shutil and name in SHUTIL)
                or (on_os and name in OS_BY_PATH)
                or name in {"fchown", "fchmod"}
                or (name == "chown" and not node.args)
            ):
                found.append((node.lineno, name))
            elif (mode := _mode_of_open(node)) is not None:
                found.append((node.lineno, f"open:{mode}"))
        elif isinstance(node, ast.List) and node.elts:
            first = node.elts[0]
            if isinstance(first, ast.Constant) and first.value in COPYING_PROGRAMS:
                found.append((node.lineno, f"argv:{first.value}"))
    return found


def test_no_act_by_path_outside_the_held_module() -> None:
    """The lint: each by-path write, chown, chmod or copy outside system/held.py is one
    of the listed places; a new one fails here until it goes through the module."""
    offences = []
    used: set[tuple[str, str]] = set()
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel == THE_MODULE:
            continue
        for line, act in by_path_acts(ast.parse(path.read_text())):
            if (rel, act) in ALLOWED:
                used.add((rel, act))
                continue
            offences.append(f"{rel}:{line}: {act} by path (use system/held.py)")
    assert offences == []
    # a place listed that no longer acts by path is taken off the list
    assert set(ALLOWED) - used == set()


def test_the_lint_sees_what_it_must(tmp_path: Path) -> None:
    """The lint catches each form (it could not fail otherwise)."""
    code = """
import shutil, os
from pathlib import Path
def f(p: Path, d: Path) -> None:
    shutil.chown(p, "postgres")
    os.chown(p, 1, 1)
    p.chmod(0o644)
    p.write_text("x")
    with p.open("a") as fh: pass
    with open(p, "w") as fh: pass
    shutil.copytree(p, d)
    run(["cp", "-a", str(p), str(d)])
    with open(p) as fh: pass
    os.open(p, os.O_RDONLY)
"""
    acts = sorted(act for _, act in by_path_acts(ast.parse(code)))
    expected = ["chown", "chown", "chmod", "write_text", "open:a", "open:w", "copytree", "argv:cp"]
    assert acts == sorted(expected)


# ---- the module on a real directory


def test_writes_replace_links_and_never_follow_them(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("root's")
    d = tmp_path / "d"
    d.mkdir()
    (d / "conf").symlink_to(victim)
    write_file(d / "conf", "mine", 0o640)
    assert victim.read_text() == "root's"
    assert not (d / "conf").is_symlink() and (d / "conf").read_text() == "mine"
    assert stat.S_IMODE((d / "conf").stat().st_mode) == 0o640
    assert [p.name for p in d.iterdir()] == ["conf"]  # no temporary name left


def test_existing_files_are_used_only_when_regular_and_single(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    os.mkfifo(d / "fifo")  # opened O_NONBLOCK: refused, not waited on
    (d / "one").write_text("a")
    os.link(d / "one", d / "two")
    (d / "link").symlink_to(d / "one")
    with Held.open(d) as held:
        with pytest.raises(UntrustedPath, match="not a regular file"):
            held.read("fifo", 100)
        with pytest.raises(UntrustedPath, match="2 links"):
            held.append("one", "b")
        with pytest.raises(UntrustedPath, match="symbolic link"):
            held.read("link", 100)
        os.unlink(d / "two")
        held.append("one", "b")
        assert held.read("one", 100) == b"ab"
        with pytest.raises(UntrustedPath, match="larger than 1 bytes"):
            held.read("one", 1)


def test_names_are_single_and_links_on_the_way_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    with Held.open(tmp_path) as held:
        for bad in ("..", "a/b", "", "."):
            with pytest.raises(UntrustedPath):
                held.write(bad, "x")
        with pytest.raises(UntrustedPath, match="not followed"):
            held.descend("via")
    with pytest.raises(UntrustedPath, match=r"'\.\.'"):
        Held.open(tmp_path / "real" / ".." / "real")


def test_directories_are_made_anew_or_adopted_only_from_trusted_owners(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b" / "c"
    make_dirs(nested)
    assert nested.is_dir() and stat.S_IMODE(nested.stat().st_mode) == 0o755
    new_dir(nested / "d", 0o700)
    assert stat.S_IMODE((nested / "d").stat().st_mode) == 0o700
    with pytest.raises(FileExistsError):
        new_dir(nested / "d")
    stranger = nested / "e"
    stranger.mkdir()
    os.chown(stranger, 4242, 4242)
    with Held.open(nested) as held:
        with pytest.raises(UntrustedPath, match="owned by uid 4242"):
            held.ensure_dir("e")
        with held.ensure_dir("e", 0o700, Owner(4242, 4242)) as adopted:
            assert adopted.stat().st_uid == 4242


def test_a_tree_is_copied_with_every_block_and_without_links(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "zeros").write_bytes(bytes(1 << 20))
    (src / "f").write_text("x")
    (src / "f").chmod(0o4755)  # no set-id bit survives the copy
    dst = tmp_path / "dst"
    dst.mkdir()
    with Held.open(src) as s, Held.open(dst) as d:
        d.copy_from(s, None)
    assert (dst / "sub" / "zeros").stat().st_blocks * 512 >= 1 << 20
    assert stat.S_IMODE((dst / "f").stat().st_mode) == 0o755
    (src / "link").symlink_to("/etc/passwd")
    again = tmp_path / "again"
    again.mkdir()
    with Held.open(src) as s, Held.open(again) as d, pytest.raises(UntrustedPath):
        d.copy_from(s, None)
