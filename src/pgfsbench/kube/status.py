"""What a run's pod and its Job say about how it is going, and why it failed (pure).

A pod Pending is read from three places, in this order: its containers' waiting reasons
(an image that is not there, a bad config), the scheduler's and kubelet's events
(FailedScheduling with the scheduler's own words, FailedMount, FailedAttachVolume) and the
claims' events (ProvisioningFailed). A finished pod from its container's terminated
state (exit code, OOMKilled) and the Job's conditions (DeadlineExceeded).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

Manifest = dict[str, Any]

# container waiting reasons that no amount of waiting mends: the run fails at once
FINAL_WAITING = frozenset(
    {
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
# events that say why a pod does not start (the newest of them is the reason shown)
PENDING_EVENTS = (
    "FailedScheduling",
    "FailedMount",
    "FailedAttachVolume",
    "ProvisioningFailed",
    "FailedCreatePodSandBox",
    "Failed",
    "BackOff",
)


class PodPhase(StrEnum):
    NONE = "none"  # no pod yet (the Job controller has not made it)
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class PodState:
    name: str | None
    phase: PodPhase
    node: str | None = None
    waiting_reason: str = ""
    waiting_message: str = ""
    exit_code: int | None = None
    terminated_reason: str = ""
    message: str = ""  # the pod's own status message (an eviction says why)
    image_id: str = ""
    qos_class: str = ""

    @property
    def finished(self) -> bool:
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def stuck(self) -> bool:
        """Waiting for something that will not come by itself."""
        return self.waiting_reason in FINAL_WAITING


def pod_state(pod: Manifest | None) -> PodState:
    if pod is None:
        return PodState(None, PodPhase.NONE)
    status = pod.get("status") or {}
    phase = (
        PodPhase(status.get("phase", "Pending"))
        if status.get("phase") in set(PodPhase)
        else PodPhase.PENDING
    )
    containers = status.get("containerStatuses") or []
    waiting_reason = waiting_message = terminated_reason = image_id = ""
    exit_code = None
    for c in containers:
        state = c.get("state") or {}
        waiting = state.get("waiting") or {}
        if waiting:
            waiting_reason = str(waiting.get("reason") or "")
            waiting_message = str(waiting.get("message") or "")
        terminated = state.get("terminated") or {}
        if terminated:
            exit_code = terminated.get("exitCode")
            terminated_reason = str(terminated.get("reason") or "")
        image_id = str(c.get("imageID") or image_id)
    return PodState(
        name=(pod.get("metadata") or {}).get("name"),
        phase=phase,
        node=(pod.get("spec") or {}).get("nodeName"),
        waiting_reason=waiting_reason,
        waiting_message=waiting_message,
        exit_code=None if exit_code is None else int(exit_code),
        terminated_reason=terminated_reason,
        message=str(status.get("message") or status.get("reason") or ""),
        image_id=image_id,
        qos_class=str(status.get("qosClass") or ""),
    )


def _when(event: Manifest) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def event_reason(events: Sequence[Manifest]) -> str:
    """The newest warning that says why a pod does not start, in the cluster's words."""
    wanted = [e for e in events if e.get("reason") in PENDING_EVENTS or e.get("type") == "Warning"]
    if not wanted:
        return ""
    newest = max(wanted, key=_when)
    message = " ".join(str(newest.get("message") or "").split())
    return f"{newest.get('reason')}: {message}" if message else str(newest.get("reason"))


def pending_reason(
    state: PodState,
    pod_events: Sequence[Manifest],
    claim_events: Sequence[Manifest],
    job_events: Sequence[Manifest] = (),
) -> str:
    """Why a pod is still not running, as precisely as the cluster says (no pod at all:
    the Job's events, where admission says why it refused the pod)."""
    if state.waiting_reason and state.waiting_reason != "ContainerCreating":
        return f"{state.waiting_reason}: {state.waiting_message}".rstrip(": ")
    for events in (job_events, pod_events, claim_events):
        found = event_reason(events)
        if found:
            return found
    if state.phase == PodPhase.NONE:
        return "the Job made no pod (a quota, an admission webhook?)"
    if state.phase == PodPhase.PENDING and not state.node:
        return "not given a node, and no event says why (is the scheduler running?)"
    return "no event says why"


def finished_reason(state: PodState, job: Manifest | None) -> str:
    """Why a finished pod failed (empty when it succeeded)."""
    if state.phase == PodPhase.SUCCEEDED:
        return ""
    parts = []
    if state.terminated_reason == "OOMKilled":
        parts.append("the container ran out of its memory limit (OOMKilled)")
    elif state.exit_code is not None:
        parts.append(
            f"the container exited with {state.exit_code}"
            + (
                f" ({state.terminated_reason})"
                if state.terminated_reason not in ("", "Error")
                else ""
            )
        )
    if state.message:
        parts.append(state.message)
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            why = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
            if why and why not in parts:
                parts.append(f"Job {why}")
    return "; ".join(parts) or "the pod failed and said nothing"


def job_failed(job: Manifest | None) -> str:
    """The Job's Failed condition (a deadline passed before its pod started), or ''."""
    for cond in ((job or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Failed" and cond.get("status") == "True":
            return f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    return ""
