"""The Diagnosis data model: verdict, phase results, target (DESIGN §2, §5).

The shared words (Phase, Severity, Finding, Evidence, Basis) live in
``dradiag.vocabulary``; this module holds what only the diagnosis builds. Models never
render themselves: ``render/document.py`` turns them into the versioned dict, and the
text and SARIF views are drawn from that dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from dradiag.vocabulary import Basis, Finding, Phase, PhaseStatus


class VerdictStatus(StrEnum):
    """The overall answer: the document's ``verdict.status``."""

    OK = "ok"
    BROKEN = "broken"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseResult:
    """One phase's status and the findings that justify it."""

    phase: Phase
    status: PhaseStatus
    findings: tuple[Finding, ...] = ()
    summary: str = ""
    basis: Basis = Basis.CHECKED
    """What the status rests on: the boundary's own objects, later evidence, or nothing."""
    basis_detail: str = ""
    """For ``inferred``: which later evidence; for ``unknown``: what is missing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What was diagnosed: the document's ``target`` block."""

    kind: str
    """``ResourceClaim``, ``Pod`` or ``Node``."""
    name: str
    namespace: str | None = None
    uid: str | None = None
    pods: tuple[str, ...] = ()
    synthesized: bool = False
    """True when the claim does not exist yet and was built from its template."""
    links: tuple[tuple[str, str], ...] = ()
    """(object, how it was tied to the claim) for every pod and piece of evidence the
    walk joined to the target, strongest link first (e.g. ("Pod ns/p",
    "pod.spec.resourceClaims")), so a reader can see why a pod or event counts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The answer in one sentence: the first broken phase and its deciding rule."""

    status: VerdictStatus
    summary: str
    phase: Phase | None = None
    rule: str | None = None
    next: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    """A full diagnosis of one target."""

    target: Target
    verdict: Verdict
    phases: tuple[PhaseResult, ...] = field(default_factory=tuple)
