"""The little pgfsbench asks of a Kubernetes API, behind one interface.

`KubeClient` is what the Job runner, the environment reader and cleanup use: create an
object from its manifest, read one, list by labels, delete, read a pod's events and log.
Objects go in and come out as plain manifests (dicts, as `kubectl get -o json` prints
them), so the runner's logic is pure and its unit tests use `FakeCluster`
(tests/unit/fake_kube.py) instead of a cluster. `LightkubeClient` is the real one:
lightkube's typed resources, loaded from the manifests with its codecs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pgfsbench.system.errors import CapabilityError, PgfsbenchError
from pgfsbench.system.trust import UntrustedPath, file_problem, path_problem, read_trusted

Manifest = dict[str, Any]

# the kinds pgfsbench reads or writes, with their API group and whether they are namespaced
KINDS: Mapping[str, tuple[str, bool]] = {
    "Job": ("batch/v1", True),
    "Pod": ("v1", True),
    "PersistentVolumeClaim": ("v1", True),
    "ConfigMap": ("v1", True),
    "Event": ("v1", True),
    "PersistentVolume": ("v1", False),
    "StorageClass": ("storage.k8s.io/v1", False),
    "Node": ("v1", False),
    "Namespace": ("v1", False),
}


# a transient error (the server unreachable, 429, 5xx) is tried again after these pauses
RETRY_PAUSES_S = (1.0, 2.0, 4.0, 8.0)
_RAISE: Any = object()  # `_call` without a value for a 404


class KubeError(PgfsbenchError):
    """The cluster refused or could not be reached."""


@dataclass(frozen=True)
class ClusterAddress:
    """Which cluster: a kubeconfig file (None: $KUBECONFIG, then ~/.kube/config) and a
    context in it (None: its current one)."""

    kubeconfig: str | None = None
    context: str | None = None

    def paths(self) -> list[Path]:
        """The kubeconfig files, as kubectl takes them: the one given, else each of
        $KUBECONFIG's list (those that exist), else ~/.kube/config."""
        if self.kubeconfig:
            return [Path(self.kubeconfig).expanduser()]
        env = os.environ.get("KUBECONFIG")
        if env:
            listed = [Path(p).expanduser() for p in env.split(os.pathsep) if p]
            there = [p for p in listed if p.exists()]
            return there or listed[:1]
        return [Path("~/.kube/config").expanduser()]

    def path(self) -> Path:
        """The first kubeconfig file (the one named in messages and the journal)."""
        return self.paths()[0]


def kubeconfig_problem(path: Path) -> str | None:
    """Why a kubeconfig cannot be trusted (None: it can): a kubeconfig runs commands (exec
    plugins), so it and every directory on its way must be writable by root (or whoever
    runs pgfsbench) alone, as for the work directory."""
    if not path.is_absolute():
        return f"kubeconfig {path} is not an absolute path"
    why = path_problem(path.parent)
    if why is not None:
        return f"kubeconfig {path}: {why}"
    try:
        return file_problem(os.lstat(path), path)
    except OSError as exc:
        return f"kubeconfig {path}: {exc.strerror}"


def merged_kubeconfig(paths: list[Path]) -> dict[str, Any]:
    """Several kubeconfigs as kubectl merges a $KUBECONFIG list: each named cluster,
    context and user from the first file that has it, the current context from the first
    file that sets one; every file checked as one alone is."""
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Config"}
    for path in paths:
        data = read_kubeconfig(path)
        for key in ("clusters", "contexts", "users"):
            have = {str(e.get("name")) for e in out.get(key, []) if isinstance(e, dict)}
            for entry in data.get(key) or []:
                if isinstance(entry, dict) and str(entry.get("name")) not in have:
                    out.setdefault(key, []).append(entry)
                    have.add(str(entry.get("name")))
        if not out.get("current-context") and data.get("current-context"):
            out["current-context"] = data["current-context"]
        for key, value in data.items():
            out.setdefault(key, value)
    return out


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """A kubeconfig's content, checked (``kubeconfig_problem``) and read once, through a
    descriptor opened without following a link: the content checked is the one used."""
    import yaml

    why = kubeconfig_problem(path)
    if why is not None:
        raise UntrustedPath(
            f"{why}: a kubeconfig can run commands (exec plugins); give one that only "
            "root can write"
        )
    data = yaml.safe_load(read_trusted(path))
    if not isinstance(data, dict):
        raise CapabilityError(f"kubeconfig {path}: not a kubeconfig (a YAML mapping)")
    why = referenced_problem(data, path.parent)
    if why is not None:
        raise UntrustedPath(f"kubeconfig {path}: {why}")
    return data


# the files a kubeconfig names: its user's credentials, its clusters' authorities, and the
# programs it runs (an exec plugin's command; an auth provider's cmd-path)
_USER_FILES = ("client-certificate", "client-key", "tokenFile")
_CLUSTER_FILES = ("certificate-authority",)


def referenced_problem(data: dict[str, Any], base: Path) -> str | None:
    """Why a file or program a kubeconfig names cannot be trusted (None: each can): each
    must be root's alone, as the kubeconfig is (a key or a CA another user can replace
    lets them in the middle; a command is run as root). A bare command is looked up on
    PATH, as kubectl does."""
    import shutil

    named: list[tuple[str, str]] = []
    for entry in data.get("users") or []:
        user = entry.get("user") if isinstance(entry, dict) else None
        if not isinstance(user, dict):
            continue
        named += [(k, str(user[k])) for k in _USER_FILES if user.get(k)]
        exe = user.get("exec")
        if isinstance(exe, dict) and exe.get("command"):
            command = str(exe["command"])
            found = command if "/" in command else shutil.which(command)
            if found is None:
                return f"its exec command {command!r} is not on PATH"
            named.append(("exec command", found))
        provider = user.get("auth-provider")
        config = provider.get("config") if isinstance(provider, dict) else None
        if isinstance(config, dict) and config.get("cmd-path"):
            named.append(("auth-provider cmd-path", str(config["cmd-path"])))
    for entry in data.get("clusters") or []:
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        if isinstance(cluster, dict):
            named += [(k, str(cluster[k])) for k in _CLUSTER_FILES if cluster.get(k)]
    for what, name in named:
        target = Path(name).expanduser()
        target = target if target.is_absolute() else base / target
        why = path_problem(target.parent)
        if why is None:
            try:
                why = file_problem(target.stat(), target)  # a link of root's is followed
            except OSError as exc:
                why = f"{target}: {exc.strerror}"
        if why is not None:
            return f"its {what}: {why}"
    return None


class KubeClient(Protocol):
    context: str  # the kubeconfig context in use (its name)

    def create(self, manifest: Manifest) -> Manifest: ...

    def get(self, kind: str, name: str, namespace: str | None = None) -> Manifest | None: ...

    def select(
        self, kind: str, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> list[Manifest]: ...

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool: ...

    def patch(self, kind: str, name: str, namespace: str | None, patch: Manifest) -> Manifest: ...

    def events(self, namespace: str, kind: str, name: str) -> list[Manifest]: ...

    def log(self, pod: str, namespace: str, container: str | None = None) -> Iterable[str]: ...

    def server_version(self) -> Manifest: ...


def _resource(kind: str) -> Any:
    from lightkube.generic_resource import get_generic_resource
    from lightkube.resources.apps_v1 import Deployment  # noqa: F401 (loads the registry)
    from lightkube.resources.batch_v1 import Job
    from lightkube.resources.core_v1 import (
        ConfigMap,
        Event,
        Namespace,
        Node,
        PersistentVolume,
        PersistentVolumeClaim,
        Pod,
    )
    from lightkube.resources.storage_v1 import StorageClass

    known = {
        "Job": Job,
        "Pod": Pod,
        "PersistentVolumeClaim": PersistentVolumeClaim,
        "ConfigMap": ConfigMap,
        "Event": Event,
        "PersistentVolume": PersistentVolume,
        "StorageClass": StorageClass,
        "Node": Node,
        "Namespace": Namespace,
    }
    found = known.get(kind)
    if found is None:
        version, _ = KINDS.get(kind, ("v1", True))
        found = get_generic_resource(version, kind)  # type: ignore[no-untyped-call]
        if found is None:
            raise KubeError(f"internal: no resource kind {kind}")
    return found


def _plain(obj: Any) -> Manifest:
    data = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
    return dict(data)


class LightkubeClient:
    """The cluster through lightkube (sync API; the same calls exist async)."""

    def __init__(self, address: ClusterAddress, namespace: str = "default"):
        from lightkube import Client, KubeConfig
        from lightkube.core.exceptions import ConfigError

        path = address.path()
        if not path.is_file():
            raise CapabilityError(
                f"no kubeconfig at {path}: give [kubernetes] kubeconfig (or --kubeconfig), "
                "or set KUBECONFIG"
            )
        try:
            config = KubeConfig.from_dict(merged_kubeconfig(address.paths()), fname=path)
            single = config.get(context_name=address.context)
        except (ConfigError, OSError, ValueError, KeyError) as exc:
            raise CapabilityError(f"kubeconfig {path}: {exc}") from None
        if single is None:
            raise CapabilityError(f"kubeconfig {path}: no context {address.context or '(current)'}")
        self.address = address
        self.namespace = namespace
        self.context = str(single.context_name)
        self._client = Client(config=single, namespace=namespace, field_manager="pgfsbench")
        self._sleep = time.sleep

    def _call(self, what: str, fn: Any, *args: Any, absent: Any = _RAISE, **kwargs: Any) -> Any:
        """``fn`` with lightkube's and the transport's errors as KubeError; a transient
        one (the server unreachable, 429, 5xx) tried again after RETRY_PAUSES_S; a 404
        returns ``absent`` when one is given."""
        import httpx2
        from lightkube import ApiError

        for attempt, pause in enumerate((*RETRY_PAUSES_S, None)):
            try:
                return fn(*args, **kwargs)
            except ApiError as exc:
                code = exc.status.code or 0
                if code == 404 and absent is not _RAISE:
                    return absent
                if pause is None or not (code == 429 or code >= 500):
                    raise KubeError(f"{what}: {exc.status.message or exc.status.reason}") from None
            except (httpx2.HTTPError, OSError) as exc:
                if pause is None:
                    raise KubeError(
                        f"{what}: the cluster cannot be reached ({exc}; tried "
                        f"{attempt + 1} times over {sum(RETRY_PAUSES_S):.0f} s)"
                    ) from None
            self._sleep(pause)
        raise KubeError(f"{what}: no answer")  # pragma: no cover - returned or raised above

    def create(self, manifest: Manifest) -> Manifest:
        from lightkube import codecs

        obj = codecs.from_dict(manifest)
        name = manifest.get("metadata", {}).get("name", "?")
        return _plain(self._call(f"creating {manifest['kind']} {name}", self._client.create, obj))

    def get(self, kind: str, name: str, namespace: str | None = None) -> Manifest | None:
        res = _resource(kind)
        kwargs = (
            {"namespace": namespace or self.namespace} if KINDS.get(kind, ("", True))[1] else {}
        )
        found = self._call(
            f"reading {kind} {name}", self._client.get, res, name, absent=None, **kwargs
        )
        return None if found is None else _plain(found)

    def select(
        self, kind: str, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> list[Manifest]:
        res = _resource(kind)
        kwargs: dict[str, Any] = {"labels": dict(labels or {})}
        if KINDS.get(kind, ("", True))[1]:
            kwargs["namespace"] = namespace or self.namespace
        # lightkube's list is lazy: read whole inside _call, or a transport error of its
        # pages would escape the retries and the conversion to KubeError
        found = self._call(f"listing {kind}", lambda: list(self._client.list(res, **kwargs)))
        return [_plain(o) for o in found]

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        from lightkube.types import CascadeType

        res = _resource(kind)
        kwargs: dict[str, Any] = {}
        if KINDS.get(kind, ("", True))[1]:
            kwargs["namespace"] = namespace or self.namespace
        if kind == "Job":
            kwargs["cascade"] = CascadeType.BACKGROUND  # its pods go with it
        gone = self._call(
            f"deleting {kind} {name}", self._client.delete, res, name, absent=False, **kwargs
        )
        return gone is not False

    def patch(self, kind: str, name: str, namespace: str | None, patch: Manifest) -> Manifest:
        from lightkube.types import PatchType

        res = _resource(kind)
        kwargs: dict[str, Any] = {"patch_type": PatchType.MERGE}
        if KINDS.get(kind, ("", True))[1]:
            kwargs["namespace"] = namespace or self.namespace
        return _plain(
            self._call(f"patching {kind} {name}", self._client.patch, res, name, patch, **kwargs)
        )

    def events(self, namespace: str, kind: str, name: str) -> list[Manifest]:
        from lightkube.resources.core_v1 import Event

        fields: dict[str, Any] = {"involvedObject.kind": kind, "involvedObject.name": name}
        found = self._call(
            f"events of {kind} {name}",
            lambda: list(self._client.list(Event, namespace=namespace, fields=fields)),
        )
        return [_plain(e) for e in found]

    def log(self, pod: str, namespace: str, container: str | None = None) -> Iterable[str]:
        return list(
            self._call(
                f"the log of pod {pod}",
                self._client.log,
                pod,
                namespace=namespace,
                container=container,
            )
        )

    def server_version(self) -> Manifest:
        # /version is not a resource: asked through lightkube's own HTTP client
        http = getattr(getattr(self._client, "_client", None), "_client", None)
        if http is None:
            return {}
        try:
            response = http.get("/version")
            return dict(response.json()) if response.status_code == 200 else {}
        except Exception:
            return {}
