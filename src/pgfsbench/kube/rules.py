"""What a spec may ask of a pod, checked by `plan` before anything is created (pure).

A pod shares its node's kernel: it cannot set the node's sysctls (the page cache's dirty
limits, vm.*), its transparent huge pages, or drop its page cache unless privileged. Its
claim is made by the cluster's provisioner: no mkfs options, no device limits (the
StorageClass's IOPS and throughput are the limits), no emulated disk. Each refusal says
why and what to do instead; namespaced sysctls are allowed, set by the kubelet.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgfsbench.spec import Cell, Spec
from pgfsbench.spec.cluster import PvcStorage, check_pvc_modes, sysctl_is_namespaced
from pgfsbench.spec.kinds import storage_kind
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import WorkloadBase

# the sysctls a namespace enforcing the "baseline" or "restricted" Pod Security Standard
# admits (its "safe" set, Kubernetes 1.34); any other needs the kubelet's
# --allowed-unsafe-sysctls and a namespace that admits it
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)


def pod_refusals(spec: Spec, cells: Sequence[Cell]) -> list[str]:
    """Every reason the spec's cells cannot run as it asks (empty: they can)."""
    problems: list[str] = []
    k8s = spec.kubernetes
    cluster_cells = [c for c in cells if storage_kind(c.fs).cluster]
    host_cells = [c for c in cells if not storage_kind(c.fs).cluster]
    if k8s is None:
        return problems  # a pvc cell without [kubernetes]: the pvc driver says why
    if host_cells:
        names = sorted({c.storage_name for c in host_cells})
        problems.append(
            f"storage {', '.join(names)}: with [kubernetes] every storage is a pvc (a run "
            "in a pod); run the host's storages from a spec without [kubernetes] and "
            "compare the two campaigns' runs (`pgfsbench compare`)"
        )
    if spec.defaults.memory_limit:
        problems.append(
            "defaults.memory_limit is a cgroup of the host's: in a pod, give "
            "[kubernetes.resources] memory (the pod's own cgroup limit)"
        )
    seen: set[str] = set()
    for cell in cluster_cells:
        storage = cell.storage
        if isinstance(storage, PvcStorage) and cell.storage_name not in seen:
            seen.add(cell.storage_name)
            where = cluster_problem(storage, cell.storage_name, sorted(k8s.clusters))
            if where:
                problems.append(where)
            for volume in (storage, storage.wal):
                why = check_pvc_modes(volume, cell.storage_name) if volume else None
                if why:
                    problems.append(why)
        kern = cell.kernel
        for name in kern.sysctl:
            if not sysctl_is_namespaced(name):
                problems.append(
                    f"kernel {cell.kernel_name}: sysctl {name} is the node's, shared by every "
                    "pod on it; a pod cannot set it. Set it on the nodes (their image, a "
                    "DaemonSet) and say so in the kernel table's description"
                )
        if kern.transparent_hugepage or kern.transparent_hugepage_defrag:
            problems.append(
                f"kernel {cell.kernel_name}: transparent huge pages are the node's; a pod "
                "cannot change them"
            )
        if workload_config(cell.workload, WorkloadBase).cache == "cold" and not k8s.privileged:
            problems.append(
                f'workload {cell.workload.name}: cache = "cold" drops the node\'s page cache, '
                "which only a privileged pod may do ([kubernetes] privileged = true)"
            )
        huge = str(cell.postgres.settings.get("huge_pages", "try")).lower()
        if huge == "on" and not (k8s.resources.hugepages_2mi or k8s.resources.hugepages_1gi):
            problems.append(
                f"postgres {cell.postgres_name}: huge_pages = on needs huge pages as a pod "
                "resource ([kubernetes.resources] hugepages_2mi or hugepages_1gi, and "
                "memory); without them PostgreSQL does not start"
            )
    return list(dict.fromkeys(problems))


def pod_sysctls(cells: Sequence[Cell]) -> dict[str, dict[str, int | str]]:
    """Per kernel configuration, the sysctls the kubelet sets for the pod."""
    return {
        c.kernel_name: {k: v for k, v in c.kernel.sysctl.items() if sysctl_is_namespaced(k)}
        for c in cells
    }


def pod_warnings(spec: Spec, cells: Sequence[Cell]) -> list[str]:
    """What `plan` says of the pods a campaign will make: as which user, and what a
    namespace enforcing a Pod Security Standard will think of them."""
    k8s = spec.kubernetes
    if k8s is None:
        return []
    out = []
    if k8s.privileged:
        out.append(
            "the pods run as root and privileged ([kubernetes] privileged = true, which "
            'cache = "cold" needs): a namespace enforcing the "baseline" or "restricted" '
            "Pod Security Standard refuses them"
        )
    else:
        out.append(
            f"the pods run as user {k8s.run_as_user} (not root, no capabilities, no "
            "privilege escalation, seccomp RuntimeDefault; their root filesystem writable: "
            "the work directory is the image's own, the user's alone): what a namespace "
            'enforcing the "restricted" Pod Security Standard admits'
        )
    unsafe = sorted(
        {
            f"{c.kernel_name}: {name}"
            for c in cells
            for name in c.kernel.sysctl
            if sysctl_is_namespaced(name) and name not in SAFE_SYSCTLS
        }
    )
    if unsafe:
        out.append(
            "sysctl(s) outside Kubernetes' safe set ("
            + "; ".join(unsafe)
            + "): the kubelet must allow them (--allowed-unsafe-sysctls), and a namespace "
            'enforcing "baseline" or "restricted" refuses the pod'
        )
    return out


def cluster_problem(storage: PvcStorage, name: str, clusters: Sequence[str]) -> str | None:
    """Why a pvc storage does not say where it runs (None: it does): with several
    clusters each names one of them; with one, none."""
    if not clusters:
        if storage.cluster is not None:
            return (
                f'storage {name}: cluster = "{storage.cluster}" names a cluster, but the spec '
                "has no [kubernetes.clusters] table"
            )
        return None
    if storage.cluster is None:
        return (
            f"storage {name}: with several clusters ({', '.join(clusters)}) a pvc storage "
            'says which it runs in (cluster = "NAME")'
        )
    if storage.cluster not in clusters:
        return (
            f'storage {name}: cluster = "{storage.cluster}" is not one of '
            f"[kubernetes.clusters] ({', '.join(clusters)})"
        )
    return None
