"""Tests against the real single-node cluster of scripts/test-k8s.sh (which starts it, runs
these inside its network namespace, and stops it). Elsewhere they skip."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgfsbench.kube.client import ClusterAddress, LightkubeClient
from tests.func.conftest import base  # noqa: F401  (a directory made and checked)
from tests.k8s import support

CLUSTER_DIR = os.environ.get("PGFSBENCH_K8S_DIR")
IMAGE = os.environ.get("PGFSBENCH_K8S_IMAGE", "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/k8s" in str(item.fspath) and not CLUSTER_DIR:
            item.add_marker(pytest.mark.skip(reason="needs the cluster of scripts/test-k8s.sh"))


@pytest.fixture(scope="session")
def cluster_dir() -> Path:
    assert CLUSTER_DIR
    return Path(CLUSTER_DIR)


@pytest.fixture(scope="session")
def kube(cluster_dir: Path) -> LightkubeClient:
    client = LightkubeClient(ClusterAddress(str(cluster_dir / "kubeconfig")))
    support.ensure_classes(client)
    return client


@pytest.fixture
def volumes(kube: LightkubeClient, cluster_dir: Path) -> Iterator[int]:
    """Fresh local volumes for the test: 4 on each class (a class's runs bind one each)."""
    support.add_volumes(kube, cluster_dir, 4)
    try:
        yield 4
    finally:
        support.remove_volumes(kube)


def cluster_sets(cluster_dir: Path) -> list[str]:
    """The --set options that point a spec at the test cluster and its image."""
    return [
        "--set",
        f"kubernetes.kubeconfig={cluster_dir / 'kubeconfig'}",
        "--set",
        f"kubernetes.image={IMAGE}",
    ]


@pytest.fixture(scope="session")
def second_cluster(cluster_dir: Path) -> tuple[Path, Path, LightkubeClient]:
    """The second cluster of scripts/test-k8s.sh (its directory, the kubeconfig that
    reaches it from the first cluster's network namespace, a client)."""
    second = os.environ.get("PGFSBENCH_K8S_DIR2")
    if not second:
        pytest.skip("needs the second cluster of scripts/test-k8s.sh")
    kubeconfig = cluster_dir / "kubeconfig-test2"
    client = LightkubeClient(ClusterAddress(str(kubeconfig)))
    support.ensure_classes(client)
    return Path(second), kubeconfig, client
