"""The seven-phase walk of a claim, a pod's claims and a whole snapshot (``scan``).

Each phase is one function in its own module under :mod:`dradiag.diagnosis.phases`,
each a PhaseResult from the Snapshot; the walk calls them in order.

A claim's life crosses seven boundaries (DESIGN §2). Each phase function reads only
what that boundary leaves behind (slices and the plugin pod, selectors, ``status.
allocation`` and scheduler evidence, kubelet events, container states, reservations)
plus the analyses that compute over them, and says ``ok``, ``broken``, ``warn``,
``unknown`` or ``not-reached``. :mod:`dradiag.diagnosis.verdict` then picks the first
broken phase.

Three rules shape every phase:

- *Never a false ok.* A phase that needs a kind the snapshot did not collect (events
  for a pod stuck in ContainerCreating, slices for publication) is ``unknown`` with a
  finding naming what is missing and why (the 403 from ``snapshot.errors``).
- *Evidence has a time.* An event or log line that matches a rule is a current symptom
  only while the boundary it describes is still uncrossed; once the pod runs, an old
  FailedPrepareDynamicResources is history and is shown as such (info), never as the cause.
- *Targeted.* Only the claim's own nodes, pools, pods and events are read through the
  Snapshot's indexes, so one claim in a 5,000-node snapshot costs what it costs in a
  five-node one (``bench/diagnose.py``).

The data-driven part (which event or log text means what) comes from the rulebook via
``dradiag.analyses.rule_matching``; what needs computation (CEL selection, allocation
simulation, pool validity, wiring, plugin health) comes from the analyses. Where one of
those is not available, the phase reports what direct evidence shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from dradiag.analyses import wiring
from dradiag.diagnosis.context import (
    ClaimWalk,
    WalkOptions,
    container_statuses,
    optional_rulebook,
    pod_all_running,
    pod_done,
    pod_key,
    pod_terminating,
)
from dradiag.diagnosis.lifecycle import with_basis
from dradiag.diagnosis.links import ClaimLinks, claim_links
from dradiag.diagnosis.model import Diagnosis, PhaseResult, Target
from dradiag.diagnosis.next_context import walk_context
from dradiag.diagnosis.next_steps import with_concrete_phases
from dradiag.diagnosis.node_evidence import with_node_evidence
from dradiag.diagnosis.nodes import diagnose_node, scan_nodes
from dradiag.diagnosis.phases.allocation import decompose_fit_error, phase_allocation
from dradiag.diagnosis.phases.injection import phase_injection
from dradiag.diagnosis.phases.prepare import phase_prepare
from dradiag.diagnosis.phases.publication import phase_publication
from dradiag.diagnosis.phases.selection import phase_selection
from dradiag.diagnosis.phases.unprepare import phase_unprepare
from dradiag.diagnosis.phases.workload import phase_workload
from dradiag.diagnosis.resolve import is_synthesized, pod_claim_names_for, resolve_pod_claims
from dradiag.diagnosis.rule_ids import CODE_RULE_IDS, NOT_COLLECTED, PHASE_CODE
from dradiag.diagnosis.scan_context import ScanContext
from dradiag.diagnosis.unresolved import diagnose_unresolved
from dradiag.diagnosis.verdict import CROSS_CLAIM_CAUSE_RULES, decide_verdict
from dradiag.errors import TargetUnreadable, UsageError
from dradiag.snapshot.model import (
    Coverage,
    K8sObject,
    Kind,
    Snapshot,
    allocated_devices,
    name_of,
    namespace_of,
    paused_gc,
)
from dradiag.vocabulary import PHASE_ORDER, PhaseStatus, Severity

logger = logging.getLogger(__name__)

__all__ = [
    # The walk itself.
    "diagnose_claim",
    "diagnose_pod",
    "scan",
    "unresolved_pod_claims",
    "walk_claim",
    # Re-exported from their own modules, where callers found them before the split.
    "CODE_RULE_IDS",
    "NOT_COLLECTED",
    "PHASE_CODE",
    "WalkOptions",
    "decompose_fit_error",
    "diagnose_node",
    "scan_nodes",
]


def _as_symptom(prepare: PhaseResult, unprepare: PhaseResult) -> PhaseResult:
    """Prepare's failure, once traced to another claim's unfinished release, as a symptom.

    DESIGN §2: the broken boundary is the other claim's unprepare; this claim's Prepare
    failure stays visible (as a warning pointing there) but is not a second break.
    """
    causes = [
        f
        for f in unprepare.findings
        if f.rule in CROSS_CLAIM_CAUSE_RULES and f.severity is Severity.ERROR
    ]
    if not causes or prepare.status is not PhaseStatus.BROKEN:
        return prepare
    culprit = dict(causes[0].identifiers).get("claim", "another claim")
    findings = tuple(
        replace(
            f,
            severity=Severity.WARNING,
            detail=f"Symptom of {culprit}'s unfinished Unprepare (see unprepare): {f.detail}",
        )
        if f.severity is Severity.ERROR
        else f
        for f in prepare.findings
    )
    return replace(prepare, status=PhaseStatus.WARN, findings=findings)


def _target(walk: ClaimWalk) -> Target:
    return Target(
        kind="ResourceClaim",
        namespace=namespace_of(walk.claim) or None,
        name=name_of(walk.claim),
        uid=walk.claim_uid or None,
        pods=tuple(pod_key(p) for p in walk.pods),
        synthesized=walk.synthesized,
        links=walk.links.described(),
    )


def walk_claim(
    snapshot: Snapshot,
    claim: K8sObject,
    *,
    options: WalkOptions | None = None,
    pods: Sequence[K8sObject] | None = None,
    shared: ScanContext | None = None,
) -> Diagnosis:
    """Diagnose one claim object (real or synthesized) through the seven phases.

    ``shared``: the scan's per-snapshot facts (its caches serve every walk of the scan).
    """
    synthesized = is_synthesized(claim)
    links = ClaimLinks() if synthesized else claim_links(snapshot, claim)
    if pods is not None:
        linked = {id(p) for p in pods}
        links.pods = [(p, "the pod's claim entry (template)") for p in pods] + [
            (p, via) for p, via in links.pods if id(p) not in linked
        ]
    walk = ClaimWalk(
        snapshot=snapshot,
        claim=claim,
        options=options or WalkOptions(),
        pods=links.pod_objects(),
        rulebook=shared.rulebook if shared is not None else optional_rulebook(),
        synthesized=synthesized,
        selection_cache=shared.selection_cache if shared is not None else None,
        links=links,
        shared=shared,
    )
    publication = phase_publication(walk)
    selection = phase_selection(walk)
    allocation = phase_allocation(walk, selection)
    prepare = phase_prepare(walk)
    injection = phase_injection(walk, prepare)
    workload = phase_workload(walk, injection)
    unprepare = phase_unprepare(walk, prepare)
    prepare, injection, unprepare = with_node_evidence(walk, prepare, injection, unprepare)
    prepare = _as_symptom(prepare, unprepare)
    phases = with_basis(
        walk, (publication, selection, allocation, prepare, injection, workload, unprepare)
    )
    assert tuple(p.phase for p in phases) == PHASE_ORDER
    memo = shared.next_steps if shared is not None else None
    phases = with_concrete_phases(phases, walk_context(walk, phases), memo)
    target = _target(walk)
    return Diagnosis(target=target, verdict=decide_verdict(target, phases), phases=phases)


def diagnose_claim(
    snapshot: Snapshot, namespace: str, name: str, *, options: WalkOptions | None = None
) -> Diagnosis:
    """Diagnose ResourceClaim ``namespace/name``; UsageError when it is not in the snapshot."""
    claim = snapshot.claim(namespace, name)
    if claim is None:
        where = snapshot.source.location or snapshot.source.kind
        refused = _refused_read(snapshot, "resourceclaims", namespace, name)
        if refused is not None:
            raise TargetUnreadable(
                f"ResourceClaim {namespace}/{name} could not be read ({refused}); "
                "it may exist: rerun with get on resourceclaims.resource.k8s.io"
            )
        coverage = snapshot.coverage[Kind.RESOURCE_CLAIM]
        hint = (
            f" (ResourceClaims were not collected: {coverage.reason})"
            if coverage.coverage is Coverage.UNKNOWN
            else ""
        )
        raise UsageError(f"ResourceClaim {namespace}/{name} not found in {where}{hint}")
    return walk_claim(snapshot, claim, options=options)


def _refused_read(snapshot: Snapshot, resource: str, namespace: str, name: str) -> str | None:
    """Why the read of ``resource`` ``namespace/name`` failed (a 403, a timeout), or None:
    the failed get of the object itself, or a failed list that would have held it."""
    for err in snapshot.errors:
        if err.resource != resource or (err.status is not None and err.status == 404):
            continue
        if err.name not in (None, "", name) or err.namespace not in (None, "", namespace):
            continue
        status = f" {err.status}" if err.status else ""
        return f"{err.verb}{status}: {err.reason}"
    return None


def diagnose_pod(
    snapshot: Snapshot, namespace: str, name: str, *, options: WalkOptions | None = None
) -> list[Diagnosis]:
    """One diagnosis per claim the pod uses (generated claims included, or synthesized)."""
    pod = snapshot.pod(namespace, name)
    if pod is None:
        where = snapshot.source.location or snapshot.source.kind
        raise UsageError(f"Pod {namespace}/{name} not found in {where}")
    out = []
    for pc in resolve_pod_claims(snapshot, pod):
        if pc.claim is None:
            continue
        pods = [pod] if pc.synthesized else None
        out.append(walk_claim(snapshot, pc.claim, options=options, pods=pods))
    if (unresolved := diagnose_unresolved(snapshot, pod)) is not None:
        out.append(unresolved)
    return out


def unresolved_pod_claims(snapshot: Snapshot, namespace: str, name: str) -> list[str]:
    """Notes about the pod's claim entries that resolve to no claim object at all."""
    pod = snapshot.pod(namespace, name)
    if pod is None:
        return []
    return [
        (
            f"pod claim {pc.pod_claim_name!r}: {pc.note or pc.resolution.value}"
            if pc.pod_claim_name
            else f"extended-resource claim: {pc.note or pc.resolution.value}"
        )
        for pc in resolve_pod_claims(snapshot, pod)
        if pc.claim is None
    ]


def _quick_healthy(
    snapshot: Snapshot,
    claim: K8sObject,
    doubly_published: frozenset[tuple[str, str, str]],
    *,
    component_logs: bool,
) -> bool:
    """A cheap, conservative test that a claim needs no walk: allocated, reserved, not
    being deleted, holding no device the driver published twice, and every consumer pod
    running all containers with one listing it.

    Logs are evidence the objects do not show (a container that runs but sees every GPU
    of its node, a plugin log line about the claim): when the snapshot holds component
    logs, or a consumer pod's own logs, the claim is walked."""
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if component_logs:
        return False
    if doubly_published and any(
        (str(r.get("driver")), str(r.get("pool")), str(r.get("device"))) in doubly_published
        for r in allocated_devices(claim)
    ):
        return False
    status = claim.get("status") or {}
    if not status.get("allocation") or not status.get("reservedFor"):
        return False
    pods = snapshot.pods_for_claim(claim)
    reserved = wiring.reserved_pod_uids(claim)
    if not pods or len(pods) < len(reserved):
        return False
    for pod in pods:
        if pod_terminating(pod) or not pod_all_running(pod) or pod_done(pod):
            return False
        if not wiring.is_reserved_for(claim, pod):
            return False
        if snapshot.logs_for(namespace_of(pod), name_of(pod)):
            return False
        names = pod_claim_names_for(snapshot, pod, claim)
        # Any wiring finding (not wired, or a request name the claim lacks) needs the walk.
        if wiring.wiring_findings(wiring.analyze_pod_wiring(pod, claim, names), claim):
            return False
        if any(int(cs.get("restartCount") or 0) for cs in container_statuses(pod)):
            return False
    return True


def _scan_sort_key(d: Diagnosis) -> tuple[int, int, str, str, str]:
    phase_index = PHASE_ORDER.index(d.verdict.phase) if d.verdict.phase else len(PHASE_ORDER)
    kind_rank = 0 if d.target.kind == "Node" else 1
    return (phase_index, kind_rank, d.target.namespace or "", d.target.name, d.target.kind)


def scan(
    snapshot: Snapshot,
    *,
    namespace: str | None = None,
    options: WalkOptions | None = None,
    include_nodes: bool = True,
) -> list[Diagnosis]:
    """Every claim (or pod whose claim is not created yet) that is not healthy, plus
    node-level publication problems, sorted by phase.

    The cyclic collector is paused while the walks run (``paused_gc``): they build
    hundreds of thousands of small acyclic objects that live until the rows are written,
    and every collection of the oldest generation would walk all of those made so far.
    """
    with paused_gc():
        return _scan(snapshot, namespace=namespace, options=options, include_nodes=include_nodes)


def _scan(
    snapshot: Snapshot,
    *,
    namespace: str | None,
    options: WalkOptions | None,
    include_nodes: bool,
) -> list[Diagnosis]:
    from dradiag.diagnosis.model import VerdictStatus

    base = options or WalkOptions()
    options = WalkOptions(now=base.now, stuck_after=base.stuck_after, simulate=base.simulate)
    shared = ScanContext.of(snapshot, optional_rulebook())
    component_logs = bool(snapshot.component_logs())
    out: list[Diagnosis] = []
    for claim in snapshot.claims:
        if namespace is not None and namespace_of(claim) != namespace:
            continue
        if _quick_healthy(
            snapshot, claim, shared.doubly_published(), component_logs=component_logs
        ):
            continue
        diagnosis = walk_claim(snapshot, claim, options=options, shared=shared)
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    for pod in snapshot.pods:
        if namespace is not None and namespace_of(pod) != namespace:
            continue
        if not (pod.get("spec") or {}).get("resourceClaims") or pod_done(pod):
            continue
        resolved = resolve_pod_claims(snapshot, pod)
        if (unresolved := diagnose_unresolved(snapshot, pod, resolved)) is not None:
            if unresolved.verdict.status is not VerdictStatus.OK:
                out.append(unresolved)
        for pc in resolved:
            if pc.synthesized and pc.claim is not None:
                diagnosis = walk_claim(
                    snapshot, pc.claim, options=options, pods=[pod], shared=shared
                )
                if diagnosis.verdict.status is not VerdictStatus.OK:
                    out.append(diagnosis)
    if include_nodes:
        out += scan_nodes(snapshot, options=options, shared=shared)
    return sorted(out, key=_scan_sort_key)
