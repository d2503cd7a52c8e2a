"""Pod → ResourceClaims: which claim each of a pod's ``spec.resourceClaims`` entries means.

Follows the kubelet's and scheduler's own algorithm (k8s-dra-semantics §6,
``resourceclaim.Name``): a direct ``resourceClaimName``; for a template, the pod's
``status.resourceClaimStatuses`` entry; and, in the window where the resourceclaim
controller created the claim but has not patched the pod status yet, a claim owned by
the pod with the ``resource.kubernetes.io/pod-claim-name`` annotation. When no claim
exists yet, one is synthesized from the template (and marked so), because the template
alone already decides selection and publication and the user is waiting on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dradiag.snapshot.model import K8sObject, Kind, Snapshot, name_of, namespace_of, uid_of

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
"""Set by the resourceclaim controller on a generated claim (k8s-dra-semantics §6)."""

SYNTHESIZED_ANNOTATION = "dradiag.io/synthesized-from-template"
"""Marks a claim dradiag built from a template because the real one does not exist yet."""


class Resolution(StrEnum):
    """How a pod claim entry was mapped to a ResourceClaim."""

    CLAIM_NAME = "spec.resourceClaims[].resourceClaimName"
    POD_STATUS = "status.resourceClaimStatuses"
    OWNER_ANNOTATION = "owner reference + pod-claim-name annotation"
    NOT_CREATED = "not created yet (synthesized from the template)"
    NOT_NEEDED = "no claim needed (status entry without a claim name)"
    EXTENDED_RESOURCE = "status.extendedResourceClaimStatus"
    """The claim the scheduler generated for the pod's extended-resource requests
    (DRAExtendedResource); containers reach it by request mapping, not by a pod claim name."""
    UNRESOLVED = "unresolved"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry of a pod and the claim it resolves to."""

    pod_claim_name: str
    """The entry's ``name`` (what containers list in ``resources.claims``)."""
    namespace: str
    claim_name: str | None
    """The ResourceClaim's name; None when it does not exist yet."""
    claim: K8sObject | None
    """The claim object (synthesized when ``synthesized``), None when unresolvable."""
    template_name: str | None = None
    resolution: Resolution
    synthesized: bool = False
    note: str = ""
    """Why the resolution is what it is, for the diagnosis (e.g. the template is missing)."""


def _owned_by(claim: K8sObject, pod_uid: str) -> bool:
    for ref in (claim.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("uid") == pod_uid:
            return bool(ref.get("controller", True))
    return False


def _status_entry(pod: K8sObject, pod_claim_name: str) -> Mapping[str, Any] | None:
    for entry in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(entry, Mapping) and entry.get("name") == pod_claim_name:
            return entry
    return None


def _claim_by_owner(snapshot: Snapshot, pod: K8sObject, pod_claim_name: str) -> K8sObject | None:
    """The orphan-window fallback: a claim owned by the pod with the annotation."""
    pod_uid = uid_of(pod)
    if not pod_uid:
        return None
    ns = namespace_of(pod)
    found = [
        c
        for c in snapshot.mentioning(Kind.RESOURCE_CLAIM, pod_uid)
        if namespace_of(c) == ns
        and ((c.get("metadata") or {}).get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION)
        == pod_claim_name
        and _owned_by(c, pod_uid)
    ]
    return sorted(found, key=name_of)[0] if found else None


def synthesize_claim(pod: K8sObject, pod_claim_name: str, template: K8sObject) -> dict[str, Any]:
    """The claim the resourceclaim controller would create from ``template`` for ``pod``.

    Its name is only the ``generateName`` prefix (the apiserver appends a random suffix,
    so the real name cannot be predicted, k8s-dra-semantics §6); it carries no status.
    """
    tpl_spec = template.get("spec") or {}
    tpl_meta = tpl_spec.get("metadata") or {}
    annotations = dict(tpl_meta.get("annotations") or {})
    annotations[POD_CLAIM_NAME_ANNOTATION] = pod_claim_name
    annotations[SYNTHESIZED_ANNOTATION] = name_of(template)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{name_of(pod)}-{pod_claim_name}-",
            "generateName": f"{name_of(pod)}-{pod_claim_name}-",
            "namespace": namespace_of(pod),
            "labels": dict(tpl_meta.get("labels") or {}),
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": name_of(pod),
                    "uid": uid_of(pod),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": dict(tpl_spec.get("spec") or {}),
        "status": {},
    }


def is_synthesized(claim: K8sObject) -> bool:
    """True for a claim :func:`synthesize_claim` built."""
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return SYNTHESIZED_ANNOTATION in annotations


def resolve_pod_claims(snapshot: Snapshot, pod: K8sObject) -> list[PodClaim]:
    """Every ``spec.resourceClaims`` entry of ``pod`` with the claim it means, in spec order."""
    ns = namespace_of(pod)
    out: list[PodClaim] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or ():
        if not isinstance(entry, Mapping):
            continue
        pcn = str(entry.get("name") or "")
        direct = entry.get("resourceClaimName")
        template_name = entry.get("resourceClaimTemplateName")
        if direct:
            claim = snapshot.claim(ns, str(direct))
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=str(direct),
                    claim=claim,
                    resolution=Resolution.CLAIM_NAME if claim else Resolution.UNRESOLVED,
                    note="" if claim else f"ResourceClaim {ns}/{direct} is not in the snapshot",
                )
            )
            continue
        if not template_name:
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=None,
                    claim=None,
                    resolution=Resolution.UNRESOLVED,
                    note="neither resourceClaimName nor resourceClaimTemplateName is set",
                )
            )
            continue
        template_name = str(template_name)
        status = _status_entry(pod, pcn)
        if status is not None and status.get("resourceClaimName"):
            claim_name = str(status["resourceClaimName"])
            claim = snapshot.claim(ns, claim_name)
            note = ""
            if claim is None:
                note = f"ResourceClaim {ns}/{claim_name} is not in the snapshot"
            elif not _owned_by(claim, uid_of(pod)):
                note = (
                    f"ResourceClaim {ns}/{claim_name} was not created for Pod "
                    f"{ns}/{name_of(pod)} (Pod is not owner)"
                )
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=claim_name,
                    claim=claim,
                    template_name=template_name,
                    resolution=Resolution.POD_STATUS if claim else Resolution.UNRESOLVED,
                    note=note,
                )
            )
            continue
        if status is not None:
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=None,
                    claim=None,
                    template_name=template_name,
                    resolution=Resolution.NOT_NEEDED,
                )
            )
            continue
        owned = _claim_by_owner(snapshot, pod, pcn)
        if owned is not None:
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=name_of(owned),
                    claim=owned,
                    template_name=template_name,
                    resolution=Resolution.OWNER_ANNOTATION,
                    note="the pod status does not name the claim yet; found by owner reference",
                )
            )
            continue
        template = snapshot.claim_template(ns, template_name)
        if template is None:
            out.append(
                PodClaim(
                    pod_claim_name=pcn,
                    namespace=ns,
                    claim_name=None,
                    claim=None,
                    template_name=template_name,
                    resolution=Resolution.UNRESOLVED,
                    note=f"ResourceClaimTemplate {ns}/{template_name} is not in the snapshot "
                    "and no claim was generated yet",
                )
            )
            continue
        out.append(
            PodClaim(
                pod_claim_name=pcn,
                namespace=ns,
                claim_name=None,
                claim=synthesize_claim(pod, pcn, template),
                template_name=template_name,
                resolution=Resolution.NOT_CREATED,
                synthesized=True,
                note=f"the claim for pod claim {pcn!r} has not been created yet; "
                f"diagnosing the spec of template {ns}/{template_name}",
            )
        )
    extended = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    if isinstance(extended, Mapping) and extended.get("resourceClaimName"):
        claim_name = str(extended["resourceClaimName"])
        claim = snapshot.claim(ns, claim_name)
        out.append(
            PodClaim(
                pod_claim_name="",
                namespace=ns,
                claim_name=claim_name,
                claim=claim,
                resolution=Resolution.EXTENDED_RESOURCE if claim else Resolution.UNRESOLVED,
                note="" if claim else f"ResourceClaim {ns}/{claim_name} is not in the snapshot",
            )
        )
    return out


def pod_claim_names_for(snapshot: Snapshot, pod: K8sObject, claim: K8sObject) -> list[str]:
    """The pod's ``spec.resourceClaims[].name`` entries that resolve to ``claim``."""
    target = (namespace_of(claim), name_of(claim))
    names = []
    for pc in resolve_pod_claims(snapshot, pod):
        if not pc.pod_claim_name:
            continue  # an extended-resource claim: containers reach it by request mapping
        if pc.claim is claim or (pc.claim_name and (pc.namespace, pc.claim_name) == target):
            names.append(pc.pod_claim_name)
    return names
