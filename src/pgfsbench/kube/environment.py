"""What a cluster run records of where it ran (pure: manifests in, a plain dict out).

The cluster (server version), the node (kubelet and runtime versions, kernel, OS image,
its instance type and zone labels, capacity), the claim's StorageClass (provisioner,
parameters, mount options, reclaim policy, binding mode) and its PersistentVolume
(capacity, CSI driver or local path, fsType, volume mode), the pod (resources and QoS
class) and the image's digest. `results show`, the reports and `history` state them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Manifest = dict[str, Any]

# the well-known node labels a managed cluster sets (and their older beta names)
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


def _label(labels: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((labels[n] for n in names if n in labels), None)


def cluster_facts(version: Manifest, context: str | None, namespace: str) -> dict[str, object]:
    return {
        "server_version": version.get("gitVersion"),
        "platform": version.get("platform"),
        "context": context,
        "namespace": namespace,
    }


def node_facts(node: Manifest | None) -> dict[str, object]:
    if node is None:
        return {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    info = (node.get("status") or {}).get("nodeInfo") or {}
    capacity = (node.get("status") or {}).get("capacity") or {}
    return {
        "name": meta.get("name"),
        "instance_type": _label(labels, INSTANCE_TYPE_LABELS),
        "zone": _label(labels, ZONE_LABELS),
        "region": _label(labels, REGION_LABELS),
        "kubelet_version": info.get("kubeletVersion"),
        "container_runtime": info.get("containerRuntimeVersion"),
        "kernel": info.get("kernelVersion"),
        "os_image": info.get("osImage"),
        "architecture": info.get("architecture"),
        "capacity": {
            k: capacity[k]
            for k in sorted(capacity)
            if k in ("cpu", "memory") or k.startswith("hugepages")
        },
    }


def storage_class_facts(sc: Manifest | None) -> dict[str, object]:
    if sc is None:
        return {}
    return {
        "name": (sc.get("metadata") or {}).get("name"),
        "provisioner": sc.get("provisioner"),
        "parameters": dict(sc.get("parameters") or {}),
        "mount_options": list(sc.get("mountOptions") or []),
        "reclaim_policy": sc.get("reclaimPolicy"),
        "volume_binding_mode": sc.get("volumeBindingMode"),
        "allow_volume_expansion": sc.get("allowVolumeExpansion"),
    }


def volume_facts(pv: Manifest | None, claim: Manifest | None) -> dict[str, object]:
    out: dict[str, object] = {}
    if claim is not None:
        cstatus = claim.get("status") or {}
        out["claim"] = (claim.get("metadata") or {}).get("name")
        out["requested"] = (
            ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
        ).get("storage")
        out["capacity"] = (cstatus.get("capacity") or {}).get("storage")
    if pv is None:
        return out
    spec = pv.get("spec") or {}
    csi = spec.get("csi") or {}
    out.update(
        {
            "volume": (pv.get("metadata") or {}).get("name"),
            "capacity": (spec.get("capacity") or {}).get("storage") or out.get("capacity"),
            "csi_driver": csi.get("driver"),
            "fs_type": csi.get("fsType") or (spec.get("local") or {}).get("fsType"),
            "volume_mode": spec.get("volumeMode"),
            "local_path": (spec.get("local") or {}).get("path")
            or (spec.get("hostPath") or {}).get("path"),
            "mount_options": list(spec.get("mountOptions") or []),
            "volume_attributes": dict(csi.get("volumeAttributes") or {}),
        }
    )
    return {k: v for k, v in out.items() if v not in (None, [], {})}


def pod_facts(pod: Manifest | None) -> dict[str, object]:
    if pod is None:
        return {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    containers = spec.get("containers") or [{}]
    statuses = status.get("containerStatuses") or [{}]
    return {
        "name": (pod.get("metadata") or {}).get("name"),
        "qos_class": status.get("qosClass"),
        "resources": containers[0].get("resources") or {},
        "image": containers[0].get("image"),
        "image_id": statuses[0].get("imageID"),
        "privileged": ((containers[0].get("securityContext") or {}).get("privileged")),
        "sysctls": (spec.get("securityContext") or {}).get("sysctls") or [],
    }


def run_facts(
    cluster: Mapping[str, object],
    node: Manifest | None,
    pod: Manifest | None,
    volumes: Mapping[str, tuple[Manifest | None, Manifest | None, Manifest | None]],
) -> dict[str, object]:
    """Everything a cluster run records; ``volumes`` maps a role (data, wal) to its
    (claim, PersistentVolume, StorageClass)."""
    return {
        "cluster": dict(cluster),
        "node": node_facts(node),
        "pod": pod_facts(pod),
        "volumes": {
            role: {
                **volume_facts(pv, claim),
                "storage_class": storage_class_facts(sc),
            }
            for role, (claim, pv, sc) in volumes.items()
        },
    }


def described(facts: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The facts in words, for `results show` and the reports: (label, text)."""
    out: list[tuple[str, str]] = []
    cluster = facts.get("cluster") or {}
    node = facts.get("node") or {}
    pod = facts.get("pod") or {}
    if cluster:
        out.append(
            (
                "Kubernetes",
                f"{cluster.get('server_version') or '?'} (context "
                f"{cluster.get('context') or 'current'}, namespace {cluster.get('namespace')})",
            )
        )
    if node:
        where = ", ".join(
            x
            for x in (
                str(node.get("instance_type") or ""),
                f"zone {node['zone']}" if node.get("zone") else "",
                f"kubelet {node.get('kubelet_version')}",
                str(node.get("container_runtime") or ""),
                f"kernel {node.get('kernel')}",
            )
            if x
        )
        out.append(("Node", f"{node.get('name')}: {where}"))
    for role, v in (facts.get("volumes") or {}).items():
        sc = v.get("storage_class") or {}
        params = ", ".join(f"{k}={val}" for k, val in sorted((sc.get("parameters") or {}).items()))
        text = (
            f"{v.get('claim')} {v.get('capacity') or v.get('requested')} of class "
            f"{sc.get('name') or '?'} ({sc.get('provisioner') or '?'}"
            + (f"; {params}" if params else "")
            + ")"
            + (f", fsType {v['fs_type']}" if v.get("fs_type") else "")
            + (f", CSI {v['csi_driver']}" if v.get("csi_driver") else "")
            + (f", reclaim {sc['reclaim_policy']}" if sc.get("reclaim_policy") else "")
        )
        out.append((f"Volume ({role})", text))
    if pod:
        limits = (pod.get("resources") or {}).get("limits") or {}
        res = ", ".join(f"{k} {v}" for k, v in sorted(limits.items())) or "no limits"
        out.append(
            (
                "Pod",
                f"QoS {pod.get('qos_class') or '?'}, {res}; "
                f"image {pod.get('image_id') or pod.get('image')}",
            )
        )
    return out
