"""The test cluster's storage (scripts/k8s/cluster.sh made the two filesystems): two
StorageClasses of local volumes, and fresh PersistentVolumes for each test."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from pgfsbench.kube.client import KubeClient, Manifest

CLASSES = ("ext4-local", "xfs-local")
NODE = os.environ.get("PGFSBENCH_K8S_NODE", "pgfsb-node")
TEST_LABEL = "pgfsbench-test/volume"


def storage_class(name: str, fs: str) -> Manifest:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
        "parameters": {"fs": fs, "test": "loop-mounted"},
    }


def ensure_classes(client: KubeClient) -> None:
    for name in CLASSES:
        if client.get("StorageClass", name) is None:
            client.create(storage_class(name, name.split("-")[0]))


def local_volume(
    cluster_dir: Path, cls: str, size: str = "2Gi", path: Path | None = None
) -> Manifest:
    """A local PV on a new directory of the class's filesystem (or on ``path``)."""
    fs = cls.split("-")[0]
    name = f"test-{fs}-{uuid.uuid4().hex[:8]}"
    if path is None:
        path = cluster_dir / "volumes" / fs / name
        path.mkdir(mode=0o755)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {TEST_LABEL: "1"}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": cls,
            "local": {"path": str(path), "fsType": fs},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [NODE],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def add_volumes(client: KubeClient, cluster_dir: Path, per_class: int) -> list[str]:
    names = []
    for cls in CLASSES:
        for _ in range(per_class):
            pv = client.create(local_volume(cluster_dir, cls))
            names.append(str(pv["metadata"]["name"]))
    return names


def remove_volumes(client: KubeClient) -> None:
    for pv in client.select("PersistentVolume", None, {TEST_LABEL: "1"}):
        client.delete("PersistentVolume", str(pv["metadata"]["name"]))
