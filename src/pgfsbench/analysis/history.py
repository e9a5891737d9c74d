"""A spec run again and again (after an upgrade, on new hardware, every week): where did a
figure step, and what changed in the environment at that point (pure: runs in, findings out).

A series is the runs that are comparable over time: same host, same cell, same workload,
scale and clients, ok and not superseded, in the order they started. Its figures are the
throughput, the p99 latency and the load time of each run (one point per repetition).

Change points: E-divisive means with a Student's t test for significance, as Hunter and
its successor Apache Otava do it (Fleming et al., "Hunter: Using Change Point Detection to
Hunt for Performance Regressions", ICPE 2023; Matteson and James 2014 for E-divisive):
windows of the series are split where the energy distance between the two sides is
largest, the candidates kept when the t test says the two sides differ (p < 10 x
MAX_PVALUE), then merged bottom-up until every remaining point has p < MAX_PVALUE and a
relative change above MIN_MAGNITUDE. Otava's `compute_change_points` does both steps;
nothing of it is reimplemented here.

At each change point, each side is the stretch of runs up to the next change point (or the
series' end): the change is the ratio of their geometric means with its 95% interval
(Welch's t on logs, as `compare` does), and "what changed" is every recorded fact of the
environment (`environment_facts`) that is the same over the runs on each side and differs
between the two sides. A fact that varies within a side (a loop device's number, a temporary
path) explains nothing and is not named; when nothing recorded changed, that is said.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pgfsbench.analysis.compare import Comparison, compare
from pgfsbench.results.records import StoredRun

MAX_PVALUE = 0.001  # Otava's default: a change point must be this unlikely by chance
MIN_MAGNITUDE = 0.02  # and at least 2% (compare's smallest effect that counts)
WINDOW = 30  # runs per window of the split step (Otava's default is 50; series are short)
MIN_POINTS = 6  # fewer runs than this: no change point is looked for
MIN_SIDE = 3  # runs on each side of a change point (compare's minimum for a verdict)


@dataclass(frozen=True)
class Metric:
    name: str  # tps, p99, load
    label: str  # what the text calls it
    unit: str
    higher_is_better: bool
    value: Callable[[StoredRun], float | None]


def _p99(run: StoredRun) -> float | None:
    return run.latency_ms.get("p99")


METRICS: tuple[Metric, ...] = (
    Metric("tps", "TPS", "tps", True, lambda r: r.figure),
    Metric("p99", "p99 latency", "ms", False, _p99),
    Metric("load", "load time", "s", False, lambda r: r.load_seconds),
)


@dataclass(frozen=True)
class SeriesKey:
    host: str
    cell: str
    workload: str
    scale: int | None
    clients: int | None

    def text(self) -> str:
        size = []
        if self.scale is not None:
            size.append(f"scale {self.scale}")
        if self.clients is not None:
            size.append(f"{self.clients} clients")
        extra = f" ({', '.join(size)})" if size else ""
        return f"{self.cell} on {self.host}{extra}"

    def as_dict(self) -> dict[str, object]:
        return {
            "host": self.host,
            "cell": self.cell,
            "workload": self.workload,
            "scale": self.scale,
            "clients": self.clients,
        }


def series_key(run: StoredRun) -> SeriesKey:
    return SeriesKey(run.host or "?", run.cell, run.workload, run.scale, run.clients)


@dataclass(frozen=True)
class Point:
    run_id: int
    campaign_id: int | None
    started_at: str | None
    value: float


@dataclass(frozen=True)
class EnvChange:
    key: str
    before: str | None
    after: str | None

    def text(self) -> str:
        return f"{self.key} {self.before if self.before is not None else '(none)'} -> " + (
            self.after if self.after is not None else "(none)"
        )


@dataclass(frozen=True)
class ChangePoint:
    """A step in one figure of a series: from ``first`` (the first run after it) on."""

    metric: Metric
    index: int  # position of the first run after the change in the series' points
    first: Point
    change: Comparison  # after / before (geometric means, 95% interval)
    p_value: float  # Otava's t test between the two sides
    mean_before: float
    mean_after: float
    n_before: int
    n_after: int
    changes: tuple[EnvChange, ...]
    unvaried: int  # how many recorded facts were compared (the same on each side)

    def when(self) -> str:
        return (self.first.started_at or "")[:10]

    def change_text(self) -> str:
        """'TPS -18.2% [-21.0%, -15.1%] (10 runs before, 3 after, p=1.2e-08)'."""
        c = self.change
        pct = f"{c.change_pct:+.1f}%" if c.change_pct is not None else "?"
        if c.ci_low is not None and c.ci_high is not None:
            pct += f" [{(c.ci_low - 1) * 100:+.1f}%, {(c.ci_high - 1) * 100:+.1f}%]"
        return (
            f"{self.metric.label} {pct} ({self.n_before} runs before, {self.n_after} after, "
            f"p={self.p_value:.2g})"
        )

    def where(self) -> str:
        """'campaign 41 (run 310, 2026-11-02)'."""
        first = self.first
        head = f"campaign {first.campaign_id}" if first.campaign_id is not None else "run"
        return f"{head} (run {first.run_id}, {self.when()})"

    def text(self, key: SeriesKey) -> str:
        """'ext4/... on node3: TPS -18.2% [-21.0%, -15.1%] from campaign 41 (run 310,
        2026-11-02) on (...); what changed: kernel 6.1.0-18 -> 6.1.0-21'."""
        return f"{key.text()}: {self.change_text()} from {self.where()} on; {self.what_changed()}"

    def what_changed(self) -> str:
        if not self.changes:
            return (
                f"nothing recorded changed (of {self.unvaried} facts compared): the cause "
                "was not recorded (the host's load, the disk beneath, something outside)"
            )
        return "what changed: " + ", ".join(c.text() for c in self.changes)

    def as_dict(self) -> dict[str, object]:
        c = self.change
        return {
            "metric": self.metric.name,
            "run_id": self.first.run_id,
            "campaign_id": self.first.campaign_id,
            "started_at": self.first.started_at,
            "change_pct": c.change_pct,
            "ci_pct": (
                [(c.ci_low - 1) * 100, (c.ci_high - 1) * 100]
                if c.ci_low is not None and c.ci_high is not None
                else None
            ),
            "p_value": self.p_value,
            "mean_before": self.mean_before,
            "mean_after": self.mean_after,
            "n_before": self.n_before,
            "n_after": self.n_after,
            "changes": [{"key": e.key, "before": e.before, "after": e.after} for e in self.changes],
            "facts_compared": self.unvaried,
        }


@dataclass(frozen=True)
class SeriesHistory:
    key: SeriesKey
    runs: tuple[StoredRun, ...]
    points: dict[str, tuple[Point, ...]]  # by metric name
    change_points: tuple[ChangePoint, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def by_run(self) -> list[list[ChangePoint]]:
        """The change points grouped by the run they start at (TPS, p99 and load time
        often step together), in time order."""
        groups: dict[int, list[ChangePoint]] = {}
        for cp in sorted(self.change_points, key=lambda c: (c.first.started_at or "", c.index)):
            groups.setdefault(cp.first.run_id, []).append(cp)
        return list(groups.values())

    def as_dict(self) -> dict[str, object]:
        return {
            **self.key.as_dict(),
            "runs": len(self.runs),
            "points": {
                m: [
                    {
                        "run_id": p.run_id,
                        "campaign_id": p.campaign_id,
                        "started_at": p.started_at,
                        "value": p.value,
                    }
                    for p in pts
                ]
                for m, pts in self.points.items()
            },
            "change_points": [c.as_dict() for c in self.change_points],
            "notes": list(self.notes),
        }


# ------------------------------------------------------------------ the environment's facts

# keys never compared: they name this run's own objects (paths, device numbers, UUIDs) or
# are long texts whose changing parts are recorded elsewhere
_SKIP = {
    "hostname",
    "initdb_output",
    "mounts.*.source",
    "source",
    "devices",
    "mountpoint",
    "mkfs_output",
    "fs_info",
    "loop_backing_file",
    "status",
    "create_argv",
    "description",
    "artifacts_dir",
}
_PATH_SETTINGS = {
    "config_file",
    "data_directory",
    "hba_file",
    "ident_file",
    "external_pid_file",
    "unix_socket_directories",
    "log_directory",
    "port",
}


def _flatten(prefix: str, value: object, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            if str(k) in _SKIP:
                continue
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list | tuple):
        out[prefix] = json.dumps(value, sort_keys=True, default=str)
    elif value is not None:
        out[prefix] = str(value)


def _argv_text(argv: object) -> str | None:
    """An mkfs command line without its device arguments (they name this run's loop)."""
    if not isinstance(argv, list):
        return None
    return " ".join(str(a) for a in argv if not str(a).startswith("/dev/"))


def _device_roles(run: StoredRun) -> dict[str, str]:
    """Block device name -> what it is to the run: 'data', 'wal' (their first device...),
    or its own name for the disks beneath (vda, nvme0n1: names that stay)."""
    roles: dict[str, str] = {}
    for role in ("data", "wal"):
        volume = run.storage_details.get(role)
        if isinstance(volume, Mapping):
            for i, dev in enumerate(volume.get("devices") or []):
                roles[str(dev).removeprefix("/dev/")] = role if i == 0 else f"{role}[{i}]"
    return roles


# what names a cluster run's own objects (a new pod, claim and volume every run)
_K8S_OWN = {"name", "claim", "volume", "local_path", "volume_attributes"}


def kubernetes_facts(k8s: object) -> dict[str, str]:
    """A cluster run's environment (kube/environment.py) as facts: the server, the node
    (its name included: another node is a change), the claim's class and volume, the pod's
    resources and image; not the names of the run's own objects."""
    if not isinstance(k8s, Mapping):
        return {}
    out: dict[str, str] = {}
    node = k8s.get("node") or {}
    if isinstance(node, Mapping) and node.get("name"):
        out["kubernetes node"] = str(node["name"])
    for part in ("cluster", "node", "pod", "volumes"):
        value = k8s.get(part)
        if not isinstance(value, Mapping):
            continue
        flat: dict[str, str] = {}
        _flatten(f"kubernetes {part}", _without(value, _K8S_OWN), flat)
        out.update(flat)
    return out


def _without(value: Mapping[str, object], keys: set[str]) -> dict[str, object]:
    return {
        k: _without(v, keys) if isinstance(v, Mapping) else v
        for k, v in value.items()
        if k not in keys
    }


def environment_facts(run: StoredRun) -> dict[str, str]:
    """Everything recorded about a run's environment that could explain a step, flattened
    to 'key' -> text: the host (kernel, distribution, CPU, memory, pgfsbench's version),
    every vm.* sysctl and THP, PostgreSQL's version and its settings that differ from the
    defaults, the benchmark tool's version, mkfs and mount options, the filesystem's and
    ZFS's versions and parameters, device facts (model, firmware, scheduler, rotational,
    write cache, read-ahead) by role, device limits, and the spec's own configuration of
    the cell (a spec edited under the same cell name shows up here)."""
    env = run.environment
    facts: dict[str, str] = {}
    for key, value in env.items():
        if key in ("vm", "pg_settings_changed", "devices", "mounts") or key in _SKIP:
            continue
        if value is not None and not isinstance(value, Mapping | list):
            facts[key] = str(value)
    for key, value in (env.get("vm") or {}).items():
        facts[str(key)] = str(value)
    facts.update(kubernetes_facts(env.get("kubernetes")))
    for row in env.get("pg_settings_changed") or []:
        if isinstance(row, Mapping) and row.get("name") not in _PATH_SETTINGS:
            unit = row.get("unit") or ""
            facts[f"postgresql.conf {row.get('name')}"] = f"{row.get('setting')}{unit}"
    for role, mount in (env.get("mounts") or {}).items():
        if isinstance(mount, Mapping):
            facts[f"mount {role}"] = f"{mount.get('fs')} {mount.get('options')}"
    roles = _device_roles(run)
    for name, dev in (env.get("devices") or {}).items():
        if isinstance(dev, Mapping):
            label = roles.get(str(name), str(name))
            if label == name and str(name).startswith("loop"):
                continue  # a loop device of something else: its number means nothing
            for k, v in dev.items():
                facts[f"device {label} {k}"] = str(v)
    details = dict(run.storage_details)
    for role in ("data", "wal"):
        volume = details.pop(role, None)
        if isinstance(volume, Mapping):
            argv = _argv_text(volume.get("mkfs_argv"))
            if argv:
                facts[f"mkfs {role}"] = argv
            _flatten(
                f"storage {role}", {k: v for k, v in volume.items() if k != "mkfs_argv"}, facts
            )
    for key, value in details.items():
        if key not in _SKIP:
            _flatten(f"storage {key}", value, facts)
    for dimension in ("storage", "postgres", "kernel", "workload"):
        _flatten(f"spec {dimension}", run.param(dimension), facts)
    for name in ("pg_version", "implementation", "duration_s", "warmup_s", "threads"):
        value = getattr(run, name)
        if value is not None:
            facts[name] = str(value)
    return facts


def what_changed(
    before: Sequence[StoredRun], after: Sequence[StoredRun]
) -> tuple[list[EnvChange], int]:
    """The facts that are the same over every run of each side and differ between the
    sides (sorted by key), and how many facts were constant on both sides. A fact missing
    on one side (recorded by a newer pgfsbench only) is not a change."""

    def constant(runs: Sequence[StoredRun]) -> dict[str, str | None]:
        merged: dict[str, str | None] = {}
        varied: set[str] = set()
        for i, facts in enumerate(environment_facts(r) for r in runs):
            keys = set(facts) | set(merged)
            for k in keys:
                v = facts.get(k)
                if i == 0:
                    merged[k] = v
                elif merged.get(k) != v:
                    varied.add(k)
        return {k: v for k, v in merged.items() if k not in varied}

    a, b = constant(before), constant(after)
    common = set(a) & set(b)
    changes = [
        EnvChange(k, a[k], b[k])
        for k in sorted(common)
        if a[k] != b[k] and a[k] is not None and b[k] is not None
    ]
    return changes, len(common)


# ------------------------------------------------------------------ change points


def _detect(values: Sequence[float], window: int) -> list[tuple[int, float]]:
    """(index of the first point after the change, p value) for each change point Otava
    finds (indices ascending), keeping only those with MIN_SIDE runs or more on each side:
    a point that sets one run apart (a first, cold run) is an outlier, not a change. When
    one goes, its neighbours' sides grow: their t tests are made again (Otava's tester),
    and a point that is no longer significant goes too."""
    from otava.analysis import TTestSignificanceTester, compute_change_points

    found, _weak = compute_change_points(
        list(values), window_len=window, max_pvalue=MAX_PVALUE, min_magnitude=MIN_MAGNITUDE
    )
    points = sorted((int(cp.index), float(cp.stats.pvalue)) for cp in found)
    tester = TTestSignificanceTester(MAX_PVALUE)
    while points:
        bounds = [0, *(i for i, _ in points), len(values)]
        sides = [
            (values[bounds[j] : idx], values[idx : bounds[j + 2]])
            for j, (idx, _) in enumerate(points)
        ]
        tested = [
            (idx, float(tester.compare(left, right).pvalue), min(len(left), len(right)))
            for (idx, _), (left, right) in zip(points, sides, strict=True)
        ]
        weak = [t for t in tested if t[2] < MIN_SIDE or t[1] >= MAX_PVALUE]
        if not weak:
            return [(idx, p) for idx, p, _ in tested]
        worst = max(weak, key=lambda t: (t[2] < MIN_SIDE, t[1]))
        points = [(i, p) for i, p, _ in tested if i != worst[0]]
    return []


def _series_points(runs: Sequence[StoredRun], metric: Metric) -> list[tuple[int, Point]]:
    out = []
    for i, r in enumerate(runs):
        v = metric.value(r)
        if v is not None and math.isfinite(v) and v > 0:
            out.append((i, Point(r.run_id, r.campaign_id, r.started_at, float(v))))
    return out


def analyse_series(
    key: SeriesKey, runs: Sequence[StoredRun], window: int = WINDOW
) -> SeriesHistory:
    """The change points of each figure of one series (runs in time order)."""
    points: dict[str, tuple[Point, ...]] = {}
    found: list[ChangePoint] = []
    notes: list[str] = []
    short: dict[int, list[str]] = {}  # runs -> the figures with that few (said once)
    for metric in METRICS:
        indexed = _series_points(runs, metric)
        points[metric.name] = tuple(p for _, p in indexed)
        if len(indexed) < MIN_POINTS:
            if indexed:
                short.setdefault(len(indexed), []).append(metric.label)
            continue
        values = [p.value for _, p in indexed]
        cps = _detect(values, window)
        bounds = [0, *(i for i, _ in cps), len(indexed)]
        for j, (idx, p) in enumerate(cps):
            left = indexed[bounds[j] : idx]
            right = indexed[idx : bounds[j + 2]]
            before_runs = [runs[i] for i, _ in left]
            after_runs = [runs[i] for i, _ in right]
            changes, compared = what_changed(before_runs, after_runs)
            lv = [pt.value for _, pt in left]
            rv = [pt.value for _, pt in right]
            found.append(
                ChangePoint(
                    metric=metric,
                    index=idx,
                    first=indexed[idx][1],
                    change=compare(lv, rv, higher_is_better=metric.higher_is_better),
                    p_value=p,
                    mean_before=sum(lv) / len(lv),
                    mean_after=sum(rv) / len(rv),
                    n_before=len(lv),
                    n_after=len(rv),
                    changes=tuple(changes),
                    unvaried=compared,
                )
            )
    for n, labels in short.items():
        notes.append(
            f"{n} run(s) of {', '.join(labels)}: too few for a change point (at least {MIN_POINTS})"
        )
    return SeriesHistory(key, tuple(runs), points, tuple(found), tuple(notes))


def _started(run: StoredRun) -> str:
    return run.started_at or ""


def history(
    runs: Iterable[StoredRun],
    *,
    host: str | None = None,
    cell: Callable[[str], bool] | None = None,
    since: dt.datetime | None = None,
    window: int = WINDOW,
) -> list[SeriesHistory]:
    """Every series of comparable runs among ``runs`` (ok, not superseded), each with its
    change points. ``since`` keeps the runs started at or after it (UTC)."""
    groups: dict[SeriesKey, list[StoredRun]] = {}
    for r in runs:
        if not r.ok or r.superseded_by is not None:
            continue
        if host is not None and r.host != host:
            continue
        if cell is not None and not cell(r.cell):
            continue
        if since is not None and (r.started_at is None or _parse(r.started_at) < since):
            continue
        groups.setdefault(series_key(r), []).append(r)
    out = []
    for key in sorted(groups, key=lambda k: (k.host, k.cell, k.scale or 0, k.clients or 0)):
        ordered = sorted(groups[key], key=lambda r: (_started(r), r.run_id))
        out.append(analyse_series(key, ordered, window))
    return out


def _parse(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
