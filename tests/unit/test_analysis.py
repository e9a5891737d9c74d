"""Statistics, comparisons and stall causes on constructed data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from pgfsbench.analysis.compare import Verdict, combine_blocks, compare
from pgfsbench.analysis.series import align
from pgfsbench.analysis.stats import estimate
from pgfsbench.results.records import StoredRun

# ---------------------------------------------------------------- statistics


def test_estimate_uses_a_t_interval_on_logs_below_five_values() -> None:
    vals = [1000.0, 1040.0, 980.0]
    e = estimate(vals)
    assert e is not None and e.method == "t on log" and e.n == 3
    logs = np.log(vals)
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert e.ci_low == pytest.approx(math.exp(logs.mean() - half))
    assert e.ci_high == pytest.approx(math.exp(logs.mean() + half))
    assert e.median == 1000.0 and e.rel_range == pytest.approx(0.06)
    assert e.cv == pytest.approx(np.std(vals, ddof=1) / np.mean(vals))


def test_estimate_bootstraps_from_five_values_and_is_repeatable() -> None:
    vals = [100.0, 102.0, 98.0, 101.0, 99.0, 100.5]
    a, b = estimate(vals), estimate(vals)
    assert a is not None and a.method == "bootstrap" and a == b
    assert a.ci_low is not None and a.ci_high is not None
    assert a.ci_low < a.mean < a.ci_high and a.ci_half_pct is not None
    assert 0.2 < a.ci_half_pct < 2.0


def test_estimate_of_one_value_has_no_interval() -> None:
    e = estimate([5.0, None, math.nan])
    assert e is not None and e.n == 1 and e.ci_low is None and e.cv is None
    assert estimate([]) is None


# ---------------------------------------------------------------- comparisons


def test_a_clear_difference_is_faster_with_its_interval() -> None:
    c = compare([1000, 1010, 990], [1100, 1115, 1090])
    assert c.verdict is Verdict.BETTER and c.ratio == pytest.approx(1.1, abs=0.01)
    assert c.ci_low is not None and c.ci_high is not None and c.ratio is not None
    assert c.ci_low < c.ratio < c.ci_high
    assert c.ci_low > 1 and c.p_value is not None and c.p_value < 0.05
    assert "faster" in c.words() and "95% family-wise" in c.words()


def test_noise_larger_than_the_difference_is_undecided_never_equivalent() -> None:
    """'≈' only when the interval lies within the margin: a wide one is undecided."""
    c = compare([1000, 1300, 800], [1050, 1250, 900])
    assert c.verdict is Verdict.UNDECIDED and "too noisy to tell" in c.words()


def test_a_tight_interval_within_the_margin_is_equivalent() -> None:
    base = [1000.0, 1000.5, 999.5, 1000.2, 999.8]
    c = compare(base, [1005.0, 1005.5, 1004.5, 1005.2, 1004.8])  # +0.5%, very stable
    assert c.verdict is Verdict.BETTER  # significant, and said so (no CV threshold)
    same = compare(base, [1000.1, 1000.6, 999.6, 1000.0, 999.9])
    assert same.verdict is Verdict.EQUIVALENT and "equivalent within ±2.0%" in same.words()
    wider = compare(base, [1000.1, 1000.6, 999.6, 1000.0, 999.9], margin=0.0001)
    assert wider.verdict is Verdict.UNDECIDED


def test_one_repetition_refuses_a_verdict_and_says_why() -> None:
    c = compare([1000], [1300])
    assert c.verdict is Verdict.NONE and c.ratio == pytest.approx(1.3)
    assert "at least 3 runs a side" in c.words()
    two = compare([1000, 1010], [1300, 1310])
    assert two.verdict is Verdict.NONE and two.ci_low is None


def test_latency_lower_is_better() -> None:
    c = compare([10.0, 10.2, 9.9], [5.0, 5.1, 4.9], higher_is_better=False)
    assert c.verdict is Verdict.BETTER and "lower" in c.words()


def test_runs_of_two_shapes_are_compared_stratum_by_stratum() -> None:
    """A checkpoint in some windows: the sides are compared where they share a stratum; a
    verdict only when every stratum agrees; otherwise none, with the shape said."""
    base = [1000, 1010, 990, 700, 710, 705]
    other = [1100, 1110, 1090, 770, 780, 775]
    labels = (["0", "0", "0", "1+", "1+", "1+"], ["0", "0", "0", "1+", "1+", "1+"])
    c = compare(base, other, strata=labels)
    assert c.verdict is Verdict.BETTER and "in every stratum" in c.reason
    assert {k for k, _ in c.strata} == {"0", "1+"}
    apart = compare(base, [1100, 1110, 1090, 600, 610, 605], strata=labels)
    assert apart.verdict is Verdict.NONE and "not of one shape" in apart.reason
    one = compare(base[:3], other[:3], strata=(labels[0][:3], labels[1][:3]))
    assert one.verdict is Verdict.BETTER and one.estimand == "in windows without a checkpoint"


def test_hosts_combine_as_a_geometric_mean() -> None:
    g = combine_blocks([1.1, 1.2, 1.15])
    assert g is not None and g[0] == pytest.approx((1.1 * 1.2 * 1.15) ** (1 / 3))
    assert g[1] < g[0] < g[2]


# ---------------------------------------------------------------- aligned series


def test_align_puts_every_series_on_the_measured_seconds() -> None:
    run = {
        "duration_s": 3.0,
        "series": {
            "tps": {"t0": 1.0, "step": 1.0, "values": [10, 11, 12]},
            "disk_write_mbps": {"t0": -1.0, "step": 1.0, "values": [0, 1, 2, 3, 4]},
            "checkpoint_buffers_per_s": {"t0": 0.0, "step": 1.0, "values": [5, 6, 7, 8]},
            "waits": {"t0": -1.0, "step": 1.0, "values": [{}, {"a": 1}, {"b": 2}, {"c": 3}, {}]},
        },
        "checkpoints": [
            {
                "started_s": 1.2,
                "ended_s": 2.5,
                "write_s": 1.0,
                "sync_s": 0.3,
                "reason": "time",
                "buffers": 9,
            }
        ],
    }
    al = align(StoredRun.from_row(run))
    assert al.seconds == 3
    assert list(al.get("tps")) == [10, 11, 12]
    assert list(al.get("disk_write_mbps")) == [2, 3, 4]
    assert list(al.get("checkpoint_buffers_per_s")) == [6, 7, 8]
    assert al.waits == [{"b": 2}, {"c": 3}, {}]
    assert al.checkpoints[0].sync_start == pytest.approx(2.2)
    assert not al.has("dirty_kb")


def test_auto_repetitions_stop_when_the_interval_is_tight_or_at_the_maximum() -> None:
    from pgfsbench.analysis.auto import auto_stop_reason
    from pgfsbench.engine.rounds import run_facts

    def rows(*tps: float, failed: int = 0) -> list[Any]:
        ok = [StoredRun(status="ok", throughput=t) for t in tps]
        return run_facts(ok + [StoredRun(status="failed")] * failed)

    assert auto_stop_reason(rows(1000, 1001, 999), 8, 2.0) is not None
    assert "CI ±" in (auto_stop_reason(rows(1000, 1001, 999), 8, 2.0) or "")
    assert auto_stop_reason(rows(1000, 1200, 900), 8, 2.0) is None  # wide: one more
    reason = auto_stop_reason(rows(1000, 1200, 900, 1100, 950, 1150, 980, 1010), 8, 2.0)
    assert reason is not None and reason.startswith("reached the maximum of 8 runs")
    assert (
        auto_stop_reason(rows(1000, failed=7), 8, 2.0)
        == "reached the maximum of 8 runs (1 ok run(s))"
    )


def test_auto_repetitions_run_a_disturbed_cell_again() -> None:
    """A disturbed run is no evidence about the storage: its cell is run again rather than
    stopped on an interval it made tight (or wide)."""
    from pgfsbench.analysis.auto import auto_stop_reason
    from pgfsbench.engine.rounds import run_facts

    mark = {
        "disturbance": {
            "format": 1,
            "causes": [{"kind": "host_cpu", "text": "a hog", "disturbs": True}],
        }
    }
    clean = [StoredRun(status="ok", throughput=t) for t in (1000, 1001)]
    disturbed = StoredRun(status="ok", throughput=999, metrics=mark)
    ok = StoredRun(status="ok", throughput=999)
    assert auto_stop_reason(run_facts([*clean, ok]), 8, 2.0, 3)
    # two clean runs: one more
    assert auto_stop_reason(run_facts([*clean, disturbed]), 8, 2.0, 3) is None


def test_t_quantile_and_p_agree_with_scipy_stats() -> None:
    """The light scipy.special forms give scipy.stats' values (fractional df included)."""
    from scipy import stats as sps

    from pgfsbench.analysis.stats import t_quantile, t_two_sided_p

    for df in (1.0, 2.0, 3.7, 10.0, 57.25):
        for q in (0.5, 0.9, 0.975):
            assert math.isclose(
                t_quantile(q, df), float(sps.t.ppf(q, df)), rel_tol=1e-9, abs_tol=1e-12
            )
        for t in (-3.0, 0.2, 2.5):
            assert math.isclose(
                t_two_sided_p(t, df), float(2 * sps.t.sf(abs(t), df)), rel_tol=1e-9, abs_tol=1e-15
            )


def test_signed_rank_critical_values_are_the_published_table() -> None:
    """Two-sided 5% critical values of the Wilcoxon signed-rank statistic (the table in
    every nonparametrics text), none below 6 values; the normal approximation used above
    SIGNED_RANK_EXACT_MAX_N is within one rank of the exact value."""
    import pgfsbench.analysis.stats as st

    table = {
        6: 0,
        7: 2,
        8: 3,
        9: 5,
        10: 8,
        11: 10,
        12: 13,
        13: 17,
        14: 21,
        15: 25,
        16: 29,
        17: 34,
        18: 40,
        19: 46,
        20: 52,
        25: 89,
        30: 137,
    }
    assert {n: st.signed_rank_critical(n) for n in table} == table
    assert st.signed_rank_critical(5) is None and st.signed_rank_critical(1) is None
    for n in (40, 120, 300):
        exact = st.signed_rank_critical(n)
        assert exact is not None
        saved = st.SIGNED_RANK_EXACT_MAX_N
        st.SIGNED_RANK_EXACT_MAX_N = 0
        try:
            approx = st.signed_rank_critical(n)
        finally:
            st.SIGNED_RANK_EXACT_MAX_N = saved
        assert approx is not None and abs(approx - exact) <= 1


def test_hodges_lehmann_interval_is_what_the_signed_rank_test_does_not_reject() -> None:
    """scipy's exact Wilcoxon test as the oracle: a shift just inside either end of the
    interval is not rejected at 5%, just outside it is; the centre is the median of the
    Walsh averages."""
    from scipy import stats as sps

    from pgfsbench.analysis.stats import hodges_lehmann

    rng = np.random.default_rng(7)
    for n in (6, 9, 14, 25):
        x = rng.standard_t(3, n) * 0.02 - 0.01
        centre, low, high = hodges_lehmann(list(x))
        assert low is not None and high is not None and low < centre < high
        walsh = [(x[i] + x[j]) / 2 for i in range(n) for j in range(i, n)]
        assert centre == pytest.approx(float(np.median(walsh)))
        eps = 1e-9
        for inside, outside in ((low + eps, low - eps), (high - eps, high + eps)):
            assert sps.wilcoxon(x - inside, method="exact").pvalue > 0.05
            assert sps.wilcoxon(x - outside, method="exact").pvalue <= 0.05
    assert hodges_lehmann([0.1, 0.2, 0.3])[1:] == (None, None)


# ---------------------------------------------------------------- observer effect


def _observer_run(
    rep: int,
    tps: float,
    on: bool,
    status: str = "ok",
    alternating: bool = True,
    cell: str = "ram/pg/k/ro",
    cpu_s: float | None = None,
) -> StoredRun:
    return StoredRun.from_row(
        {
            "run_id": rep,
            "campaign_id": 1,
            "cell": cell,
            "host": None,
            "repetition": rep,
            "status": status,
            "tps": tps,
            "duration_s": 10.0,
            "transactions": int(tps * 10),
            "metrics": {
                "observer": {
                    "on": on,
                    "alternating": alternating,
                    "sampler_cpu_pct_of_a_core": 0.4 if on else 0.0,
                    "observer_cpu_pct_of_a_core": 0.7 if on else 0.0,
                    "benchmark_cpu_s": cpu_s if cpu_s is not None else 7.0 if on else 6.5,
                }
            },
        }
    )


def test_samplers_alternate_in_abba_pairs() -> None:
    from pgfsbench.spec.models import Defaults

    d = Defaults(samplers="alternate", repetitions=8)
    assert [d.observed(r) for r in range(1, 9)] == [
        False,
        True,
        True,
        False,
        False,
        True,
        True,
        False,
    ]
    assert Defaults(samplers=True).observed(3) and not Defaults(samplers=False).observed(2)
    for bad in (3, "auto"):
        with pytest.raises(ValueError, match="even number of repetitions"):
            Defaults(samplers="alternate", repetitions=bad)


def test_an_unwatched_pgbench_run_keeps_no_transaction_log() -> None:
    from pgfsbench.workloads import unobserved
    from pgfsbench.workloads.pgbench import Pgbench
    from pgfsbench.workloads.sysbench import Sysbench

    assert unobserved(Pgbench("client", False, True)) == Pgbench("client", False, False)
    sysbench = Sysbench()
    assert unobserved(sysbench) is sysbench


@pytest.mark.parametrize(
    ("samplers", "txlog", "logged"),
    [
        (True, True, True),
        (True, False, False),
        (False, True, False),
        ("alternate", True, True),
        ("alternate", False, False),
        (True, "auto", True),
        (False, "auto", False),
    ],
)
def test_txlog_false_keeps_the_samplers_and_drops_only_pgbench_log(
    samplers: bool | str, txlog: bool | str, logged: bool
) -> None:
    from pgfsbench.spec import Defaults, expand, load_spec
    from pgfsbench.workloads import workload_for
    from pgfsbench.workloads.pgbench import Pgbench

    d = Defaults.model_validate({"samplers": samplers, "txlog": txlog, "repetitions": 2})
    assert d.observed(2) is (samplers is not False)  # the samplers do not follow txlog
    examples = Path(__file__).resolve().parents[2] / "examples"
    cell = next(
        c for c in expand(load_spec(examples / "quick.toml").spec) if c.workload.tool == "pgbench"
    )
    driver = workload_for(cell, d)
    assert isinstance(driver, Pgbench) and driver.log_transactions is logged


def test_observer_effect_pairs_watched_with_unwatched_runs() -> None:
    from pgfsbench.analysis.observer import observer_effects

    tps = {
        1: (1000.0, False),
        2: (990.0, True),
        3: (1010.0, True),
        4: (1000.0, False),
        5: (980.0, False),
        6: (975.1, True),
        7: (500.0, True),
        8: (700.0, False),
    }
    runs = [
        _observer_run(r, t, on, status="failed" if r == 7 else "ok") for r, (t, on) in tps.items()
    ]
    runs.append(_observer_run(1, 2000.0, True, alternating=False, cell="other"))
    [e] = observer_effects(runs)
    assert e.cell == "ram/pg/k/ro" and e.pairs == 3  # the pair with a failed run is left out
    assert e.ratios == pytest.approx((0.99, 1.01, 0.995))
    logs = [math.log(x) for x in (0.99, 1.01, 0.995)]
    centre = sum(logs) / 3
    half = sps.t.ppf(0.975, 2) * float(np.std(logs, ddof=1)) / math.sqrt(3)
    assert e.ratio == pytest.approx(math.exp(centre))
    assert (e.ci_low, e.ci_high) == pytest.approx(
        (math.exp(centre - half), math.exp(centre + half))
    )
    assert e.sampler_cpu_pct == pytest.approx(0.4) and e.observer_cpu_pct == pytest.approx(0.7)
    assert "samplers used 0.40% of a core (0.70% with their server backend)" in e.words()
    assert e.benchmark_cpu_pct == {"watched": 70.0, "not watched": 65.0}
    # CPU per transaction: medians of 7 s / (10 s x TPS) and 6.5 s / (10 s x TPS)
    assert e.benchmark_cpu_us_per_tx == pytest.approx(
        {
            "watched": round(7e6 / 9900, 2),
            "not watched": round((6.5e6 / 10000 + 6.5e6 / 9800) / 2, 2),
        }
    )
    assert "the benchmark's CPU per transaction 707.07 us watched, 656.63 us not" in e.words()
    assert "3 pair(s)" in e.words() and "no significant effect" in e.words()
    assert e.robust is not None and e.robust[1:] == (None, None)  # 3 pairs: no interval
    assert "Hodges-Lehmann" not in e.words()


def test_observer_effect_robust_ratio_is_not_dragged_by_one_disturbed_pair() -> None:
    """A burst of the host's load halves one run: the geometric mean and its t interval
    move with it, the Hodges-Lehmann ratio and its interval stay with the other pairs."""
    from pgfsbench.analysis.observer import observer_effects

    # 19 undisturbed pairs and one disturbed (with 20 pairs the 52 lowest of the 210 Walsh
    # averages bound the interval: more than the 20 that involve the disturbed pair)
    pair_ratios = [
        0.998,
        1.003,
        0.996,
        1.001,
        0.999,
        1.002,
        0.997,
        1.000,
        0.995,
        1.004,
        0.998,
        1.001,
        0.997,
        1.002,
        0.999,
        1.000,
        0.996,
        1.003,
        0.998,
        0.5,
    ]
    runs = []
    for k, ratio in enumerate(pair_ratios):
        off_first = k % 2 == 0
        runs += [
            _observer_run(2 * k + 1, 1000.0 if off_first else 1000.0 * ratio, not off_first),
            _observer_run(2 * k + 2, 1000.0 * ratio if off_first else 1000.0, off_first),
        ]
    [e] = observer_effects(runs)
    assert e.ratios == pytest.approx(tuple(pair_ratios))
    assert e.ratio < 0.97 and e.ci_low is not None and e.ci_low < 0.93
    assert e.robust is not None
    centre, low, high = e.robust
    assert low is not None and high is not None
    assert 0.997 < centre < 1.0 and 0.99 < low < centre < high < 1.003
    assert (
        f"robust to disturbed pairs (Hodges-Lehmann) {centre:.4f} [{low:.4f}, {high:.4f}]"
    ) in e.words()


def test_observer_effect_adds_what_watching_cost_the_benchmark_pair_by_pair() -> None:
    from pgfsbench.analysis.observer import observer_effects

    # (repetition, watched, benchmark CPU s over 10 s): pairs (1,2) (3,4) (5,6) (7,8);
    # run 8 failed, so its pair is left out; run 9 has no partner
    runs = [
        _observer_run(rep, 1000.0, on, cpu_s=cpu, status="failed" if rep == 8 else "ok")
        for rep, on, cpu in (
            (1, False, 5.50),
            (2, True, 5.56),
            (3, True, 5.61),
            (4, False, 5.52),
            (5, False, 5.40),
            (6, True, 5.44),
            (7, True, 9.0),
            (8, False, 1.0),
            (9, True, 9.0),
        )
    ]
    [e] = observer_effects(runs)
    diffs = [0.6, 0.9, 0.4]  # points of % of one core: 100 * (watched - not) / 10 s
    half = sps.t.ppf(0.975, 2) * float(np.std(diffs, ddof=1)) / math.sqrt(3)
    mean = sum(diffs) / 3
    assert e.benchmark_cpu_extra_pct == pytest.approx((mean, mean - half, mean + half))
    assert e.total_cpu_pct == pytest.approx(0.7 + mean)  # the samplers with their backend
    assert (
        f"watching added +{mean:.2f} points of a core to the benchmark (95% CI "
        f"[{mean - half:+.2f}, {mean + half:+.2f}]), the whole observer about "
        f"{0.7 + mean:.2f}% of a core"
    ) in e.words()
    [one] = observer_effects(runs[:2])
    assert one.benchmark_cpu_extra_pct == pytest.approx((0.6, None, None))
    assert "watching added +0.60 points of a core to the benchmark, the whole" in one.words()


def test_observer_effect_says_slower_when_the_interval_is_below_one() -> None:
    from pgfsbench.analysis.observer import observer_effects

    runs = [
        _observer_run(r, 1000.0 if r % 4 in (0, 1) else 900.0 + r, r % 4 in (2, 3))
        for r in range(1, 9)
    ]
    [e] = observer_effects(runs)
    assert e.ci_high is not None and e.ci_high < 1 and "slower" in e.words()
    assert observer_effects([_observer_run(1, 1000.0, False)]) == []


def test_runs_without_pgbench_log_under_txlog_auto_are_said_once_per_report() -> None:
    from pgfsbench.analysis.warnings import reading_warnings

    def run(rep: int, cell: str, why: str | None) -> StoredRun:
        return StoredRun(
            run_id=rep,
            cell=cell,
            repetition=rep,
            metrics={"observer": {"on": True, "txlog": why is None, "txlog_left_out": why}},
        )

    why = 'txlog = "auto": 60,000 TPS expected on 2 CPU(s)'
    runs = [
        run(1, "ram/pg/k/ro", why),
        run(2, "ram/pg/k/ro", why),
        run(3, "ram/pg/k/rw", None),
        run(4, "ram/pg/k/sel", why),
    ]
    [said] = [w for w in reading_warnings(runs) if "latency percentiles" in w]
    assert said.startswith("no latency percentiles for 2 cell(s)")
    assert "ram/pg/k/ro, ram/pg/k/sel" in said and "rw" not in said
    assert not [w for w in reading_warnings(runs[2:3]) if "latency percentiles" in w]


def test_sysbench_without_prepared_statements_is_said_next_to_cells_with_them() -> None:
    from pgfsbench.analysis.warnings import reading_warnings

    def run(rep: int, cell: str, disabled: str | None, prepared: bool | None = None) -> StoredRun:
        return StoredRun(
            run_id=rep,
            cell=cell,
            repetition=rep,
            metrics={
                "tool": {
                    "name": "sysbench",
                    "prepared_statements": disabled is None if prepared is None else prepared,
                    "prepared_statements_disabled": disabled,
                }
            },
        )

    why = "pgbouncer 1.18.0 in transaction mode does not keep server-side prepared statements"
    runs = [
        run(1, "ext4/pgbouncer/k/oltp", why),
        run(2, "ext4/seed/k/oltp", None),
        run(3, "ext4/huge/k/oltp", None),
    ]
    [said] = [w for w in reading_warnings(runs) if "prepared statements" in w]
    assert said.startswith("sysbench ran without server-side prepared statements in 1 cell(s)")
    assert "ext4/pgbouncer/k/oltp" in said and "2 other sysbench cell(s) prepared" in said
    [alone] = [w for w in reading_warnings(runs[:1]) if "prepared statements" in w]
    assert "other sysbench" not in alone
    assert not [w for w in reading_warnings(runs[1:]) if "prepared statements" in w]
    # the spec disabled them everywhere (options = { "db-ps-mode" = "disable" }): alike
    alike = [
        run(1, "ext4/pgbouncer/k/oltp", None, prepared=False),
        run(2, "ext4/seed/k/oltp", None, prepared=False),
    ]
    assert not [w for w in reading_warnings(alike) if "prepared statements" in w]


def test_an_emulated_disk_answered_late_is_said_with_what_made_it_late() -> None:
    from pgfsbench.analysis.warnings import reading_warnings

    def run(rep: int, storage: str, **counts: float) -> StoredRun:
        dev = {"device_model": "hdd-7200", "device_model_text": "hdd-7200 (7200 rpm hard disk)"}
        return StoredRun(
            run_id=rep,
            cell=f"{storage}/pg/k/w",
            storage=storage,
            repetition=rep,
            storage_details={"emulated_devices": {"/dev/loop0": dev}},
            metrics={"emulated_devices": {"/dev/loop0": dict(dev, **counts)}},
        )

    runs = [
        run(1, "ext4", model_wait_s=50.0, late_s=20.0, io_s=1.0, model_s=0.2, oversleep_s=19.0),
        run(2, "ext4", model_wait_s=50.0, late_s=5.0, io_s=1.0, model_s=0.2, oversleep_s=4.0),
        run(3, "xfs", model_wait_s=50.0, late_s=1.0),  # within 10%: not said
        run(4, "btrfs", model_wait_s=10.0, late_s=3.0),  # a daemon without the breakdown
    ]
    [said] = [w for w in reading_warnings(runs) if "later than their model said" in w]
    assert "ext4 25.0 s late for 100.0 s modelled (23.0 s of it waking up after the model's" in said
    assert "time (the host's CPU))" in said
    assert "btrfs 3.0 s late for 10.0 s modelled," in said and "xfs" not in said


def test_a_busy_host_whose_storage_daemons_took_the_cpu_is_said_with_its_figures() -> None:
    from pgfsbench.analysis.warnings import reading_warnings

    def run(rep: int, storage: str, busy: float, **daemons: float) -> StoredRun:
        named = {k.replace("_", "-"): v for k, v in daemons.items()}
        cpu = {
            "seconds": 60.0,
            "cpus": 2,
            "busy_pct": busy,
            "iowait_pct": 1.0,
            "daemons_cpus": named,
        }
        return StoredRun(
            run_id=rep,
            cell=f"{storage}/pg/k/w",
            storage=storage,
            repetition=rep,
            metrics={"cpu": cpu},
        )

    runs = [
        run(1, "zfs-slog", 96.0, zfs_fuse=0.8, pgfsbench_disk=0.1),
        run(2, "zfs-slog", 94.0, zfs_fuse=0.6, pgfsbench_disk=0.1),
        run(3, "zfs-hdd", 80.0, zfs_fuse=0.45),  # busy, not the limit: said without it
        run(4, "ext4", 97.0, pgfsbench_disk=0.1),  # the daemons took 5%: not said
        run(5, "xfs", 40.0, pgfsbench_disk=0.9),  # an idle host: not said
    ]
    [said] = [w for w in reading_warnings(runs) if "storage's own daemons" in w]
    assert "zfs-slog: zfs-fuse 0.70 and pgfsbench-disk 0.10 of 2 CPUs, the host 95% busy " in said
    assert "95% busy (the CPU was the limit)" in said
    assert "zfs-hdd: zfs-fuse 0.45 of 2 CPUs, the host 80% busy;" in said
    assert "ext4" not in said and "xfs" not in said
    assert "zfs-fuse: ZFS through FUSE" in said and "a lower bound" in said
    # runs recorded before the CPU was measured: nothing said
    assert not [
        w
        for w in reading_warnings([StoredRun(run_id=9, cell="a/b/c/d", storage="a")])
        if "storage's own daemons" in w
    ]
