"""The Diagnosis data model: phases, statuses, findings and evidence (DESIGN §2, §5).

Plain frozen dataclasses with tuples, so a value can be cached and shared between
analyses. Enum values are the JSON spellings, so the document and the code cannot drift.
Models never render themselves: ``render/document.py`` turns them into the versioned
dict, and the text and SARIF views are drawn from that dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Phase(StrEnum):
    """The seven boundaries of a ResourceClaim's life, in the order they are crossed."""

    PUBLICATION = "publication"
    SELECTION = "selection"
    ALLOCATION = "allocation"
    PREPARE = "prepare"
    INJECTION = "injection"
    WORKLOAD = "workload"
    UNPREPARE = "unprepare"


PHASE_ORDER: tuple[Phase, ...] = tuple(Phase)


class PhaseStatus(StrEnum):
    """How one phase stands for the target."""

    OK = "ok"
    BROKEN = "broken"
    WARN = "warn"
    UNKNOWN = "unknown"
    """The evidence needed was not readable; the phase's findings say which."""
    NOT_REACHED = "not-reached"
    """The claim has not got there yet (e.g. prepare for an unallocated claim)."""


class Severity(StrEnum):
    """A finding's weight: ``error`` breaks its phase, ``warning`` marks it, ``info`` explains."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class VerdictStatus(StrEnum):
    """The overall answer: the document's ``verdict.status``."""

    OK = "ok"
    BROKEN = "broken"
    INCONCLUSIVE = "inconclusive"


class EvidenceSource(StrEnum):
    """Where a piece of evidence was read."""

    EVENT = "event"
    LOG = "log"
    OBJECT = "object"
    CEL = "cel"
    NODE = "node"


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """One observation that supports a finding, quoted from its source."""

    source: EvidenceSource
    ref: str
    """What was read, precisely enough to read it again: ``Event ns/name``,
    ``ResourceClaim ns/name .status.allocation``, ``log ns/pod/container:123``."""
    excerpt: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One conclusion with a stable rule id, its evidence and the next observation.

    Every finding a user sees has a rule id with an entry in ``rules/*.yaml``, whether
    the rule matched data (events, logs) or code computed it (CEL, allocation, pools).
    """

    rule: str
    phase: Phase
    severity: Severity
    title: str
    detail: str = ""
    evidence: tuple[Evidence, ...] = ()
    next: tuple[str, ...] = ()
    """The next discriminating observations: commands to run or fields to read. A
    mutating action appears only when marked as a remediation."""
    identifiers: tuple[tuple[str, str], ...] = ()
    """(layer, value) pairs quoted by the finding, e.g. ("claim UID", "..."),
    ("slice device name", "gpu-0"), ("MIG UUID", "MIG-..."), ("PCI bus ID", "...")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseResult:
    """One phase's status and the findings that justify it."""

    phase: Phase
    status: PhaseStatus
    findings: tuple[Finding, ...] = ()
    summary: str = ""


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
