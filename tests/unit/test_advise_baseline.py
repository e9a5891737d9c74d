"""`advise` copies what you run: every setting not at its default that shapes what the
storage sees, the ones left out said with why; --try adds alternatives; distinct names;
one size estimate (the plan's), from the server's databases; the work directory in the
spec; `plan` says where the loop files go, every host-wide change, and refuses a cell
that cannot fit before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgfsbench.advisor.advise import advise, to_toml
from pgfsbench.advisor.baseline import baseline, tried
from pgfsbench.plan import make_plan
from pgfsbench.spec.loading import load_spec
from pgfsbench.system.errors import CapabilityError, UsageError

GiB = 1 << 30
MiB = 1 << 20

# what pg_settings says of a tuned server (valued as the doctor's query values them)
NON_DEFAULT = {
    "shared_buffers": "1048576kB",
    "wal_compression": "lz4",
    "wal_buffers": "16384kB",
    "checkpoint_completion_target": "0.7",
    "effective_io_concurrency": "200",
    "bgwriter_lru_maxpages": "400",
    "bgwriter_delay": "50ms",
    "huge_pages": "off",
    "max_wal_size": "4096MB",
    "random_page_cost": "1.1",
    "max_connections": "300",
    "log_line_prefix": "%m [%p] ",
    "archive_command": "cp %p /archive/%f",
    "shared_preload_libraries": "pg_stat_statements",
    "ssl": "on",
    "port": "5433",
    "statement_timeout": "30s",
    "cluster_name": "15/main",
    "work_mem": "65536kB",
}
SOURCES = {**dict.fromkeys(NON_DEFAULT, "configuration file"), "work_mem": "database"}


def doctor(databases: list[tuple[str, int]] | None = None) -> dict[str, Any]:
    return {
        "findings": [],
        "facts": {
            "host": {"memory_bytes": 16 * GiB},
            "paths": [
                {
                    "role": "data directory",
                    "path": "/srv/pg",
                    "fstype": "ext4",
                    "mount": {"source": "/dev/sdb1", "options": ["rw", "relatime"]},
                }
            ],
            "postgresql": {
                "settings": {**NON_DEFAULT, "full_page_writes": "on"},
                "non_default": NON_DEFAULT,
                "non_default_source": SOURCES,
                "evidence": {"databases": [[n, b] for n, b in databases or []]},
            },
        },
    }


def test_every_storage_setting_of_yours_is_copied_and_the_rest_said() -> None:
    found = baseline(NON_DEFAULT, SOURCES)
    assert found.settings == {
        "shared_buffers": "1048576kB",
        "wal_compression": "lz4",
        "wal_buffers": "16384kB",
        "checkpoint_completion_target": "0.7",
        "effective_io_concurrency": "200",
        "bgwriter_lru_maxpages": "400",
        "bgwriter_delay": "50ms",
        "huge_pages": "off",
        "max_wal_size": "4096MB",
        "random_page_cost": "1.1",
    }
    said = "\n".join(found.comment())
    for name in (
        "max_connections",
        "log_line_prefix",
        "archive_command",
        "shared_preload_libraries",
        "ssl",
        "port",
        "statement_timeout",
        "cluster_name",
        "work_mem",  # ALTER DATABASE ... SET: one database's only
    ):
        assert name in said, name
    assert "set for one database or role" in said and "run commands or load libraries" in said


def test_advise_writes_todays_settings_tries_and_distinct_names(tmp_path: Path) -> None:
    advice = advise(
        doctor([("app", 40 * MiB), ("postgres", 8 * MiB)]),
        None,
        70 * GiB,
        tries=["wal_compression=off", "checkpoint_timeout=15min"],
        workdir=str(tmp_path / "work"),
    )
    spec: Any = advice.spec
    assert set(spec["storage"]) == {"ext4-today", "ext4-noatime"}
    assert set(spec["postgres"]) == {
        "settings-today",
        "wal_compression-off",
        "checkpoint_timeout-15min",
    }
    today = spec["postgres"]["settings-today"]["settings"]
    assert today["wal_compression"] == "lz4" and today["bgwriter_delay"] == "50ms"
    tried_off = spec["postgres"]["wal_compression-off"]["settings"]
    assert tried_off == {**today, "wal_compression": "off"}
    assert spec["workdir"] == str(tmp_path / "work")
    # 48 MiB of databases: scale 3 (16 MiB a scale unit), as the plan reckons it
    assert spec["defaults"]["scale"] == 3
    text = to_toml(advice)
    assert "left out" in text and "archive_command" in text
    target = tmp_path / "advised.toml"
    target.write_text(text)
    loaded = load_spec(target)
    plan = make_plan(loaded, Path(spec["workdir"]))
    cell = next(c for c in plan.cells if c.id.startswith("ext4-today/settings-today"))
    data, room = plan.data_bytes_per_cell[cell.id], plan.needed_bytes_per_cell[cell.id]
    # one estimate: the figures advise wrote are the plan's
    assert f"about {data / MiB:.1f} MiB of data" in spec["description"]
    assert f"{room / MiB:.1f} MiB of room" in spec["description"]
    assert "app" in advice.sizes[0] and "48.0 MiB" in advice.sizes[0]


def test_a_database_larger_than_the_work_directory_is_brought_down_and_said() -> None:
    advice = advise(doctor([("big", 500 * GiB)]), None, 10 * GiB, workdir="/srv/w")
    scale = advice.spec["defaults"]["scale"]  # type: ignore[index]
    assert isinstance(scale, int) and 50 <= scale <= 300
    assert "brought down to scale" in advice.sizes[0] and "/srv/w" in advice.sizes[0]


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("wal_compression", "SETTING=VALUE"),
        ("wal_compresion=on", "not a PostgreSQL setting"),
        ("checkpoint_timeout=soon", "not of its type"),
    ],
)
def test_try_refuses_what_it_cannot_measure(entry: str, said: str) -> None:
    with pytest.raises(UsageError, match=said):
        tried([entry], set())


def test_the_specs_workdir_is_where_plan_puts_the_loop_files(tmp_path: Path) -> None:
    work = tmp_path / "disk"
    target = tmp_path / "s.toml"
    target.write_text(
        f'workdir = "{work}"\n[storage.ext4]\nfs = "ext4"\ndevice = "loop:1G"\n'
        "[kernel.dirty]\nsysctl = { 'vm.dirty_background_bytes' = 67108864 }\n"
    )
    from pgfsbench.cli.run import chosen_workdir

    loaded = load_spec(target)
    assert chosen_workdir(None, loaded) == work
    assert chosen_workdir(Path("/elsewhere"), loaded) == Path("/elsewhere")
    plan = make_plan(loaded, chosen_workdir(None, loaded))
    assert plan.workdir_place is not None and plan.workdir_place.startswith(f"{work}: ")
    (change,) = plan.host_changes
    assert "vm.dirty_background_bytes = 67108864 (now " in change
    assert "put back after each cell" in change and "every process" in change
    bad = tmp_path / "bad.toml"
    bad.write_text('workdir = "relative/dir"\n[storage.ext4]\nfs = "ext4"\n')
    with pytest.raises(Exception, match="absolute"):
        load_spec(bad)
    # a spec someone else wrote cannot put pgfsbench's directories in /etc
    bad.write_text('workdir = "/etc/"\n[storage.ext4]\nfs = "ext4"\n')
    with pytest.raises(Exception, match="a system directory"):
        load_spec(bad)


def test_a_cell_that_cannot_fit_is_refused_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pgfsbench.plan as plan_module

    target = tmp_path / "s.toml"
    target.write_text('[defaults]\nscale = 100\n[storage.ext4]\nfs = "ext4"\ndevice = "loop:8G"\n')
    monkeypatch.setattr(plan_module, "_free_under", lambda w: (w, 1 * GiB))
    with pytest.raises(CapabilityError, match=r"which has 1\.0 GiB free"):
        make_plan(load_spec(target), tmp_path)


def _dirty(small_buffers: bool, databases: list[tuple[str, int]]) -> Any:
    d = doctor(databases)
    d["findings"] = [{"rule": "dirty-gigabytes", "severity": "WARN"}]
    d["facts"]["vm"] = {"vm.dirty_ratio": 20, "vm.dirty_background_ratio": 10}
    if small_buffers:
        for where in ("settings", "non_default"):
            d["facts"]["postgresql"][where] = {
                **d["facts"]["postgresql"][where],
                "shared_buffers": "131072kB",
            }
    return d


def test_dirty_limits_are_not_a_dimension_where_the_runs_cannot_tell_them_apart() -> None:
    """A DBA's 52 MiB cluster (2026-12-01): advise added kernel-today/kernel-recommended
    (vm.dirty_*), doubling the runs, and `plan` then warned that the runs could not tell
    them apart (the data fits in shared_buffers, no checkpoint in a 40 s run). The kernel
    dimension is asked only where it can show; the reason is said."""
    small = advise(_dirty(True, [("postgres", 52 * MiB)]), None, 70 * GiB, duration="30s")
    assert "kernel" not in small.spec
    said = [r for r in small.reasons if r.startswith("vm.dirty_* left as found")]
    assert said and "fits in shared_buffers" in said[0], small.reasons
    # a database larger than shared_buffers: the dirty limits shape the runs, compared
    big = advise(_dirty(True, [("app", 2 * GiB)]), None, 70 * GiB, duration="30s")
    kernel: Any = big.spec["kernel"]
    assert set(kernel) == {"kernel-today", "kernel-recommended"}
    assert kernel["kernel-recommended"]["sysctl"]["vm.dirty_bytes"] == 512 << 20
    # a run past checkpoint_timeout (5 min): a checkpoint's writes in it, compared too
    long = advise(_dirty(True, [("postgres", 52 * MiB)]), None, 70 * GiB, duration="6min")
    assert "kernel" in long.spec
