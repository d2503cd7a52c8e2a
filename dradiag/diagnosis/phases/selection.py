"""Phase 2, selection: the DeviceClass and request CEL selectors pick candidate devices."""

from __future__ import annotations

import importlib

from dradiag.diagnosis.context import ClaimWalk, claim_devices, class_names
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import SEL_CLASS_MISSING, SEL_NOT_EVALUATED
from dradiag.snapshot.model import (
    Kind,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity


def _selection_analysis(walk: ClaimWalk) -> list[Finding] | None:
    """Findings of the selector-check analysis, or None when it is not available."""
    try:
        selection = importlib.import_module("dradiag.analyses.selection")
    except ImportError:
        return None
    analyze = getattr(selection, "analyze_claim_selection", None)
    to_findings = getattr(selection, "selection_findings", None)
    if analyze is None or to_findings is None:
        return None
    if walk.shared is not None and not walk.synthesized:
        # One analysis per distinct spec in a namespace, its findings re-addressed to each
        # claim, so scan says exactly what ``claim`` says (ScanContext.selection).
        def compute() -> list[Finding]:
            result = analyze(
                walk.snapshot,
                walk.claim.get("spec") or {},
                namespace=namespace_of(walk.claim),
                claim_name=name_of(walk.claim),
                builtin_classes_fallback=False,
            )
            return list(to_findings(result))

        return walk.shared.selection(walk.claim, compute)
    key = None
    if walk.selection_cache is not None:
        import json

        key = (namespace_of(walk.claim), json.dumps(walk.claim.get("spec") or {}, sort_keys=True))
        if key in walk.selection_cache:
            return list(walk.selection_cache[key])
    result = analyze(
        walk.snapshot,
        walk.claim.get("spec") or {},
        namespace=namespace_of(walk.claim),
        claim_name=None if walk.synthesized or key is not None else name_of(walk.claim),
        # Classes were collected (checked by the caller): a missing one is real.
        builtin_classes_fallback=False,
    )
    findings = list(to_findings(result))
    if key is not None and walk.selection_cache is not None:
        walk.selection_cache[key] = findings
    return findings


def phase_selection(walk: ClaimWalk) -> PhaseResult:
    """DeviceClasses exist and the selectors match at least one published device."""
    phase = Phase.SELECTION
    if walk.allocation is not None:
        devices = ", ".join(d for _r, _drv, _p, d in claim_devices(walk.claim))
        hits = [
            as_historical(h.finding, "the claim is now allocated") for h in walk.hits_for(phase)
        ]
        return phase_result(
            walk.rulebook, phase, hits, PhaseStatus.OK, f"selected {devices}" if devices else ""
        )
    classes = class_names(walk.claim)
    missing_kinds = [k for k in (Kind.DEVICE_CLASS, Kind.RESOURCE_SLICE) if not walk.collected(k)]
    findings: list[Finding] = [h.finding for h in walk.hits_for(phase)]
    if missing_kinds and classes:
        findings.append(
            walk.not_collected(
                phase, missing_kinds, "Selection evaluates the classes' and requests' selectors"
            )
        )
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
    analysed = _selection_analysis(walk)
    if analysed is not None:
        return phase_result(walk.rulebook, phase, findings + analysed, PhaseStatus.OK)
    for cls in classes:
        if walk.snapshot.device_class(cls) is None:
            installed = ", ".join(sorted(name_of(c) for c in walk.snapshot.device_classes))
            findings.append(
                Finding(
                    rule=SEL_CLASS_MISSING,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the claim names a DeviceClass that does not exist",
                    detail=f"ResourceClaim {walk.claim_key} requests devices of class "
                    f"{cls!r}, which is not in the cluster; the scheduler reports "
                    f"'device class {cls} does not exist'. Installed classes: "
                    f"{installed or 'none'}.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceClaim {walk.claim_key} .spec.devices.requests",
                            excerpt=f"deviceClassName: {cls}",
                        ),
                    ),
                    next=("kubectl get deviceclasses",),
                    identifiers=(("device class", cls),),
                )
            )
    if any(f.severity is Severity.ERROR for f in findings):
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK)
    findings.append(
        Finding(
            rule=SEL_NOT_EVALUATED,
            phase=phase,
            severity=Severity.WARNING,
            title="the selectors were not evaluated",
            detail="The claim is not allocated and this build of dradiag could not evaluate "
            "its CEL selectors against the published devices.",
            next=(f"dradiag selector-check <file with ResourceClaim {walk.claim_key}>",),
        )
    )
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
