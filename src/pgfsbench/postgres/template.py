"""initdb once per server build, options and host: later clusters are copies of the first.

initdb spends about half a second of CPU (the bootstrap, then a single-user server that
loads the catalogs) making the same files for every cell of a campaign that uses the same
binaries and initdb options. PostgreSQL's own test suites do what this module does since
PostgreSQL 17 (an initdb template copied for each test cluster, ``cp -RPp``): the first
cluster is made by initdb, copied aside, and each later one is a copy of it.

The copy is what initdb would write, not an approximation of it: initdb's output depends on
its binaries, its arguments, its environment (locale, time zone) and the host's limits it
probes (shared memory and semaphores, for ``max_connections`` and ``shared_buffers``), and
all of these are in the template's key, with the boot's id (a reboot makes new templates).
Files are copied whole (every block written: a WAL segment initdb zero-filled must not come
back with holes, which would make its first writes allocate blocks), beneath directories
held by descriptor (``system/held.py``): the cluster initdb made is the server user's, and
a link or a FIFO that user planted in it is refused, never followed or vouched for. The
one difference is the system identifier in ``pg_control``, the same for every copy; no
benchmark reads it.

Templates live in the work directory (``initdb-templates/``, root's alone), the 8 used
last; a template is written under a name of its own and renamed into place once complete,
so a killed run leaves no half one. Root copies a template into every later cell and starts
it, into a data directory the server's user cannot enter until the copy is whole, so one
is used only if root made it here: its manifest (root's file, written when it
was made) holds its key and a checksum of every entry (names, types, modes, owners, link
targets and contents), checked again before each use. A template that fails any check is
passed over, and initdb runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.held import Held, Owner, make_dirs
from pgfsbench.system.trust import directory_problem, open_nofollow, read_trusted

FORMAT = 2  # 2: a manifest with the key and a checksum of the tree
KEEP = 8  # templates a work directory keeps (the ones used last)
OUTPUT = "initdb-output.txt"
MANIFEST = "manifest.json"
# what initdb reads from its environment
_ENV = ("TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "PGTZ")
# what initdb's probe of max_connections and shared_buffers depends on, and the boot
_HOST_FILES = (
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/shmmax",
    "/proc/sys/kernel/shmall",
    "/proc/sys/kernel/sem",
    "/etc/timezone",
)


def _file_identity(path: Path) -> list[object]:
    real = path.resolve()
    st = real.stat()
    return [str(real), st.st_size, st.st_mtime_ns]


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def template_key(
    binaries: Binaries, argv: list[str], pgdata: Path, waldir: Path | None, os_user: str | None
) -> str:
    """What initdb's output depends on, as a name: the same key, the same files."""
    generic = [
        "<pgdata>" if a == str(pgdata) else "<waldir>" if waldir and a == str(waldir) else a
        for a in argv
    ]
    try:
        localtime = str(Path("/etc/localtime").resolve())
    except OSError:
        localtime = ""
    material = {
        "format": FORMAT,
        "version": binaries.version_line,
        "programs": [_file_identity(binaries.bindir / p) for p in ("initdb", "postgres")],
        "argv": generic,
        "user": os_user,
        "env": {k: os.environ.get(k) for k in _ENV},
        "host": {p: _read(p) for p in _HOST_FILES},
        "localtime": localtime,
    }
    blob = json.dumps(material, sort_keys=True).encode()
    return f"pg{binaries.version}-{hashlib.sha256(blob).hexdigest()[:20]}"


@dataclass(frozen=True)
class Templates:
    """The initdb templates of a work directory."""

    root: Path
    keep: int = KEEP

    def find(self, key: str) -> Path | None:
        """The template of this key, when one is complete and root made it (marked as used
        now); None otherwise."""
        path = self.root / key
        if not (path / "pgdata" / "PG_VERSION").is_file():
            return None
        if self.distrust(key) is not None:
            return None
        os.utime(path)
        return path

    def distrust(self, key: str) -> str | None:
        """Why the template of ``key`` is not to be used (None: root made it, as it is)."""
        path = self.root / key
        for directory in (self.root, path):
            try:
                why = directory_problem(os.lstat(directory), directory, last=True)
            except OSError as exc:
                return f"{directory}: {exc.strerror}"
            if why is not None:
                return why
        try:
            manifest = json.loads(read_trusted(path / MANIFEST))
        except (OSError, ValueError, PgfsbenchError) as exc:
            return f"no manifest of root's ({exc})"
        if not isinstance(manifest, dict) or manifest.get("key") != key:
            return "its manifest is of another key"
        try:
            checksum = tree_checksum(path, skip=(MANIFEST,))
        except (OSError, PgfsbenchError) as exc:
            return f"it cannot be read whole ({exc})"
        if manifest.get("checksum") != checksum:
            return "its files are not those it was made with (checksum)"
        return None

    def _evict(self) -> None:
        """Keep the ``keep`` templates used last: a new boot, build or set of options
        makes new ones, and the old would otherwise stay for good."""
        done = [p for p in self.root.iterdir() if not p.name.startswith(".") and p.is_dir()]
        done.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in done[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)

    def save(self, key: str, pgdata: Path, waldir: Path | None, output: str) -> None:
        """Copy a cluster initdb has just made (nothing has started it) as the template of
        ``key``. The WAL directory, when it is elsewhere, is copied in as pg_wal. The
        cluster is the server user's: it is read beneath held directories, regular files
        and directories only (a link or a FIFO planted there fails the save, and the next
        cell runs initdb)."""
        if self.find(key) is not None:
            return
        make_dirs(self.root, 0o700)
        self._discard(self.root / key)  # one not to be used (an older format, changed)
        for stale in self.root.glob(f".{key}.*"):  # a killed run's (one campaign a host)
            shutil.rmtree(stale, ignore_errors=True)
        name = f".{key}.{os.getpid()}"
        partial = self.root / name
        try:
            with Held.open(self.root) as root, root.make_dir(name) as made:
                with Held.open(pgdata) as source, made.make_dir("pgdata") as copy:
                    owner = _owner_of(source)
                    copy.copy_from(source, owner, skip=("pg_wal",) if waldir else ())
                    if waldir is not None:
                        with Held.open(waldir) as wal, copy.make_dir("pg_wal") as wal_copy:
                            wal_copy.copy_from(wal, owner)
                            wal_copy.hand_to(_owner_of(wal), wal.stat().st_mode)
                    copy.hand_to(owner, source.stat().st_mode)
                made.create(OUTPUT, output)
                manifest = {"format": FORMAT, "key": key, "checksum": tree_checksum(partial)}
                made.create(MANIFEST, json.dumps(manifest))
                made.sync_filesystem()  # syncfs(2) of the work directory's, never sync(2)
            partial.rename(self.root / key)
            self._evict()
        finally:
            shutil.rmtree(partial, ignore_errors=True)

    def _discard(self, path: Path) -> None:
        """Remove what stands at ``path`` in the templates' directory, never following a
        link (a link is removed, not what it points at)."""
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)

    def copy_into(
        self, template: Path, pgdata: Held, waldir: Path | None, owner: Owner | None
    ) -> str:
        """Make the cluster in ``pgdata`` (an empty directory of root's, handed to the
        server's user only after this) a copy of the template, with its WAL in ``waldir``
        (pg_wal a link to it) when one is given, as initdb --waldir makes it; initdb's
        output as the template kept it."""
        with Held.open(template / "pgdata") as source:
            pgdata.copy_from(source, owner, skip=("pg_wal",) if waldir else ())
            if waldir is not None:
                with source.descend("pg_wal") as wal_source, Held.open(waldir) as wal:
                    wal.copy_from(wal_source, owner)
                pgdata.symlink("pg_wal", waldir, owner)
        try:
            output = read_trusted(template / OUTPUT).decode(errors="replace")
        except (OSError, PgfsbenchError):
            output = ""
        return f"(a copy of the initdb template {template.name})\n{output}"

    def uncopy(self, template: Path, pgdata: Held, waldir: Path | None) -> None:
        """Remove what a failed ``copy_into`` may have made: the template's entries by
        name, in ``pgdata`` and ``waldir``, and nothing else that is there."""
        with Held.open(template / "pgdata") as source:
            for name in source.names():
                pgdata.remove(name)
            if waldir is not None and source.exists("pg_wal"):
                with source.descend("pg_wal") as wal_source, Held.open(waldir) as wal:
                    for name in wal_source.names():
                        wal.remove(name)


def _owner_of(held: Held) -> Owner:
    st = held.stat()
    return Owner(st.st_uid, st.st_gid)


def tree_checksum(root: Path, skip: tuple[str, ...] = ()) -> str:
    """sha256 over every entry under ``root`` (top-level names in ``skip`` left out): its
    relative name, type, mode, owner, and its content or link target. Links are never
    followed; files are read through descriptors opened without following one."""
    digest = hashlib.sha256()
    for directory, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        base = Path(directory)
        for name in sorted([*dirs, *files]):
            path = base / name
            rel = path.relative_to(root)
            if len(rel.parts) == 1 and name in skip:
                continue
            st = os.lstat(path)
            digest.update(json.dumps([str(rel), st.st_mode, st.st_uid, st.st_gid]).encode() + b"\0")
            if stat.S_ISLNK(st.st_mode):
                digest.update(os.readlink(path).encode() + b"\0")
            elif stat.S_ISREG(st.st_mode):
                fd = open_nofollow(path, os.O_RDONLY)
                with os.fdopen(fd, "rb") as fh:
                    digest.update(hashlib.file_digest(fh, "sha256").digest())
    return digest.hexdigest()
