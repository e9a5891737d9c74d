"""The spec's Kubernetes parts: `[kubernetes]` (a cluster as a place to run) and the
storage kind `pvc` (a PersistentVolumeClaim of a StorageClass and a size).

A `pvc` cell runs in a pod: a Job with its claims, the same engine inside (cluster/).
What a pod cannot do is refused by `plan` with the reason (`pod_refusals`): mkfs options,
node-level sysctls, device limits, emulated disks. Namespaced sysctls go into the pod's
securityContext, where the kubelet sets them for the pod alone.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from pgfsbench.spec.models import Duration, Model, StorageCommon

# Kubernetes' resource quantities: binary (Ki, Mi, Gi, Ti, Pi) and decimal (k, M, G, T, P)
_QUANTITY_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
_QUANTITY_MULT = {
    None: 1,
    "m": 0.001,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 1 << 10,
    "Mi": 1 << 20,
    "Gi": 1 << 30,
    "Ti": 1 << 40,
    "Pi": 1 << 50,
    "Ei": 1 << 60,
}

# the sysctls the kubelet allows a pod by default, and those of namespaces a pod has its own
# of (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*): the kubelet sets them for
# the pod alone. Everything else (vm.*: the page cache, dirty limits; kernel.* beyond IPC)
# is the node's, shared by every pod on it, and a pod cannot change it.
NAMESPACED_SYSCTL_RE = re.compile(r"^(kernel\.(shm[a-z_]+|msg[a-z_]+|sem)|fs\.mqueue\..+|net\..+)$")

# the label every object of ours carries, and those that say which campaign and run
MANAGED_BY = "app.kubernetes.io/managed-by"
CAMPAIGN_LABEL = "pgfsbench.io/campaign"
RUN_LABEL = "pgfsbench.io/run"
CELL_LABEL = "pgfsbench.io/cell"


def parse_quantity(text: str) -> int:
    """Bytes from a Kubernetes quantity ("100Gi", "20G", "512Mi")."""
    m = _QUANTITY_RE.match(text.strip())
    if not m or m.group(2) == "m":
        raise ValueError(
            f"{text!r} is not a Kubernetes size (examples: 20Gi, 100Gi, 500G): Gi is 2^30 "
            "bytes, G is 10^9"
        )
    return int(float(m.group(1)) * _QUANTITY_MULT[m.group(2)])


def _quantity(v: object) -> str:
    """A size in a spec's [kubernetes] or pvc table: Kubernetes's binary suffixes (Gi, Mi,
    Ti...) or plain bytes. The decimal ones are refused: "500G" is 500 x 10^9 bytes to
    Kubernetes but 500 GiB everywhere else in a spec (loop:500G, tmpfs size): one rule,
    said, never a silent 7% difference."""
    text = str(v).strip()
    parse_quantity(text)
    m = _QUANTITY_RE.match(text)
    if m and m.group(2) in ("k", "M", "G", "T", "P", "E"):
        binary = {"k": "Ki"}.get(m.group(2), m.group(2) + "i")
        power = {"k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[m.group(2)]
        raise ValueError(
            f"{text!r}: in a spec, sizes are binary (1G is a GiB, as in loop:1G), but "
            f"Kubernetes reads {m.group(2)} as 10^{power} bytes; write {m.group(1)}{binary} "
            "(binary) or the bytes"
        )
    return text


Quantity = Annotated[str, BeforeValidator(_quantity)]
_CPU_RE = re.compile(r"^([0-9]+(\.[0-9]+)?|[0-9]+m)$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_LABEL_KEY_RE = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def _labels(v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        if not _LABEL_KEY_RE.match(key):
            raise ValueError(f"{key!r} is not a label key (prefix/name, 63 characters a part)")
        if not _LABEL_VALUE_RE.match(value):
            raise ValueError(f"{key} = {value!r} is not a label value (63 characters at most)")
    return v


class Toleration(Model):
    # the taint's key
    key: str | None = None
    # Equal (to value) or Exists
    operator: Literal["Equal", "Exists"] = "Equal"
    # the taint's value (with Equal)
    value: str | None = None
    # the taint's effect tolerated: NoSchedule, PreferNoSchedule, NoExecute
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    # how long a NoExecute taint is tolerated
    toleration_seconds: int | None = None


class PodResources(Model):
    """The pgfsbench container's requests, equal to its limits: with cpu and memory both
    set the pod is of QoS class Guaranteed, the only one whose CPU a neighbour cannot take."""

    # CPUs, requested and limited alike ("2", "1500m")
    cpu: str | None = None
    # memory, requested and limited alike ("8Gi"): what scales relative to RAM are relative to
    memory: Quantity | None = None
    # PostgreSQL's huge_pages = on inside a pod needs them as a resource (and the node
    # to have them); requests must equal limits for huge pages
    hugepages_2mi: Quantity | None = None
    # 1 GiB huge pages for PostgreSQL (huge_pages = on)
    hugepages_1gi: Quantity | None = None
    # the container's own scratch space
    ephemeral_storage: Quantity | None = None

    @field_validator("cpu", mode="before")
    @classmethod
    def _cpu(cls, v: object) -> object:
        if v is not None and not _CPU_RE.match(str(v)):
            raise ValueError(f"cpu {v!r} is not a CPU quantity (examples: 2, 1.5, 500m)")
        return None if v is None else str(v)

    def as_dict(self) -> dict[str, str]:
        """Kubernetes' resource names and values."""
        names = {
            "cpu": self.cpu,
            "memory": self.memory,
            "hugepages-2Mi": self.hugepages_2mi,
            "hugepages-1Gi": self.hugepages_1gi,
            "ephemeral-storage": self.ephemeral_storage,
        }
        return {k: v for k, v in names.items() if v is not None}

    @model_validator(mode="after")
    def _huge_pages_need_memory(self) -> PodResources:
        if (self.hugepages_2mi or self.hugepages_1gi) and not self.memory:
            raise ValueError(
                "huge pages as a resource need memory too (Kubernetes refuses a pod that "
                "asks huge pages without cpu or memory)"
            )
        return self


class ClusterTarget(Model):
    """`[kubernetes.clusters.NAME]`: one of several clusters of a campaign (a pvc storage
    names it with `cluster = "NAME"`); what it leaves out is `[kubernetes]`'s."""

    # its kubeconfig (default: [kubernetes] kubeconfig, then $KUBECONFIG, ~/.kube/config)
    kubeconfig: str | None = None
    # its kubeconfig context (default: [kubernetes] context, then the current one)
    context: str | None = None
    # the namespace its Jobs and claims are made in (default: [kubernetes] namespace)
    namespace: str | None = None
    # how many of its Jobs run at once (the clusters' Jobs run side by side; a cluster of
    # one node takes one at a time, or its runs would share the node)
    parallel: int = Field(default=1, ge=1, le=64)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_LABEL_RE.match(v):
            raise ValueError(f"{v!r} is not a namespace name (lower case, digits, -)")
        return v


class KubernetesConfig(Model):
    """`[kubernetes]`: where `pvc` cells run, as Jobs."""

    kubeconfig: str | None = None  # default: $KUBECONFIG, then ~/.kube/config
    # the kubeconfig context (default: its current one; --context)
    context: str | None = None
    # the namespace Jobs and claims are made in (--namespace)
    namespace: str = "default"
    # the pgfsbench image the pods run (scripts/k8s/ builds one)
    image: str
    # Always, IfNotPresent or Never
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    # labels a node must have to run the pods
    node_selector: dict[str, str] = {}
    # taints of the nodes the pods may run on
    tolerations: list[Toleration] = []
    # the pods' CPU and memory (requests equal to limits: QoS Guaranteed)
    resources: PodResources = PodResources()
    # the pods' service account (default: the namespace's)
    service_account: str | None = None
    # false: the pods run as run_as_user, non-root, with a read-only root filesystem, no
    # privilege escalation, every capability dropped and seccomp RuntimeDefault (what a
    # namespace enforcing the "restricted" Pod Security Standard admits); true: as root,
    # privileged, which cache = "cold" needs (dropping the node's page cache)
    privileged: bool = False
    # the pods' user and group (and the claims' fsGroup) when not privileged: the image's
    # postgres user (scripts/k8s builds it with 999; PostgreSQL needs a user of the image)
    run_as_user: int = Field(default=999, ge=1, le=2**31 - 1)
    # more labels on every object made
    labels: dict[str, str] = {}
    # a pod still Pending after this long fails its run with the reason from its events
    # (unschedulable, a claim not bound, an image not found), and the matrix goes on
    pending_timeout: Duration = 300.0
    # the longest a run's Job may take once running (None: the plan's estimate x 3 + 10 min)
    run_timeout: Duration | None = None
    # how long the Job and its claims are kept after the results came back: 0 deletes them
    # at once; more leaves them to the TTL controller (the claims go with their Job)
    keep_finished: Duration = 0.0
    # several clusters in one campaign, by name: each pvc storage says which it runs in
    # (`cluster = "NAME"`); their Jobs run side by side, into one store
    clusters: dict[str, ClusterTarget] = {}

    @field_validator("clusters")
    @classmethod
    def _cluster_names(cls, v: dict[str, ClusterTarget]) -> dict[str, ClusterTarget]:
        for name in v:
            if not _DNS_LABEL_RE.match(name):
                raise ValueError(f"cluster name {name!r}: lower case letters, digits and -")
        return v

    def for_cluster(self, name: str | None) -> KubernetesConfig:
        """This table as one named cluster sees it (its own kubeconfig, context,
        namespace), or as it is (None: a spec of one cluster)."""
        if name is None:
            return self
        target = self.clusters[name]
        update = {
            key: value
            for key, value in (
                ("kubeconfig", target.kubeconfig),
                ("context", target.context),
                ("namespace", target.namespace),
            )
            if value is not None
        }
        return self.model_copy(update={**update, "clusters": {}})

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        if not _DNS_LABEL_RE.match(v):
            raise ValueError(f"{v!r} is not a namespace name (lower case, digits, -)")
        return v

    @field_validator("node_selector", "labels")
    @classmethod
    def _label_maps(cls, v: dict[str, str]) -> dict[str, str]:
        return _labels(v)

    @field_validator("labels")
    @classmethod
    def _not_ours(cls, v: dict[str, str]) -> dict[str, str]:
        for key in v:
            if key.startswith("pgfsbench.io/") or key == MANAGED_BY:
                raise ValueError(f"label {key} is pgfsbench's own (cleanup finds objects by it)")
        return v


# what a storage on a host may say and a claim cannot, and why (a pod gets its volume made
# and mounted by the cluster's provisioner)
HOST_ONLY = {
    "device": "the cluster's provisioner picks the device (the StorageClass and size)",
    "devices": "the cluster's provisioner picks the device (the StorageClass and size)",
    "mkfs_options": "the provisioner makes the filesystem (the StorageClass's fsType and "
    "parameters)",
    "mount_options": "the kubelet mounts the volume with the StorageClass's mountOptions",
    "limits": "device limits are set on a host's block device; a cloud volume's IOPS and "
    "MB/s come with its StorageClass and size",
    "model": "emulated disks run on a host",
    "lvm": "LVM is a host's layer",
    "md": "md RAID is a host's layer",
    "snapshots": "snapshots during a run are a host's (btrfs, ZFS)",
    "pool": "ZFS pools are a host's",
}


def _no_host_options(data: object) -> object:
    if isinstance(data, dict):
        for key in data:
            if key in HOST_ONLY:
                raise ValueError(f"{key} cannot apply to a pvc: {HOST_ONLY[key]}")
    return data


class PvcVolume(Model):
    """A PersistentVolumeClaim: a StorageClass (None: the cluster's default) and a size."""

    @model_validator(mode="before")
    @classmethod
    def _host_only(cls, data: object) -> object:
        return _no_host_options(data)

    # the StorageClass the claim asks for
    storage_class: str | None = None
    # the claim's size ("100Gi": binary, as every size in a spec)
    size: Quantity = "20Gi"
    # the claim's access mode (ReadWriteOnce...)
    access_mode: Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"] = "ReadWriteOnce"
    # Filesystem (the node formats and mounts it) or Block
    volume_mode: Literal["Filesystem", "Block"] = "Filesystem"

    @field_validator("storage_class")
    @classmethod
    def _class_name(cls, v: str | None) -> str | None:
        if v is not None and not _DNS_NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a StorageClass name")
        return v

    def size_bytes(self) -> int:
        return parse_quantity(self.size)


class PvcStorage(PvcVolume, StorageCommon):
    """A claim the cluster provisions for the data directory (and optionally the WAL)."""

    fs: Literal["pvc"]
    # pg_wal on a claim of its own
    wal: PvcVolume | None = None
    # the cluster it runs in, one of [kubernetes.clusters] (with several clusters)
    cluster: str | None = None

    def data_capacity(self) -> int | None:
        return self.size_bytes()

    def layers(self) -> list[str]:
        return [f"PVC of {self.storage_class or 'the default class'}, {self.size}"]


# where the pod mounts its claims (the engine in the pod finds them there)
POD_DATA_MOUNT = "/pgfsbench/data"
POD_WAL_MOUNT = "/pgfsbench/wal"
# why a `pvc` storage asked for on a host cannot run there
PVC_NEEDS_CLUSTER = (
    "a pvc storage runs in a Kubernetes cluster: the spec needs a [kubernetes] table"
)


def check_pvc_modes(volume: PvcVolume, name: str) -> str | None:
    """Why a claim cannot be used by the engine in a pod (None: it can)."""
    if volume.volume_mode == "Block":
        return (
            f'storage {name}: volume_mode = "Block" would need a filesystem made inside '
            'the pod (privileged, mkfs); use volume_mode = "Filesystem" and the '
            "StorageClass's fsType"
        )
    return None


def sysctl_is_namespaced(name: str) -> bool:
    return NAMESPACED_SYSCTL_RE.match(name) is not None
