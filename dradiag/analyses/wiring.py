"""Claim ↔ pod ↔ container wiring, and ``reservedFor`` consistency.

The kubelet hands a container only the CDI devices of the claims (and requests) that
container lists in ``resources.claims`` (k8s-dra-semantics §5.2, ``cdiDevicesAsList``):
a pod can reference a claim at pod level, get it allocated and prepared, and still run
every container without a GPU, silently. This module says which containers of a pod
receive the claim's devices and which request names do not exist in the claim.

``reservedFor`` is the other half of the wiring: the kubelet refuses to prepare a claim
for a pod it is not reserved for (``is not allowed to use ResourceClaim``), and a
reservation naming a pod that is gone or finished keeps the devices allocated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dradiag.snapshot.model import K8sObject, Snapshot, name_of, namespace_of, uid_of
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

CLAIM_NOT_IN_CONTAINERS = "DRA-WORK-CLAIM-NOT-REFERENCED"
UNKNOWN_REQUEST = "DRA-WORK-WRONG-REQUEST"
NOT_RESERVED_FOR_POD = "DRA-ALLOC-NOT-RESERVED"
RULE_IDS = (CLAIM_NOT_IN_CONTAINERS, UNKNOWN_REQUEST, NOT_RESERVED_FOR_POD)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerUse:
    """One container's ``resources.claims`` entries that name the claim."""

    container: str
    init: bool
    requests: tuple[str, ...]
    """Request names listed; ``""`` means every request of the claim."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PodWiring:
    """How one pod's containers are wired to one claim."""

    pod_key: str
    pod_claim_names: tuple[str, ...]
    """The pod's ``spec.resourceClaims[].name`` entries that resolve to the claim."""
    using: tuple[ContainerUse, ...]
    not_using: tuple[str, ...]
    """Regular containers that do not list the claim (they see no device from it)."""
    unknown_requests: tuple[tuple[str, str], ...]
    """(container, request) pairs naming a request the claim does not have."""
    claim_requests: tuple[str, ...]

    @property
    def wired(self) -> bool:
        """True when at least one container receives the claim's devices."""
        return bool(self.using)


def claim_request_names(claim: K8sObject) -> tuple[str, ...]:
    """Request names of the claim, with ``<request>/<subrequest>`` for prioritized lists."""
    names: list[str] = []
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        if not isinstance(req, Mapping):
            continue
        name = str(req.get("name") or "")
        names.append(name)
        for sub in req.get("firstAvailable") or ():
            if isinstance(sub, Mapping) and sub.get("name"):
                names.append(f"{name}/{sub['name']}")
    return tuple(names)


def _containers(pod: K8sObject) -> list[tuple[Mapping[str, Any], bool]]:
    spec = pod.get("spec") or {}
    out = [(c, True) for c in spec.get("initContainers") or () if isinstance(c, Mapping)]
    out += [(c, False) for c in spec.get("containers") or () if isinstance(c, Mapping)]
    return out


def analyze_pod_wiring(pod: K8sObject, claim: K8sObject, pod_claim_names: list[str]) -> PodWiring:
    """Which containers of ``pod`` list ``claim`` (through ``pod_claim_names``)."""
    requests = claim_request_names(claim)
    top_level = {r.split("/", 1)[0] for r in requests}
    using: list[ContainerUse] = []
    not_using: list[str] = []
    unknown: list[tuple[str, str]] = []
    for container, init in _containers(pod):
        cname = str(container.get("name") or "")
        listed = [
            str(entry.get("request") or "")
            for entry in (container.get("resources") or {}).get("claims") or ()
            if isinstance(entry, Mapping) and entry.get("name") in pod_claim_names
        ]
        if listed:
            using.append(ContainerUse(container=cname, init=init, requests=tuple(listed)))
            for req in listed:
                if req and req not in requests and req not in top_level:
                    unknown.append((cname, req))
        elif not init:
            not_using.append(cname)
    return PodWiring(
        pod_key=f"{namespace_of(pod)}/{name_of(pod)}",
        pod_claim_names=tuple(pod_claim_names),
        using=tuple(using),
        not_using=tuple(not_using),
        unknown_requests=tuple(unknown),
        claim_requests=requests,
    )


def wiring_findings(wiring: PodWiring, claim: K8sObject) -> list[Finding]:
    """Workload-phase findings: no container gets the device, or a request name is wrong."""
    claim_key = f"{namespace_of(claim)}/{name_of(claim)}"
    findings: list[Finding] = []
    ns, pod_name = wiring.pod_key.split("/", 1)
    jsonpath = (
        f"kubectl get pod -n {ns} {pod_name} -o jsonpath="
        '\'{range .spec.containers[*]}{.name}{": "}{.resources.claims}{"\\n"}{end}\''
    )
    if not wiring.wired:
        findings.append(
            Finding(
                rule=CLAIM_NOT_IN_CONTAINERS,
                phase=Phase.WORKLOAD,
                severity=Severity.ERROR,
                title="no container of the pod lists the claim in resources.claims",
                detail=f"Pod {wiring.pod_key} references ResourceClaim {claim_key} as "
                f"{', '.join(repr(n) for n in wiring.pod_claim_names) or '(no pod claim entry)'} "
                f"but none of its containers ({', '.join(wiring.not_using) or 'none'}) lists it "
                "in resources.claims: the devices are allocated and prepared, yet the kubelet "
                "injects them into no container, so the workload sees no GPU.",
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pod {wiring.pod_key} .spec.containers[*].resources.claims",
                        excerpt=f"pod claim names {list(wiring.pod_claim_names)}; "
                        f"containers without them: {list(wiring.not_using)}",
                    ),
                ),
                next=(
                    jsonpath,
                    "remediation: add `resources: {claims: [{name: "
                    f"{(wiring.pod_claim_names or ('<pod claim name>',))[0]}}}]}}` to the container "
                    "that needs the GPU",
                ),
                identifiers=(("pod", wiring.pod_key), ("claim", claim_key)),
            )
        )
    for container, request in wiring.unknown_requests:
        findings.append(
            Finding(
                rule=UNKNOWN_REQUEST,
                phase=Phase.WORKLOAD,
                severity=Severity.ERROR,
                title="a container names a request the claim does not have",
                detail=f"Container {container!r} of pod {wiring.pod_key} lists request "
                f"{request!r} of ResourceClaim {claim_key}, whose requests are "
                f"{list(wiring.claim_requests)}: it receives no device for that entry.",
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pod {wiring.pod_key} container {container} .resources.claims",
                        excerpt=f"request: {request}",
                    ),
                ),
                next=(
                    f"kubectl get resourceclaim -n {namespace_of(claim)} {name_of(claim)} "
                    "-o jsonpath='{.spec.devices.requests[*].name}'",
                ),
                identifiers=(("pod", wiring.pod_key), ("request", request)),
            )
        )
    return findings


def extended_resource_mappings(pod: K8sObject, claim: K8sObject) -> list[tuple[str, str, str]]:
    """(container, request, resource) of the pod's extended-resource mapping onto ``claim``.

    With DRAExtendedResource (Kubernetes 1.34+) a container asking for an extended resource
    (``nvidia.com/gpu: 1``) gets it from a claim the scheduler generates; the pod does not
    list that claim in ``spec.resourceClaims`` but in
    ``status.extendedResourceClaimStatus`` (``resourceClaimName`` and, per container,
    ``requestMappings[].requestName``). The kubelet hands each container the devices of the
    request its mapping names (k8s-dra-semantics §5.2).
    """
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    if not isinstance(status, Mapping) or status.get("resourceClaimName") != name_of(claim):
        return []
    return [
        (
            str(m.get("containerName") or ""),
            str(m.get("requestName") or ""),
            str(m.get("resourceName") or ""),
        )
        for m in status.get("requestMappings") or ()
        if isinstance(m, Mapping)
    ]


def extended_resource_findings(pod: K8sObject, claim: K8sObject) -> list[Finding]:
    """A request mapping naming a request the generated claim does not have: that container
    receives none of the claim's devices although allocation and Prepare succeeded."""
    requests = claim_request_names(claim)
    top_level = {r.split("/", 1)[0] for r in requests}
    claim_key = f"{namespace_of(claim)}/{name_of(claim)}"
    pod_key = f"{namespace_of(pod)}/{name_of(pod)}"
    out: list[Finding] = []
    for container, request, resource in extended_resource_mappings(pod, claim):
        if not request or request in requests or request in top_level:
            continue
        out.append(
            Finding(
                rule=UNKNOWN_REQUEST,
                phase=Phase.WORKLOAD,
                severity=Severity.ERROR,
                title="a container names a request the claim does not have",
                detail=f"Pod {pod_key} maps container {container!r}'s extended resource "
                f"{resource!r} to request {request!r} of ResourceClaim {claim_key} "
                "(status.extendedResourceClaimStatus.requestMappings), but the claim's requests "
                f"are {list(requests)}: the kubelet hands the container the devices of the "
                "request its mapping names, so it receives none of the claim's devices.",
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pod {pod_key} .status.extendedResourceClaimStatus.requestMappings",
                        excerpt=f"containerName: {container}, requestName: {request}, "
                        f"resourceName: {resource}",
                    ),
                ),
                next=(
                    f"kubectl get resourceclaim -n {namespace_of(claim)} {name_of(claim)} "
                    "-o jsonpath='{.spec.devices.requests[*].name}'",
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.status.extendedResourceClaimStatus}'",
                ),
                identifiers=(("pod", pod_key), ("container", container), ("request", request)),
                cause=f"container {container!r} is mapped to request {request!r}, which the "
                "claim does not have",
            )
        )
    return out


def reserved_pod_uids(claim: K8sObject) -> list[str]:
    """UIDs of the pods in ``status.reservedFor`` (resource ``pods``)."""
    return [
        str(r.get("uid") or "")
        for r in (claim.get("status") or {}).get("reservedFor") or ()
        if isinstance(r, Mapping) and (r.get("resource") or "pods") == "pods"
    ]


def is_reserved_for(claim: K8sObject, pod: K8sObject) -> bool:
    """True when ``reservedFor`` names this pod (by UID, else by name without a UID)."""
    pod_uid = uid_of(pod)
    for ref in (claim.get("status") or {}).get("reservedFor") or ():
        if not isinstance(ref, Mapping) or (ref.get("resource") or "pods") != "pods":
            continue
        if pod_uid and ref.get("uid"):
            if ref.get("uid") == pod_uid:
                return True
        elif ref.get("name") == name_of(pod):
            return True
    return False


def reservation_finding(claim: K8sObject, pod: K8sObject) -> Finding | None:
    """A bound pod whose allocated claim is not reserved for it (kubelet refuses Prepare)."""
    if not (claim.get("status") or {}).get("allocation"):
        return None
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or is_reserved_for(claim, pod):
        return None
    pod_key = f"{namespace_of(pod)}/{name_of(pod)}"
    claim_key = f"{namespace_of(claim)}/{name_of(claim)}"
    reserved = [
        f"{r.get('name')} ({r.get('uid')})"
        for r in (claim.get("status") or {}).get("reservedFor") or ()
        if isinstance(r, Mapping)
    ]
    return Finding(
        rule=NOT_RESERVED_FOR_POD,
        phase=Phase.ALLOCATION,
        severity=Severity.ERROR,
        title="the claim is allocated but not reserved for the pod",
        detail=f"Pod {pod_key} is bound to node {node}, but ResourceClaim {claim_key} lists "
        f"{reserved or 'no pod'} in status.reservedFor: the kubelet refuses Prepare with "
        f"'pod {name_of(pod)} ({uid_of(pod)}) is not allowed to use ResourceClaim'. Typical "
        "cause: the pod was bound with spec.nodeName, bypassing the scheduler.",
        evidence=(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"ResourceClaim {claim_key} .status.reservedFor",
                excerpt=str(reserved),
            ),
        ),
        next=(
            f"kubectl get resourceclaim -n {namespace_of(claim)} {name_of(claim)} "
            "-o jsonpath='{.status.reservedFor}'",
            f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
            "-o jsonpath='{.spec.schedulerName} {.spec.nodeName}'",
        ),
        identifiers=(("pod UID", uid_of(pod)), ("claim UID", uid_of(claim))),
    )


def pods_of_reservations(
    snapshot: Snapshot, claim: K8sObject
) -> list[tuple[str, K8sObject | None]]:
    """Each reserved pod UID with the pod object (None when it is not in the snapshot)."""
    return [(uid, snapshot.pod_by_uid(uid)) for uid in reserved_pod_uids(claim) if uid]
