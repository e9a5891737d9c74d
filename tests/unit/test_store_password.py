"""A results store's password is never shown: messages, the campaign's lines, journals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgfsbench.results.target import shown

SECRET = "s3cretpw"


def test_shown_keeps_everything_but_the_password() -> None:
    assert shown(f"postgresql://me:{SECRET}@db.example:5432/bench") == (
        "postgresql://me:***@db.example:5432/bench"
    )
    assert SECRET not in shown(f"postgresql://me@db/x?password={SECRET}&sslmode=require")
    assert "sslmode=require" in shown(f"postgresql://me@db/x?password={SECRET}&sslmode=require")
    assert shown("results.sqlite") == "results.sqlite"
    assert shown("postgresql://me@db/x") == "postgresql://me@db/x"
    assert SECRET not in shown(f"postgresql://me:{SECRET}@[bad")


def test_an_unreachable_store_is_named_without_its_password() -> None:
    for url in (
        f"postgresql://me:{SECRET}@127.0.0.1:1/x",
        f"postgresql://me@127.0.0.1:1/x?password={SECRET}",
        f"mysql://me:{SECRET}@127.0.0.1:1/x",
    ):
        done = subprocess.run(
            [sys.executable, "-m", "pgfsbench", "results", "list", "--results", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PGCONNECT_TIMEOUT": "2"},
        )
        assert done.returncode != 0
        assert SECRET not in done.stdout + done.stderr
        assert "127.0.0.1" in done.stderr


def test_every_secret_of_a_url_is_masked_and_argv_kept_without_them() -> None:
    from pgfsbench.system.secrets import shown, shown_argv

    url = "postgresql://bob:hunter2@db/x?sslpassword=keypass&password=qp&sslmode=require"
    text = shown(url)
    assert "hunter2" not in text and "keypass" not in text and "qp&" not in text
    assert "sslmode=require" in text
    argv = ["pgfsbench", "run", "s.toml", f"--results={url}", "-r", url, "--set", "a=b"]
    kept = " ".join(shown_argv(argv))
    assert "hunter2" not in kept and "keypass" not in kept
    assert kept.startswith("pgfsbench run s.toml --results=postgresql://bob:***@db/x")


def test_a_journal_header_keeps_no_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    import sys

    from pgfsbench.system.journal import Journal
    from pgfsbench.system.runner import Runner

    monkeypatch.setattr(sys, "argv", ["pgfsbench", "run", "--results", "postgresql://u:pw1@h/d"])
    journal = Journal.create(tmp_path, Runner())
    header = json.loads(journal.path.read_text().splitlines()[0])
    journal.close()
    assert "pw1" not in json.dumps(header)


def test_a_new_results_file_is_its_owners_alone(tmp_path: Path) -> None:
    """Runs keep other users' command lines (a disturbance's): the file is 0600."""
    import stat

    from pgfsbench.results.store import Store

    Store(str(tmp_path / "r.sqlite")).close()
    assert stat.S_IMODE((tmp_path / "r.sqlite").stat().st_mode) == 0o600


def test_a_connection_string_is_kept_without_its_password() -> None:
    from pgfsbench.system.secrets import shown_argv, shown_conninfo

    argv = [
        "pgfsbench",
        "capture",
        "--dsn",
        "host=/run/pg port=5432 user=alice password='S3:c\\'r et' dbname=x",
        "--dsn=password=plain host=h",
        "--results",
        "postgresql://u:pw@h/db",
    ]
    kept = " ".join(shown_argv(argv))
    assert "S3" not in kept and "plain" not in kept and "pw@" not in kept
    assert "password=***" in kept and "host=/run/pg" in kept and "dbname=x" in kept
    assert shown_conninfo("sslpassword = k3y host=x") == "sslpassword = *** host=x"
