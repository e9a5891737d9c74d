"""Journaled cluster objects: each recorded before it is created, deleted on undo, and
found by our labels only.

Two undo actions: one object (a run's Job or claim), deleted only if the object of that
name still carries our labels and this campaign's uuid (a namesake someone else made is
left alone); and a campaign's sweep (recorded first, undone last), which deletes every
Job and claim labelled with the campaign, so that nothing a killed controller created is
left even between "recorded" and "created". A kubeconfig can run commands (exec
credential plugins): it is used only if root (or the user running) owns it and nobody
else can write it, at run time and again at cleanup.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pgfsbench.kube.client import (
    ClusterAddress,
    KubeClient,
    LightkubeClient,
    kubeconfig_problem,
)
from pgfsbench.spec.cluster import CAMPAIGN_LABEL, MANAGED_BY
from pgfsbench.system.journal import Scope, Undo, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import (
    UntrustedPath,
)

OBJECT_KINDS = ("Job", "PersistentVolumeClaim", "ConfigMap")
OBJECT_NAME = re.compile(r"pgfsbench-[0-9a-f]{8}-[0-9]+(-data|-wal|-fetch|-task)?")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")

# how a client is made from a journal's arguments (the unit tests put a fake cluster here)
ClientFactory = Callable[[ClusterAddress, str], KubeClient]
client_factory: ClientFactory = LightkubeClient
# the clients this process already has (a campaign's own, for its undo): by kubeconfig,
# context and namespace
_in_use: dict[tuple[str, str | None, str], KubeClient] = {}


def use_client(address: ClusterAddress, namespace: str, client: KubeClient) -> None:
    """Undo this process's steps through ``client`` (the campaign's own connection)."""
    _in_use[(str(address.path()), address.context, namespace)] = client


def recorded_kubeconfig_problem(path: str | None) -> str | None:
    """Why the kubeconfig a journal names cannot be trusted (None: it can)."""
    if path is None:
        return "no kubeconfig path recorded"
    return kubeconfig_problem(Path(path))


def check_kubeconfig(address: ClusterAddress) -> None:
    for path in address.paths():
        why = kubeconfig_problem(path)
        if why is None:
            continue
        raise UntrustedPath(
            f"{why}: a kubeconfig can run commands (exec plugins); give one that only "
            "root can write"
        )


def _object_bound(args: dict[str, object], scope: Scope) -> str | None:
    kind, name = str(args.get("kind")), str(args.get("name"))
    if kind not in OBJECT_KINDS:
        return f"{kind} is not a kind pgfsbench creates"
    if not OBJECT_NAME.fullmatch(name):
        return f"{name} is not the name of a run's object"
    return _campaign_bound(args, scope)


def _campaign_bound(args: dict[str, object], scope: Scope) -> str | None:
    if not UUID.fullmatch(str(args.get("campaign"))):
        return f"campaign {args.get('campaign')!r} is not a uuid"
    if not NAMESPACE.fullmatch(str(args.get("namespace"))):
        return f"namespace {args.get('namespace')!r} is not a namespace name"
    kubeconfig = args.get("kubeconfig")
    return recorded_kubeconfig_problem(None if kubeconfig is None else str(kubeconfig))


def _client(args: dict[str, Any]) -> KubeClient:
    address = ClusterAddress(str(args["kubeconfig"]), args.get("context"))
    key = (str(address.path()), address.context, str(args["namespace"]))
    return _in_use.get(key) or client_factory(address, str(args["namespace"]))


def ours(manifest: dict[str, Any] | None, campaign: str) -> bool:
    labels = ((manifest or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == "pgfsbench" and labels.get(CAMPAIGN_LABEL) == campaign


def object_undo(
    address: ClusterAddress, namespace: str, campaign: str, kind: str, name: str
) -> Undo:
    return Undo(
        "delete_kube_object",
        {
            "kubeconfig": str(address.path()),
            "context": address.context,
            "namespace": namespace,
            "campaign": campaign,
            "kind": kind,
            "name": name,
        },
    )


def campaign_undo(address: ClusterAddress, namespace: str, campaign: str) -> Undo:
    return Undo(
        "delete_kube_campaign",
        {
            "kubeconfig": str(address.path()),
            "context": address.context,
            "namespace": namespace,
            "campaign": campaign,
        },
    )


@undo_action("delete_kube_object", bound=_object_bound)
def _delete_object(runner: Runner, args: dict[str, Any]) -> None:
    client = _client(args)
    found = client.get(str(args["kind"]), str(args["name"]), str(args["namespace"]))
    if found is not None and ours(found, str(args["campaign"])):
        client.delete(str(args["kind"]), str(args["name"]), str(args["namespace"]))


@undo_action("delete_kube_campaign", bound=_campaign_bound)
def _delete_campaign(runner: Runner, args: dict[str, Any]) -> None:
    client = _client(args)
    selector = {MANAGED_BY: "pgfsbench", CAMPAIGN_LABEL: str(args["campaign"])}
    for kind in OBJECT_KINDS:  # Jobs first: their pods hold the claims
        for obj in client.select(kind, str(args["namespace"]), selector):
            name = str((obj.get("metadata") or {}).get("name"))
            if ours(obj, str(args["campaign"])):
                client.delete(kind, name, str(args["namespace"]))
