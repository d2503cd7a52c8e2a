"""The ``DRA-SEL-*`` findings of a claim's selection, and the catalogue of those rules.

``selector-check`` and the diagnosis engine's selection phase both turn a
:class:`ClaimSelection` into findings here: :func:`selection_problems` keeps what each
is about (request, selector, offset) so selector-check can point at it,
:func:`selection_findings` orders them most decisive first. :data:`RULES` is the
code-backed rules' severity, title and next steps, mirrored in ``rules/selection.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dradiag.analyses.selection.results import (
    CLAIM_DEVICE_LIMIT,
    ClaimSelection,
    RequestSelection,
    RequestStatus,
    SelectorOrigin,
    StageResult,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleInfo:
    """The catalogue entry of a code-backed selection rule (mirrored in rules/selection.yaml)."""

    severity: Severity
    title: str
    next: tuple[str, ...]


RULES: Mapping[str, RuleInfo] = {
    "DRA-SEL-CLASS-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="the request's DeviceClass does not exist",
        next=("kubectl get deviceclasses", "check the driver's Helm values resources.gpus.enabled"),
    ),
    "DRA-SEL-BUILTIN-CLASSES": RuleInfo(
        severity=Severity.INFO,
        title="DeviceClasses were taken from the NVIDIA driver's built-in set",
        next=("kubectl get deviceclasses -o yaml  (to check against the cluster's real classes)",),
    ),
    "DRA-SEL-CEL-COMPILE-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector does not compile",
        next=("fix the expression at the caret; the apiserver rejects it on create",),
    ),
    "DRA-SEL-CEL-RUNTIME-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector errors on a device: kube-scheduler would abort scheduling",
        next=(
            "guard optional attributes: has(device.attributes['d'].x), "
            "device.attributes['d'].?x.orValue(default), or 'x' in device.attributes['d']",
        ),
    ),
    "DRA-SEL-NO-MATCH": RuleInfo(
        severity=Severity.ERROR,
        title="no device matches the request's selectors",
        next=("compare the failing clause with the values devices publish",),
    ),
    "DRA-SEL-COUNT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="no single node has as many matching devices as the request's count",
        next=("lower count, or split the request across pods",),
    ),
    "DRA-SEL-ALL-MODE": RuleInfo(
        severity=Severity.INFO,
        title="allocationMode All takes every matching device on the chosen node",
        next=("check that no matching device on that node is in use or tainted",),
    ),
    "DRA-SEL-CONSTRAINT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="a matchAttribute constraint cannot be met on any single node",
        next=("compare the attribute's values across the matching devices per node",),
    ),
    "DRA-SEL-CLAIM-LIMIT": RuleInfo(
        severity=Severity.ERROR,
        title="the claim asks for more than 32 devices",
        next=("split the claim; AllocationResultsMaxSize is 32",),
    ),
    "DRA-SEL-REQUEST-INVALID": RuleInfo(
        severity=Severity.ERROR,
        title="a request is malformed (no device class, or an unknown allocation mode)",
        next=("set exactly.deviceClassName and allocationMode ExactCount or All",),
    ),
    "DRA-SEL-SUBREQUEST-FALLBACK": RuleInfo(
        severity=Severity.WARNING,
        title="a firstAvailable subrequest can never be satisfied; a later one is used",
        next=("drop or fix the subrequest that cannot match",),
    ),
    "DRA-SEL-UNKNOWN-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute or capacity no device publishes",
        next=("compare the key with what is published: `kubectl get resourceslices -o yaml`",),
    ),
    "DRA-SEL-WRONG-DOMAIN": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads a key under the wrong domain",
        next=("bare keys belong to the driver's domain; standard keys to resource.kubernetes.io",),
    ),
    "DRA-SEL-TYPE-MISMATCH": RuleInfo(
        severity=Severity.WARNING,
        title="a selector compares values of different types",
        next=("compare versions with semver(), quantities with quantity() and compareTo()",),
    ),
    "DRA-SEL-MIG-PROFILE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector names a MIG profile no device publishes",
        next=("use the profile attribute's spelling (1g.10gb), not the device name's (1g10gb)",),
    ),
    "DRA-SEL-PROFILE-CAPACITY": RuleInfo(
        severity=Severity.WARNING,
        title="a MIG profile's name is not its memory capacity",
        next=("select on the profile attribute, or compare memory with what is published",),
    ),
    "DRA-SEL-OPTIONAL-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute only some devices publish, without a guard",
        next=("guard with has(), .?key.orValue(default) or 'key' in device.attributes[domain]",),
    ),
    "DRA-SEL-CLAIM-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="a pod references a ResourceClaim or ResourceClaimTemplate that does not exist",
        next=("kubectl get resourceclaimtemplates,resourceclaims -n <namespace>",),
    ),
    "DRA-SEL-NONE-FREE": RuleInfo(
        severity=Severity.WARNING,
        title="devices match, but none of them is free now",
        next=("dradiag inventory  (who holds the matching devices)",),
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionProblem:
    """A finding and the selector (or request) it is about, so callers can locate it."""

    finding: Finding
    request: str | None = None
    subrequest: str | None = None
    origin: SelectorOrigin | None = None
    selector_index: int | None = None
    offset: int | None = None
    """Character offset in the expression (compile errors)."""


def _finding(rule: str, detail: str, *, title: str | None = None, **kw: Any) -> Finding:
    info = RULES[rule]
    return Finding(
        rule=rule,
        phase=Phase.SELECTION,
        severity=kw.pop("severity", info.severity),
        title=title or info.title,
        detail=detail,
        next=tuple(kw.pop("next", info.next)),
        evidence=tuple(kw.pop("evidence", ())),
        identifiers=tuple(kw.pop("identifiers", ())),
        cause=str(kw.pop("cause", "")),
    )


def _tally_text(stage: StageResult, what: str) -> str:
    t = stage.total
    return (
        f"{what}: {t.matched} matched, {t.not_matched} not matched, {t.errored} errored "
        f"of {t.total}"
    )


def _claim_label(result: ClaimSelection) -> str:
    return f"{result.namespace}/{result.claim_name}" if result.claim_name else result.namespace


def selection_problems(result: ClaimSelection) -> list[SelectionProblem]:
    """Every problem of a claim's selection, with what it is about."""
    problems: list[SelectionProblem] = []
    claim = _claim_label(result)
    for group in result.requests:
        chosen = group.chosen
        for alt in group.alternatives:
            if group.first_available and chosen is not None and alt is not chosen:
                if alt.broken and group.alternatives.index(alt) < group.alternatives.index(chosen):
                    problems.append(
                        SelectionProblem(
                            finding=_finding(
                                "DRA-SEL-SUBREQUEST-FALLBACK",
                                f"claim {claim}, request {alt.label}: {alt.status.value}; "
                                f"subrequest {chosen.label} is used instead",
                            ),
                            request=alt.request,
                            subrequest=alt.subrequest,
                        )
                    )
                continue
            problems.extend(_alternative_problems(claim, alt, result))
    for c in result.constraints:
        if not c.feasible:
            problems.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CONSTRAINT-INFEASIBLE",
                        f"claim {claim}, constraint #{c.index} (matchAttribute {c.attribute}): "
                        + c.detail,
                    ),
                    request=c.requests[0] if c.requests else None,
                )
            )
    if result.device_limit_exceeded is not None:
        problems.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLAIM-LIMIT",
                    f"claim {claim}: number of requested devices {result.device_limit_exceeded} "
                    f"exceeds the claim limit of {CLAIM_DEVICE_LIMIT}",
                )
            )
        )
    return problems


def _near_miss_problems(
    alt: RequestSelection, result: ClaimSelection
) -> tuple[list[SelectionProblem], list[Evidence], str]:
    """Hints as problems of their own, the closest devices as evidence for NO-MATCH, and
    the cause in a phrase: the first hint, else the clause the closest device fails with
    the value it has."""
    if result.inventory is None or alt.status not in (
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COUNT_INFEASIBLE,
    ):
        return [], [], ""
    from dradiag.analyses.near_miss import explain_request

    report = explain_request(result.inventory, alt)
    problems = [
        SelectionProblem(
            finding=_finding(hint.rule, f"request {alt.label}: {hint.message}"),
            request=alt.request,
            subrequest=alt.subrequest,
            origin=hint.origin,
            selector_index=hint.selector_index,
            offset=hint.offset,
        )
        for hint in report.hints
    ]
    evidence = []
    for near in report.closest:
        parts = []
        for failure in near.failed:
            has = ", ".join(f"{k} = {v}" for k, v in failure.actual) or "no attribute read"
            what = f"error: {failure.message}" if failure.outcome == "error" else "false"
            parts.append(f"{failure.clause} -> {what} (device has {has})")
        evidence.append(
            Evidence(
                source=EvidenceSource.CEL,
                ref=f"{near.device} ({near.selector_origin} selector #{near.selector_index}, "
                f"{len(near.failed)} of {near.clauses} clause(s) fail)",
                excerpt="; ".join(parts),
            )
        )
    cause = report.hints[0].message if report.hints else ""
    if not cause and report.closest and report.closest[0].failed:
        failure = report.closest[0].failed[0]
        has = ", ".join(f"{k} = {v}" for k, v in failure.actual)
        verb = f"fails ({failure.message})" if failure.outcome == "error" else "is false"
        cause = f"{failure.clause} {verb} on every device" + (
            f" (the closest, {report.closest[0].device}, has {has})" if has else ""
        )
    return problems, evidence, cause


def _alternative_problems(
    claim: str, alt: RequestSelection, result: ClaimSelection
) -> list[SelectionProblem]:
    out: list[SelectionProblem] = []
    where: dict[str, Any] = {"request": alt.request, "subrequest": alt.subrequest}
    hint_problems, near_evidence, near_cause = _near_miss_problems(alt, result)
    if alt.status is RequestStatus.INVALID:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-REQUEST-INVALID", f"claim {claim}, request {alt.label}: {alt.problem}"
                ),
                **where,
            )
        )
        return out
    if alt.status is RequestStatus.CLASS_MISSING:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLASS-NOT-FOUND",
                    f"request {alt.label}: device class {alt.device_class} does not exist",
                    identifiers=(("DeviceClass", alt.device_class),),
                ),
                **where,
            )
        )
        return out
    for sel in alt.selectors():
        owner = f"class {sel.owner}" if sel.origin == "class" else f"claim {claim}"
        if sel.compile_error is not None:
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-COMPILE-ERROR",
                        f"{owner}: selector #{sel.index}: CEL compile error: "
                        f"{sel.compile_error.reason}",
                        evidence=(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{sel.origin} selector #{sel.index}",
                                excerpt=sel.compile_error.caret,
                            ),
                        ),
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    offset=sel.compile_error.position,
                    **where,
                )
            )
        if sel.error_count:
            first = sel.errors[0]
            detail = (
                f"kube-scheduler would abort scheduling: {owner}: selector #{sel.index} on "
                f"device {first.device}: CEL runtime error: {first.message}"
            )
            if sel.error_count > 1:
                detail += f" (and {sel.error_count - 1} more device(s))"
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-RUNTIME-ERROR",
                        detail,
                        evidence=tuple(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{e.device} (node {e.node})",
                                excerpt=e.message,
                            )
                            for e in sel.errors[:5]
                        ),
                        identifiers=(("slice device", first.device),),
                        cause=f"{first.message} (on device {first.device})",
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    **where,
                )
            )
    if alt.status is RequestStatus.NO_MATCH:
        stage = "request" if alt.class_stage.total.matched else "class"
        failing = next(
            (
                s
                for s in (alt.request_selectors if stage == "request" else alt.class_selectors)
                if s.false
            ),
            None,
        )
        scope = f"{result.devices_in_scope} device(s)"
        if result.nodes_in_scope and len(result.nodes_in_scope) <= 3:
            scope += " on " + ", ".join(result.nodes_in_scope)
        detail = (
            f"claim {claim}, request {alt.label}: no device of {scope} matches; "
            + _tally_text(alt.class_stage, f"class {alt.device_class} selectors")
        )
        if alt.class_stage.total.matched:
            detail += "; " + _tally_text(alt.request_stage, "request selectors")
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-NO-MATCH", detail, evidence=near_evidence, cause=near_cause
                ),
                origin=failing.origin if failing else None,
                selector_index=failing.index if failing else None,
                **where,
            )
        )
    elif alt.status is RequestStatus.COUNT_INFEASIBLE:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-COUNT-INFEASIBLE",
                    f"claim {claim}, request {alt.label}: count {alt.count}, but at most "
                    f"{alt.best_node_count} matching device(s) on one node "
                    f"({alt.best_node}); {alt.matched} match in all",
                ),
                **where,
            )
        )
    elif alt.status is RequestStatus.OK and alt.allocation_mode == "All":
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-ALL-MODE",
                    f"claim {claim}, request {alt.label}: allocationMode All would take "
                    f"{alt.best_node_count} device(s) on node {alt.best_node} (the most on one node)",
                ),
                **where,
            )
        )
    if result.free_now is not None and alt.status is RequestStatus.OK:
        free = result.free_now.get(alt.label)
        if free is not None and free < (1 if alt.allocation_mode == "All" else alt.count):
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-NONE-FREE",
                        f"claim {claim}, request {alt.label}: matches {alt.matched} device(s), "
                        f"{free} free now",
                    ),
                    **where,
                )
            )
    return out + hint_problems


def selection_findings(result: ClaimSelection) -> list[Finding]:
    """The findings (``DRA-SEL-*``) of a claim's selection, most decisive first."""
    problems = selection_problems(result)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return [p.finding for p in sorted(problems, key=lambda p: order[p.finding.severity])]
