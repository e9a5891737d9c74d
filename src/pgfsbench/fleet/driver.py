"""One spec on many hosts, through Ansible (ansible-runner's Python API) and the playbook
shipped in fleet/playbooks/run.yml.

Ansible does the fan-out, per-host failure isolation (an unreachable or failed host drops
out, the others go on), the detached run (`async`/`poll`) and the fetch; this module
starts it, follows its events to keep one state line per host, and imports each host's
results file into the team's results store as soon as it is fetched. The state is kept in
the fleet directory (fleet.json), so `fleet status` can show it and `fleet resume` can run
again only the hosts that did not finish, with `run --resume` where the host had begun.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.system.errors import CapabilityError, UsageError
from pgfsbench.system.held import make_dirs, write_file
from pgfsbench.system.secrets import shown
from pgfsbench.system.trust import (
    UntrustedPath,
    check_workdir_trusted,
    file_problem,
    make_trusted_dir,
    path_problem,
    read_trusted,
)

PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "run.yml"
CAPTURE_PLAYBOOK = PLAYBOOK.with_name("capture.yml")
STATE = "fleet.json"


@dataclass
class HostState:
    name: str
    status: str = "pending"  # pending, running, done, failed, unreachable
    phase: str = ""
    error: str = ""
    results_file: str | None = None
    imported: str = ""  # what the import said
    campaign: int | None = None  # the host's campaign id in its own file (for resume)
    updated_at: str = ""
    # from the run's progress file, polled by the playbook every 5 s
    runs_done: int | None = None
    runs_total: int | None = None
    eta_s: int | None = None
    cell: str = ""
    # the host's wall time in this fleet run, and the part of it its `pgfsbench run` took:
    # the rest is the controller's (Ansible, checks, copies, doctor, polling, fetch, import)
    started_at: str = ""
    ended_at: str = ""
    run_s: int | None = None

    def controller_s(self) -> int | None:
        if not (self.started_at and self.ended_at) or self.run_s is None:
            return None
        wall = dt.datetime.fromisoformat(self.ended_at) - dt.datetime.fromisoformat(self.started_at)
        return max(0, round(wall.total_seconds()) - self.run_s)

    def runs(self) -> str:
        return "" if self.runs_total is None else f"{self.runs_done or 0}/{self.runs_total}"

    def eta(self) -> str:
        if self.eta_s is None or self.status != "running":
            return ""
        m, s = divmod(self.eta_s, 60)
        return f"{m // 60}:{m % 60:02d}:{s:02d}"

    def progress(self, line: str) -> None:
        """The first line of the playbook's progress task: `run --progress-file`'s JSON."""
        try:
            data = json.loads(line)
        except ValueError:
            return
        if not isinstance(data, dict) or "total" not in data:
            return  # not started yet
        self.runs_done, self.runs_total = int(data.get("done", 0)), int(data["total"])
        self.eta_s = int(data.get("eta_s") or 0)
        self.run_s = int(data.get("elapsed_s") or 0)
        self.cell = str(data.get("cell", ""))
        where = " · ".join(x for x in (self.cell, str(data.get("phase", ""))) if x)
        self.phase = where or "starting"


@dataclass
class FleetState:
    run_uuid: str
    spec: str
    inventory: str
    results: str
    directory: str
    command: str
    run_args: str = ""
    remote_dir: str = "/var/tmp/pgfsbench-fleet"
    # ssh accepts a host's key it has never seen (and records it); a changed one is refused
    accept_new_host_keys: bool = False
    hosts: dict[str, HostState] = field(default_factory=dict)
    started_at: str = ""
    ended_at: str = ""

    def save(self) -> None:
        # in the checked fleet directory, made anew (never through a link), root's alone
        write_file(Path(self.directory) / STATE, json.dumps(asdict(self), indent=1), 0o600)

    @classmethod
    def load(cls, directory: Path) -> FleetState:
        path = directory / STATE
        if not path.is_file():
            raise UsageError(f"{path}: no fleet run here (see `pgfsbench fleet run`)")
        data = json.loads(read_trusted(path))
        hosts = {k: HostState(**v) for k, v in data.pop("hosts").items()}
        return cls(**data, hosts=hosts)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def require_ansible() -> Any:
    try:
        import ansible_runner  # type: ignore[import-untyped]
    except ModuleNotFoundError:
        raise CapabilityError(
            "the fleet needs Ansible: pip install 'pgfsbench[fleet]' "
            "(ansible-runner and ansible-core)"
        ) from None
    return ansible_runner


Progress = Callable[[FleetState], None]


def _event(event: dict[str, Any]) -> tuple[str, dict[str, Any], str, str, dict[str, Any]]:
    """An ansible-runner event's kind, data, host ("" for none), task and result."""
    data = event.get("event_data") or {}
    name = data.get("host")
    return (
        str(event.get("event", "")),
        data,
        str(name) if name else "",
        str(data.get("task", "")),
        data.get("res") or {},
    )


class Follower:
    """Ansible's events -> host states; imports each host's results as it is fetched."""

    def __init__(
        self,
        state: FleetState,
        on_change: Progress,
        import_file: Callable[[Path, str], tuple[str, int | None]],
    ):
        self.state = state
        self.on_change = on_change
        self.import_file = import_file

    def host(self, name: str) -> HostState:
        if name not in self.state.hosts:
            self.state.hosts[name] = HostState(name)
        return self.state.hosts[name]

    def __call__(self, event: dict[str, Any]) -> bool:
        kind, data, name, task, res = _event(event)
        if not name:
            return True
        h = self.host(name)
        if kind == "runner_on_start":
            if h.status == "pending":
                h.started_at, h.ended_at, h.run_s = _now(), "", None
            h.status = "running"
            if task != "pgfsbench run progress":  # its retries say more (see below)
                h.phase = task
        elif kind == "runner_on_unreachable":
            h.status, h.error = "unreachable", str(res.get("msg", "unreachable"))[:300]
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            h.status = "failed"
            h.error = str(res.get("msg") or res.get("stderr") or task)[:300]
        elif kind == "runner_on_ok" and task == "the host's results":
            local = Path(self.state.directory) / "fetched" / f"{name}.sqlite"
            try:
                why = file_problem(os.lstat(local), local)
            except OSError:
                why = "not fetched"
            if why is None:
                h.results_file = str(local)
                h.imported, h.campaign = self.import_file(local, str(name))
            elif why != "not fetched":
                h.status, h.error = "failed", f"its results file is not imported: {why}"
        elif kind in ("runner_retry", "runner_on_ok") and task == "pgfsbench run progress":
            lines = res.get("stdout_lines") or []
            if lines:
                h.progress(str(lines[0]))
        elif kind == "runner_on_ok" and task == "pgfsbench run result":
            h.phase = "run finished"
        h.updated_at = _now()
        if h.started_at:
            h.ended_at = h.updated_at  # the host's last event so far (others may follow it)
        self.state.save()
        self.on_change(self.state)
        return True


def run_fleet(
    state: FleetState,
    *,
    limit: str | None,
    serial: int | None,
    on_change: Progress,
    import_file: Callable[[Path, str], tuple[str, int | None]],
    resume: dict[str, int] | None = None,
) -> FleetState:
    """Run the playbook over the inventory (or ``limit``), ``serial`` hosts at a time.
    ``resume``: host -> campaign to resume there. The inventory is checked first
    (``inventory_problem``)."""
    check_inventory(Path(state.inventory))
    runner = require_ansible()
    base = Path(state.directory)
    # the hosts' results are fetched there and imported: nobody else may plant one
    check_workdir_trusted(base, "--fleet-dir")
    make_dirs(base / "fetched", 0o700)
    make_dirs(base / "ansible", 0o700)
    extravars: dict[str, Any] = {
        "spec": str(Path(state.spec).resolve()),
        "run_uuid": state.run_uuid,
        "fetch_dir": str((base / "fetched").resolve()),
        "pgfsbench_cmd": state.command,
        "run_args": state.run_args,
        "pgfsbench_dir": state.remote_dir,
    }
    if serial:
        extravars["serial"] = serial
    follower = Follower(state, on_change, import_file)
    groups = (
        [(None, limit)] if not resume else [({"resume_campaign": c}, h) for h, c in resume.items()]
    )
    for more, hosts in groups:
        for hostname in hosts.split(",") if hosts else []:
            st = follower.host(hostname)
            st.status, st.error, st.phase = "pending", "", ""
        result = runner.run(
            private_data_dir=str(base / "ansible"),
            playbook=str(PLAYBOOK),
            inventory=str(Path(state.inventory).resolve()),
            extravars={**extravars, **(more or {})},
            limit=hosts,
            quiet=True,
            event_handler=follower,
            envvars=ansible_env(state.accept_new_host_keys),
        )
        stats = result.stats or {}
        for name, hs in state.hosts.items():
            if name in (stats.get("dark") or {}):
                hs.status = "unreachable"
            elif name in (stats.get("failures") or {}):
                hs.status = "failed"
            elif name in (stats.get("ok") or {}) and hs.status not in ("failed", "unreachable"):
                hs.status = "done"
    state.ended_at = _now()
    state.save()
    on_change(state)
    return state


# what an inventory may not say: it would take away the check of every host's key
_NO_HOST_KEYS = re.compile(
    r"StrictHostKeyChecking\s*=?\s*(no|off)\b|UserKnownHostsFile\s*=?\s*/dev/null"
    r"|ansible_host_key_checking\s*[:=]\s*['\"]?(false|no|off|0)\b"
    r"|host_key_checking\s*=\s*(false|no|off|0)\b",
    re.IGNORECASE,
)
INVENTORY_MAX = 4 << 20  # bytes of an inventory (or a vars file) read to check it


def inventory_problem(inventory: Path) -> str | None:
    """Why an inventory cannot be used (None: it can). Ansible runs what it says as root
    (a local connection, an executable inventory is a script, vars name programs), so the
    inventory and the group_vars/ and host_vars/ beside it are trusted as a kubeconfig is:
    written by root (or whoever runs pgfsbench) alone, every directory on their way too.
    And none may turn the check of the hosts' keys off: `--accept-new-host-keys` is the
    way to meet new hosts."""
    path = inventory.absolute()
    files = [path]
    for vars_dir in ("group_vars", "host_vars"):
        beside = path.parent / vars_dir
        if beside.is_dir() and not beside.is_symlink():
            files += sorted(p for p in beside.rglob("*") if not p.is_dir())
    for f in files:
        why = path_problem(f.parent)
        if why is not None:
            return f"{f}: {why}"
        try:
            why = file_problem(os.lstat(f), f)
        except OSError as exc:
            why = f"{f}: {exc.strerror}"
        if why is not None:
            return f"{why}: an inventory runs commands as root; give one only root can write"
        text = read_trusted(f)[:INVENTORY_MAX].decode(errors="replace")
        if (m := _NO_HOST_KEYS.search(text)) is not None:
            return (
                f"{f} turns the check of the hosts' keys off ({m.group(0)}): pgfsbench checks "
                "every host's key; --accept-new-host-keys accepts a key never seen"
            )
    return None


def check_inventory(inventory: Path) -> None:
    """UntrustedPath when ``inventory_problem`` says why."""
    why = inventory_problem(inventory)
    if why is not None:
        raise UntrustedPath(why)


def ansible_env(accept_new_host_keys: bool = False) -> dict[str, str]:
    """ansible-playbook from the same environment as pgfsbench (a venv's bin first), every
    host's key checked (the known hosts of root, or the inventory's own
    ``ansible_ssh_common_args='-o UserKnownHostsFile=...'``); with
    ``accept_new_host_keys``, a key never seen is accepted and kept, a changed one refused."""
    here = str(Path(sys.executable).parent)
    env = {
        "PATH": f"{here}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_NOCOLOR": "1",
    }
    if accept_new_host_keys:
        env["ANSIBLE_SSH_COMMON_ARGS"] = "-o StrictHostKeyChecking=accept-new"
    return env


def new_state(
    spec: Path,
    inventory: Path,
    results: str,
    directory: Path,
    command: str,
    run_args: str,
    remote_dir: str = "/var/tmp/pgfsbench-fleet",
    accept_new_host_keys: bool = False,
) -> FleetState:
    # checked before anything is written there: the state and the fetched results
    make_trusted_dir(directory)
    old = directory / STATE
    if old.is_file():  # an earlier fleet run: kept under its uuid
        previous = json.loads(read_trusted(old)).get("run_uuid", "previous")
        old.replace(directory / f"fleet-{str(previous)[:40].replace('/', '_')}.json")
    state = FleetState(
        str(uuid.uuid4()),
        str(spec.resolve()),
        str(inventory.resolve()),
        shown(results),  # kept without its password (give it through PGPASSWORD or ~/.pgpass)
        str(directory.resolve()),
        command,
        run_args,
        remote_dir,
        accept_new_host_keys,
        started_at=_now(),
    )
    state.save()
    return state


@dataclass
class CaptureHost:
    """One host of a fleet capture: how it ended and what it captured (counts only)."""

    name: str
    status: str = "pending"  # pending | running | done | failed | unreachable
    error: str = ""
    summary: dict[str, Any] = field(default_factory=dict)


class CaptureFollower:
    """Ansible's events -> each host's capture."""

    def __init__(self, hosts: dict[str, CaptureHost], on_change: Callable[[], None]):
        self.hosts = hosts
        self.on_change = on_change

    def __call__(self, event: dict[str, Any]) -> bool:
        kind, data, name, task, res = _event(event)
        if not name:
            return True
        h = self.hosts.setdefault(name, CaptureHost(name))
        if kind == "runner_on_start" and h.status == "pending":
            h.status = "running"
        elif kind == "runner_on_unreachable":
            h.status, h.error = "unreachable", str(res.get("msg", "unreachable"))[:300]
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            h.status = "failed"
            h.error = str(res.get("msg") or res.get("stderr") or task)[:300]
        elif kind == "runner_on_ok" and task == "pgfsbench capture":
            h.summary = _capture_summary(str(res.get("stdout") or ""))
            h.status = "done" if h.summary else "failed"
            if not h.summary:
                h.error = "the capture printed no summary"
        self.on_change()
        return True


def _capture_summary(stdout: str) -> dict[str, Any]:
    """The summary `capture --json` printed (its last line): counts, sizes, the
    directory; anything else is not kept."""
    keys = ("directory", "kind", "format", "seconds", "statements", "log_bytes", "base")
    for line in reversed(stdout.strip().splitlines()):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict):
            return {k: found[k] for k in keys if isinstance(found.get(k), str | int | float)}
    return {}


def capture_fleet(
    *,
    inventory: Path,
    directory: Path,
    dsn: str | None,
    seconds: float,
    capture_dir: str,
    command: str,
    capture_args: str,
    workdir: str,
    limit: str | None,
    accept_new_host_keys: bool,
    on_change: Callable[[dict[str, CaptureHost]], None],
) -> dict[str, CaptureHost]:
    """`pgfsbench capture` on every host of the inventory (or ``limit``), all at once
    (each captures its own server); each host's counts kept in DIRECTORY. The inventory is
    checked first (``inventory_problem``)."""
    check_inventory(inventory)
    runner = require_ansible()
    make_trusted_dir(directory)
    make_dirs(directory / "ansible-capture", 0o700)
    extravars: dict[str, Any] = {
        "seconds": seconds,
        "capture_dir": capture_dir,
        "pgfsbench_cmd": command,
        "capture_args": capture_args,
        "capture_workdir": workdir,
    }
    if dsn is not None:
        extravars["capture_dsn"] = dsn
    hosts: dict[str, CaptureHost] = {}
    follower = CaptureFollower(hosts, lambda: on_change(hosts))
    result = runner.run(
        private_data_dir=str(directory / "ansible-capture"),
        playbook=str(CAPTURE_PLAYBOOK),
        inventory=str(inventory.resolve()),
        extravars=extravars,
        limit=limit,
        quiet=True,
        event_handler=follower,
        envvars=ansible_env(accept_new_host_keys),
    )
    stats = result.stats or {}
    for name in stats.get("dark") or {}:
        hosts.setdefault(name, CaptureHost(name)).status = "unreachable"
    for name in stats.get("failures") or {}:
        hosts.setdefault(name, CaptureHost(name)).status = "failed"
    write_file(
        directory / f"capture-{_now().replace(':', '')}.json",
        json.dumps({k: asdict(v) for k, v in hosts.items()}, indent=1) + "\n",
        0o600,
    )
    on_change(hosts)
    return hosts
