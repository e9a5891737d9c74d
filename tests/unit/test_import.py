"""Importing one results store into another: everything travels, nothing twice."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

from pgfsbench.results.importer import import_store
from pgfsbench.results.records import (
    RunOutcome,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store


def _host_file(path: Path, host: str, runs: int) -> tuple[Store, list[int]]:
    store = Store(str(path))
    camp = store.start_campaign(StoredCampaign(name="quick", host=host, uuid=str(uuid.uuid4())))
    ids = []
    for rep in range(1, runs + 1):
        rid = store.start_run(
            StoredRun(
                campaign_id=camp,
                cell="ext4/p/k/w",
                storage="ext4",
                fs="ext4",
                postgres="p",
                kernel="k",
                workload="w",
                repetition=rep,
                host=host,
                uuid=str(uuid.uuid4()),
            )
        )
        store.finish_run(
            rid, RunOutcome(RunStatus.OK, throughput=1000.0 + rep, throughput_unit="tps")
        )
        store.put_series(rid, "tps", [1000.0, 1001.0 + rep])
        store.put_checkpoints(rid, [{"started_s": 1.0, "ended_s": 2.0, "reason": "time"}])
        art = path.parent / f"{host}-{rep}.txt"
        art.write_text(f"artifact {rep}")
        store.put_artifact(rid, "commands", art)
        ids.append(rid)
    return store, ids


def test_import_twice_adds_nothing_twice_and_keeps_children(tmp_path: Path) -> None:
    a, ids = _host_file(tmp_path / "a.sqlite", "db1", 2)
    a.finish_run(ids[1], RunOutcome(RunStatus.ABORTED))  # the host was killed during its second run
    team = Store(str(tmp_path / "team.sqlite"))
    first = import_store(a, team)
    assert (first.runs_added, first.campaigns_added) == (2, 1)
    again = import_store(a, team)
    assert (again.runs_added, again.runs_already_there, again.campaigns_added) == (0, 2, 0)
    runs = team.list_runs()
    assert len(runs) == 2 and {r.host for r in runs} == {"db1"}
    full = team.get_run(runs[1].run_id)
    assert full.series["tps"].values == [1000.0, 1003.0]
    assert full.checkpoints[0].reason == "time"
    sha = hashlib.sha256(b"artifact 2").hexdigest()
    assert full.metrics["imported_artifacts"]["commands"]["sha256"] == sha

    # the host resumed: its second run again, imported again: only the new run is added
    camp = a.list_runs()[0].campaign_id
    assert camp is not None
    extra = a.start_run(
        StoredRun(
            campaign_id=camp,
            cell="ext4/p/k/w",
            storage="ext4",
            fs="ext4",
            postgres="p",
            kernel="k",
            workload="w",
            repetition=2,
            host="db1",
            uuid=str(uuid.uuid4()),
        )
    )
    a.finish_run(extra, RunOutcome(RunStatus.OK, throughput=999.0))
    a.supersede(camp, "ext4/p/k/w", 2, extra)
    third = import_store(a, team)
    assert (third.runs_added, third.runs_already_there, third.campaigns_added) == (1, 2, 0)
    assert len({r.campaign_id for r in team.list_runs()}) == 1
    old, new = sorted((r for r in team.list_runs() if r.repetition == 2), key=lambda r: r.run_id)
    assert old.status == "aborted" and old.superseded_by == new.run_id


def test_the_same_file_under_two_inventory_names_is_two_hosts(tmp_path: Path) -> None:
    a, _ = _host_file(tmp_path / "a.sqlite", "localhost", 1)
    team = Store(str(tmp_path / "team.sqlite"))
    import_store(a, team, host="node-a")
    import_store(a, team, host="node-b")
    assert sorted(str(r.host) for r in team.list_runs()) == ["node-a", "node-b"]
