"""Aged filesystems on real loop devices: ext4 aged by files and xfs aged by its own
database, made once into the work directory's cache and copied for each run, beside fresh
ext4; each run's filesystem state measured; a copy byte for byte its cache entry; a killed
aging leaves nothing mounted, attached or half-made."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from pgfsbench.storage.aging import CACHE_DIR, ImageCache
from pgfsbench.storage.devices import DeviceFactory
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from tests.func.conftest import kill, leftovers, pgfsbench, run_until_phase, runs_of, show

SPEC = """
[defaults]
scale = 1
clients = 2
threads = 1
duration = "2s"
warmup = "0s"
repetitions = 1

[storage.ext4]
fs = "ext4"
device = "loop:256M"

[storage.ext4-aged]
fs = "ext4"
device = "loop:256M"
age = { recipe = "files", seed = 3, overwritten = 1.0, fullness = 0.4, file_size = "64K" }

# the same filesystem, options, device and age: the same image, reused
[storage.ext4-aged-again]
fs = "ext4"
device = "loop:256M"
age = { recipe = "files", seed = 3, overwritten = 1.0, fullness = 0.4, file_size = "64K" }

[storage.xfs-aged-db]
fs = "xfs"
device = "loop:320M"
age = { recipe = "postgres", seed = 3, overwritten = 0.3, fullness = 0.3 }
"""


def test_aged_filesystems_made_once_copied_and_measured(base: Path) -> None:
    spec = base / "aged.toml"
    spec.write_text(SPEC)
    work, results = base / "work", base / "r.sqlite"
    plan = pgfsbench("plan", str(spec), "--workdir", str(work))
    words = " ".join(plan.stdout.split())
    assert "made once, at its first run" in words and "aged-images/" in words
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(work), timeout=900)
    runs = runs_of(results)
    assert [r["status"] for r in runs] == ["ok"] * 4, runs
    by_storage: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        by_storage.setdefault(str(r["storage"]), []).append(show(results, int(r["run_id"])))
    entries = sorted(p.name for p in (work / CACHE_DIR).iterdir())
    assert len(entries) == 2 and not any(e.startswith(".") for e in entries), entries
    ages = {name: by_storage[name][0]["storage_details"]["data"]["age"] for name in by_storage
            if name != "ext4"}  # fmt: skip
    # the two ext4 storages aged alike: copies of the one image, made once
    assert ages["ext4-aged"]["image"] == ages["ext4-aged-again"]["image"] in entries
    assert ages["xfs-aged-db"]["image"] in entries
    assert all(a["copy_seconds"] is not None for a in ages.values())
    for name, times in (("ext4-aged", 1.0), ("xfs-aged-db", 0.3)):  # per byte of the fs
        aging = ages[name]["aging"]
        assert 200 * 2**20 < aging["filesystem_bytes"] <= 320 * 2**20, aging
        assert aging["written_bytes"] >= times * aging["filesystem_bytes"], aging
    fresh = by_storage["ext4"][0]["storage_details"]
    aged = by_storage["ext4-aged"][0]["storage_details"]
    assert "age" not in fresh["data"]
    # the state measured in each: the aged one fuller, its free space in smaller pieces
    f_state, a_state = fresh["state_after_load"], aged["state_after_load"]
    assert a_state["fullness"] > f_state["fullness"] + 0.2, (f_state, a_state)
    assert (
        a_state["free_space"]["free_extent_avg_kib"] < f_state["free_space"]["free_extent_avg_kib"]
    )
    assert a_state["data_files"]["extents_per_gib"] is not None
    xfs_state = by_storage["xfs-aged-db"][0]["storage_details"]["state_after_load"]
    assert xfs_state["free_space"]["tool"] == "xfs_spaceman freesp"
    aged_run = next(r for r in runs if r["storage"] == "ext4-aged")
    text = pgfsbench("results", "show", str(aged_run["run_id"]), "--results", str(results)).stdout
    words = " ".join(text.split())
    assert "aged by files (seed 3" in words and "average free extent" in words

    # a run's device is the cache entry block for block: the provisioning's own copy
    entry = ImageCache(work / CACHE_DIR).find(entries[0])
    assert entry is not None
    journal = Journal.create(base / "copy-work", Runner())
    try:
        with journal.scope():
            dev = DeviceFactory(journal, Runner(), base / "copy-work" / "devices").get(
                f"loop:{entry.size}", "data", initial=entry
            )
            assert dev.backing_file is not None
            done = subprocess.run(["cmp", dev.backing_file, str(entry.image)], check=False)
            assert done.returncode == 0
    finally:
        journal.close()


def test_a_killed_aging_leaves_nothing(base: Path) -> None:
    spec = base / "long.toml"
    spec.write_text(
        '[defaults]\nscale = 1\nduration = "2s"\nrepetitions = 1\n'
        '[storage.ext4-aged]\nfs = "ext4"\ndevice = "loop:512M"\n'
        'age = { recipe = "files", overwritten = 40.0, fullness = 0.5 }\n'
    )
    work = base / "work"
    proc = run_until_phase(spec, base, "aging")
    time.sleep(1)  # mounted and churning
    assert any((work / CACHE_DIR).glob(".ext4-files-*"))
    code, _, _ = kill(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL
    pgfsbench("cleanup", "--workdir", str(work))
    assert leftovers(base) == []  # nothing mounted, attached or running
    # neither a half-made image nor a complete one: the next run ages from the start
    cache = work / CACHE_DIR
    assert not cache.exists() or list(cache.iterdir()) == []
