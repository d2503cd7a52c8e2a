"""The MPS control daemon of a claim: whether the claim asks for one, and why it is down.

With MPS sharing, the gpu.nvidia.com plugin's Prepare creates a Deployment
``mps-control-daemon-<claim UID>-<hash>`` in the driver's namespace and waits for its pod
to be ready before it answers (nvidia-driver-facts §3.2). When the pod cannot even be
created (an admission refusal: OpenShift security context constraints, a quota, a
PodSecurity level), the kubelet keeps retrying Prepare, the consumer waits in
ContainerCreating, and the only object that says why is that Deployment's status: its
``ReplicaFailure`` condition quotes the refusal. Pure functions of raw objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dradiag.snapshot.driver_workloads import DAEMON_PREFIX, mps_requests
from dradiag.snapshot.model import K8sObject, Snapshot, name_of

__all__ = ["DaemonDown", "claim_daemons", "daemon_down", "first_down", "mps_requests"]


def claim_daemons(snapshot: Snapshot, claim_uid: str) -> list[K8sObject]:
    """The claim's MPS control-daemon Deployments (one per config group), by name."""
    return [
        d
        for d in snapshot.deployments_for_claim(claim_uid)
        if name_of(d).startswith(DAEMON_PREFIX + claim_uid)
    ]


@dataclass(frozen=True, slots=True)
class DaemonDown:
    """Why a daemon Deployment has no available pod, from its own status."""

    condition: str
    """``ReplicaFailure`` or ``Available``: the condition quoted."""
    reason: str
    message: str


def _conditions(deployment: K8sObject) -> dict[str, Mapping[str, Any]]:
    conditions = (deployment.get("status") or {}).get("conditions") or []
    return {str(c.get("type")): c for c in conditions if isinstance(c, Mapping) and c.get("type")}


def daemon_down(deployment: K8sObject) -> DaemonDown | None:
    """Why the Deployment's pod is not available, or None when it is (or nothing says).

    ``ReplicaFailure=True`` is the controller's word that it could not create the pod and
    names the refusal; ``Available=False`` only says the replica is not up yet, so it
    counts only together with unavailable replicas and no available one.
    """
    conditions = _conditions(deployment)
    failure = conditions.get("ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return DaemonDown(
            "ReplicaFailure", str(failure.get("reason") or ""), str(failure.get("message") or "")
        )
    status = deployment.get("status") or {}
    available = conditions.get("Available")
    if (
        available is not None
        and available.get("status") == "False"
        and not status.get("availableReplicas")
        and status.get("unavailableReplicas")
    ):
        return DaemonDown(
            "Available", str(available.get("reason") or ""), str(available.get("message") or "")
        )
    return None


def first_down(deployments: Sequence[K8sObject]) -> tuple[K8sObject, DaemonDown] | None:
    """The first daemon that is down, a ReplicaFailure (a named cause) before the rest."""
    downs = [(d, down) for d in deployments if (down := daemon_down(d)) is not None]
    downs.sort(key=lambda dd: dd[1].condition != "ReplicaFailure")
    return downs[0] if downs else None
