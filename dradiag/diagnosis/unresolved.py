"""A pod whose ResourceClaim (or ResourceClaimTemplate) does not exist: broken wiring.

The pod names a claim by ``resourceClaimName`` or a template by
``resourceClaimTemplateName``; when neither the claim nor the template is there, nothing
will ever be allocated for it and the pod waits forever ("could not find ResourceClaim",
"ResourceClaim not created yet"). That is a finding about the pod, never "no claims to
diagnose, all fine" (issue 11 §7). When the claims or templates were not readable, it
cannot be told apart from a read failure, so the verdict is inconclusive instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from dradiag.diagnosis.context import (
    optional_matcher,
    optional_rulebook,
    pod_done,
    pod_key,
    pod_started,
    pod_terminating,
)
from dradiag.diagnosis.findings import phase_result
from dradiag.diagnosis.model import Diagnosis, Target
from dradiag.diagnosis.next_context import NextContext
from dradiag.diagnosis.next_steps import with_concrete_next
from dradiag.diagnosis.resolve import PodClaim, Resolution, resolve_pod_claims
from dradiag.diagnosis.rule_ids import (
    ALLOC_CLAIM_NOT_CREATED,
    NOT_COLLECTED,
    SEL_CLAIM_CREATION_FAILED,
)
from dradiag.diagnosis.verdict import decide_verdict
from dradiag.snapshot.model import (
    Coverage,
    K8sObject,
    Kind,
    Snapshot,
    name_of,
    namespace_of,
    uid_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

if TYPE_CHECKING:
    from dradiag.analyses.rule_matching import RuleHit


def _missing_kind(pc: PodClaim) -> Kind:
    return (
        Kind.RESOURCE_CLAIM
        if pc.claim_name or not pc.template_name
        else Kind.RESOURCE_CLAIM_TEMPLATE
    )


def _finding(snapshot: Snapshot, pod: K8sObject, pc: PodClaim) -> Finding:
    ns = namespace_of(pod)
    kind = _missing_kind(pc)
    if pc.claim_name:
        missing = f"ResourceClaim {ns}/{pc.claim_name}"
        field = "resourceClaimName" if pc.template_name is None else "(status) resourceClaimName"
        ref = f"Pod {pod_key(pod)} .spec.resourceClaims[name={pc.pod_claim_name}].{field}"
        get = f"kubectl get resourceclaim -n {ns} {pc.claim_name}"
    elif pc.template_name is not None:
        missing = f"ResourceClaimTemplate {ns}/{pc.template_name}"
        ref = (
            f"Pod {pod_key(pod)} .spec.resourceClaims[name={pc.pod_claim_name}]"
            ".resourceClaimTemplateName"
        )
        get = f"kubectl get resourceclaimtemplate -n {ns} {pc.template_name}"
    else:
        missing = "a claim or template name"
        ref = f"Pod {pod_key(pod)} .spec.resourceClaims[name={pc.pod_claim_name}]"
        get = f"kubectl get pod -n {ns} {name_of(pod)} -o jsonpath='{{.spec.resourceClaims}}'"
    record = snapshot.coverage[kind]
    if not snapshot.is_collected(kind):
        return Finding(
            rule=NOT_COLLECTED[Phase.ALLOCATION],
            phase=Phase.ALLOCATION,
            severity=Severity.WARNING,
            title="evidence for allocation was not collected",
            detail=f"Pod {pod_key(pod)} uses {missing}, which is not in the snapshot, but "
            f"{kind.value}s were not read ({record.reason or 'not collected'}): it may exist.",
            evidence=(Evidence(source=EvidenceSource.OBJECT, ref=ref, excerpt=pc.note),),
            next=(get,),
            identifiers=(("pod UID", uid_of(pod)),),
        )
    why = (
        f"and it cannot exist: {record.reason or 'the API server does not serve it'} "
        "(DRA is not enabled on this cluster)"
        if record.coverage is Coverage.ABSENT
        else "and it does not exist"
    )
    return Finding(
        rule=ALLOC_CLAIM_NOT_CREATED,
        phase=Phase.ALLOCATION,
        severity=Severity.ERROR,
        title="the pod's ResourceClaim does not exist",
        detail=f"Pod {pod_key(pod)} needs {missing} for pod claim {pc.pod_claim_name!r}, "
        f"{why}: nothing can be allocated for the pod, so it stays pending "
        "(the scheduler reports 'could not find ResourceClaim' or 'ResourceClaim not created "
        "yet'). Create it, or fix the name in the pod spec.",
        evidence=(Evidence(source=EvidenceSource.OBJECT, ref=ref, excerpt=pc.note),),
        next=(get, f"kubectl describe pod -n {ns} {name_of(pod)}  (Events)"),
        identifiers=(("pod UID", uid_of(pod)),),
    )


def unresolved_claims(
    snapshot: Snapshot, pod: K8sObject, resolved: Sequence[PodClaim] | None = None
) -> list[PodClaim]:
    """The pod's claim entries that resolve to no claim, while the pod still waits for it;
    ``resolved``: the pod's ``resolve_pod_claims`` when the caller has it already."""
    if pod_done(pod) or pod_terminating(pod) or pod_started(pod):
        return []
    return [
        pc
        for pc in (resolve_pod_claims(snapshot, pod) if resolved is None else resolved)
        if pc.claim is None and pc.resolution is Resolution.UNRESOLVED
    ]


def _creation_failures(snapshot: Snapshot, pod: K8sObject) -> list[RuleHit]:
    """Rule hits of the pod's own events that say why its claim was not created.

    The resourceclaim controller reports it on the pod (``FailedResourceClaimCreation``:
    a template "not found", a webhook that denied the claim): that event settles what a
    missing template in the snapshot cannot, even when templates were not read.
    """
    rulebook = optional_rulebook()
    match_events = optional_matcher("match_events")
    if rulebook is None or match_events is None:
        return []
    events = snapshot.events_for("Pod", namespace_of(pod), name_of(pod), uid_of(pod) or None)
    return [h for h in match_events(rulebook, events) if h.rule.id == SEL_CLAIM_CREATION_FAILED]


def diagnose_unresolved(
    snapshot: Snapshot, pod: K8sObject, resolved: Sequence[PodClaim] | None = None
) -> Diagnosis | None:
    """The pod's diagnosis when a claim or template it names is missing, else None."""
    missing = unresolved_claims(snapshot, pod, resolved)
    if not missing:
        return None
    rulebook = optional_rulebook()
    failures = _creation_failures(snapshot, pod)
    explained = {h.captures.get("pod_claim") for h in failures}
    findings = [_finding(snapshot, pod, pc) for pc in missing if pc.pod_claim_name not in explained]
    results = []
    if failures:
        # The pod's namespace and name make the rule's generic steps concrete
        # (`-n <ns>`, `kubectl describe pod -n NS NAME`), as a claim walk's are.
        ctx = NextContext(
            namespace=namespace_of(pod), pod_namespace=namespace_of(pod), pod_name=name_of(pod)
        )
        shown = [with_concrete_next(h.to_finding(), ctx) for h in failures]
        results.append(phase_result(rulebook, Phase.SELECTION, shown, PhaseStatus.OK))
    if findings or not failures:
        base = (
            PhaseStatus.UNKNOWN
            if all(f.severity is not Severity.ERROR for f in findings)
            else PhaseStatus.OK
        )
        results.append(phase_result(rulebook, Phase.ALLOCATION, findings, base))
    target = Target(
        kind="Pod",
        namespace=namespace_of(pod) or None,
        name=name_of(pod),
        uid=uid_of(pod) or None,
        pods=(pod_key(pod),),
    )
    phases = tuple(results)
    return Diagnosis(target=target, verdict=decide_verdict(target, phases), phases=phases)
