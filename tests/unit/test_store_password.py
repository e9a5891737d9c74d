"""A results store's password is never shown: messages, the campaign's lines, journals."""

from __future__ import annotations

import os
import subprocess
import sys

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
