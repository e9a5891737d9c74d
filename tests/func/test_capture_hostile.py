"""Capture and replay against a hostile captured server: the review's proofs (issue 76) re-run
as tests, as root against the real `postgres` user and a server the test set against
pgfsbench.

- links planted in the server's pg_tblspc make root write nothing outside the capture (no
  set-uid file, no directory anywhere): the capture is refused, by OID;
- a shadowed pg_settings, a setting name with a newline, a library planted in the data
  directory, an event trigger, a SECURITY DEFINER function, a C function bound to libc's
  system(), a DO block with COPY ... TO PROGRAM: none runs on the benchmark host (markers
  are looked for), the statements that reach the OS are counted, not replayed;
- a password reaches no process's command line, no journal, no output; PGPASSWORD alone
  works (no prompt loop); a killed capture's journal blocks the next capture until
  `cleanup`, which PGPASSWORD lets connect;
- SIGTERM and SIGHUP put the server back like Ctrl-C;
- a postgresql.auto.conf that already holds a capture's settings is refused as "before".
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgfsbench.workloads.replay import replayer_path
from tests.func.conftest import (
    ROOT,
    leftovers,
    new_shared_memory,
    pgfsbench,
    runs_of,
    shared_memory,
)
from tests.func.pgserver import PG_USER, Server, as_postgres, private_server

pytestmark = pytest.mark.skipif(replayer_path() is None, reason="pgfsbench-replay not built (Go)")

PORT = 5984
PASSWORD = "S3cr3t:pw\\x"  # a colon and a backslash: a passfile escapes both
WATCHED = ("log_statement", "log_destination", "log_duration", "log_parameter_max_length")


@pytest.fixture(scope="module")
def place() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pgfsb-hostile-", dir="/var/tmp"))
    d.chmod(0o755)
    memory = shared_memory()
    try:
        yield d
        left = leftovers(d) + sorted(new_shared_memory(memory))
        if left:
            pgfsbench("cleanup", "--workdir", str(d / "work"), check=False)
        assert left == [], f"left behind: {left}"
    finally:
        if not leftovers(d):
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def server(place: Path) -> Iterator[Server]:
    """The captured server: logging collector on, a password role (alice) by SCRAM on its
    socket, pgbench's tables."""
    hba = (
        "local all alice scram-sha-256\n"
        "local replication alice scram-sha-256\n"
        "local replication all trust\n"
    )
    conf = "logging_collector = on\nlog_directory = 'log'\npassword_encryption = scram-sha-256\n"
    with private_server(place, PORT, conf, hba) as srv:
        srv.psql(f"CREATE ROLE alice SUPERUSER LOGIN PASSWORD '{PASSWORD}'")
        as_postgres(
            str(srv.bindir / "pgbench"),
            "-i",
            "-s",
            "1",
            "-q",
            "-h",
            str(srv.sock),
            "-p",
            str(PORT),
            "postgres",
        )
        yield srv


def settings(srv: Server) -> dict[str, str]:
    rows = srv.psql(
        "SELECT name || '=' || setting FROM pg_catalog.pg_settings WHERE name IN "
        f"({', '.join(repr(n) for n in WATCHED)})"
    )
    return dict(line.split("=", 1) for line in rows.splitlines())


def capture(
    place: Path,
    srv: Server,
    seconds: int,
    out: Path,
    dsn: str | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "capture",
            "--dsn",
            dsn or srv.dsn,
            "--seconds",
            f"{seconds}s",
            "-o",
            str(out),
            "--workdir",
            str(place / "work"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **(env or {})},
        # a SIGHUP ignored stays ignored (nohup: system/signals.py); the suite started
        # under nohup would hand that on, and the SIGHUP test would wait out the capture
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )


def setuid_files(root: Path) -> list[str]:
    found = []
    for p in root.rglob("*"):
        with contextlib.suppress(OSError):
            st = p.lstat()
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(f"{p} uid={st.st_uid}")
    return found


def test_links_planted_in_pg_tblspc_make_root_write_nothing(place: Path, server: Server) -> None:
    """The server sends a tablespace for each entry of pg_tblspc: links the postgres user
    planted there (one relative, to root's working directory; one absolute, holding a
    set-uid program) are refused by OID, and nothing is written outside the capture."""
    outside = place / "outside"
    outside.mkdir()
    shutil.chown(outside, PG_USER, PG_USER)
    shutil.copy("/usr/bin/id", outside / "id")
    shutil.chown(outside / "id", PG_USER, PG_USER)
    (outside / "id").chmod(0o4755)
    tblspc = server.pgdata / "pg_tblspc"
    as_postgres("ln", "-s", "../../../../../../../tmp/pgfsb-planted-rel", str(tblspc / "90001"))
    as_postgres("ln", "-s", str(outside), str(tblspc / "90002"))
    before = settings(server)
    out = place / "cap-tblspc"
    try:
        proc = capture(place, server, 1, out)
        said = proc.communicate(timeout=120)[0]
    finally:
        (tblspc / "90001").unlink()
        (tblspc / "90002").unlink()
    assert proc.returncode != 0 and "tablespace 9000" in said and "refused" in said, said
    assert settings(server) == before  # put back on the way out
    assert not Path("/tmp/pgfsb-planted-rel").exists()
    assert not any(ROOT.glob("**/pgfsb-planted-rel"))
    assert setuid_files(place) == [f"{outside / 'id'} uid={os.stat(outside / 'id').st_uid}"]
    assert not out.exists() or not any(p.name == "id" for p in out.rglob("*"))


EVIL_C = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void) {
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd) || strcmp(cwd, ORIGINAL) == 0) return;
    FILE *f = fopen(MARKER, "a");
    if (f) { fprintf(f, "library ran in %s\n", cwd); fclose(f); }
}
"""


def test_a_hostile_server_carries_no_code_into_the_replay(place: Path, server: Server) -> None:
    markers = place / "markers"
    markers.mkdir()
    shutil.chown(markers, PG_USER, PG_USER)
    marker = markers / "ran"
    # a library in the data directory: it writes the marker when loaded anywhere else
    src = place / "evil.c"
    src.write_text(EVIL_C)
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-o",
            str(place / "evil.so"),
            str(src),
            f'-DORIGINAL="{server.pgdata}"',
            f'-DMARKER="{marker}"',
        ],
        check=True,
    )
    shutil.copy(place / "evil.so", server.pgdata / "evil.so")
    shutil.chown(server.pgdata / "evil.so", PG_USER, PG_USER)

    def touch(what: str) -> str:
        """A statement that makes a marker named by where it ran (md5 of data_directory)."""
        return (
            "EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', "
            f"'touch {markers}/{what}-' || md5(current_setting('data_directory')))"
        )

    server.psql(
        # a pg_settings of the superuser's own, found first on its search_path: a name
        # with a newline, and libraries to load
        "CREATE TABLE public.planted (name text, setting text);"
        "INSERT INTO public.planted VALUES "
        "(E'work_mem\\nsession_preload_libraries', './evil'), "
        "('session_preload_libraries', './evil'), ('local_preload_libraries', './evil'), "
        "('auto_explain.log_min_duration', '0'), ('archive_command', 'id');"
        "CREATE VIEW public.pg_settings AS SELECT name, setting, source, context, "
        "pending_restart FROM pg_catalog.pg_settings UNION ALL SELECT name, setting, "
        "'configuration file', 'user', false FROM public.planted;"
        "ALTER DATABASE postgres SET search_path = public, pg_catalog;"
        # an event trigger, a SECURITY DEFINER function and a C function on libc's system()
        "CREATE FUNCTION public.on_ddl() RETURNS event_trigger LANGUAGE plpgsql AS "
        f"$f$ BEGIN {touch('trigger')}; END $f$;"
        "CREATE EVENT TRIGGER on_ddl ON ddl_command_end EXECUTE FUNCTION public.on_ddl();"
        "CREATE FUNCTION public.definer() RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS "
        f"$f$ BEGIN {touch('definer')}; END $f$;"
        "GRANT EXECUTE ON FUNCTION public.definer() TO PUBLIC;"
        # a C function whose library is the one planted in the data directory (made from
        # a valid one, then pointed there: PostgreSQL loads, and runs its constructor,
        # before it checks the magic block)
        "CREATE FUNCTION public.sys(cstring) RETURNS int LANGUAGE c AS "
        "'$libdir/plpgsql', 'plpgsql_call_handler';"
        "UPDATE pg_catalog.pg_proc SET probin = './evil.so' "
        "WHERE oid = 'public.sys(cstring)'::pg_catalog.regprocedure;"
        "GRANT EXECUTE ON FUNCTION public.sys(cstring) TO PUBLIC;"
    )
    out = place / "cap-code"
    proc = capture(place, server, 4, out)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert "capturing" in first, first + proc.stdout.read()
    # the workload: each way to the OS, and ordinary statements
    for statement in (
        "SELECT count(*) FROM pgbench_accounts WHERE aid < 100",
        "SELECT public.sys('x')",  # fails here (no magic block), after the constructor ran
        f"DO $$ BEGIN {touch('do')}; END $$",
        "SELECT public.definer()",
        "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1",
    ):
        with contextlib.suppress(AssertionError):
            server.psql(statement)
    said = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, said
    server.psql(
        "DROP EVENT TRIGGER on_ddl; DROP VIEW public.pg_settings; DROP TABLE public.planted;"
        "ALTER DATABASE postgres RESET search_path;"
    )
    (server.pgdata / "evil.so").unlink()
    manifest = json.loads((out / "manifest.json").read_text())
    assert not (out / "base" / "evil.so").exists()
    assert "evil.so (file)" in manifest["base"]["left_out"]
    carried = manifest["server_settings"]
    assert not any("\n" in k or "preload" in k or "auto_explain" in k for k in carried)
    source_made = sorted(p.name for p in markers.iterdir())
    # the replay, as a cell: none of it runs here
    spec = place / "code.toml"
    spec.write_text(
        '[defaults]\nrepetitions = 1\nwarmup = "0s"\n[storage.ext4]\nfs = "ext4"\n'
        f'device = "loop:1G"\n[workload.mine]\ntool = "replay"\ncapture = "{out}"\n'
        'mode = "fast"\n'
    )
    results = place / "code.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(place / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    assert not marker.exists(), marker.read_text()
    assert sorted(p.name for p in markers.iterdir()) == source_made
    shown = json.loads(
        pgfsbench("results", "show", str(run["run_id"]), "--results", str(results), "--json").stdout
    )
    skipped = shown["metrics"]["tool"]["fidelity"]["not_replayable"]
    reached = {k: v for k, v in skipped.items() if k.startswith("reaches the server's OS")}
    assert any("sys()" in k for k in reached) and any("PROGRAM" in k for k in reached), skipped
    (safety,) = out.glob("replay-*.safety.json")
    facts = json.loads(safety.read_text())
    assert any(
        f.startswith("sys(") or ".sys(" in f
        for f in facts["functions_in_untrusted_languages_locked"]
    ), facts
    assert facts["event_triggers_disabled"] >= 1 and facts["role_map"].get("postgres") == (
        "pgfsbench_replay"
    )
    (conf,) = (out / "templates").glob("replay-*/pgdata/postgresql.conf")
    text = conf.read_text()
    assert "evil" not in text and "session_preload_libraries = ''" in text.split("written last")[1]


def _cmdlines() -> list[str]:
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            with contextlib.suppress(OSError):
                found.append((p / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


def test_a_password_reaches_no_argv_journal_or_output(place: Path, server: Server) -> None:
    import threading

    dsn = f"host={server.sock} port={PORT} user=alice password='S3cr3t:pw\\\\x' dbname=postgres"
    out = place / "cap-pw"
    proc = capture(place, server, 30, out, dsn=dsn)
    lines: list[str] = []
    assert proc.stdout is not None
    stream = proc.stdout
    reader = threading.Thread(target=lambda: lines.extend(stream), daemon=True)
    reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("capturing" in ln for ln in lines):
        # every process's command line, as any local user reads them (pg_basebackup's too),
        # but pgfsbench's own: the user put the password there (PGPASSWORD or ~/.pgpass
        # keep it off every command line; docs/safety.md)
        seen += [
            c
            for c in _cmdlines()
            if "S3cr3t" in c and "pytest" not in c and "-m pgfsbench capture" not in c
        ]
        time.sleep(0.01)
    assert any("capturing" in ln for ln in lines), lines
    assert seen == [], seen
    proc.send_signal(signal.SIGKILL)  # killed mid-capture: the journal must undo it
    proc.wait(timeout=30)
    journals = list((place / "work" / "journal").glob("*.jsonl"))
    assert journals and not any(b"S3cr3t" in p.read_bytes() for p in journals)
    assert settings(server)["log_statement"] == "all"
    # a second capture of the same server is refused while that journal is there
    again = capture(place, server, 1, place / "cap-pw2", dsn=dsn)
    said = again.communicate(timeout=60)[0]
    assert again.returncode != 0 and "pgfsbench cleanup" in said and "S3cr3t" not in said, said
    # cleanup without the password cannot connect, says so, and keeps the journal
    left = pgfsbench("cleanup", "--workdir", str(place / "work"), check=False)
    assert "S3cr3t" not in left.stdout + left.stderr
    assert settings(server)["log_statement"] == "all"
    # with it (PGPASSWORD, as libpq takes it), the server is put back
    done = subprocess.run(
        [sys.executable, "-m", "pgfsbench", "cleanup", "--workdir", str(place / "work")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PGPASSWORD": "S3cr3t:pw\\x"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "S3cr3t" not in done.stdout + done.stderr
    assert settings(server)["log_statement"] == "none"
    shutil.rmtree(out, ignore_errors=True)
    # PGPASSWORD alone: the copy gets it by its passfile (it once looped without one)
    started = time.monotonic()
    ok = capture(
        place,
        server,
        1,
        place / "cap-pw3",
        dsn=f"host={server.sock} port={PORT} user=alice dbname=postgres",
        env={"PGPASSWORD": "S3cr3t:pw\\x"},
    )
    said = ok.communicate(timeout=120)[0]
    assert ok.returncode == 0 and time.monotonic() - started < 60, said
    assert "S3cr3t" not in said


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_put_the_server_back(
    place: Path, server: Server, sig: signal.Signals
) -> None:
    before = settings(server)
    out = place / f"cap-{sig.name}"
    proc = capture(place, server, 60, out)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "capturing" in line, line + proc.stdout.read()
    assert settings(server)["log_statement"] == "all"
    proc.send_signal(sig)
    said = proc.communicate(timeout=60)[0]
    assert settings(server) == before, said
    assert proc.returncode == 0 and (out / "manifest.json").exists(), said
    assert json.loads((out / "manifest.json").read_text())["end"]["cut_short"] is True


def test_settings_a_capture_left_are_never_taken_as_the_servers(
    place: Path, server: Server
) -> None:
    for statement in (
        "ALTER SYSTEM SET log_statement = 'all'",
        "ALTER SYSTEM SET log_duration = on",
        "ALTER SYSTEM SET log_parameter_max_length = -1",
        "SELECT pg_reload_conf()",
    ):
        server.psql(statement)
    try:
        proc = capture(place, server, 1, place / "cap-left")
        said = proc.communicate(timeout=60)[0]
        assert proc.returncode != 0 and "already holds a capture's settings" in said, said
    finally:
        for name in ("log_statement", "log_duration", "log_parameter_max_length"):
            server.psql(f"ALTER SYSTEM RESET {name}")
        server.psql("SELECT pg_reload_conf()")


def test_a_system_view_redefined_on_the_captured_server_is_refused(
    place: Path, server: Server
) -> None:
    """A superuser may redefine pg_catalog's own views: pgfsbench's queries of its counters
    (as superuser, in every cell) would run what the captured server put there. The copy
    is refused, naming what changed, before anything of pgfsbench's runs in it."""
    server.psql(
        "CREATE OR REPLACE VIEW pg_catalog.pg_stat_wal AS "
        "SELECT * FROM pg_catalog.pg_stat_get_wal()"
    )
    out = place / "cap-view"
    proc = capture(place, server, 1, out)
    said = proc.communicate(timeout=120)[0]
    assert proc.returncode == 0, said
    spec = place / "view.toml"
    spec.write_text(
        '[defaults]\nrepetitions = 1\nwarmup = "0s"\n[storage.tmp]\nfs = "tmpfs"\nsize = "1G"\n'
        f'[workload.mine]\ntool = "replay"\ncapture = "{out}"\nmode = "fast"\n'
    )
    results = place / "view.sqlite"
    done = pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(place / "work"),
        check=False,
    )
    assert done.returncode != 0
    assert "view pg_stat_wal redefined" in done.stdout + done.stderr, done.stdout
