"""A cluster in memory for the Job runner's unit tests: objects by kind, namespace and
name, label selection, events, pod logs, and a kubelet whose behaviour each test scripts
(`FakeCluster.on_job`: what the pod of a new Job does)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pgfsbench.kube.client import KINDS, KubeError, Manifest
from pgfsbench.kube.task import TASK_FILE, Task


@dataclass
class PodScript:
    """What a Job's pod does: its phase, its container's state, its log and events."""

    phase: str = "Succeeded"
    # the pod's log, or a function of the Job's Task giving it
    log: Any = field(default_factory=list)
    waiting_reason: str = ""
    waiting_message: str = ""
    exit_code: int | None = 0
    terminated_reason: str = ""
    events: list[tuple[str, str]] = field(default_factory=list)  # (reason, message)
    node: str | None = "node-1"
    polls_before_done: int = 1  # how many polls the pod is Running first


class FakeCluster:
    context = "fake"

    def __init__(self, on_job: Callable[[Manifest], PodScript] | None = None):
        self.objects: dict[tuple[str, str | None, str], Manifest] = {}
        self.events_of: dict[tuple[str, str], list[Manifest]] = {}
        self.logs: dict[str, list[str]] = {}
        self.on_job = on_job or (lambda job: PodScript())
        self.created: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str]] = []
        self.scripts: dict[str, PodScript] = {}
        self.polls: dict[str, int] = {}
        self._seq = itertools.count(1)
        self.refuse: set[str] = set()  # kinds whose creation the API refuses
        self.add(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "node-1",
                    "labels": {
                        "node.kubernetes.io/instance-type": "ecs.g7.xlarge",
                        "topology.kubernetes.io/zone": "cn-hangzhou-h",
                    },
                },
                "status": {
                    "nodeInfo": {
                        "kubeletVersion": "v1.34.4",
                        "containerRuntimeVersion": "containerd://1.7.0",
                        "kernelVersion": "5.10.134",
                        "osImage": "Alibaba Cloud Linux 3",
                    },
                    "capacity": {"cpu": "4", "memory": "16Gi"},
                },
            }
        )

    # ------------------------------------------------------------ helpers for tests

    def add(self, manifest: Manifest) -> Manifest:
        kind = manifest["kind"]
        meta = manifest.setdefault("metadata", {})
        ns = meta.get("namespace") if KINDS.get(kind, ("", True))[1] else None
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", f"2026-11-27T10:00:{next(self._seq):02d}Z")
        self.objects[(kind, ns, meta["name"])] = manifest
        return manifest

    def of_kind(self, kind: str) -> list[Manifest]:
        return [m for (k, _, _), m in self.objects.items() if k == kind]

    # ------------------------------------------------------------ KubeClient

    def create(self, manifest: Manifest) -> Manifest:
        kind = manifest["kind"]
        if kind in self.refuse:
            raise KubeError(f"creating {kind}: forbidden by a quota")
        name = manifest["metadata"]["name"]
        ns = manifest["metadata"].get("namespace")
        if (kind, ns, name) in self.objects:
            raise KubeError(f"creating {kind} {name}: already exists")
        obj = self.add(_copy(manifest))
        self.created.append((kind, name))
        if kind == "PersistentVolumeClaim":
            obj["status"] = {"phase": "Pending"}
        if kind == "Job":
            self._start_pod(obj)
        return _copy(obj)

    def _start_pod(self, job: Manifest) -> None:
        script = self.on_job(job)
        template = job["spec"]["template"]
        name = f"{job['metadata']['name']}-{uuid.uuid4().hex[:5]}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": job["metadata"]["namespace"],
                "labels": {**template["metadata"]["labels"], "job-name": job["metadata"]["name"]},
            },
            "spec": {**_copy(template["spec"]), "nodeName": script.node},
            "status": {"phase": "Pending", "qosClass": "Guaranteed"},
        }
        self.add(pod)
        self.scripts[name] = script
        self.polls[name] = 0
        log = script.log
        if callable(log):  # the log of the Job's own task (its cell), made when it starts
            # the task is the ConfigMap the pod mounts, created before the Job
            ns = job["metadata"]["namespace"]
            (name_of_map,) = [
                v["configMap"]["name"] for v in template["spec"]["volumes"] if "configMap" in v
            ]
            config_map = self.objects[("ConfigMap", ns, name_of_map)]
            log = log(Task.parse(config_map["data"][TASK_FILE]))
        self.logs[name] = list(log)
        for reason, message in script.events:
            self.events_of.setdefault(("Pod", name), []).append(
                {
                    "reason": reason,
                    "message": message,
                    "type": "Warning",
                    "lastTimestamp": "2026-11-27T10:01:00Z",
                }
            )
        # the claims bind to a volume as the pod is scheduled
        if script.phase != "Pending":
            for vol in template["spec"].get("volumes", []):
                claim = vol.get("persistentVolumeClaim", {}).get("claimName")
                found = self.objects.get(
                    ("PersistentVolumeClaim", job["metadata"]["namespace"], claim)
                )
                if found is not None:
                    pv_name = f"pv-{claim}"
                    cls = found["spec"].get("storageClassName")
                    self.add(
                        {
                            "apiVersion": "v1",
                            "kind": "PersistentVolume",
                            "metadata": {"name": pv_name},
                            "spec": {
                                "capacity": {
                                    "storage": found["spec"]["resources"]["requests"]["storage"]
                                },
                                "csi": {
                                    "driver": "diskplugin.csi.alibabacloud.com",
                                    "fsType": "ext4",
                                },
                                "volumeMode": "Filesystem",
                                "storageClassName": cls,
                            },
                        }
                    )
                    found["spec"]["volumeName"] = pv_name
                    found["status"] = {
                        "phase": "Bound",
                        "capacity": found["spec"]["resources"]["requests"],
                    }

    def _advance(self, pod: Manifest) -> None:
        """The kubelet's turn: a pod moves on each time it is looked at."""
        name = pod["metadata"]["name"]
        script = self.scripts.get(name)
        if script is None:
            return
        self.polls[name] += 1
        status = pod["status"]
        if script.phase == "Pending":
            if script.waiting_reason:
                status["containerStatuses"] = [
                    {
                        "state": {
                            "waiting": {
                                "reason": script.waiting_reason,
                                "message": script.waiting_message,
                            }
                        }
                    }
                ]
            return
        if self.polls[name] <= script.polls_before_done:
            status["phase"] = "Running"
            return
        status["phase"] = script.phase
        status["containerStatuses"] = [
            {
                "imageID": "sha256:feedbeef",
                "state": {
                    "terminated": {"exitCode": script.exit_code, "reason": script.terminated_reason}
                },
            }
        ]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Manifest | None:
        ns = namespace if KINDS.get(kind, ("", True))[1] else None
        obj = self.objects.get((kind, ns, name))
        if obj is None and ns is not None:
            obj = self.objects.get((kind, None, name))
        return None if obj is None else _copy(obj)

    def select(
        self, kind: str, namespace: str | None = None, labels: Mapping[str, str] | None = None
    ) -> list[Manifest]:
        out = []
        for (k, ns, _), obj in list(self.objects.items()):
            if k != kind or (namespace is not None and ns not in (namespace, None)):
                continue
            have = obj["metadata"].get("labels") or {}
            if all(have.get(a) == b for a, b in (labels or {}).items()):
                if kind == "Pod":
                    self._advance(obj)
                out.append(_copy(obj))
        return out

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        ns = namespace if KINDS.get(kind, ("", True))[1] else None
        obj = self.objects.pop((kind, ns, name), None)
        if obj is None:
            return False
        self.deleted.append((kind, name))
        if kind == "Job":  # its pods go with it (background propagation)
            for key, pod in list(self.objects.items()):
                if key[0] == "Pod" and pod["metadata"]["labels"].get("job-name") == name:
                    del self.objects[key]
        return True

    def patch(self, kind: str, name: str, namespace: str | None, patch: Manifest) -> Manifest:
        ns = namespace if KINDS.get(kind, ("", True))[1] else None
        obj = self.objects[(kind, ns, name)]
        obj["metadata"].update(patch.get("metadata", {}))
        return _copy(obj)

    def events(self, namespace: str, kind: str, name: str) -> list[Manifest]:
        return list(self.events_of.get((kind, name), []))

    def log(self, pod: str, namespace: str, container: str | None = None) -> Iterable[str]:
        if pod not in self.logs:
            raise KubeError(f"the log of pod {pod}: not found")
        return [line + "\n" for line in self.logs[pod]]

    def server_version(self) -> Manifest:
        return {"gitVersion": "v1.34.4", "platform": "linux/amd64"}


def _copy(m: Manifest) -> Manifest:
    import copy

    return copy.deepcopy(m)
