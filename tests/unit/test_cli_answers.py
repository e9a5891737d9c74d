"""The CLI says what it saw, consistently: missing names are usage errors (exit 2) that
name what is there; compare compares what the user named, saying what else differs; a
store is not compared with itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.results.records import (
    RunOutcome,
    RunPreparation,
    RunStatus,
    StoredCampaign,
    StoredRun,
)
from pgfsbench.results.store import Store

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
        timeout=120,
    )


def dbi_like(path: Path) -> Path:
    """ext4 with the default postgres configuration, zfs-compressed with its own (the dbi
    example's natural question): 3 repetitions each."""
    store = Store(str(path))
    cid = store.start_campaign(StoredCampaign(name="dbi", spec_text="x", host="h"))
    for storage, fs, pg, tps in (
        ("ext4", "ext4", "default", 1000.0),
        ("zfs-compressed", "zfs", "zfs", 700.0),
    ):
        for rep, jitter in enumerate((0.99, 1.0, 1.01), 1):
            rid = store.start_run(
                StoredRun(
                    campaign_id=cid,
                    cell=f"{storage}/{pg}/default/tpcb",
                    storage=storage,
                    fs=fs,
                    postgres=pg,
                    kernel="default",
                    workload="tpcb",
                    repetition=rep,
                    clients=4,
                    scale=2,
                )
            )
            store.prepare_run(rid, RunPreparation(load_seconds=1.0, space_bytes=1))
            store.finish_run(
                rid,
                RunOutcome(
                    RunStatus.OK, tps=tps * jitter, throughput=tps * jitter, latency_avg_ms=1.0
                ),
            )
    store.finish_campaign(cid, "done")
    return path


def test_compare_what_the_user_named_and_say_what_else_differs(tmp_path: Path) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    done = cli("compare", "ext4", "zfs-compressed", "--results", str(results))
    assert done.returncode == 0, done.stderr
    words = " ".join(done.stdout.split())
    assert "zfs-compressed" in words and "-30.0%" in words
    assert "also differ in postgres (default and zfs)" in words
    (pair,) = json.loads(
        cli("compare", "ext4", "zfs-compressed", "--results", str(results), "--json").stdout
    )
    assert pair["also_differ"] == {"postgres": ["default", "zfs"]}
    # these runs do not say the checkpoints in their windows: the interval allows for a slow
    # mode they may have missed, and says how deep
    assert pair["allows_for_missed_slow_mode"] == 0.3


def test_a_name_that_is_not_there_is_a_usage_error_that_says_what_is(tmp_path: Path) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    done = cli("compare", "ext5", "zfs-compressed", "--results", str(results))
    assert done.returncode == 2
    assert "no cell named 'ext5'" in done.stderr and "ext4" in done.stderr
    missing = cli("results", "show", "999", "--results", str(results))
    assert missing.returncode == 2 and "no run 999" in missing.stderr


def test_a_store_is_not_compared_with_itself(tmp_path: Path) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    done = cli("compare", "--results", str(results), "--results", str(results))
    assert done.returncode == 2 and "compared with itself" in done.stderr
    other = tmp_path / "link.sqlite"
    other.symlink_to(results)
    assert cli("compare", "--results", str(results), "--results", str(other)).returncode == 2


def test_report_takes_the_readmes_spelling_of_markdown(tmp_path: Path) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    out = tmp_path / "r.md"
    done = cli("report", "--results", str(results), "--format", "markdown", "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("# pgfsbench")
    from pgfsbench import __version__

    assert f"pgfsbench {__version__}" in text  # which pgfsbench said it
    rows = [ln for ln in text.splitlines() if ln.startswith(("| ext4", "| zfs")) and "3/3" in ln]
    assert rows and all(ln.rstrip(" |").endswith("-") for ln in rows)  # no stall: "-"
    assert cli("report", "--results", str(results), "--format", "pdf").returncode == 2


def test_a_busy_host_says_over_how_long_it_was_sampled() -> None:
    from pgfsbench.collect.host import HostLoad, busy_warning

    text = busy_warning(HostLoad(97.0, 0.0, 0.0, 1.5, 3, 0.5), 25.0, 5.0)
    assert text is not None and "CPU 97% busy over 0.5 s" in text


def test_doctor_at_80_columns_keeps_urls_whole_and_says_each_rule_once() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pgfsbench", "doctor", "--ok"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=120,
        env={**os.environ, "COLUMNS": "80"},
    )
    lines = done.stdout.splitlines()
    for i, line in enumerate(lines):
        if "see: http" in line:  # the URL whole on its line, not continued on the next
            assert not lines[i + 1].startswith(("#", "html", "/")), lines[i : i + 2]
    whys = [ln for ln in lines if ln.strip().startswith("why:")]
    fired = {
        ln.split(":")[0].split()[-1] for ln in lines if ln.lstrip().startswith(("WARN", "BAD"))
    }
    assert len(whys) == len(fired)  # the advice once per rule, however many things it saw
    assert not any(
        ln.lstrip().startswith("OK")
        and ln.rstrip().endswith(("fsync off", "transparent huge pages always"))
        for ln in lines
    )
    assert "did not apply (" in done.stdout


def _plan(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "s.toml"
    spec.write_text(text)
    return cli("plan", str(spec), "--workdir", str(tmp_path / "work"))


PLAIN = '[defaults]\nscale = 1\n[storage.e]\nfs = "ext4"\ndevice = "loop:1G"\n'


def test_what_plan_accepts_runs(tmp_path: Path) -> None:
    """A fuzzer's finds, all accepted by plan (exit 0) before: now refused, each with why."""
    for settings in (
        'shared_buffers = "a b"',
        "shared_buffers = true",
        'work_mem = "-o"',
        'max_connections = "-o"',
    ):
        done = _plan(tmp_path, PLAIN + f"[postgres.p]\nsettings = {{ {settings} }}\n")
        assert done.returncode == 2, (settings, done.stdout, done.stderr)
        assert "postgres p: " + settings.split(" =")[0] in done.stderr, done.stderr
    bindir = _plan(tmp_path, PLAIN + '[postgres.p]\nbindir = "/etc/passwd"\n')
    assert bindir.returncode == 5, bindir.stderr
    tiny = _plan(tmp_path, PLAIN.replace("scale = 1\n", "scale = 1\nmemory_limit = 5\n"))
    assert tiny.returncode == 2 and "a bare number is bytes" in tiny.stderr
    colour = _plan(
        tmp_path, '[storage.z]\nfs = "zfs"\n[storage.z.data]\nproperties = { colour = 1 }\n'
    )
    assert colour.returncode == 2 and "'colour' is not a ZFS dataset property" in colour.stderr
    assert _plan(
        tmp_path,
        '[storage.z]\nfs = "zfs"\n[storage.z.data]\n'
        'properties = { "com.example:colour" = "blue", recordsize = "16K" }\n',
    ).returncode in (0, 5)  # 5 where no ZFS is installed
    assert (
        _plan(
            tmp_path,
            PLAIN + '[postgres.p]\nsettings = { shared_buffers = "128MB", '
            'work_mem = "4MB", max_connections = 200 }\n',
        ).returncode
        == 0
    )


def test_at_80_columns_figures_and_cell_ids_stay_whole(tmp_path: Path) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    listed = subprocess.run(
        [sys.executable, "-m", "pgfsbench", "results", "list", "--results", str(results)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert "1,010.0" in listed.stdout and "…" not in listed.stdout, listed.stdout
    spec = tmp_path / "s.toml"
    spec.write_text(
        "[defaults]\nscale = 1\nclients = [8, 16]\n[storage.ext4-with-a-long-name]\n"
        'fs = "ext4"\ndevice = "loop:1G"\n'
    )
    plan = subprocess.run(
        [sys.executable, "-m", "pgfsbench", "plan", str(spec), "--workdir", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env={**os.environ, "COLUMNS": "80"},
    )
    ids = [ln.split(":")[0].strip() for ln in plan.stdout.splitlines() if "@clients=" in ln]
    assert len(set(ids)) == 2 and all(i.endswith(("@clients=8", "@clients=16")) for i in ids)


def test_the_process_ends_with_its_output_and_its_code() -> None:
    """The CLI leaves without the interpreter's teardown (os._exit): what it printed still
    reaches a pipe in full, and the code is Python's (None 0, an int itself, else 1 with
    the value printed)."""
    for code, status in (("None", 0), ("6", 6), ("'no such run'", 1)):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys\nfrom pgfsbench.cli import _leave\n"
                f"sys.stdout.write('x' * 200000)\n_leave({code})\nprint('not reached')",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
            timeout=60,
        )
        assert done.returncode == status
        assert done.stdout == "x" * 200000
        assert ("no such run" in done.stderr) == (status == 1)


def test_a_baseline_or_only_that_names_nothing_is_a_usage_error_with_did_you_mean(
    tmp_path: Path,
) -> None:
    results = dbi_like(tmp_path / "r.sqlite")
    for argv in (
        ["results", "summary", "--baseline", "ext3"],
        ["report", "--baseline", "ext3", "-o", str(tmp_path / "r.html")],
        ["compare", "--baseline", "ext3"],
    ):
        done = cli(*argv, "--results", str(results))
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "--baseline ext3: no cell matches" in done.stderr
        assert "did you mean 'ext4'" in done.stderr
    assert not (tmp_path / "r.html").exists()
    # a baseline that names a cell still works
    assert (
        cli("results", "summary", "--baseline", "zfs*", "--results", str(results)).returncode == 0
    )
    # --only: one pattern of several matching nothing is a typo, not a smaller matrix
    plan = cli("plan", str(ROOT / "examples" / "quick.toml"), "--only", "ext4*", "--only", "xfz*")
    assert plan.returncode == 2 and "--only xfz*: no cell matches" in plan.stderr
    assert "did you mean" in plan.stderr


def test_the_demos_next_commands_name_its_own_files_and_work_as_shown(tmp_path: Path) -> None:
    import shlex

    from pgfsbench.cli.run import next_commands
    from pgfsbench.report.loading import analyse

    results = dbi_like(tmp_path / "my demo.sqlite")  # a name that needs quoting
    store = Store(str(results))
    a = analyse(store, [1])
    lines = next_commands(str(results), a.cells, [r.run_id for r in a.runs], me="pgfsbench")
    assert len(lines) == 5 and all(shlex.quote(str(results)) in ln for ln in lines[:4])
    for line in lines:
        argv = shlex.split(line.split("#")[0])
        assert argv[0] == "pgfsbench"
        if "-o" in argv:  # the report: into the test's own directory
            argv[argv.index("-o") + 1] = str(tmp_path / "report.html")
        done = cli(*argv[1:])
        assert done.returncode == 0, (line, done.stderr)
    # as the demo prints them: the program as it can be typed here
    assert next_commands(str(results), a.cells, [1], me=".venv/bin/pgfsbench")[0].startswith(
        ".venv/bin/pgfsbench results summary"
    )


def test_the_program_is_named_as_it_can_be_typed(tmp_path: Path) -> None:
    """`pgfsbench` only when that name on PATH is this program; else its path (relative
    beneath the current directory), or `python -m pgfsbench`."""
    from pgfsbench.cli.program import program

    repo = Path("/work/repo")
    assert program(".venv/bin/pgfsbench", repo) == ".venv/bin/pgfsbench"
    assert program("/work/repo/.venv/bin/pgfsbench", repo) == ".venv/bin/pgfsbench"
    assert program("/work/repo/.venv/bin/pgfsbench", Path("/tmp")) == (
        "/work/repo/.venv/bin/pgfsbench"
    )
    assert program("/x/site-packages/pgfsbench/__main__.py", repo).endswith(" -m pgfsbench")
    me = tmp_path / "bin" / "pgfsbench"
    me.parent.mkdir()
    me.write_text("#!/bin/sh\n")
    me.chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{me.parent}:{old}"
    try:
        assert program(str(me), tmp_path) == "pgfsbench"  # on PATH: the short name
    finally:
        os.environ["PATH"] = old


def test_into_a_pipe_every_column_whole_values_no_boxes(tmp_path: Path) -> None:
    """A pipe is not an 80-column terminal: every column, values whole, no box lines, no
    trailing blanks, in every command that prints a table."""
    results = dbi_like(tmp_path / "r.sqlite")

    def piped(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
        done = subprocess.run(
            [sys.executable, "-m", "pgfsbench", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    for args in (
        ("results", "summary"),
        ("results", "list"),
        ("results", "show", "1"),
        ("compare",),
    ):
        out = piped(*args, "--results", str(results))
        assert not any(ch in out for ch in "┃━│─┏┓┗┛╇╈╍"), (args, out)
        assert all(line == line.rstrip() for line in out.splitlines()), args
        assert "…" not in out, (args, out)
    summary = piped("results", "summary", "--results", str(results))
    header = next(line for line in summary.splitlines() if line.lstrip().startswith("cell"))
    for column in ("min–max", "p99 ms", "ok", "stalls"):
        assert column in header, header


def test_a_missing_results_file_points_to_the_one_there_and_the_env_default(
    tmp_path: Path,
) -> None:
    dbi_like(tmp_path / "pgfsbench-demo.sqlite")
    env = {k: v for k, v in os.environ.items() if k != "PGFSBENCH_RESULTS"}

    def run(**extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pgfsbench", "results", "list"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(ROOT / "src"), **extra},
            timeout=120,
            check=False,
        )

    missing = run()
    assert missing.returncode == 2
    assert "here: pgfsbench-demo.sqlite" in missing.stderr
    assert "--results pgfsbench-demo.sqlite" in missing.stderr
    found = run(PGFSBENCH_RESULTS="pgfsbench-demo.sqlite")
    assert found.returncode == 0 and "tpcb" in found.stdout, found.stderr


def test_plan_says_what_it_knows_and_shows_the_commands(tmp_path: Path) -> None:
    """No "busy host now" (a plan has no figures), no "loop files up to 0 B" where there
    are none, and how each filesystem would be made and mounted."""
    done = cli("plan", str(ROOT / "examples" / "quick.toml"))
    assert done.returncode == 0, done.stderr
    assert "busy host" not in done.stdout
    assert "mkfs.ext4 -F -E lazy_itable_init=1,lazy_journal_init=0 DEVICE" in done.stdout
    assert "mount -t ext4 -o noinit_itable DEVICE DIR" in done.stdout
    existing = tmp_path / "existing.toml"
    existing.write_text(
        f'[storage.mine]\nfs = "existing"\npath = "{tmp_path}"\n'
        '[workload.w]\nbuiltin = "tpcb-like"\n'
    )
    plan = cli("plan", str(existing))
    assert plan.returncode == 0, plan.stderr
    assert "loop files up to" not in plan.stdout


def test_progress_in_a_pipe_says_run_n_of_total_and_the_time_left() -> None:
    import io

    from rich.console import Console

    from pgfsbench.cli.run import RichEvents
    from pgfsbench.plan import make_plan
    from pgfsbench.spec import load_spec

    plan = make_plan(load_spec(ROOT / "examples" / "quick.toml"))
    out = io.StringIO()
    events = RichEvents(Console(file=out, force_terminal=False, width=200), plan)
    events.run_started(plan.runs[0], 41)
    events.extend(3)
    events.run_started(plan.runs[1], 42)
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("run ")]
    assert lines[0].startswith(f"run 1 of {len(plan.runs)} (run id 41): ")
    assert lines[1].startswith(f"run 2 of {len(plan.runs) + 3} (run id 42): ")
    assert all(ln.endswith(" left") and "about " in ln for ln in lines)


def test_results_list_and_summary_as_csv(tmp_path: Path) -> None:
    import csv
    import io

    from tests.unit.test_store_report import fill

    store = Store(str(tmp_path / "r.sqlite"))
    fill(store)
    listed = cli("results", "list", "-r", str(tmp_path / "r.sqlite"), "--csv")
    rows = list(csv.DictReader(io.StringIO(listed.stdout)))
    assert len(rows) == 6 and rows[0]["cell"] == "ext4/d/d/w"
    summary = cli("results", "summary", "-r", str(tmp_path / "r.sqlite"), "--csv")
    cells = list(csv.DictReader(io.StringIO(summary.stdout)))
    assert [c["cell"] for c in cells] == ["ext4/d/d/w", "zfs/d/d/w"]
    compared = cli("compare", "-r", str(tmp_path / "r.sqlite"), "--csv")
    pairs = list(csv.DictReader(io.StringIO(compared.stdout)))
    assert pairs and pairs[0]["baseline.cell"] == "ext4/d/d/w" and pairs[0]["verdict"]
    bad = cli("results", "list", "-r", str(tmp_path / "r.sqlite"), "--csv", "--json")
    assert bad.returncode == 2 and "not both" in bad.stderr


def test_a_busy_host_is_one_line_for_all_its_runs_and_leads_when_most_were() -> None:
    """Each busy run is said once while it runs; the summary groups them: how many, the
    CPU's range, which, one remedy; "too busy for a verdict" first when most were."""
    from pgfsbench.analysis.warnings import busy_host_line, reading_warnings
    from pgfsbench.results.records import StoredRun

    def run(i: int, busy: int | None) -> StoredRun:
        warnings = (
            [f"busy host before the run: CPU {busy}% busy over 0.5 s (load average 1.0); x"]
            if busy
            else []
        )
        return StoredRun(
            campaign_id=1, cell="ext4", repetition=i, status="ok", host="h", warnings=warnings
        )

    few = [run(1, 44), run(2, None), run(3, None)]
    line = busy_host_line(few)
    assert line == (
        "1 of 3 runs began on a busy host (CPU 44-44% busy): ext4 #1; run again when the host "
        "is quiet (what else runs: `top`, or the runs' disturbance lines), or give the spec "
        "busy_cpu_pct if this load is the host's normal"
    )
    most = [run(1, 26), run(2, 44), run(3, None)]
    said = reading_warnings(most)
    assert said[0].startswith("this host was too busy for a verdict: 2 of 3 runs")
    assert "CPU 26-44% busy" in said[0]
    assert sum("busy host" in w for w in said) == 1


def test_a_budget_cuts_the_last_round_to_the_runs_that_fit(monkeypatch: Any) -> None:
    """10 runs in 100 s, a budget of 135 s: of a round of 5, the 3 that fit at 10 s a run;
    then no more rounds: the campaign ends within its budget, its verdicts from one last
    look at every run (not the look before the cut round)."""
    import time as time_mod
    from types import SimpleNamespace

    from pgfsbench.engine import rounds as camp
    from pgfsbench.spec.models import Defaults

    rounds: list[list[str]] = []
    looks: list[bool] = []

    # a round of 5: the baseline's and three cells' next runs; the valid runs each has made
    # (a failed or disturbed run made its repetition number, no evidence)
    cells = ["base", "a", "b", "base", "c"]
    valid = {"base": 3, "a": 2, "b": 4, "c": 1}

    def more_runs(*a: Any, final: bool = False) -> list[Any]:
        looks.append(final)
        return (
            []
            if final
            else [SimpleNamespace(cell=SimpleNamespace(id=c), repetition=9) for c in cells]
        )

    monkeypatch.setattr(camp, "more_runs", more_runs)
    monkeypatch.setattr(camp, "note_auto_repetitions", lambda *a: None)
    monkeypatch.setattr(camp, "_valid_counts", lambda *a: valid)
    d = Defaults(repetitions="auto", budget="135s")
    result = SimpleNamespace(run_ids=list(range(10)), campaign_id=1)
    events = SimpleNamespace(extend=lambda n: None)
    camp.adaptive_rounds(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        d,
        result,
        time_mod.monotonic() - 100.0,
        events,
        lambda more: rounds.append([r.cell.id for r in more]),
    )
    # the 3 that fit: the cells with the fewest valid runs first (c: 1, a: 2, then the
    # baseline's first of two at 3), in the round's order; b (4 valid) waits
    assert rounds == [["base", "a", "c"]]
    assert looks == [False, True]  # the round's look, then the last one after it


def test_a_resumed_auto_campaigns_budget_counts_its_earlier_parts(monkeypatch: Any) -> None:
    """A campaign of a 135 s budget that spent 100 s (10 runs) before it was killed and
    resumed: its budget goes on from 100 s, so of a round of 5 the 3 that fit. Before, the
    resumed part started the budget again from nothing."""
    import time as time_mod
    from types import SimpleNamespace

    from pgfsbench.analysis.auto import spent_before
    from pgfsbench.engine import rounds as camp
    from pgfsbench.spec.models import Defaults

    cells = ["base", "a", "b", "base", "c"]
    valid = {"base": 3, "a": 2, "b": 4, "c": 1}
    rounds: list[list[str]] = []

    def more_runs(*a: Any, final: bool = False) -> list[Any]:
        return (
            []
            if final
            else [SimpleNamespace(cell=SimpleNamespace(id=c), repetition=9) for c in cells]
        )

    monkeypatch.setattr(camp, "more_runs", more_runs)
    monkeypatch.setattr(camp, "note_auto_repetitions", lambda *a: None)
    monkeypatch.setattr(camp, "_valid_counts", lambda *a: valid)
    earlier = [
        SimpleNamespace(
            started_at=f"2026-11-30T10:0{i}:00+00:00", ended_at=f"2026-11-30T10:0{i}:08+00:00"
        )
        for i in range(10)
    ]
    store = SimpleNamespace(
        campaign=lambda cid: SimpleNamespace(
            notes={"auto_repetitions": {"seed": 7, "active_s": 100.0}}
        ),
        list_runs=lambda cid: earlier,
    )
    camp.adaptive_rounds(
        store,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        Defaults(repetitions="auto", budget="135s"),
        SimpleNamespace(run_ids=[], campaign_id=1),
        time_mod.monotonic(),
        SimpleNamespace(extend=lambda n: None),
        lambda more: rounds.append([r.cell.id for r in more]),
    )
    assert rounds == [["base", "a", "c"]]
    # killed before its notes were written: at least the time its runs took
    stamps = [(r.started_at, r.ended_at) for r in earlier]
    assert spent_before(None, stamps, time_mod.time()) == (80.0, 10)
    assert spent_before({"active_s": 100.0}, stamps, time_mod.time()) == (100.0, 10)
    # runs of this part (begun after it started) are not the earlier parts'
    assert spent_before(None, stamps, 0.0) == (0.0, 0)


def test_a_resumed_auto_campaign_keeps_its_seed_and_its_first_parts_notes(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """On 0206292 a resumed campaign drew a new seed and wrote its notes over the first
    part's."""
    import time as time_mod
    from types import SimpleNamespace

    from pgfsbench.engine import rounds as camp
    from pgfsbench.results.records import StoredCampaign
    from pgfsbench.results.store import Store
    from pgfsbench.spec.models import Defaults

    store = Store(str(tmp_path / "r.sqlite"))
    cid = store.start_campaign(StoredCampaign(name="c", uuid="u-1"))
    store.note_campaign(cid, "auto_repetitions", {"seed": 1234, "rounds": 3, "stopped": {"a": "x"}})
    seeds: list[int] = []

    def more_runs(store: Any, plan: Any, d: Any, result: Any, state: Any, **k: Any) -> list[Any]:
        seeds.append(state.seed)
        return []

    monkeypatch.setattr(camp, "more_runs", more_runs)
    d = Defaults(repetitions="auto")
    result = SimpleNamespace(run_ids=[], campaign_id=cid)
    camp.adaptive_rounds(
        store,
        None,  # type: ignore[arg-type]
        d,
        result,
        time_mod.monotonic(),
        SimpleNamespace(extend=lambda n: None),
        lambda more: None,
    )
    assert seeds == [1234]
    notes = store.campaign(cid).notes["auto_repetitions"]  # type: ignore[union-attr]
    assert notes["seed"] == 1234
    assert notes["earlier_parts"][0]["stopped"] == {"a": "x"}


def test_an_auto_campaign_stopped_by_its_user_notes_a_last_look(monkeypatch: Any) -> None:
    """Ctrl-C between looks (the seed's second campaign, 2026-12-01): the summary fell back
    on fixed-sample intervals, invalid after a stop that followed the data. Now the
    interruption takes one last look at every run made and notes it, said so."""
    import time as time_mod
    from types import SimpleNamespace

    from pgfsbench.engine import rounds as camp
    from pgfsbench.spec.models import Defaults
    from pgfsbench.system.errors import Interrupted

    looks: list[bool] = []
    noted: list[Any] = []

    def more_runs(*a: Any, final: bool = False) -> list[Any]:
        looks.append(final)
        return [] if final else [SimpleNamespace(cell=SimpleNamespace(id="a"), repetition=4)]

    def interrupted(more: Any) -> None:
        raise Interrupted("interrupted by Ctrl-C")

    monkeypatch.setattr(camp, "more_runs", more_runs)
    monkeypatch.setattr(camp, "note_auto_repetitions", lambda *a: noted.append(a[-1]))
    with pytest.raises(Interrupted):
        camp.adaptive_rounds(
            None,  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
            Defaults(repetitions="auto"),
            SimpleNamespace(run_ids=[1, 2, 3], campaign_id=1),
            time_mod.monotonic(),
            SimpleNamespace(extend=lambda n: None),
            interrupted,
        )
    assert looks == [False, True]  # the round's look, then the last one at the stop
    (state,) = noted
    assert state.interrupted is True and state.budget_spent is False
