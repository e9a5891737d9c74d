"""A pod's bundle is what a container image made: hostile input to the root controller.
Each attack of the issue, refused with a reason, before anything is allocated for it."""

from __future__ import annotations

import gzip
import io
import sqlite3
import tarfile
import time
from pathlib import Path

import pytest

from pgfsbench.kube import bundle
from pgfsbench.kube.pod import POD_ARTIFACTS
from pgfsbench.results.importer import adopt_runs
from pgfsbench.results.records import RunOutcome, RunStatus, StoredCampaign, StoredRun
from pgfsbench.results.store import Store
from pgfsbench.system.errors import StoreError


def _tar(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_bundle_that_unpacks_to_more_than_its_bound_is_refused_while_decompressing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle, "MAX_UNPACKED_BYTES", 4 << 20)
    monkeypatch.setattr(bundle, "MAX_MEMBER_BYTES", 4 << 20)
    bomb = _tar([("results.db", bytes(64 << 20))])  # 64 MiB of zeros: a few tens of KiB
    assert len(bomb) < 200_000
    with pytest.raises(ValueError, match=r"too large|more than"):
        bundle.unpack(bomb, tmp_path / "x")
    written = sum(p.stat().st_size for p in (tmp_path / "x").rglob("*") if p.is_file())
    assert written == 0


def test_a_member_that_lies_about_its_size_or_leaves_is_refused(tmp_path: Path) -> None:
    for i, name in enumerate(("../escape", "/etc/cron.d/x", "a/../../b")):
        with pytest.raises(ValueError, match="leaves its directory"):
            bundle.unpack(_tar([(name, b"x")]), tmp_path / f"x{i}")
    assert not (tmp_path / "escape").exists()


def test_a_header_claiming_too_many_lines_is_refused_before_anything_is_kept() -> None:
    started = time.monotonic()
    found = bundle.unframe([f"{bundle.HEADER} 100 2000000000 {'0' * 64}", f"{bundle.TRAILER} x"])
    assert found.data is None and "claims" in found.problem
    assert time.monotonic() - started < 1.0  # no list of two billion missing lines


def test_a_complete_bundle_followed_by_a_cut_one_is_kept() -> None:
    lines = list(bundle.frame(b"first bundle"))
    again = list(bundle.frame(b"first bundle"))[:-1]  # printed again, cut short
    assert bundle.unframe([*lines, *again]).data == b"first bundle"


def _one_run(store: Store, host: str, uuid: str) -> int:
    """A campaign of one run of cell x on ``host`` in ``store``; the run's id."""
    cid = store.start_campaign(StoredCampaign(name=host, host=host, uuid=f"c-{uuid}"))
    return store.start_run(
        StoredRun(
            campaign_id=cid,
            cell="x",
            storage="s",
            fs="ext4",
            postgres="default",
            kernel="default",
            workload="w",
            repetition=1,
            host=host,
            uuid=uuid,
        )
    )


def _pod_store(tmp_path: Path, artifact: Path) -> Path:
    store = Store(str(tmp_path / "results.db"))
    rid = _one_run(store, "pod", "pod-run-1")
    store.finish_run(rid, RunOutcome(RunStatus.OK, tps=1.0, throughput=1.0))
    store.put_artifact(rid, "pgbench_stdout", artifact)
    store.close()
    return tmp_path / "results.db"


def _target(tmp_path: Path) -> tuple[Store, int]:
    tmp_path.mkdir(exist_ok=True)
    target = Store(str(tmp_path / "controller.db"))
    return target, _one_run(target, "h", "run-1")


def test_an_artifact_path_outside_the_bundle_is_never_read(tmp_path: Path) -> None:
    """The pod names /etc/shadow (or /dev/zero) as an artifact: root neither hashes nor
    reads it; the run says what was refused."""
    pod = tmp_path / "pod"
    pod.mkdir()
    for i, outside in enumerate((Path("/etc/shadow"), Path("/dev/zero"), POD_ARTIFACTS / "..")):
        results = _pod_store(pod, outside)
        source = Store.foreign(results, pod / "artifacts")
        target, rid = _target(tmp_path / f"t{i}")
        started = time.monotonic()
        adopt_runs(source, target, [(1, rid)], moved=(POD_ARTIFACTS, pod / "artifacts"))
        assert time.monotonic() - started < 5
        metrics = target.get_run(rid).metrics
        assert metrics.get("imported_artifacts") in (None, {})
        assert "artifacts_refused" in metrics
        source.close()
        target.close()
        results.unlink()


def test_a_pods_store_with_a_view_in_place_of_a_table_is_refused_unread(tmp_path: Path) -> None:
    """A recursive view named like a table would fill the disk with SQLite's temporary
    file: it is never queried."""
    results = _pod_store(tmp_path, POD_ARTIFACTS / "x")
    conn = sqlite3.connect(results)
    conn.executescript(
        "DROP TABLE series;"
        "CREATE VIEW series AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)"
        " SELECT n AS id, n AS run_id, 'x' AS name, NULL AS unit, NULL AS data FROM r;"
    )
    conn.close()
    started = time.monotonic()
    with pytest.raises(StoreError, match="series is a view"):
        Store.foreign(results, tmp_path)
    assert time.monotonic() - started < 2


def test_a_pods_store_of_another_schema_revision_is_refused(tmp_path: Path) -> None:
    results = _pod_store(tmp_path, POD_ARTIFACTS / "x")
    conn = sqlite3.connect(results)
    conn.execute("UPDATE alembic_version SET version_num = '9999'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="different versions"):
        Store.foreign(results, tmp_path)


def test_a_pods_store_is_never_written(tmp_path: Path) -> None:
    results = _pod_store(tmp_path, POD_ARTIFACTS / "x")
    before = results.read_bytes()
    store = Store.foreign(results, tmp_path)
    with pytest.raises(Exception, match=r"readonly|read-only"):
        store.finish_run(1, RunOutcome(RunStatus.FAILED, error="x"))
    store.close()
    assert results.read_bytes() == before


def test_a_value_of_the_wrong_type_fails_the_adoption_with_its_column(tmp_path: Path) -> None:
    pod = tmp_path / "pod"
    pod.mkdir()
    results = _pod_store(pod, POD_ARTIFACTS / "x")
    conn = sqlite3.connect(results)
    conn.execute("UPDATE run SET repetition = 'three'")
    conn.commit()
    conn.close()
    source = Store.foreign(results, pod / "artifacts")
    target, rid = _target(tmp_path)
    with pytest.raises(ValueError, match=r"run\.repetition holds a str"):
        adopt_runs(source, target, [(1, rid)], moved=(POD_ARTIFACTS, pod / "artifacts"))
    source.close()
    target.close()


def test_gzip_of_the_bound_is_what_unpack_counts() -> None:
    """The counter sees decompressed bytes (not the compressed size)."""
    data = gzip.compress(bytes(1 << 20))
    stream = bundle._Counted(gzip.GzipFile(fileobj=io.BytesIO(data)), 1 << 19)
    with pytest.raises(ValueError, match="more than"):
        stream.read()


def test_a_pod_says_its_bundle_is_too_large_before_packing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On 0206292 the bound was checked only when the controller read the bundle, after
    the pod's whole run and log: now the pod refuses to pack it, naming the largest files."""
    from pgfsbench.kube import bundle

    monkeypatch.setattr(bundle, "MAX_UNPACKED_BYTES", 1 << 20)
    results = tmp_path / "results.db"
    results.write_bytes(b"x" * 100)
    artifacts = tmp_path / "artifacts"
    (artifacts / "run-1").mkdir(parents=True)
    (artifacts / "run-1" / "txlog.gz").write_bytes(b"y" * (2 << 20))
    with pytest.raises(bundle.TooLarge, match=r"run-1/txlog\.gz"):
        bundle.pack(results, artifacts)
    (artifacts / "run-1" / "txlog.gz").write_bytes(b"y" * 1000)
    assert bundle.pack(results, artifacts)
