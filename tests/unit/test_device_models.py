"""Emulated disks in the spec, and the parameters each model resolves to (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgfsbench.plan import make_plan
from pgfsbench.spec import load_spec
from pgfsbench.spec.device_models import MODELS, resolve_model
from pgfsbench.spec.models import EmulatedDevice, device_text, loop_bytes
from pgfsbench.storage import devices
from pgfsbench.system.errors import SpecError
from pgfsbench.system.runner import Completed

HEAD = '[defaults]\nscale = 2\n[storage.e]\nfs = "ext4"\n'


def test_an_emulated_disk_is_a_table_in_the_spec_and_a_loop_size_in_the_plan(
    tmp_path: Path,
) -> None:
    p = tmp_path / "spec.toml"
    p.write_text(HEAD + 'device = { size = "2G", model = "hdd-7200" }\n')
    plan = make_plan(load_spec(p))
    (cell,) = plan.cells
    (role, dev) = cell.storage.devices()[0]
    assert role == "data" and isinstance(dev, EmulatedDevice) and dev.model == "hdd-7200"
    assert loop_bytes(dev) == 2 << 30 and plan.loop_bytes_per_cell[cell.id] == 2 << 30
    assert device_text(dev) == "2G emulated (hdd-7200)" and device_text("loop:1G") == "loop:1G"


def test_a_disk_over_io_uring_is_not_supported_where_the_kernel_lacks_it(
    tmp_path: Path,
) -> None:
    """transport = "io_uring" on a kernel without FUSE over io_uring (or with io_uring
    off): the cell is not supported here, with the reason, and the others run."""
    p = tmp_path / "spec.toml"
    p.write_text(
        HEAD
        + 'device = { size = "2G", model = "sata-ssd", transport = "io_uring" }\n'
        + '[storage.f]\nfs = "ext4"\ndevice = { size = "2G", model = "sata-ssd" }\n'
    )
    plan = make_plan(load_spec(p))
    ring = [c.id for c in plan.cells if c.storage_name == "e"]
    assert len(ring) == 1 and len(plan.cells) == 2
    param, disabled = tmp_path / "enable_uring", tmp_path / "io_uring_disabled"
    assert devices.fuse_uring_unsupported(param, disabled) == (
        "this kernel has no FUSE over io_uring (Linux 6.14 and later)"
    )
    param.write_text("N\n")
    disabled.write_text("2\n")
    assert "kernel.io_uring_disabled = 2" in (devices.fuse_uring_unsupported(param, disabled) or "")
    disabled.write_text("0\n")
    assert devices.fuse_uring_unsupported(param, disabled) is None
    import pgfsbench.engine.preflight as preflight

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(preflight, "fuse_uring_unsupported", lambda: "no ring here")
        why = preflight.emulated_disks_unsupported(plan.cells)
        assert list(why) == ring and why[ring[0]].endswith(
            'transport = "io_uring" is not supported here: no ring here'
        )
        mp.setattr(preflight, "fuse_uring_unsupported", lambda: None)
        assert preflight.emulated_disks_unsupported(plan.cells) == {}


@pytest.mark.parametrize(
    ("device", "said"),
    [
        ('{ size = "2G", model = "sata-ssd", transport = "nbd" }', "transport"),
        ('{ size = "2G", model = "hdd-7201" }', "model 'hdd-7201' is unknown (models: zero,"),
        ('{ size = "2G", model = "ssd" }', "unknown"),
        ('{ size = "1M", model = "zero" }', "needs at least 16M"),
        ('{ size = "2G", model = "sata-ssd", write_cache = false }', "a hard disk's"),
        ('{ size = "2G", model = "zero", rpm = 10000 }', "unknown key"),
        ('"disk:2G"', "an emulated disk { size"),
    ],
)
def test_a_wrong_emulated_disk_is_refused_with_its_reason(
    tmp_path: Path, device: str, said: str
) -> None:
    p = tmp_path / "spec.toml"
    p.write_text(HEAD + f"device = {device}\n")
    with pytest.raises(SpecError, match=r"storage\.e\.device") as info:
        load_spec(p)
    assert said in str(info.value)


def test_every_model_resolves_and_says_where_its_figures_come_from() -> None:
    for name, m in MODELS.items():
        r = resolve_model(name, 4 << 30)
        assert r.params["kind"] == m.kind and r.text.startswith(name)
        assert m.sources and all(s.strip() for s in m.sources)
        if m.kind in ("hdd", "ssd", "cloud"):
            assert m.assumed, f"{name}: what no source gives must be said"


def test_a_hard_disk_is_the_outer_part_of_its_drive_and_its_cache_can_be_turned_off() -> None:
    r = resolve_model("hdd-7200", 4 << 30, write_cache=False, drive_bytes=2 << 40)
    assert r.params["drive_bytes"] == float(2 << 40) and r.params["write_cache"] is False
    assert "write cache off" in r.text
    # a device larger than the drive it is said to be part of is the whole drive
    assert resolve_model("hdd-7200", 8 << 40, drive_bytes=1 << 40).params["drive_bytes"] == float(
        8 << 40
    )


def test_a_cloud_volume_takes_its_providers_formula_at_its_size() -> None:
    gp2 = resolve_model("gp2", 100 << 30)
    # 3 IOPS per GiB as its baseline, bursting to 3,000 on 5.4 million credits
    assert gp2.params["baseline_iops"] == 300 and gp2.params["iops"] == 3000
    assert gp2.params["credit_ios"] == 5.4e6
    essd = resolve_model("essd-pl1", 300 << 30)
    assert essd.params["iops"] == 16_800 and essd.params["io_unit_bytes"] == 16384
    assert resolve_model("gp3", 4 << 30).params["io_unit_bytes"] == 256 * 1024


def test_an_nvme_ssd_has_its_guides_figures_and_a_protected_cache() -> None:
    def figures(name: str) -> dict[str, float]:
        params = resolve_model(name, 4 << 30).params
        return {k: float(v) for k, v in params.items() if isinstance(v, int | float)}

    nvme, sata = figures("nvme-ssd"), figures("sata-ssd")
    assert (nvme["read_us"], nvme["write_us"]) == (85.0, 20.0)
    assert nvme["channels"] == pytest.approx(490_000 * nvme["read_us"] / 1e6, abs=0.5)
    assert nvme["flush_us"] == 0.0 < sata["flush_us"]
    assert nvme["read_mbps"] > sata["read_mbps"] and nvme["write_mbps"] > sata["write_mbps"]


class _Probe:
    """A runner that answers the real-time probe as told."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.argv: list[str] = []

    def run(self, argv: list[str], **_: object) -> Completed:
        self.argv = argv
        return Completed(tuple(argv), self.code, "", "chrt: failed" if self.code else "", 0.0)


@pytest.mark.parametrize(
    ("code", "prefix", "text"),
    [
        (0, ["chrt", "--fifo", "10"], "SCHED_FIFO 10"),
        (1, ["nice", "-n", "-10"], "nice -10 (real-time refused here)"),
    ],
)
def test_the_disk_daemon_runs_real_time_where_the_host_allows_it_and_says_which(
    monkeypatch: pytest.MonkeyPatch, code: int, prefix: list[str], text: str
) -> None:
    monkeypatch.setattr("shutil.which", lambda _: "/usr/bin/chrt")
    probe = _Probe(code)
    assert devices.controller_priority(probe) == (prefix, text)  # type: ignore[arg-type]
    assert probe.argv == ["chrt", "--fifo", "10", "true"]


def test_an_emulated_disks_second_says_what_made_its_replies_late() -> None:
    before = {"t": 10.0, "writes": 100, "model_wait_s": 1.0, "late_s": 0.1, "io_s": 0.05}
    after = {"t": 11.0, "writes": 300, "flushes": 10, "model_wait_s": 3.0, "late_s": 0.5}
    after |= {"io_s": 0.25, "model_s": 0.01, "oversleep_s": 0.2}
    d = devices.disk_delta(before, after)
    assert d["io_s"] == 0.2 and d["model_s"] == 0.01 and d["oversleep_s"] == 0.2
    assert d["late_ms_per_request"] == round(1e3 * 0.4 / 210, 3)
    # a daemon of before these counters: none of them, not an error
    assert devices.disk_delta({}, {"t": 1.0})["oversleep_s"] == 0.0


def test_the_daemons_line_gives_its_numbers_and_says_what_carries_its_requests(
    tmp_path: Path,
) -> None:
    stats = tmp_path / "d.stats.jsonl"
    stats.write_text(
        '{"t": 1.0, "writes": 5, "transport": "io_uring"}\n'
        '{"t": 2.0, "writes": 9, "final": true, "transport": "io_uring"}\n'
    )
    assert devices.disk_counters(stats) == {"t": 2.0, "writes": 9.0}
    assert devices.disk_transport(stats) == "io_uring"
    # a line cut short by the daemon's end: the whole one before it
    stats.write_text('{"t": 1.0, "writes": 5, "transport": "/dev/fuse"}\n{"t": 2.0, "wri')
    assert devices.disk_counters(stats) == {"t": 1.0, "writes": 5.0}
    assert devices.disk_transport(stats) == "/dev/fuse"
    # a daemon older than the transport, or a value it would never write
    stats.write_text('{"t": 1.0}\n')
    assert devices.disk_transport(stats) == "unknown"
    stats.write_text('{"t": 1.0, "transport": "<b>x</b>"}\n')
    assert devices.disk_transport(stats) == "unknown"
    assert devices.disk_counters(tmp_path / "none") == {}
