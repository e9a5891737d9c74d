"""A spec's PostgreSQL 18 is found where users install it, or refused with what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.postgres.binaries import BINDIRS_ENV, find_binaries, major_in_path
from pgfsbench.system.errors import InstanceError


def fake_bindir(root: Path, version: str) -> Path:
    bindir = root / "bin"
    bindir.mkdir(parents=True)
    for tool in ("initdb", "pg_ctl", "pgbench"):
        (bindir / tool).write_text("#!/bin/sh\nexit 0\n")
        (bindir / tool).chmod(0o755)
    postgres = bindir / "postgres"
    postgres.write_text(f"#!/bin/sh\necho 'postgres (PostgreSQL) {version}'\n")
    postgres.chmod(0o755)
    return bindir


def test_the_major_a_bindir_names() -> None:
    assert major_in_path("/usr/lib/postgresql/18/bin") == 18
    assert major_in_path("/usr/pgsql-17/bin") == 17
    assert major_in_path("/opt/homebrew/opt/postgresql@16/bin") == 16
    assert major_in_path("/opt/pgfsbench-test/postgresql-18.6.0/bin") == 18
    assert major_in_path("/usr/local/bin") is None


def test_a_bindir_that_is_not_there_is_looked_for_by_major(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seventeen = fake_bindir(tmp_path / "seventeen", "17.2")
    eighteen = fake_bindir(tmp_path / "eighteen", "18.6")
    monkeypatch.setenv(BINDIRS_ENV, f"{seventeen}:{eighteen}")
    found = find_binaries(str(tmp_path / "usr/lib/postgresql/18/bin"))
    assert found.bindir == eighteen and found.version == "18.6"


def test_a_major_installed_nowhere_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BINDIRS_ENV, str(fake_bindir(tmp_path / "seventeen", "17.2")))
    with pytest.raises(InstanceError) as err:
        find_binaries(str(tmp_path / "usr/lib/postgresql/99/bin"))
    text = str(err.value)
    assert "PostgreSQL 99 is not installed here" in text and "postgresql-99" in text
    assert BINDIRS_ENV in text and "--set postgres.NAME.bindir" in text
    # a path that names no version stays a plain refusal
    with pytest.raises(InstanceError, match="no postgres, initdb"):
        find_binaries(str(tmp_path / "nowhere"))
