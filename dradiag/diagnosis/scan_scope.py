"""Which of a scan's rows the user asked for, which are silenced, and the counts of both.

``scan`` diagnoses the whole snapshot and this module narrows the rows afterwards, so a
narrowed scan gives each kept row the diagnosis a full scan gives it (a claim judged
with all of its pods, not just the selected ones). The rules, as ``scan --help`` says:

- ``-l``/``--field-selector``: a claim row is kept when the claim matches or a pod that
  uses it does (users label pods; template-generated claims do not copy those labels),
  a pod row when its pod matches. A claim has only ``metadata.*`` fields, so a term on
  ``spec.nodeName`` or ``status.phase`` is met through its pods. Node rows belong to no
  pod or claim and are dropped by a selector (``--node`` keeps its own).
- ``--node``: claims allocated to the node or used by a pod on it, pods on it, and the
  node's own rows.
- ``--phase``: the row's verdict phase; ``--rule`` (globs) and ``--min-severity``: rows
  with at least one such finding (SARIF then lists only those findings).
- Silences (``--silence FILE``): a row whose deciding rule and scope match an entry is
  left out and not counted for the exit code; the summary says how many.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from dradiag.snapshot.model import allocation_nodes, name_of, namespace_of
from dradiag.snapshot.selectors import METADATA_FIELDS, FieldSelector, LabelSelector
from dradiag.vocabulary import PHASE_ORDER, Finding, Severity

if TYPE_CHECKING:
    from dradiag.diagnosis.model import Diagnosis
    from dradiag.snapshot.model import K8sObject, Snapshot

SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanScope:
    """The narrowing options of one ``scan``; the default keeps every row."""

    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    nodes: tuple[str, ...] = ()
    phases: frozenset[str] = frozenset()
    rules: tuple[str, ...] = ()
    """Rule id globs (``DRA-PREP-*``), matched case-insensitively."""
    min_severity: Severity | None = None

    @property
    def selects_objects(self) -> bool:
        """True when ``-l`` or ``--field-selector`` was given."""
        return bool(self.labels) or bool(self.fields)

    def wants(self, rule: str, severity: Severity) -> bool:
        """Whether a finding of ``rule`` at ``severity`` passes ``--rule``/``--min-severity``."""
        if self.rules and not any(_glob(rule, g) for g in self.rules):
            return False
        if self.min_severity is not None:
            return SEVERITY_RANK[severity] >= SEVERITY_RANK[self.min_severity]
        return True

    def wants_finding(self, finding: Finding) -> bool:
        """Whether ``finding`` passes ``--rule`` and ``--min-severity``."""
        return self.wants(finding.rule, finding.severity)


@dataclass(frozen=True, slots=True, kw_only=True)
class Silence:
    """One entry of a silence file: a rule (glob) in a scope, and why it is accepted."""

    rule: str
    reason: str
    namespace: str | None = None
    claim: str | None = None
    """Glob on the row's object name (the claim, or the pod of a pod row)."""
    node: str | None = None

    def covers(self, row: Diagnosis, nodes: Iterable[str]) -> bool:
        """Whether this entry silences ``row`` (its deciding rule, in this scope)."""
        rule = row.verdict.rule
        if not rule or not _glob(rule, self.rule):
            return False
        target = row.target
        if self.namespace is not None and not fnmatchcase(target.namespace or "", self.namespace):
            return False
        if self.claim is not None and (
            target.kind == "Node" or not fnmatchcase(target.name, self.claim)
        ):
            return False
        return self.node is None or any(fnmatchcase(n, self.node) for n in nodes)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScanSelection:
    """The rows to show, the rows silenced (with the entry that did it), and counts."""

    rows: tuple[Diagnosis, ...]
    silenced: tuple[tuple[Diagnosis, Silence], ...] = ()
    filtered_out: int = 0

    def summary(self) -> dict[str, Any]:
        """The document's ``summary`` block: rows per phase and status, silenced, filtered."""
        by_phase = Counter(
            (row.verdict.phase.value if row.verdict.phase else "none") for row in self.rows
        )
        by_status = Counter(row.verdict.status.value for row in self.rows)
        return {
            "rows": len(self.rows),
            "byPhase": dict(sorted(by_phase.items(), key=lambda kv: _phase_order(kv[0]))),
            "byStatus": dict(sorted(by_status.items())),
            "silenced": len(self.silenced),
            "filteredOut": self.filtered_out,
        }


def _phase_order(phase: str) -> int:
    order = [p.value for p in PHASE_ORDER]
    return order.index(phase) if phase in order else len(order)


def _glob(rule: str, pattern: str) -> bool:
    return fnmatchcase(rule.upper(), pattern.upper())


def _node_of(pod: K8sObject) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


@dataclass(slots=True)
class _RowObjects:
    """The objects a row stands for, looked up once."""

    claim: K8sObject | None
    pods: list[K8sObject]
    nodes: list[str]


def _objects(snapshot: Snapshot, row: Diagnosis) -> _RowObjects:
    target = row.target
    namespace = target.namespace or ""
    if target.kind == "Node":
        return _RowObjects(None, [], [target.name])
    claim = snapshot.claim(namespace, target.name) if target.kind == "ResourceClaim" else None
    pods: list[K8sObject] = []
    names = list(target.pods)
    if target.kind == "Pod":
        names.append(f"{namespace}/{target.name}")
    for key in dict.fromkeys(names):
        ns, _, name = key.rpartition("/")
        pod = snapshot.pod(ns or namespace, name)
        if pod is not None:
            pods.append(pod)
    if claim is not None:
        seen = {(namespace_of(p), name_of(p)) for p in pods}
        pods += [
            p for p in snapshot.pods_for_claim(claim) if (namespace_of(p), name_of(p)) not in seen
        ]
    nodes = allocation_nodes(claim) if claim is not None else []
    nodes += [n for p in pods if (n := _node_of(p)) and n not in nodes]
    return _RowObjects(claim, pods, nodes)


def _claim_matches(claim: K8sObject, scope: ScanScope) -> bool:
    if not scope.labels.matches(claim):
        return False
    if scope.fields.fields() - METADATA_FIELDS:
        return False  # a claim has no spec.nodeName or status.phase: only its pods can match
    return scope.fields.matches(claim)


def _pod_matches(pod: K8sObject, scope: ScanScope) -> bool:
    return scope.labels.matches(pod) and scope.fields.matches(pod)


def _in_scope(row: Diagnosis, objects: _RowObjects, scope: ScanScope) -> bool:
    if scope.selects_objects:
        if row.target.kind == "Node":
            if not scope.nodes:
                return False
        elif not (
            (objects.claim is not None and _claim_matches(objects.claim, scope))
            or any(_pod_matches(p, scope) for p in objects.pods)
        ):
            return False
    if scope.nodes and not set(objects.nodes) & set(scope.nodes):
        return False
    if scope.phases and (row.verdict.phase is None or row.verdict.phase.value not in scope.phases):
        return False
    if scope.rules or scope.min_severity is not None:
        return any(scope.wants_finding(f) for phase in row.phases for f in phase.findings)
    return True


def select_rows(
    snapshot: Snapshot,
    rows: Sequence[Diagnosis],
    scope: ScanScope,
    silences: Sequence[Silence] = (),
) -> ScanSelection:
    """The rows of ``rows`` in ``scope``, less those a silence covers."""
    if scope == ScanScope() and not silences:
        return ScanSelection(rows=tuple(rows))
    kept: list[Diagnosis] = []
    silenced: list[tuple[Diagnosis, Silence]] = []
    dropped = 0
    for row in rows:
        objects = _objects(snapshot, row)
        if not _in_scope(row, objects, scope):
            dropped += 1
            continue
        entry = next((s for s in silences if s.covers(row, objects.nodes)), None)
        if entry is not None:
            silenced.append((row, entry))
        else:
            kept.append(row)
    return ScanSelection(rows=tuple(kept), silenced=tuple(silenced), filtered_out=dropped)
