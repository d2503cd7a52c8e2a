"""The text view: verdict on top, the seven phases as a track, findings, next steps."""

from __future__ import annotations

from dradiag.diagnosis.model import Diagnosis, PhaseResult, Target, Verdict, VerdictStatus
from dradiag.render.document import collection_block, diagnoses_document, diagnosis_document
from dradiag.render.text import render_diagnoses, render_diagnosis, render_scan
from dradiag.snapshot.model import SourceInfo
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

SOURCE = SourceInfo(kind="files", location="bundle/", collected_at="2026-05-01T12:00:00Z")


def _doc(status=PhaseStatus.BROKEN):
    finding = Finding(
        rule="DRA-INJ-CDI-UNRESOLVABLE",
        phase=Phase.INJECTION,
        severity=Severity.ERROR,
        title="the container runtime cannot resolve the claim's CDI device IDs",
        detail="containerd cannot find the CDI device.",
        evidence=(
            Evidence(
                source=EvidenceSource.EVENT, ref="Event ml/p.1", excerpt="Warning Failed " * 60
            ),
        ),
        next=("ls -l /var/run/cdi/ on the node",),
        identifiers=(("CDI device ID", "k8s.gpu.nvidia.com/claim=3c83-gpu-0"),),
    )
    order = list(Phase)
    phases = []
    for p in order:
        if p is Phase.INJECTION:
            phases.append(PhaseResult(phase=p, status=status, findings=(finding,)))
        elif order.index(p) > order.index(Phase.INJECTION):
            phases.append(PhaseResult(phase=p, status=PhaseStatus.NOT_REACHED))
        else:
            phases.append(PhaseResult(phase=p, status=PhaseStatus.OK, summary="fine"))
    d = Diagnosis(
        target=Target(kind="ResourceClaim", namespace="ml", name="c", uid="3c83", pods=("ml/p",)),
        verdict=Verdict(
            status=VerdictStatus.BROKEN,
            phase=Phase.INJECTION,
            rule=finding.rule,
            summary="ResourceClaim ml/c is broken at injection: CDI.",
            next=finding.next,
        ),
        phases=tuple(phases),
    )
    return diagnosis_document(d, SOURCE, collection_block([]))


def test_layout_verdict_track_findings_next():
    text = render_diagnosis(_doc())
    lines = text.splitlines()
    assert lines[0] == "BROKEN  ResourceClaim ml/c is broken at injection: CDI."
    track = [
        line.split()[:3] for line in lines if line.strip()[:1] in "✓✗!?·" and len(line.split()) >= 3
    ]
    assert [t[1] for t in track] == [p.value for p in Phase]
    assert [t[0] for t in track] == ["✓", "✓", "✓", "✓", "✗", "·", "·"]
    assert "[error] DRA-INJ-CDI-UNRESOLVABLE" in text
    assert "identifiers: CDI device ID k8s.gpu.nvidia.com/claim=3c83-gpu-0" in text
    assert "1. ls -l /var/run/cdi/ on the node" in text
    assert "claim UID 3c83" in text and "pods: ml/p" in text
    # Long excerpts are clipped, lines carry no trailing padding.
    assert "…" in text
    assert all(line == line.rstrip() for line in lines)


def test_no_colour_codes_unless_asked():
    assert "\x1b[" not in render_diagnosis(_doc(), color=False)
    assert "\x1b[" in render_diagnosis(_doc(), color=True, width=100)


def test_pod_view_and_scan_table():
    doc = diagnoses_document([_doc(), _doc()], collection_block([]))
    assert render_diagnoses(doc).count("BROKEN  ResourceClaim ml/c") == 2
    table = render_scan(doc)
    header, *rows = [line for line in table.splitlines() if line.strip()]
    assert header.split() == ["PHASE", "STATUS", "TARGET", "RULE", "WHY"]
    assert rows[1].split()[:5] == [
        "injection",
        "broken",
        "ResourceClaim",
        "ml/c",
        "DRA-INJ-CDI-UNRESOLVABLE",
    ]
    assert "the container runtime cannot resolve" in table
    empty = diagnoses_document([], collection_block([]))
    assert render_scan(empty).strip() == "nothing unhealthy found"
    assert render_diagnoses(empty).strip() == "no ResourceClaims to diagnose"


def test_scan_with_unread_kinds_never_says_nothing_unhealthy():
    from dradiag.snapshot.model import Coverage, Kind, KindRecord

    unread = [KindRecord(kind=Kind.RESOURCE_CLAIM, coverage=Coverage.UNKNOWN, reason="forbidden")]
    empty = diagnoses_document([], collection_block([], unread=unread))
    text = render_scan(empty)
    assert "nothing unhealthy found" not in text
    assert text.startswith("inconclusive:") and "ResourceClaim (forbidden)" in text
    rows = diagnoses_document([_doc()], collection_block([], unread=unread))
    assert "could not read ResourceClaim (forbidden)" in render_scan(rows)
