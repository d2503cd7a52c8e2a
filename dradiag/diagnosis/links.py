"""Tie a claim to its pods and evidence as a real cluster does, strongest link first.

Real evidence is partial: a claim pasted without its pod's status, a pod without the
claim's ``reservedFor``, one kubelet event that names the claim in its message. The
cluster itself ties these objects by a few links, each with its own strength
(k8s-dra-semantics §6); this module follows them and says which one tied each object,
so the diagnosis can show why a pod or event counts:

1. the claim's owner reference to its pod (a generated claim);
2. the pod's ``status.resourceClaimStatuses`` naming the claim, or its
   ``status.extendedResourceClaimStatus`` (the claim generated for extended-resource
   requests, DRAExtendedResource);
3. the claim's ``status.reservedFor`` naming the pod;
4. the pod's ``spec.resourceClaims`` naming the claim;
5. a generated claim's ``resource.kubernetes.io/pod-claim-name`` annotation together
   with its ``<pod>-<pod claim>-<suffix>`` name (the resourceclaim controller's
   ``generateName``), when the pod's status and the owner reference were not given;
6. events about the claim (``involvedObject``) and events whose message names it — by
   UID, ``ns/name`` or name — as the kubelet's prepare errors and the scheduler's
   messages do; the pod such an event is about counts as the claim's too.

The node comes from the pod's ``spec.nodeName``, the allocation's node selector, or an
event's source host (``ClaimWalk.nodes``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dradiag.diagnosis.resolve import POD_CLAIM_NAME_ANNOTATION
from dradiag.snapshot.model import (
    K8sObject,
    Snapshot,
    name_of,
    namespace_of,
    uid_of,
)

GENERATE_NAME_MAX = 57
"""The resourceclaim controller cuts ``<pod>-<pod claim>`` to 57 characters before the
``-`` and the random suffix (kubernetes pkg/controller/resourceclaim, ``generateName``)."""


@dataclass(slots=True)
class EventLink:
    """An event tied to the claim, and the pod it is about (None: about the claim, or
    about a pod the input does not hold)."""

    event: K8sObject
    via: str
    pod: K8sObject | None = None
    pod_key: str = ""
    """``ns/name`` of the pod the event is about, also when the pod object is absent."""
    node: str = ""
    """The node that reported it (``source.host`` / ``reportingInstance``), if any."""


@dataclass(slots=True)
class ClaimLinks:
    """The claim's pods and linked events, each with the link that tied it."""

    pods: list[tuple[K8sObject, str]] = field(default_factory=list)
    mentioned_by: list[EventLink] = field(default_factory=list)
    """Events not about the claim itself whose message names it."""

    def pod_objects(self) -> list[K8sObject]:
        return [p for p, _via in self.pods]

    def described(self) -> tuple[tuple[str, str], ...]:
        """(object, link) pairs for the document's ``target.links``."""
        out = [(f"Pod {namespace_of(p)}/{name_of(p)}", via) for p, via in self.pods]
        pods = {id(p) for p, _via in self.pods}
        # Events about a pod already tied are that pod's evidence; list the others.
        out += [
            (f"Event {namespace_of(e.event)}/{name_of(e.event)}", e.via)
            for e in self.mentioned_by
            if e.pod is None or id(e.pod) not in pods or not e.via.startswith("its message")
        ][:5]
        return tuple(out)


def _owner_uids(claim: K8sObject) -> list[str]:
    return [
        str(o.get("uid") or "")
        for o in (claim.get("metadata") or {}).get("ownerReferences") or ()
        if isinstance(o, Mapping) and o.get("kind") == "Pod" and o.get("uid")
    ]


def _reserved_uids(claim: K8sObject) -> list[str]:
    status = claim.get("status")
    if not isinstance(status, Mapping):
        return []
    return [
        str(r.get("uid") or "")
        for r in status.get("reservedFor") or ()
        if isinstance(r, Mapping) and (r.get("resource") or "pods") == "pods" and r.get("uid")
    ]


def _names_claim_in_status(pod: K8sObject, claim_name: str) -> bool:
    status = pod.get("status")
    if not isinstance(status, Mapping):
        return False
    return any(
        isinstance(st, Mapping) and st.get("resourceClaimName") == claim_name
        for st in status.get("resourceClaimStatuses") or ()
    )


def generated_for(claim: K8sObject, pod: K8sObject) -> bool:
    """True when ``claim``'s annotation and name say it was generated for ``pod``."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    pod_claim = (
        annotations.get(POD_CLAIM_NAME_ANNOTATION) if isinstance(annotations, Mapping) else None
    )
    if not pod_claim or namespace_of(claim) != namespace_of(pod):
        return False
    templated = {
        str(e.get("name"))
        for e in (pod.get("spec") or {}).get("resourceClaims") or ()
        if isinstance(e, Mapping) and e.get("resourceClaimTemplateName")
    }
    if pod_claim not in templated:
        return False
    base = f"{name_of(pod)}-{pod_claim}"[:GENERATE_NAME_MAX] + "-"
    return name_of(claim).startswith(base) and len(name_of(claim)) > len(base)


_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def message_names_claim(message: str, claim: K8sObject, event_namespace: str) -> str | None:
    """How ``message`` names the claim ("UID", "ns/name", "name"), or None.

    A bare name counts only labelled as a claim or quoted, and only in the claim's own
    namespace: a pod and its claim often share a name.
    """
    ns, name, uid = namespace_of(claim), name_of(claim), uid_of(claim)
    if uid and uid in message:
        return "UID"
    if name and re.search(rf"(?<![\w.-]){re.escape(ns)}/{re.escape(name)}(?![\w.-])", message):
        return "ns/name"
    if name and event_namespace == ns:
        labelled = rf"(?:[Cc]laims?|ResourceClaim)[\s:=]+[\"'`]?{re.escape(name)}(?![\w.-])"
        quoted = rf"[\"'`]{re.escape(name)}[\"'`]"
        if re.search(labelled, message) or re.search(quoted, message):
            return "name"
    return None


def _event_pod(snapshot: Snapshot, event: K8sObject) -> tuple[K8sObject | None, str]:
    io = event.get("involvedObject") or {}
    if not isinstance(io, Mapping) or io.get("kind") != "Pod":
        return None, ""
    ns = str(io.get("namespace") or namespace_of(event))
    name = str(io.get("name") or "")
    pod = snapshot.pod(ns, name) if name else None
    if pod is None and io.get("uid"):
        pod = snapshot.pod_by_uid(str(io["uid"]))
    return pod, f"{ns}/{name}" if name else ""


def event_node(event: K8sObject) -> str:
    """The node that reported an event: core/v1 ``source.host``, events.k8s.io
    ``reportingInstance`` (normalized to the same place when present)."""
    source = event.get("source")
    if isinstance(source, Mapping) and source.get("host"):
        return str(source["host"])
    if event.get("reportingInstance") and str(event.get("reportingComponent") or "") == "kubelet":
        return str(event["reportingInstance"])
    return ""


def claim_links(snapshot: Snapshot, claim: K8sObject) -> ClaimLinks:
    """Every pod and event of the input tied to ``claim``, with the link used."""
    links = ClaimLinks()
    ns, name = namespace_of(claim), name_of(claim)
    seen: set[int] = set()

    def add(pod: K8sObject | None, via: str) -> None:
        if pod is not None and id(pod) not in seen:
            seen.add(id(pod))
            links.pods.append((pod, via))

    for uid in _owner_uids(claim):
        add(snapshot.pod_by_uid(uid), "claim.metadata.ownerReferences")
    using = snapshot.pods_for_claim(claim)
    for pod in using:
        if _names_claim_in_status(pod, name):
            add(pod, "pod.status.resourceClaimStatuses")
    for pod in using:
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus")
        if isinstance(extended, Mapping) and extended.get("resourceClaimName") == name:
            add(pod, "pod.status.extendedResourceClaimStatus")
    for uid in _reserved_uids(claim):
        add(snapshot.pod_by_uid(uid), "claim.status.reservedFor")
    for pod in using:
        add(pod, "pod.spec.resourceClaims")
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    if isinstance(annotations, Mapping) and annotations.get(POD_CLAIM_NAME_ANNOTATION):
        prefix = str(annotations[POD_CLAIM_NAME_ANNOTATION])
        for pod in _pods_named_before(snapshot, ns, name, prefix):
            if generated_for(claim, pod):
                add(pod, f"annotation {POD_CLAIM_NAME_ANNOTATION} and the generated name")
    own = {id(e) for e in snapshot.events_for("ResourceClaim", ns, name, uid_of(claim) or None)}
    found: dict[int, EventLink] = {}
    for value in (uid_of(claim), f"{ns}/{name}", name):
        for event in snapshot.events_mentioning(value):
            if id(event) in own or id(event) in found:
                continue
            how = message_names_claim(str(event.get("message") or ""), claim, namespace_of(event))
            if how is None:
                continue
            event_pod, pod_key = _event_pod(snapshot, event)
            found[id(event)] = EventLink(
                event=event,
                via=f"its message names the claim ({how})",
                pod=event_pod,
                pod_key=pod_key,
                node=event_node(event),
            )
    links.mentioned_by = list(found.values())
    for link in links.mentioned_by:
        if link.pod is not None:
            add(link.pod, f"Event {namespace_of(link.event)}/{name_of(link.event)} names the claim")
    return links


def _pods_named_before(
    snapshot: Snapshot, namespace: str, claim_name: str, pod_claim: str
) -> list[K8sObject]:
    """Pods whose name the generated claim name starts with (``<pod>-<pod claim>-…``)."""
    marker = f"-{pod_claim}-"
    out = []
    at = claim_name.find(marker)
    while at > 0:
        pod = snapshot.pod(namespace, claim_name[:at])
        if pod is not None:
            out.append(pod)
        at = claim_name.find(marker, at + 1)
    if not out and len(claim_name) > GENERATE_NAME_MAX:
        # The controller cut ``<pod>-<pod claim>`` at 57 characters, so the pod's name is
        # at least that long less ``-<pod claim>`` and starts the claim's name that far.
        # Rare; the namespace's pods are scanned for that prefix (``generated_for``
        # then checks each exactly).
        prefix = claim_name[: max(GENERATE_NAME_MAX - len(pod_claim) - 1, 1)]
        out = [
            p
            for p in snapshot.pods
            if namespace_of(p) == namespace and name_of(p).startswith(prefix)
        ]
    return out
