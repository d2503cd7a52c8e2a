"""Phase 2, selection: the DeviceClass and request CEL selectors pick candidate devices."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace

from dradiag.diagnosis.context import ClaimWalk, claim_devices, class_names
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import SEL_CLASS_MISSING as SEL_CLASS_NOT_FOUND
from dradiag.snapshot.model import (
    Kind,
    Snapshot,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import (
    Basis,
    Finding,
    Phase,
    PhaseStatus,
    Severity,
)


def _selection_analysis(
    walk: ClaimWalk, snapshot: Snapshot | None = None, *, builtin_classes: bool = False
) -> list[Finding]:
    """Findings of the selector-check analysis of the claim's spec (``DRA-SEL-*``).

    ``snapshot`` replaces the walk's for a class-free evaluation; ``builtin_classes`` lets
    the analysis take the NVIDIA driver's built-in DeviceClasses when the input holds none.
    """
    from dradiag.analyses.selection import analyze_claim_selection, selection_findings

    def compute() -> list[Finding]:
        result = analyze_claim_selection(
            snapshot or walk.snapshot,
            walk.claim.get("spec") or {},
            namespace=namespace_of(walk.claim),
            claim_name=None if walk.synthesized else name_of(walk.claim),
            builtin_classes_fallback=builtin_classes,
        )
        return list(selection_findings(result))

    if (
        walk.shared is not None
        and not walk.synthesized
        and snapshot is None
        and not builtin_classes
    ):
        # One analysis per distinct spec in a namespace, its findings re-addressed to each
        # claim, so scan says exactly what ``claim`` says (ScanContext.selection).
        return walk.shared.selection(walk.claim, compute)
    key = None
    if walk.selection_cache is not None and snapshot is None and not builtin_classes:
        key = (namespace_of(walk.claim), json.dumps(walk.claim.get("spec") or {}, sort_keys=True))
        if key in walk.selection_cache:
            return list(walk.selection_cache[key])
    findings = compute()
    if key is not None and walk.selection_cache is not None:
        walk.selection_cache[key] = findings
    return findings


ALLOCATION_SHAPED: Mapping[str, str] = {
    "DRA-SEL-CONSTRAINT-INFEASIBLE": "DRA-ALLOC-CONSTRAINT-UNSATISFIABLE",
    "DRA-SEL-COUNT-INFEASIBLE": "DRA-ALLOC-TOO-FEW-DEVICES",
}
"""Selector-check findings that are the allocator's business, not the selectors'.

DESIGN §2: selection is "do the class and request selectors pick candidates"; counts and
``matchAttribute``/``distinctAttribute`` constraints are choices the allocator makes among
them. selector-check reports them under its own ids; in a claim's walk they move to the
allocation phase under the allocation rule that says the same thing."""


def _to_allocation(finding: Finding) -> Finding:
    rule = ALLOCATION_SHAPED[finding.rule]
    return replace(
        finding,
        rule=rule,
        phase=Phase.ALLOCATION,
        cause=finding.cause or finding.detail.split(": ", 1)[-1],
    )


def _breaks(findings: Sequence[Finding]) -> bool:
    """True when a selection finding (not a count or constraint) is an error."""
    return any(f.severity is Severity.ERROR and f.rule not in ALLOCATION_SHAPED for f in findings)


def _class_free(walk: ClaimWalk, classes: Sequence[str]) -> Snapshot:
    """The walk's slices with a selector-less DeviceClass for each class the claim names.

    Class selectors only narrow what a request's own selectors match, so a request that
    matches nothing here matches nothing under any class of that name.
    """
    synthetic = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": c},
            "spec": {},
        }
        for c in classes
    ]
    return Snapshot(
        objects={Kind.RESOURCE_SLICE: list(walk.snapshot.slices), Kind.DEVICE_CLASS: synthetic}
    )


def phase_selection(walk: ClaimWalk) -> PhaseResult:
    """DeviceClasses exist and the selectors match at least one published device."""
    phase = Phase.SELECTION
    if walk.allocation is not None:
        devices = ", ".join(d for _r, _drv, _p, d in claim_devices(walk.claim))
        hits = [
            as_historical(h.finding, "the claim is now allocated") for h in walk.hits_for(phase)
        ]
        return replace(
            phase_result(
                walk.rulebook, phase, hits, PhaseStatus.OK, f"selected {devices}" if devices else ""
            ),
            basis=Basis.INFERRED,
            basis_detail=f"ResourceClaim {walk.claim_key} .status.allocation",
        )
    classes = class_names(walk.claim)
    missing_kinds = [k for k in (Kind.DEVICE_CLASS, Kind.RESOURCE_SLICE) if not walk.collected(k)]
    findings: list[Finding] = [h.finding for h in walk.hits_for(phase)]
    if Kind.RESOURCE_SLICE in missing_kinds and classes:
        findings.append(
            walk.not_collected(
                phase, missing_kinds, "Selection evaluates the classes' and requests' selectors"
            )
        )
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
    if missing_kinds and classes:
        return _selection_without_classes(walk, classes, findings)
    analysed = _selection_analysis(walk)
    return _selection_result(walk, findings + analysed)


def _selection_result(walk: ClaimWalk, findings: list[Finding]) -> PhaseResult:
    """The selection phase of these findings; allocation-shaped ones go to allocation."""
    moved = [_to_allocation(f) for f in findings if f.rule in ALLOCATION_SHAPED]
    walk.for_allocation.extend(moved)
    kept = [f for f in findings if f.rule not in ALLOCATION_SHAPED]
    return phase_result(walk.rulebook, Phase.SELECTION, kept, PhaseStatus.OK)


def _selection_without_classes(
    walk: ClaimWalk, classes: Sequence[str], findings: list[Finding]
) -> PhaseResult:
    """Slices are in hand but no DeviceClass: decide what can be decided, never ok.

    Class selectors only narrow what a request's own selectors match, so a request that
    matches no published device without them is broken whatever its class says. Failing
    that, the NVIDIA driver's classes are known (``DRA-SEL-BUILTIN-CLASSES`` says they were
    used): a request they leave without devices is broken under the driver's own class.
    A match proves nothing (the cluster's class may say more), so the phase stays unknown.
    """
    phase = Phase.SELECTION
    free = _selection_analysis(walk, _class_free(walk, classes))
    if _breaks(free):
        return replace(
            _selection_result(walk, findings + free),
            basis_detail="DeviceClasses not collected: the request selectors alone match no "
            "published device, so no class can make them match",
        )
    analysed = _selection_analysis(walk, builtin_classes=True)
    if not any(f.rule == SEL_CLASS_NOT_FOUND for f in analysed) and _breaks(analysed):
        return replace(
            _selection_result(walk, findings + analysed),
            basis_detail="DeviceClasses not collected: the NVIDIA driver's built-in "
            f"definitions of {', '.join(classes)} were used",
        )
    findings.append(
        walk.not_collected(
            phase, [Kind.DEVICE_CLASS], "Selection evaluates the classes' and requests' selectors"
        )
    )
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
