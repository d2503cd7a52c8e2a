"""Scan narrowing and silences on hand-built rows: which rows stay, which are silenced."""

from __future__ import annotations

from dradiag.diagnosis.model import Diagnosis, PhaseResult, Target, Verdict, VerdictStatus
from dradiag.diagnosis.scan_scope import ScanScope, ScanSelection, Silence
from dradiag.vocabulary import Finding, Phase, PhaseStatus, Severity


def _row(kind: str, name: str, rule: str, phase: Phase, namespace: str | None = "ml") -> Diagnosis:
    finding = Finding(rule=rule, phase=phase, severity=Severity.WARNING, title="t")
    return Diagnosis(
        target=Target(kind=kind, name=name, namespace=namespace),
        verdict=Verdict(status=VerdictStatus.BROKEN, summary="s", phase=phase, rule=rule),
        phases=(PhaseResult(phase=phase, status=PhaseStatus.BROKEN, findings=(finding,)),),
    )


def test_silence_scopes() -> None:
    claim = _row("ResourceClaim", "train-1", "DRA-ALLOC-ALL-IN-USE", Phase.ALLOCATION)
    node = _row("Node", "cpu-7", "DRA-PUB-NO-SLICES", Phase.PUBLICATION, namespace=None)
    assert Silence(rule="dra-alloc-*", reason="r").covers(claim, [])
    assert Silence(rule="DRA-ALLOC-*", reason="r", namespace="ml", claim="train-*").covers(
        claim, []
    )
    assert not Silence(rule="DRA-ALLOC-*", reason="r", namespace="research").covers(claim, [])
    assert not Silence(rule="DRA-ALLOC-*", reason="r", node="gpu-*").covers(claim, ["cpu-1"])
    assert Silence(rule="DRA-ALLOC-*", reason="r", node="gpu-*").covers(claim, ["gpu-3"])
    # A claim glob never silences a node row; a node glob does.
    assert not Silence(rule="DRA-PUB-*", reason="r", claim="*").covers(node, ["cpu-7"])
    assert Silence(rule="DRA-PUB-*", reason="r", node="cpu-*").covers(node, ["cpu-7"])


def test_wants_rule_globs_and_severity() -> None:
    scope = ScanScope(rules=("DRA-PREP-*",), min_severity=Severity.WARNING)
    assert scope.wants("DRA-PREP-FAILED", Severity.ERROR)
    assert scope.wants("dra-prep-failed", Severity.WARNING)
    assert not scope.wants("DRA-PREP-FAILED", Severity.INFO)
    assert not scope.wants("DRA-ALLOC-ALL-IN-USE", Severity.ERROR)
    assert ScanScope().wants("anything", Severity.INFO)


def test_summary_orders_phases_by_the_claims_life() -> None:
    rows = (
        _row("ResourceClaim", "a", "DRA-UNPREP-X", Phase.UNPREPARE),
        _row("ResourceClaim", "b", "DRA-PUB-X", Phase.PUBLICATION),
        _row("ResourceClaim", "c", "DRA-PUB-X", Phase.PUBLICATION),
    )
    summary = ScanSelection(rows=rows, filtered_out=4).summary()
    assert list(summary["byPhase"].items()) == [("publication", 2), ("unprepare", 1)]
    assert summary["rows"] == 3 and summary["filteredOut"] == 4 and summary["silenced"] == 0
