"""The words every layer shares: phases, statuses, severity, evidence, findings, basis.

DESIGN §2 and §5 define them. They sit at the bottom of the package so analyses, the
rulebook and the diagnosis can all speak them without an analysis importing from the
diagnosis layer above it. Plain frozen dataclasses with tuples, so a value can be cached
and shared between analyses; enum values are the JSON spellings, so the document and the
code cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass
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


class Basis(StrEnum):
    """How a phase's status was established (DESIGN §2).

    Real evidence is partial, so a status is only as good as what it rests on: the
    boundary's own objects, later evidence that proves the boundary was crossed, or
    nothing (and then the phase says what is missing).
    """

    CHECKED = "checked"
    """From the objects of that boundary itself."""
    INFERRED = "inferred"
    """Proven by later evidence: an allocation proves publication and selection, a
    prepare attempt proves allocation, a started container proves prepare and injection."""
    UNKNOWN = "unknown"
    """Neither; the phase's basis detail names what was missing."""


class Severity(StrEnum):
    """A finding's weight: ``error`` breaks its phase, ``warning`` marks it, ``info`` explains."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


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
    cause: str = ""
    """The specific cause in one phrase, where the code or the evidence names one (the CEL
    clause nobody satisfies with the values published, the taint, the constraint
    attribute, the innermost error of a wrapped message). The title is the rule's, shared
    by every instance; the cause is this one's, and the verdict sentence quotes it."""
