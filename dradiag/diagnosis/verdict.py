"""The verdict: the first broken phase, in one sentence, with its deciding rule.

DESIGN §2: the verdict is the **first** ``broken`` phase; a later symptom never
outranks an earlier broken boundary. Two refinements:

- *The cause, not the surface.* When this claim's Prepare fails because another claim's
  state was never released (a MIG instance, checkpoint entry or device still held for a
  claim that is gone), the walk marks this claim's ``unprepare`` phase broken with a
  rule from :data:`CROSS_CLAIM_CAUSE_RULES`; that phase then decides the verdict, and
  the sentence names the other claim.
- *Unknown is not ok.* With no broken phase, a phase whose evidence was not collected
  makes the verdict ``inconclusive`` (exit 4). An unknown phase *before* the first broken
  one does not hide the break (exit 1), but the sentence says it could not be checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from dradiag.diagnosis.model import PhaseResult, Target, Verdict, VerdictStatus
from dradiag.vocabulary import Finding, Phase, PhaseStatus, Severity

CROSS_CLAIM_CAUSE_RULES: frozenset[str] = frozenset({"DRA-UNPREP-LEAKED-STATE"})
"""Unprepare-phase rules that explain an *earlier* phase's failure of this claim."""

_REACHED_WORDS = {
    Phase.PUBLICATION: "published",
    Phase.SELECTION: "selected",
    Phase.ALLOCATION: "allocated",
    Phase.PREPARE: "prepared",
    Phase.INJECTION: "injected",
    Phase.WORKLOAD: "in use by running containers",
    Phase.UNPREPARE: "released",
}


def _first(findings: Sequence[Finding], severity: Severity) -> Finding | None:
    return next((f for f in findings if f.severity is severity), None)


def _describe(target: Target) -> str:
    if target.kind == "Node":
        return f"node {target.name}"
    name = f"{target.namespace}/{target.name}" if target.namespace else target.name
    if target.synthesized:
        return f"the not-yet-created claim {name}…"
    return f"{target.kind} {name}"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith(".") else text + "."


def decide_verdict(target: Target, phases: Sequence[PhaseResult]) -> Verdict:
    """The verdict for ``phases`` (given in phase order)."""
    who = _describe(target)
    broken = [p for p in phases if p.status is PhaseStatus.BROKEN]
    unknown = [p for p in phases if p.status is PhaseStatus.UNKNOWN]
    cause = next(
        (
            (p, f)
            for p in broken
            for f in p.findings
            if f.rule in CROSS_CLAIM_CAUSE_RULES and f.severity is Severity.ERROR
        ),
        None,
    )
    if cause is not None:
        phase_result, finding = cause
        surfaced = broken[0].phase if broken[0] is not phase_result else None
        where = f" (it surfaced at {surfaced.value})" if surfaced is not None else ""
        return Verdict(
            status=VerdictStatus.BROKEN,
            phase=phase_result.phase,
            rule=finding.rule,
            summary=_sentence(
                f"{who} is broken at {phase_result.phase.value}{where}: {finding.title}"
                + (f" ({other})" if (other := dict(finding.identifiers).get("claim")) else "")
            ),
            next=finding.next,
        )
    if broken:
        first = broken[0]
        deciding = _first(first.findings, Severity.ERROR)
        earlier_unknown = [
            u.phase.value for u in unknown if PHASE_INDEX[u.phase] < PHASE_INDEX[first.phase]
        ]
        caveat = f" ({', '.join(earlier_unknown)} could not be checked)" if earlier_unknown else ""
        title = deciding.title if deciding else "broken"
        if deciding is not None and deciding.cause and deciding.cause not in title:
            title = f"{title}: {deciding.cause}"
        return Verdict(
            status=VerdictStatus.BROKEN,
            phase=first.phase,
            rule=deciding.rule if deciding else None,
            summary=_sentence(f"{who} is broken at {first.phase.value}{caveat}: {title}"),
            next=deciding.next if deciding else (),
        )
    if unknown:
        first = unknown[0]
        why = _first(first.findings, Severity.WARNING) or (
            first.findings[0] if first.findings else None
        )
        reason = why.title if why else "the evidence it needs was not collected"
        return Verdict(
            status=VerdictStatus.INCONCLUSIVE,
            phase=first.phase,
            rule=why.rule if why else None,
            summary=_sentence(
                f"{who}: inconclusive — {first.phase.value} could not be checked ({reason}); "
                "nothing checked is broken"
            ),
            next=why.next if why else (),
        )
    return _healthy(who, phases)


def _healthy(who: str, phases: Sequence[PhaseResult]) -> Verdict:
    reached = [p for p in phases if p.status in (PhaseStatus.OK, PhaseStatus.WARN)]
    warnings = [f for p in phases for f in p.findings if f.severity is Severity.WARNING]
    pending = next((p for p in phases if p.status is PhaseStatus.NOT_REACHED), None)
    if reached and reached[-1].phase is Phase.UNPREPARE:
        state = "released"
    elif reached:
        last_before_gap = reached[0]
        for p in phases:
            if p.status in (PhaseStatus.OK, PhaseStatus.WARN):
                last_before_gap = p
            else:
                break
        state = _REACHED_WORDS[last_before_gap.phase]
        if last_before_gap.phase is Phase.WORKLOAD and last_before_gap.status is PhaseStatus.WARN:
            # A container that keeps failing is not "running": the device was delivered.
            state = "delivered to the containers"
    else:
        state = "not started"
    text = f"{who}: nothing broken — {state}"
    if pending is not None and state not in (
        "in use by running containers",
        "delivered to the containers",
        "released",
    ):
        text += f"; {pending.phase.value} not reached yet"
        if pending.summary:
            text += f" ({pending.summary})"
    if warnings:
        text += f"; {len(warnings)} warning{'s' if len(warnings) != 1 else ''}"
    first_warning = warnings[0] if warnings else None
    return Verdict(
        status=VerdictStatus.OK,
        phase=None,
        rule=None,
        summary=_sentence(text),
        next=first_warning.next if first_warning else (),
    )


PHASE_INDEX: dict[Phase, int] = {p: i for i, p in enumerate(Phase)}
