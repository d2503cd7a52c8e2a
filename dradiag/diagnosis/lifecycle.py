"""What later evidence proves about earlier boundaries, and each phase's basis (DESIGN §2).

A claim crosses its boundaries in order, so evidence that it reached one stage proves
every earlier boundary was crossed for it: ``status.allocation`` or a reservation proves
publication and selection at allocation time; a kubelet prepare attempt for the claim
proves allocation (the kubelet prepares only an allocated claim); a started container
that lists the claim proves prepare and injection. Real evidence is partial (a claim, a
pod, one event), so a phase whose own objects are missing is still settled when a later
stage proves it — ``ok``, basis ``inferred``, naming the proof — instead of ``unknown``.
The same claim then gets the same verdict whether a kind was missing offline or listed
empty live.

Inference never overrides what a boundary's own evidence shows: a broken phase stays
broken, and only ``unknown`` phases are settled by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from dradiag.diagnosis.context import (
    ClaimWalk,
    container_statuses,
    containers_given_devices,
    pod_key,
    pod_started,
)
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import NOT_COLLECTED
from dradiag.snapshot.model import name_of, namespace_of
from dradiag.vocabulary import PHASE_ORDER, Basis, Phase, PhaseStatus, Severity

_NOT_PREPARE_ATTEMPT = ("not allocated", "not reserved", "is not allowed to use", "not found")
"""Kubelet prepare errors raised *before* it calls the driver because the claim is not
allocated or reserved for the pod: they do not prove an allocation."""


@dataclass(frozen=True, slots=True)
class Crossing:
    """Evidence that the claim crossed ``phase`` (and so every boundary before it)."""

    phase: Phase
    ref: str


def crossings(walk: ClaimWalk) -> dict[Phase, Crossing]:
    """For each boundary the claim provably crossed, the strongest evidence of it."""
    found: list[Crossing] = []
    key = walk.claim_key
    if walk.allocation is not None:
        found.append(Crossing(Phase.ALLOCATION, f"ResourceClaim {key} .status.allocation"))
    status = walk.claim.get("status")
    if isinstance(status, dict) and status.get("reservedFor"):
        found.append(Crossing(Phase.ALLOCATION, f"ResourceClaim {key} .status.reservedFor"))
    for pod in walk.bound_pods():
        if not pod_started(pod):
            continue
        users = containers_given_devices(walk, pod)
        running = [
            str(cs.get("name"))
            for cs in container_statuses(pod)
            if str(cs.get("name")) in users
            and any(s in (cs.get("state") or {}) for s in ("running", "terminated"))
        ]
        if running:
            found.append(
                Crossing(
                    Phase.INJECTION,
                    f"container {running[0]} of Pod {pod_key(pod)}, which lists the claim, started",
                )
            )
        found.append(
            Crossing(
                Phase.PREPARE,
                f"Pod {pod_key(pod)} started on node {(pod.get('spec') or {}).get('nodeName')} "
                "(the kubelet creates the sandbox only after Prepare)",
            )
        )
    attempt = prepare_attempt(walk)
    if attempt:
        found.append(Crossing(Phase.ALLOCATION, attempt))
    out: dict[Phase, Crossing] = {}
    for crossing in found:
        for phase in PHASE_ORDER[: PHASE_ORDER.index(crossing.phase) + 1]:
            out.setdefault(phase, crossing)
    return out


def prepare_attempt(walk: ClaimWalk) -> str:
    """A reference to evidence that the kubelet tried to prepare this claim, or "".

    A FailedPrepareDynamicResources event on one of the claim's pods, or one whose message
    names the claim, or a prepare-phase rule hit on the claim's evidence.
    """
    events = [(e, pod_key(p)) for p in walk.pods for e in walk.pod_events(p)]
    events += [(link.event, link.pod_key) for link in walk.links.mentioned_by]
    for event, _pod in events:
        if event.get("reason") != "FailedPrepareDynamicResources":
            continue
        message = str(event.get("message") or "")
        if any(marker in message for marker in _NOT_PREPARE_ATTEMPT):
            continue
        return (
            f"kubelet prepare attempt: Event {namespace_of(event)}/{name_of(event)} "
            "(FailedPrepareDynamicResources)"
        )
    for hit in walk.hits_for(Phase.PREPARE):
        rule = hit.finding.rule
        if rule in ("DRA-PREP-NOT-RESERVED", "DRA-PREP-CLAIM-STATE-CHANGED"):
            continue
        if hit.finding.evidence:
            return f"kubelet/plugin prepare evidence: {hit.finding.evidence[0].ref}"
    return ""


def with_basis(walk: ClaimWalk, phases: Sequence[PhaseResult]) -> tuple[PhaseResult, ...]:
    """Each phase with its basis; ``unknown`` phases a later stage proves become inferred."""
    # Read only when a phase is unknown: most rows have none, and the proofs cost a look
    # at every bound pod and event of the claim.
    out = []
    for result in phases:
        if result.basis is not Basis.CHECKED or result.basis_detail:
            out.append(result)  # the phase settled its own basis
            continue
        missing = walk.missing.get(result.phase, [])
        missing_text = ", ".join(k.value for k in missing)
        unknown = result.status is PhaseStatus.UNKNOWN
        proof = walk.crossings().get(result.phase) if unknown else None
        if unknown and proof is not None:
            kept = tuple(f for f in result.findings if f.rule != NOT_COLLECTED[result.phase])
            status = (
                PhaseStatus.WARN
                if any(f.severity is Severity.WARNING for f in kept)
                else PhaseStatus.OK
            )
            detail = proof.ref + (f"; {missing_text} not collected" if missing_text else "")
            out.append(
                replace(
                    result,
                    status=status,
                    findings=kept,
                    basis=Basis.INFERRED,
                    basis_detail=detail,
                )
            )
        elif result.status is PhaseStatus.UNKNOWN:
            what = walk.unknown_reason.get(result.phase) or (
                f"{missing_text} not collected" if missing_text else "its evidence is missing"
            )
            out.append(replace(result, basis=Basis.UNKNOWN, basis_detail=what))
        else:
            out.append(result)
    return tuple(out)
