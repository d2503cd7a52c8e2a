"""Phase 3, allocation: the scheduler allocates and reserves the claim."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from dradiag.analyses import wiring
from dradiag.analyses.error_chain import clip_middle
from dradiag.analyses.timeline import (
    age,
    format_age,
    parse_time,
)
from dradiag.diagnosis import placement
from dradiag.diagnosis.context import (
    ClaimWalk,
    RuleHit,
    claim_devices,
    pod_condition,
    pod_done,
    pod_key,
    pod_status_of,
    pod_terminating,
)
from dradiag.diagnosis.findings import as_historical, event_evidence, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.phases.taint_eviction import taint_eviction_findings
from dradiag.diagnosis.rule_ids import (
    ALLOC_ALLOCATION_IN_FLIGHT,
    ALLOC_BOUND_UNALLOCATED,
    ALLOC_CLAIM_NOT_CREATED,
    ALLOC_NO_CONSUMER,
    ALLOC_NODE_AFFINITY,
    ALLOC_PENDING_SILENT,
    ALLOC_UNSCHEDULABLE,
)
from dradiag.snapshot.model import (
    K8sObject,
    Kind,
    name_of,
    namespace_of,
    uid_of,
)
from dradiag.vocabulary import (
    Basis,
    Evidence,
    EvidenceSource,
    Finding,
    Phase,
    PhaseStatus,
    Severity,
)

_NODES_AVAILABLE = re.compile(r"0/(?P<total>\d+) nodes are available:(?P<rest>.*)", re.S)


def decompose_fit_error(message: str) -> list[tuple[int, str]]:
    """``0/N nodes are available: 3 reason a, 2 reason b.`` → [(3, "reason a"), ...].

    The scheduler's FitError lists per-node reasons sorted, comma-separated, after an
    optional PreFilter message (k8s-dra-semantics §5.1); only the counted parts are kept.
    """
    m = _NODES_AVAILABLE.search(message)
    if not m:
        return []
    head = m.group("rest").split(" preemption:", 1)[0]
    out = []
    for part in re.split(r"[,.]\s+", head):
        part = part.strip().rstrip(".")
        count, _, reason = part.partition(" ")
        if count.isdigit() and reason:
            out.append((int(count), reason.strip()))
    return out


def _allocation_simulation(walk: ClaimWalk) -> tuple[list[Finding], list[str]] | None:
    """The simulator's findings for the claim, and the nodes where it fits now."""
    from dradiag.analyses.allocation import explain_across_nodes

    explanation = explain_across_nodes(walk.snapshot, [walk.claim])
    return list(explanation.findings()), list(explanation.fitting_nodes)


_AFFINITY_MISMATCH = "didn't match Pod's node affinity/selector"


def _node_affinity_findings(
    walk: ClaimWalk, pods: Sequence[K8sObject], fits: Sequence[str]
) -> list[Finding]:
    """Pods whose node selector or required affinity excludes every node where the claim fits.

    The scheduler filters nodes by the pod's placement before the allocator looks at them
    (k8s-dra-semantics §5.1), so devices free only on excluded nodes do not count. Decided
    only when every fitting node's Node object is readable (its labels prove exclusion).
    """
    if not fits or not walk.collected(Kind.NODE):
        return []
    nodes = {n: walk.snapshot.node(n) for n in fits}
    if any(obj is None for obj in nodes.values()):
        return []
    out = []
    for pod in pods:
        if not placement.has_node_selection(pod):
            continue
        why = {n: placement.placement_mismatch(pod, obj) for n, obj in nodes.items() if obj}
        if not all(why.values()):
            continue
        shown = sorted(why)[:5]
        evidence = [
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Pod {pod_key(pod)} .spec.nodeSelector/.spec.affinity",
                excerpt=placement.describe_selection(pod),
            ),
            *(
                Evidence(
                    source=EvidenceSource.OBJECT,
                    ref=f"Node {n} .metadata.labels",
                    excerpt=f"excluded: {why[n]}",
                )
                for n in shown
            ),
        ]
        events = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedScheduling"]
        if events and _AFFINITY_MISMATCH in str(events[-1].get("message") or ""):
            evidence.append(event_evidence(events[-1]))
        where = ", ".join(shown) + (f" (+{len(fits) - len(shown)} more)" if len(fits) > 5 else "")
        out.append(
            Finding(
                rule=ALLOC_NODE_AFFINITY,
                phase=Phase.ALLOCATION,
                severity=Severity.ERROR,
                title="the nodes that have matching devices are excluded by the pod's placement",
                detail=f"The allocator finds devices for ResourceClaim {walk.claim_key} only on "
                f"{where}, but pod {pod_key(pod)} may not run there: "
                + "; ".join(f"{n}: {why[n]}" for n in shown)
                + ". The scheduler filters those nodes out before it allocates devices, so the "
                "claim stays unallocated however many devices are free.",
                evidence=tuple(evidence),
                next=(
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.spec.nodeSelector} {.spec.affinity.nodeAffinity}'",
                    f"kubectl get node {shown[0]} --show-labels",
                ),
                identifiers=(("pod", pod_key(pod)), *(("node", n) for n in shown)),
            )
        )
    return out


def phase_allocation(walk: ClaimWalk, selection: PhaseResult | None = None) -> PhaseResult:
    """``status.allocation`` and the reservation for each pod, or why the scheduler failed."""
    phase = Phase.ALLOCATION
    findings: list[Finding] = []
    hits = walk.hits_for(phase)
    if walk.allocation is not None:
        for pod in walk.bound_pods():
            if pod_done(pod) or pod_terminating(pod):
                continue
            if (f := wiring.reservation_finding(walk.claim, pod)) is not None:
                findings.append(f)
        findings += [as_historical(h.finding, "the claim is now allocated") for h in hits]
        findings += taint_eviction_findings(walk)
        devices = claim_devices(walk.claim)
        summary = "allocated " + ", ".join(f"{pool}/{dev}" for _r, _d, pool, dev in devices)
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)
    if walk.synthesized:
        return phase_result(
            walk.rulebook, phase, not_created_findings(walk), PhaseStatus.NOT_REACHED
        )
    if not walk.status_known:
        # The claim came without its status (a manifest, a pasted spec): its allocation is
        # unknown, not absent. Later evidence may prove it; the scheduler's evidence on a
        # pending pod still decides below.
        walk.unknown_reason[phase] = (
            f"ResourceClaim {walk.claim_key} was given without .status, so its allocation "
            "is not known"
        )
        proof = walk.allocation_proof()
        if proof:
            findings += [
                as_historical(h.finding, "later evidence shows it allocated") for h in hits
            ]
            return replace(
                phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, "allocated"),
                basis=Basis.INFERRED,
                basis_detail=proof + "; the claim's .status was not given",
            )
    if not walk.pods:
        if not walk.collected(Kind.POD):
            return phase_result(
                walk.rulebook,
                phase,
                [walk.not_collected(phase, [Kind.POD], "Allocation happens for a pod")],
                PhaseStatus.UNKNOWN,
            )
        findings.append(
            Finding(
                rule=ALLOC_NO_CONSUMER,
                phase=phase,
                severity=Severity.INFO,
                title="no pod uses the claim yet",
                detail=f"ResourceClaim {walk.claim_key} is not allocated and no pod references "
                "it: the scheduler allocates a claim only while scheduling a pod that uses it.",
                next=(
                    f"kubectl get pods -n {namespace_of(walk.claim)} -o json | jq '.items[] | "
                    f'select(.spec.resourceClaims[]?.resourceClaimName=="{name_of(walk.claim)}")'
                    " | .metadata.name'",
                ),
            )
        )
        return phase_result(
            walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "no consumer pod"
        )
    for pod in walk.bound_pods() if walk.status_known else ():
        if pod_done(pod):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        findings.append(
            Finding(
                rule=ALLOC_BOUND_UNALLOCATED,
                phase=phase,
                severity=Severity.ERROR,
                title="the pod is bound to a node but its claim is not allocated",
                detail=f"Pod {pod_key(pod)} is bound to node {node} while ResourceClaim "
                f"{walk.claim_key} has no status.allocation and its status.reservedFor does not "
                "list the pod: nothing allocated or reserved the claim for it, so the kubelet "
                "refuses to prepare it ('not allowed to use' / 'not allocated'). This happens "
                "when the pod bypassed the scheduler (spec.nodeName set directly) or the "
                "scheduler's DynamicResources plugin was off when it was bound.",
                cause=f"ResourceClaim {walk.claim_key} is not allocated or reserved for pod "
                f"{pod_key(pod)}",
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"ResourceClaim {walk.claim_key} .status.allocation",
                        excerpt="absent",
                    ),
                ),
                next=(
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.spec.schedulerName} {.spec.nodeName}'",
                ),
                identifiers=(("pod UID", uid_of(pod)), ("claim UID", walk.claim_uid)),
            )
        )
    pending = [
        p for p in walk.pods if not (p.get("spec") or {}).get("nodeName") and not pod_done(p)
    ]
    findings += [_persisting_in_flight(walk, h) for h in hits]
    matched_pods = {id(h.pod) for h in hits if h.pod is not None}
    saw_evidence = bool(hits)
    for pod in pending:
        cond = pod_condition(pod, "PodScheduled")
        message = str((cond or {}).get("message") or "")
        events = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedScheduling"]
        if cond is not None and cond.get("status") == "False" and message:
            saw_evidence = True
        if events:
            saw_evidence = True
            message = message or str(events[-1].get("message") or "")
        if id(pod) in matched_pods or not message:
            continue
        parts = decompose_fit_error(message)
        breakdown = "; ".join(f"{n} node(s): {r}" for n, r in parts)
        evidence = [
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Pod {pod_key(pod)} .status.conditions[PodScheduled]",
                excerpt=f"{(cond or {}).get('reason') or ''}: {clip_middle(message, 600)}",
            )
        ]
        if events:
            evidence.append(event_evidence(events[-1]))
        findings.append(
            Finding(
                rule=ALLOC_UNSCHEDULABLE,
                phase=phase,
                severity=Severity.ERROR,
                title="the scheduler cannot place the pod with its claim",
                detail=f"Pod {pod_key(pod)} is unschedulable and ResourceClaim "
                f"{walk.claim_key} is not allocated."
                + (
                    f" Per node: {breakdown}."
                    if breakdown
                    else f" Scheduler: {clip_middle(message, 300)}"
                ),
                evidence=tuple(evidence),
                next=(
                    f"dradiag simulate --node <node> --claim {walk.claim_key}  (the allocator explained)",
                    f"kubectl get events -n {namespace_of(pod)} --field-selector "
                    f"involvedObject.name={name_of(pod)},reason=FailedScheduling",
                ),
                identifiers=(("pod", pod_key(pod)),),
            )
        )
    # The simulator explains an allocation failure; when selection already broke (nothing
    # matches), the verdict is decided earlier and the simulation would only repeat it. When
    # selection is unknown (classes or slices not collected), the simulator would read the
    # missing objects as absent ("could not retrieve device class"): it does not run either.
    selection_undecided = selection is not None and selection.status in (
        PhaseStatus.BROKEN,
        PhaseStatus.UNKNOWN,
    )
    # ``claim`` and ``scan`` take this same path (one verdict per claim); a scan shares one
    # simulation among the claims with the same spec (ScanContext.simulation).
    simulated_rules: set[str] = set()
    if walk.options.simulate and pending and not selection_undecided:
        simulated = (
            walk.shared.simulation(walk.claim, lambda: _allocation_simulation(walk))
            if walk.shared is not None
            else _allocation_simulation(walk)
        )
        if simulated is not None:
            findings += simulated[0]
            simulated_rules = {f.rule for f in simulated[0]}
            findings += _node_affinity_findings(walk, pending, simulated[1])
    findings = [_with_reach(walk, f, pending) for f in findings]
    # Counts and constraints the selection analysis found unsatisfiable by any matching
    # devices (the simulator, when it ran, says the same with availability taken in).
    findings += [f for f in walk.for_allocation if f.rule not in simulated_rules]
    if any(f.severity is Severity.ERROR for f in findings):
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK)
    if not saw_evidence and pending:
        if not walk.collected(Kind.EVENT):
            findings.append(
                walk.not_collected(
                    phase,
                    [Kind.EVENT],
                    "The pod is pending and its scheduling failure is reported in events",
                )
            )
            return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
        oldest = min(
            (parse_time((p.get("metadata") or {}).get("creationTimestamp")) for p in pending),
            key=lambda t: t or datetime.max.replace(tzinfo=None),
            default=None,
        )
        stuck = walk.older_than_threshold(oldest)
        if stuck:
            findings.append(
                Finding(
                    rule=ALLOC_PENDING_SILENT,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the pod has been pending without any scheduler verdict",
                    detail=f"Pod {pod_key(pending[0])} has been pending for "
                    f"{format_age(age(oldest, walk.now) or timedelta())} with no FailedScheduling "
                    "event and no PodScheduled condition. The scheduler's PreEnqueue check "
                    "(claim missing, being deleted, or not owned by the pod) rejects silently.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pending[0])} .status",
                            excerpt=f"phase: {pod_status_of(pending[0]).get('phase') or 'Pending'}; "
                            "no PodScheduled condition",
                        ),
                    ),
                    next=(
                        f"kubectl get pod -n {namespace_of(pending[0])} {name_of(pending[0])} "
                        "-o jsonpath='{.spec.schedulerName}'",
                        f"kubectl get resourceclaim -n {namespace_of(walk.claim)} {name_of(walk.claim)} "
                        "-o jsonpath='{.metadata.deletionTimestamp} {.metadata.ownerReferences}'",
                    ),
                )
            )
            return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK)
        return phase_result(
            walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "waiting for the scheduler"
        )
    base = PhaseStatus.NOT_REACHED if not pending else PhaseStatus.WARN
    if not walk.status_known:
        base = PhaseStatus.UNKNOWN
    return phase_result(walk.rulebook, phase, findings, base)


_NONE_ON_NODE = "0 device(s) on the node"


def _with_reach(walk: ClaimWalk, finding: Finding, pods: Sequence[K8sObject]) -> Finding:
    """ "No device on the node", explained by the slices that do not reach it.

    A slice offers its devices to a node by ``nodeName``, ``allNodes`` or a
    ``nodeSelector`` (k8s-dra-semantics §3.2); when none of the driver's slices reaches the
    pod's candidate node, the cause is that selector and the node's labels.
    """
    if finding.rule != "DRA-ALLOC-TOO-FEW-DEVICES" or _NONE_ON_NODE not in finding.detail:
        return finding
    names = sorted(
        {str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}
        | {name_of(n) for n in walk.snapshot.nodes}
    )[:5]
    drivers = set(walk.drivers())
    reasons: list[str] = []
    for slc in walk.snapshot.slices:
        spec = slc.get("spec") or {}
        selector = spec.get("nodeSelector")
        if spec.get("driver") not in drivers or not isinstance(selector, Mapping):
            continue
        for node_name in names:
            node = walk.snapshot.node(node_name)
            if node is None or placement.selector_admits(selector, node):
                continue
            labels = (node.get("metadata") or {}).get("labels") or {}
            keys = {
                str(r.get("key"))
                for t in selector.get("nodeSelectorTerms") or ()
                if isinstance(t, Mapping)
                for r in t.get("matchExpressions") or ()
                if isinstance(r, Mapping)
            }
            has = ", ".join(f"{k}={labels.get(k, '(absent)')}" for k in sorted(keys)) or "no label"
            reasons.append(
                f"slice {name_of(slc)} (pool {(spec.get('pool') or {}).get('name')}) offers its "
                f"devices only to nodes with {placement.describe_selector(selector)}; node "
                f"{node_name} has {has}"
            )
    if not reasons:
        return finding
    return replace(finding, cause="; ".join(reasons[:3]))


def not_created_findings(walk: ClaimWalk) -> list[Finding]:
    """The generated claim does not exist yet (template claim, k8s-dra-semantics §6)."""
    pods = walk.pods
    pod = pods[0] if pods else None
    if pod is None:
        return []
    findings: list[Finding] = []
    ev = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedResourceClaimCreation"]
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    stuck = walk.older_than_threshold(created)
    template = ((walk.claim.get("metadata") or {}).get("annotations") or {}).get(
        "dradiag.io/synthesized-from-template", ""
    )
    if ev or stuck:
        findings.append(
            Finding(
                rule=ALLOC_CLAIM_NOT_CREATED,
                phase=Phase.ALLOCATION,
                severity=Severity.ERROR,
                title="the pod's generated ResourceClaim was never created",
                detail=f"Pod {pod_key(pod)} uses template {namespace_of(pod)}/{template}, "
                "but no ResourceClaim was generated for it"
                + (f" after {format_age(age(created, walk.now) or timedelta())}" if stuck else "")
                + "; the scheduler waits silently ('ResourceClaim not created yet'). "
                "The diagnosis reads the template's spec instead.",
                evidence=tuple(event_evidence(e) for e in ev[-2:])
                or (
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pod {pod_key(pod)} .status.resourceClaimStatuses",
                        excerpt="no entry for the pod claim",
                    ),
                ),
                next=(
                    f"kubectl get events -n {namespace_of(pod)} --field-selector "
                    f"involvedObject.name={name_of(pod)},reason=FailedResourceClaimCreation",
                    "kubectl logs -n kube-system -l component=kube-controller-manager | grep -i "
                    "resourceclaim",
                ),
                identifiers=(("pod UID", uid_of(pod)),),
            )
        )
    return findings


IN_FLIGHT_LOOP_COUNT = 100
"""Retries of "is in the process of being allocated" past which it is a loop, whatever
the span: the scheduler writes an allocation in flight within seconds (PreBind)."""


def _persisting_in_flight(walk: ClaimWalk, hit: RuleHit) -> Finding:
    """``hit``'s finding; an allocation "in flight" that has lasted is an error, not news.

    The message is transient by nature: pods sharing a claim wait while the first one's
    allocation is written. Repeated for longer than the walk's stuck-after (or more than
    :data:`IN_FLIGHT_LOOP_COUNT` times) it is a scheduler that never finishes that
    allocation; when the pods sharing the claim are scheduled as one gang (``workloadRef``)
    that is kubernetes/kubernetes#137617 (PreFilter rejects the gang's later pods while
    the first one's allocation is pending, and the gang never binds).
    """
    finding = hit.finding
    if finding.rule != ALLOC_ALLOCATION_IN_FLIGHT:
        return finding
    first, last = parse_time(hit.first_seen), parse_time(hit.last_seen)
    span = last - first if first is not None and last is not None else None
    if hit.count < IN_FLIGHT_LOOP_COUNT and (span is None or span < walk.options.stuck_after):
        return finding
    lasted = f"for {format_age(span)} " if span is not None and span.total_seconds() > 0 else ""
    gang = sorted(
        {
            str(ref.get("name"))
            for pod in walk.pods
            if isinstance(ref := (pod.get("spec") or {}).get("workloadRef"), Mapping)
            and ref.get("name")
        }
    )
    why = (
        f"The pods sharing the claim are scheduled as one gang (Workload {', '.join(gang)}): "
        "kube-scheduler rejects the gang's later pods while the first one's allocation of the "
        "shared claim is pending, so the gang never binds and the allocation never completes "
        "(kubernetes/kubernetes#137617). Give each pod of the gang its own claim (a template), "
        "or run a kube-scheduler with the fix."
        if gang
        else "The scheduler never finishes writing that allocation: look for a kube-scheduler "
        "stuck in PreBind or failing to update the claim."
    )
    return replace(
        finding,
        severity=Severity.ERROR,
        title="the claim's allocation has been in flight for too long",
        detail=f"{finding.detail} It has repeated {lasted}({hit.count} times): an allocation in "
        f"flight is written within seconds, so this one is stuck. {why}",
        cause="an allocation in flight that never completes"
        + (" (gang scheduling of pods sharing one claim)" if gang else ""),
        next=(
            *finding.next,
            *(
                (
                    f"kubectl get workloads.scheduling.k8s.io -n {namespace_of(walk.claim)} {gang[0]} -o yaml",
                )
                if gang
                else ()
            ),
            "kubectl logs -n kube-system -l component=kube-scheduler --tail=200 | grep -i "
            f"{name_of(walk.claim)}",
        ),
    )
