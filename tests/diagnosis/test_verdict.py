"""The verdict: first broken phase; unknown → inconclusive only when nothing earlier broke."""

from __future__ import annotations

from dradiag.diagnosis.model import PhaseResult, Target, VerdictStatus
from dradiag.diagnosis.verdict import decide_verdict
from dradiag.vocabulary import Finding, Phase, PhaseStatus, Severity

TARGET = Target(kind="ResourceClaim", namespace="ml", name="train-gpu")


def _phases(**statuses):
    out = []
    for phase in Phase:
        status = statuses.get(phase.value, PhaseStatus.OK)
        findings = ()
        if status is PhaseStatus.BROKEN:
            findings = (
                Finding(
                    rule=f"DRA-X-{phase.name}",
                    phase=phase,
                    severity=Severity.ERROR,
                    title=f"{phase.value} broke",
                    next=(f"look at {phase.value}",),
                ),
            )
        elif status is PhaseStatus.UNKNOWN:
            findings = (
                Finding(
                    rule=f"DRA-X-{phase.name}-NC",
                    phase=phase,
                    severity=Severity.WARNING,
                    title="not collected",
                ),
            )
        out.append(PhaseResult(phase=phase, status=status, findings=findings))
    return out


def test_all_ok():
    v = decide_verdict(TARGET, _phases())
    assert (v.status, v.phase, v.rule) == (VerdictStatus.OK, None, None)
    assert v.summary.startswith("ResourceClaim ml/train-gpu: nothing broken")


def test_first_broken_wins_over_later_symptoms():
    v = decide_verdict(
        TARGET,
        _phases(
            selection=PhaseStatus.BROKEN, prepare=PhaseStatus.BROKEN, workload=PhaseStatus.BROKEN
        ),
    )
    assert (v.status, v.phase, v.rule) == (VerdictStatus.BROKEN, Phase.SELECTION, "DRA-X-SELECTION")
    assert v.next == ("look at selection",)


def test_unknown_decides_only_without_a_break():
    v = decide_verdict(TARGET, _phases(injection=PhaseStatus.UNKNOWN))
    assert (v.status, v.phase) == (VerdictStatus.INCONCLUSIVE, Phase.INJECTION)
    v = decide_verdict(TARGET, _phases(allocation=PhaseStatus.UNKNOWN, prepare=PhaseStatus.BROKEN))
    assert (v.status, v.phase) == (VerdictStatus.BROKEN, Phase.PREPARE)
    assert "allocation could not be checked" in v.summary


def test_cross_claim_unprepare_cause_decides():
    phases = _phases(prepare=PhaseStatus.BROKEN)
    phases[-1] = PhaseResult(
        phase=Phase.UNPREPARE,
        status=PhaseStatus.BROKEN,
        findings=(
            Finding(
                rule="DRA-UNPREP-LEAKED-STATE",
                phase=Phase.UNPREPARE,
                severity=Severity.ERROR,
                title="another claim's devices were never released on the node",
                detail="Prepare of ml/train-gpu fails because ResourceClaim ml/old is stuck. More.",
                identifiers=(("claim UID", "u-old"), ("claim", "ml/old")),
            ),
        ),
    )
    v = decide_verdict(TARGET, phases)
    assert (v.phase, v.rule) == (Phase.UNPREPARE, "DRA-UNPREP-LEAKED-STATE")
    assert "surfaced at prepare" in v.summary and "ml/old" in v.summary


def test_warnings_are_counted_in_an_ok_verdict():
    phases = _phases()
    phases[0] = PhaseResult(
        phase=Phase.PUBLICATION,
        status=PhaseStatus.WARN,
        findings=(
            Finding(
                rule="DRA-PUB-PLUGIN-RESTARTS",
                phase=Phase.PUBLICATION,
                severity=Severity.WARNING,
                title="restarts",
                next=("kubectl logs",),
            ),
        ),
    )
    v = decide_verdict(TARGET, phases)
    assert v.status is VerdictStatus.OK
    assert "1 warning" in v.summary
    assert v.next == ("kubectl logs",)


def test_node_target_wording():
    v = decide_verdict(
        Target(kind="Node", name="gpu-node-1"), _phases(publication=PhaseStatus.BROKEN)[:1]
    )
    assert v.summary.startswith("node gpu-node-1 is broken at publication")
