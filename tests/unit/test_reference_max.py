"""rate = "75%" finds the same cell's earlier maximum, whatever way its scale was given."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pgfsbench.engine.measure import reference_max
from pgfsbench.results.records import (
    RunOutcome,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store
from pgfsbench.spec import load_spec
from pgfsbench.spec.matrix import Cell, expand

SPEC = """
[defaults]
scale = "{scale}"
clients = 4
[storage.ext4]
fs = "tmpfs"
size = "1G"
[workload.rw]
builtin = "tpcb-like"
"""


def cell_of(tmp_path: Path, scale: str) -> Cell:
    path = tmp_path / "s.toml"
    path.write_text(SPEC.format(scale=scale).replace('"7"', "7"))

    def resolve(cell: Cell, text: str) -> tuple[int, dict[str, Any]]:
        return 37, {"from": text}

    (cell,) = expand(load_spec(path).spec, resolve)
    return cell


@pytest.mark.parametrize("scale", ["fits_ram", "7"])
def test_the_unthrottled_run_of_the_same_cell_is_found(tmp_path: Path, scale: str) -> None:
    cell = cell_of(tmp_path, scale)
    store = Store(str(tmp_path / "r.sqlite"))
    campaign = store.start_campaign(StoredCampaign(name="c", spec_path="s", spec_text=""))
    coords = cell.coordinates()
    for tps, clients in ((900.0, cell.workload.clients), (5000.0, cell.workload.clients + 1)):
        run = store.start_run(
            StoredRun(
                campaign_id=campaign,
                cell=cell.id,
                storage=coords["storage"],
                fs="tmpfs",
                postgres=coords["postgres"],
                kernel=coords["kernel"],
                workload=coords["workload"],
                repetition=1,
                scale=cell.scale,
                clients=clients,
                params={"workload": {"rate": None, "rate_fraction": None}},
            )
        )
        store.finish_run(run, RunOutcome(RunStatus.OK, throughput=tps))
    eng: Any = SimpleNamespace(store=store, campaign_id=campaign, plan=SimpleNamespace(rate_max={}))
    found = reference_max(eng, cell)
    assert found is not None and found[0] == 900.0
    store.close()
