"""A pod the device taint eviction controller deleted: its allocated device carries a NoExecute
taint that the claim's allocation does not tolerate.

The controller (kube-controller-manager, ``DRADeviceTaints``) reads only the claim's
``status.allocation``: a device of it tainted ``NoExecute`` whose allocation result records no
toleration for the taint evicts every pod using the claim. It marks the pod with the
``DisruptionTarget`` condition, reason ``DeletionByDeviceTaintManager``, and records a
``DeviceTaintManagerEviction`` event (k8s-dra-semantics §3.11). The claim's allocation is what
is wrong, so this is an allocation break, with two causes told apart by the claim itself:

- the request tolerates the taint but its allocation result does not say so: kube-scheduler
  before 1.35.0 did not copy request tolerations into the result
  (kubernetes/kubernetes#134434, fixed by #134479);
- nothing tolerates it: the device was tainted after allocation (a health taint such as
  ``gpu.nvidia.com/xid``, or a DeviceTaintRule), and the eviction is the taint's purpose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dradiag.analyses.allocation.candidates import device_taints
from dradiag.analyses.allocation.taints import tolerates
from dradiag.diagnosis.context import ClaimWalk, pod_condition, pod_key
from dradiag.diagnosis.rule_ids import ALLOC_TAINT_EVICTED
from dradiag.snapshot.model import K8sObject, Kind, name_of, namespace_of
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

EVICTION_REASON = "DeletionByDeviceTaintManager"
"""The ``DisruptionTarget`` condition reason the device taint eviction controller sets."""

EVICTION_EVENT = "DeviceTaintManagerEviction"
"""The reason of the event it records on the pod."""

SCHEDULER_FIX = "1.35.0"
"""kube-scheduler copies request tolerations into the allocation result from here on
(kubernetes/kubernetes#134479)."""


def _eviction_evidence(walk: ClaimWalk, pod: K8sObject) -> list[Evidence]:
    out: list[Evidence] = []
    cond = pod_condition(pod, "DisruptionTarget")
    if cond is not None and cond.get("status") == "True" and cond.get("reason") == EVICTION_REASON:
        out.append(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Pod {pod_key(pod)} .status.conditions[type=DisruptionTarget]",
                excerpt=f"{EVICTION_REASON}: {cond.get('message') or ''}".strip(),
            )
        )
    for event in walk.pod_events(pod):
        if event.get("reason") == EVICTION_EVENT:
            out.append(
                Evidence(
                    source=EvidenceSource.EVENT,
                    ref=f"Event {namespace_of(event)}/{name_of(event)} on Pod {pod_key(pod)}",
                    excerpt=f"{event.get('type') or 'Normal'} {EVICTION_EVENT}: "
                    f"{event.get('message') or ''}".strip(),
                )
            )
            break
    return out


def _request_tolerations(claim: K8sObject, request: str) -> list[Mapping[str, Any]]:
    """The tolerations of the claim's request (or firstAvailable subrequest) ``request``."""
    top, _, sub = request.partition("/")
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        if not isinstance(req, Mapping) or req.get("name") != top:
            continue
        if sub:
            for option in req.get("firstAvailable") or ():
                if isinstance(option, Mapping) and option.get("name") == sub:
                    return [t for t in option.get("tolerations") or () if isinstance(t, Mapping)]
            return []
        exactly = req.get("exactly") or {}
        return [t for t in exactly.get("tolerations") or () if isinstance(t, Mapping)]
    return []


def _noexecute_taints(walk: ClaimWalk, result: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The NoExecute taints of the result's device, or None when its slice was not read."""
    driver, pool, device = (str(result.get(k) or "") for k in ("driver", "pool", "device"))
    rules = walk.snapshot.taint_rules if walk.collected(Kind.DEVICE_TAINT_RULE) else ()
    for slc in walk.snapshot.pool_slices(driver, pool):
        for dev in (slc.get("spec") or {}).get("devices") or ():
            if isinstance(dev, Mapping) and dev.get("name") == device:
                return [t for t in device_taints(slc, dev, rules) if t.get("effect") == "NoExecute"]
    return None


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint.get('value')}" if taint.get("value") else ""
    rule = f" (DeviceTaintRule {taint.get('_rule')})" if taint.get("_rule") else ""
    added = f", added {taint.get('timeAdded')}" if taint.get("timeAdded") else ""
    return f"{taint.get('key')}{value}:NoExecute{rule}{added}"


def taint_eviction_findings(walk: ClaimWalk) -> list[Finding]:
    """One error per pod of the claim that the device taint eviction controller deleted."""
    evicted = [(pod, ev) for pod in walk.pods if (ev := _eviction_evidence(walk, pod))]
    if not evicted:
        return []
    results = [
        r
        for r in ((walk.allocation or {}).get("devices") or {}).get("results") or ()
        if isinstance(r, Mapping)
    ]
    tolerated_by_request: list[str] = []
    untolerated: list[str] = []
    unknown = False
    for result in results:
        taints = _noexecute_taints(walk, result)
        if taints is None:
            unknown = True
            continue
        recorded = [t for t in result.get("tolerations") or () if isinstance(t, Mapping)]
        requested = _request_tolerations(walk.claim, str(result.get("request") or ""))
        for taint in taints:
            if any(tolerates(t, taint) for t in recorded):
                continue
            where = f"device {result.get('device')} ({_taint_text(taint)})"
            if any(tolerates(t, taint) for t in requested):
                tolerated_by_request.append(f"request {result.get('request')} on {where}")
            else:
                untolerated.append(where)
    return [
        _finding(walk, pod, ev, tolerated_by_request, untolerated, unknown) for pod, ev in evicted
    ]


def _finding(
    walk: ClaimWalk,
    pod: K8sObject,
    evidence: Sequence[Evidence],
    tolerated_by_request: Sequence[str],
    untolerated: Sequence[str],
    unknown: bool,
) -> Finding:
    lead = (
        f"The device taint eviction controller is deleting pod {pod_key(pod)}, which uses "
        f"ResourceClaim {walk.claim_key}: a device allocated to the claim carries a NoExecute "
        "taint that the claim's allocation does not tolerate (the controller reads only "
        "status.allocation)."
    )
    if tolerated_by_request:
        detail = (
            f"{lead} The claim's request tolerates it ({'; '.join(tolerated_by_request[:3])}), "
            "but the allocation result records no toleration: kube-scheduler before "
            f"{SCHEDULER_FIX} did not copy a request's tolerations into the allocation, so a "
            "tolerated NoExecute taint still evicts the pod right after it is scheduled "
            "(kubernetes/kubernetes#134434, fixed in 1.35.0)."
        )
        next_steps: tuple[str, ...] = (
            "kubectl get pods -n kube-system -l component=kube-scheduler "
            "-o jsonpath='{.items[*].spec.containers[*].image}'  (below v1.35.0 it drops the "
            "toleration)",
            f"kubectl get resourceclaim -n {namespace_of(walk.claim)} {name_of(walk.claim)} "
            "-o jsonpath='{.status.allocation.devices.results[*].tolerations}'",
            "remediation: upgrade the control plane to 1.35.0 or later, or remove the NoExecute "
            "taint (its DeviceTaintRule) while the pod must run",
        )
    elif untolerated:
        detail = (
            f"{lead} Nothing tolerates {'; '.join(untolerated[:3])}: the device was tainted "
            "after the claim was allocated (a device health taint or a DeviceTaintRule), and "
            "evicting its users is what a NoExecute taint is for. The claim stays allocated "
            "to the tainted device until it is deleted and allocated again."
        )
        next_steps = (
            "kubectl get resourceslices -o jsonpath='{range .items[*].spec.devices[*]}"
            '{.name}{"\\t"}{.taints}{"\\n"}{end}\'  (the taint and who added it)',
            "kubectl get devicetaintrules",
            "remediation: remove the taint once the device is healthy, or recreate the claim "
            "so the scheduler allocates an untainted device",
        )
    else:
        why = (
            "the device's ResourceSlice or the DeviceTaintRules were not read, so which taint "
            "it is cannot be told"
            if unknown or not walk.collected(Kind.RESOURCE_SLICE)
            else "no NoExecute taint is on the allocated devices now (removed since, or set by "
            "a DeviceTaintRule not in the input)"
        )
        detail = f"{lead} {why[0].upper()}{why[1:]}."
        next_steps = (
            "kubectl get resourceslices -o jsonpath='{range .items[*].spec.devices[*]}"
            '{.name}{"\\t"}{.taints}{"\\n"}{end}\'',
            "kubectl get devicetaintrules",
        )
    return Finding(
        rule=ALLOC_TAINT_EVICTED,
        phase=Phase.ALLOCATION,
        severity=Severity.ERROR,
        title="a NoExecute taint on the allocated device evicts the pod",
        detail=detail,
        evidence=tuple(evidence),
        next=next_steps,
        identifiers=(("pod", pod_key(pod)), ("claim UID", walk.claim_uid)),
    )
