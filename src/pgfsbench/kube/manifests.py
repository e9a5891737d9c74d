"""The objects of one run in a cluster, as manifests: its claims and its Job (pure).

A run's objects are named `pgfsbench-<campaign>-<run>[-data|-wal]` (the campaign's first 8
hex digits and the controller's run id) and carry our labels: managed-by, the campaign's
uuid, the run id and the cell, so that cleanup finds them by label, never by name alone.
The Job has no retries (backoffLimit 0, restartPolicy Never): a failed run is an answer,
not something to try until it passes. `plan --manifests` prints them (as `kubectl cnpg
pgbench --dry-run` does).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pgfsbench.kube.task import TASK_DIR, TASK_FILE
from pgfsbench.spec.cluster import (
    CAMPAIGN_LABEL,
    CELL_LABEL,
    MANAGED_BY,
    POD_DATA_MOUNT,
    POD_WAL_MOUNT,
    RUN_LABEL,
    KubernetesConfig,
    PvcStorage,
    PvcVolume,
    sysctl_is_namespaced,
)
from pgfsbench.storage.pvc import IN_POD_ENV

Manifest = dict[str, Any]
CONTAINER = "pgfsbench"
# the pod's entry: the same engine as on a host, for one cell (kube/pod.py)
POD_COMMAND = ("pgfsbench", "pod-run")
# the pods' own directories, one per user: /var/lib/pgfsbench/<uid>, owned by that user in
# the image (scripts/k8s makes 999's; root makes its own). Not an emptyDir: a volume's
# mount point is writable by everyone, which a work directory must never be (system/trust)
POD_HOMES = "/var/lib/pgfsbench"


def pod_uid(k8s: KubernetesConfig) -> int:
    """The user the pods run as: root when privileged, else run_as_user."""
    return 0 if k8s.privileged else int(k8s.run_as_user)


def pod_home(uid: int) -> str:
    return f"{POD_HOMES}/{uid}"


@dataclass(frozen=True)
class RunObjects:
    """Names of one run's objects."""

    job: str
    data_claim: str
    wal_claim: str | None

    @property
    def task(self) -> str:
        """The ConfigMap holding the Job's task (kube/task.py)."""
        return f"{self.job}-task"

    @property
    def claims(self) -> tuple[str, ...]:
        return (self.data_claim,) if self.wal_claim is None else (self.data_claim, self.wal_claim)


def object_names(campaign_uuid: str, run_id: int, wal: bool) -> RunObjects:
    base = f"pgfsbench-{campaign_uuid.replace('-', '')[:8]}-{run_id}"
    return RunObjects(base, f"{base}-data", f"{base}-wal" if wal else None)


def label_value(text: str) -> str:
    """A cell id as a label value (63 characters of [A-Za-z0-9-_.], ends alphanumeric):
    readable where it fits, else cut and suffixed with a digest of the whole."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.-")
    if len(clean) > 63:
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        clean = clean[:52].rstrip("_.-") + "-" + digest
    return clean or "cell"


def labels(
    campaign_uuid: str, run_id: int, cell_id: str, extra: Mapping[str, str]
) -> dict[str, str]:
    return {
        **dict(extra),
        MANAGED_BY: "pgfsbench",
        CAMPAIGN_LABEL: campaign_uuid,
        RUN_LABEL: str(run_id),
        CELL_LABEL: label_value(cell_id),
    }


def claim_manifest(
    name: str, namespace: str, volume: PvcVolume, object_labels: Mapping[str, str]
) -> Manifest:
    spec: dict[str, Any] = {
        "accessModes": [volume.access_mode],
        "volumeMode": volume.volume_mode,
        "resources": {"requests": {"storage": volume.size}},
    }
    if volume.storage_class is not None:
        spec["storageClassName"] = volume.storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(object_labels)},
        "spec": spec,
    }


def task_manifest(
    names: RunObjects, namespace: str, task_text: str, object_labels: Mapping[str, str]
) -> Manifest:
    """The ConfigMap that carries the Job's task to its pod (mounted read-only)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": names.task, "namespace": namespace, "labels": dict(object_labels)},
        "data": {TASK_FILE: task_text},
    }


def pod_security_contexts(k8s: KubernetesConfig) -> tuple[Manifest, Manifest]:
    """The pod's and its container's securityContext: non-root and locked down (what the
    "restricted" Pod Security Standard asks), or root and privileged when the spec says
    privileged = true (cache = "cold" drops the node's page cache)."""
    if k8s.privileged:
        return {}, {"privileged": True, "runAsUser": 0}
    uid = int(k8s.run_as_user)
    pod = {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        # the claims are made writable to the pods' group (OnRootMismatch: only when not)
        "fsGroup": uid,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    container = {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        # not read-only: the pod's work directory is the image's /var/lib/pgfsbench/<uid>,
        # the user's alone; a volume mounted there (emptyDir) is writable by everyone, and
        # pgfsbench trusts no such directory (system/trust.py)
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"]},
    }
    return pod, container


def job_manifest(
    names: RunObjects,
    k8s: KubernetesConfig,
    storage: PvcStorage,
    *,
    object_labels: Mapping[str, str],
    sysctls: Mapping[str, int | str],
    deadline_s: int,
) -> Manifest:
    """The run's Job: one pod, no retries, the task's ConfigMap and the claims mounted
    where the engine looks."""
    mounts: list[Manifest] = [
        {"name": "task", "mountPath": TASK_DIR, "readOnly": True},
        {"name": "data", "mountPath": POD_DATA_MOUNT},
    ]
    volumes: list[Manifest] = [
        {"name": "task", "configMap": {"name": names.task}},
        {"name": "data", "persistentVolumeClaim": {"claimName": names.data_claim}},
    ]
    if names.wal_claim is not None:
        mounts.append({"name": "wal", "mountPath": POD_WAL_MOUNT})
        volumes.append({"name": "wal", "persistentVolumeClaim": {"claimName": names.wal_claim}})
    resources = k8s.resources.as_dict()
    container: Manifest = {
        "name": CONTAINER,
        "image": k8s.image,
        "imagePullPolicy": k8s.image_pull_policy,
        "command": list(POD_COMMAND),
        "env": [
            {"name": IN_POD_ENV, "value": "1"},
            {"name": "HOME", "value": pod_home(pod_uid(k8s))},
            {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
            {"name": "PGFSBENCH_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "PGFSBENCH_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "volumeMounts": mounts,
    }
    pod_security, container_security = pod_security_contexts(k8s)
    container["securityContext"] = container_security
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    namespaced = {k: v for k, v in sysctls.items() if sysctl_is_namespaced(k)}
    if namespaced:
        pod_security["sysctls"] = [
            {"name": k, "value": str(v)} for k, v in sorted(namespaced.items())
        ]
    pod_spec: Manifest = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": volumes,
        "terminationGracePeriodSeconds": 30,
    }
    if pod_security:
        pod_spec["securityContext"] = pod_security
    if k8s.node_selector:
        pod_spec["nodeSelector"] = dict(k8s.node_selector)
    if k8s.tolerations:
        pod_spec["tolerations"] = [_toleration(t.model_dump()) for t in k8s.tolerations]
    if k8s.service_account:
        pod_spec["serviceAccountName"] = k8s.service_account
    job_spec: Manifest = {
        "backoffLimit": 0,
        "activeDeadlineSeconds": deadline_s,
        "template": {"metadata": {"labels": dict(object_labels)}, "spec": pod_spec},
    }
    if k8s.keep_finished > 0:
        job_spec["ttlSecondsAfterFinished"] = int(k8s.keep_finished)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": names.job,
            "namespace": k8s.namespace,
            "labels": dict(object_labels),
        },
        "spec": job_spec,
    }


def _toleration(t: Mapping[str, Any]) -> Manifest:
    keys = {"toleration_seconds": "tolerationSeconds"}
    return {keys.get(k, k): v for k, v in t.items() if v is not None}


def owned_by(manifest: Manifest, owner: Manifest) -> Manifest:
    """``manifest`` with ``owner`` (a created Job) as its owner: the garbage collector
    deletes it with the Job (keep_finished > 0 leaves the Job to its TTL)."""
    meta = dict(manifest.get("metadata", {}))
    meta["ownerReferences"] = [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
    ]
    return {**manifest, "metadata": meta}


def run_manifests(
    names: RunObjects,
    k8s: KubernetesConfig,
    storage: PvcStorage,
    task_text: str,
    **job: Any,
) -> list[Manifest]:
    """The task's ConfigMap, the claims, then the Job, in the order they are created."""
    lab = job["object_labels"]
    out = [
        task_manifest(names, k8s.namespace, task_text, lab),
        claim_manifest(names.data_claim, k8s.namespace, storage, lab),
    ]
    if names.wal_claim is not None and storage.wal is not None:
        out.append(claim_manifest(names.wal_claim, k8s.namespace, storage.wal, lab))
    out.append(job_manifest(names, k8s, storage, **job))
    return out


def yaml_documents(manifests: Sequence[Manifest]) -> str:
    """The manifests as one YAML stream (what `kubectl apply -f` reads)."""
    import yaml

    return "".join(
        "---\n" + yaml.safe_dump(m, sort_keys=False, default_flow_style=False) for m in manifests
    )
