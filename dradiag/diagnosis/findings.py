"""Findings of the walk: catalogue enrichment, ordering by specificity and ``supersedes``,
and the PhaseResult a phase returns (``phase_result``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.analyses.component_events import klog_message
from dradiag.analyses.error_chain import clip_middle, innermost_error
from dradiag.analyses.timeline import (
    event_count,
    event_first_time,
    event_last_time,
    format_age,
)
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import (
    ALLOC_UNSCHEDULABLE,
    INJ_CREATE_FAILED,
    PREP_FAILED,
    PREP_STUCK,
    PUB_DRIVER_NO_SLICES,
    PUB_NODE_NO_SLICES,
    UNPREP_DELETION_STUCK,
    UNPREP_POD_STUCK_TERMINATING,
    UNPREP_STALE_RESERVATION,
)
from dradiag.snapshot.model import (
    K8sObject,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity


def _enrich(finding: Finding, rulebook: Any | None) -> Finding:
    """Title and generic next steps of a code-backed finding from its rule entry.

    The code knows the specifics (names, counts, commands for this claim); the rule file
    holds the catalogue text, so ``rules show ID`` and the diagnosis say the same thing.
    """
    if rulebook is None:
        return finding
    rule = rulebook.get(finding.rule)
    if rule is None or rule.match is not None:
        # Data-rule hits arrive rendered by the matcher; only code-backed ones need this.
        return finding
    extra = tuple(n for n in rule.next if n not in finding.next and not _context_placeholders(n))
    return replace(finding, title=rule.title or finding.title, next=finding.next + extra)


@functools.cache
def _context_placeholders(text: str) -> frozenset[str]:
    """Evidence placeholders (``{pod}``, ``{node}``) in a catalogue line. Only the matcher
    fills them; a code-backed finding states its own commands, so such a line is left out
    rather than shown with the braces (kubectl jsonpath braces are not placeholders)."""
    from dradiag.rulebook.schema import CONTEXT_FIELDS, explain_placeholders

    known = frozenset().union(*CONTEXT_FIELDS.values()) | _EXTRA_PLACEHOLDERS
    return explain_placeholders(text) & known


_EXTRA_PLACEHOLDERS = frozenset({"container", "driver", "request", "nodes", "age", "cause"})


def event_evidence(event: K8sObject) -> Evidence:
    """An Event as evidence: reference it can be read again by, and its message."""
    io = event.get("involvedObject") or {}
    count = event_count(event)
    ns = namespace_of(event) or str(io.get("namespace") or "")
    ref = f"Event {ns}/{name_of(event)}" if ns else f"Event {name_of(event)}"
    times = ""
    first, last = event_first_time(event), event_last_time(event)
    if count > 1 and first and last:
        times = f" (x{count} over {format_age(last - first)})"
    elif count > 1:
        times = f" (x{count})"
    excerpt = (
        f"{event.get('type') or 'Normal'} {event.get('reason') or ''}{times} "
        f"{io.get('kind') or ''}/{io.get('name') or ''}: "
        f"{clip_middle(str(event.get('message') or ''), 600)}"
    )
    return Evidence(source=EvidenceSource.EVENT, ref=ref, excerpt=excerpt)


def _status_of(findings: Sequence[Finding], base: PhaseStatus) -> PhaseStatus:
    if any(f.severity is Severity.ERROR for f in findings):
        return PhaseStatus.BROKEN
    if base is PhaseStatus.UNKNOWN:
        return PhaseStatus.UNKNOWN
    if any(f.severity is Severity.WARNING for f in findings):
        return PhaseStatus.WARN if base is not PhaseStatus.NOT_REACHED else PhaseStatus.NOT_REACHED
    return base


def phase_result(
    rulebook: Any | None,
    phase: Phase,
    findings: Iterable[Finding],
    base: PhaseStatus,
    summary: str = "",
) -> PhaseResult:
    enriched = [_enrich(f, rulebook) for f in findings]
    if not enriched:
        # Most phases of most walks find nothing: no merging, causes or ordering to do.
        return PhaseResult(phase=phase, status=_status_of((), base), findings=(), summary=summary)
    # The same rule saying the same thing twice (a current and a previous log, a claim
    # and a pod event) is one finding with the evidence of both.
    merged: dict[tuple[str, str, Severity], Finding] = {}
    for f in enriched:
        key = (f.rule, f.detail, f.severity)
        if key in merged:
            kept = merged[key]
            extra = tuple(e for e in f.evidence if e not in kept.evidence)
            merged[key] = replace(kept, evidence=kept.evidence + extra)
        else:
            merged[key] = f
    deduped = [_with_cause(f, phase, rulebook) for f in merged.values()]
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    # A finding whose rule another finding here supersedes (rules/*.yaml `supersedes`)
    # describes what that one explains: it never decides the verdict ahead of it.
    superseded = {
        target
        for f in deduped
        if rulebook is not None and (rule := rulebook.get(f.rule)) is not None
        for target in getattr(rule, "supersedes", ())
    }
    deduped.sort(key=lambda f: (order[f.severity], f.rule in superseded, _specificity(f, rulebook)))
    return PhaseResult(
        phase=phase,
        status=_status_of(deduped, base),
        findings=tuple(deduped),
        summary=summary,
    )


UMBRELLA_RULES: frozenset[str] = frozenset(
    {
        PUB_DRIVER_NO_SLICES,
        PUB_NODE_NO_SLICES,
        "DRA-ALLOC-CANNOT-ALLOCATE",
        ALLOC_UNSCHEDULABLE,
        PREP_FAILED,
        PREP_STUCK,
        INJ_CREATE_FAILED,
        UNPREP_POD_STUCK_TERMINATING,
        UNPREP_STALE_RESERVATION,
        UNPREP_DELETION_STUCK,
    }
)
"""Rules that name a symptom many causes share ("no slices", "cannot allocate all claims",
"Prepare failed"). Within a phase a more specific finding, a log line or a computed
explanation, decides the verdict ahead of them."""


_REPEAT_NOTE = re.compile(r"\s*\((?:x\d+|\d+ matching lines)[^)]*\)\s*$")
"""The count an excerpt ends with ("(x12, last …)"), not part of the quoted error."""

_CHAINED_PHASES = frozenset({Phase.PREPARE, Phase.INJECTION, Phase.UNPREPARE})
"""Phases whose umbrella evidence is a kubelet/plugin/runtime error chain."""


def _with_cause(finding: Finding, phase: Phase, rulebook: Any | None) -> Finding:
    """An umbrella finding of a wrapped error, titled with the chain's innermost cause.

    "The kubelet could not prepare the claim's devices" is true of every Prepare failure;
    the last link of the quoted error (a config field, a MIG profile, a driver name, a
    permission) is what the reader acts on, so it goes into the title.
    """
    if (
        phase not in _CHAINED_PHASES
        or finding.severity is not Severity.ERROR
        or _specificity(finding, rulebook) < 1
    ):
        return finding
    quoted = next(
        (
            e.excerpt
            for e in finding.evidence
            if e.source in (EvidenceSource.EVENT, EvidenceSource.LOG)
        ),
        "",
    )
    message = quoted.split(": ", 1)[1] if quoted.startswith(("Warning ", "Normal ")) else quoted
    message = _REPEAT_NOTE.sub("", message)
    if ' err="' in message or ' error="' in message:
        message = klog_message(message)[0]  # a kubelet log line: its err= field
    cause = innermost_error(message)
    if finding.cause or not cause or cause in finding.title:
        return finding
    if len(cause) >= len(message.strip()) > 200:
        return finding  # no chain to take apart: the detail quotes the message
    return replace(finding, cause=clip_middle(cause, 200))


def _specificity(finding: Finding, rulebook: Any | None) -> int:
    """0: a specific cause; 1: a catch-all message rule; 2: the plugin's state; 3: an
    umbrella symptom."""
    if finding.rule in UMBRELLA_RULES:
        return 3
    if finding.rule in ph.RULE_IDS:
        # The plugin's state (crash-looping, stuck): what its log says is the cause.
        return 2
    rule = rulebook.get(finding.rule) if rulebook is not None else None
    if rule is not None and getattr(rule, "fallback", False):
        return 1
    return 0


def as_historical(finding: Finding, why: str) -> Finding:
    """A matched symptom whose boundary has since been crossed: shown, never the cause."""
    return replace(
        finding,
        severity=Severity.INFO,
        detail=f"Earlier, since resolved ({why}): {finding.detail}".strip(),
    )
