"""Which rules a pasted error message matches, with no cluster: ``dradiag explain``.

A support engineer holds a line from a ticket (an event message from ``kubectl
describe``, a kubelet-plugin log line) and wants the rule behind it. The text is put
through the rulebook's own matchers (``rule_matching.match_events`` and ``match_log``)
as a synthetic Event and as a synthetic container log, so an explanation can never
disagree with what a diagnosis would say about the same text.

The synthetic Events take each reason, type and involved kind the event rules ask
for; when the text names reasons (a ``kubectl describe`` events row does) only those
are tried, and rules that read a reason alone fire only then. The synthetic logs take
each container name the log rules name. The whole text is one evidence item, so a
fallback rule or a superseded one does not stand beside the rule that replaces it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dradiag.analyses.rule_matching import match_events, match_log, resolve_overlaps
from dradiag.rulebook.schema import explain_placeholders
from dradiag.snapshot.model import ContainerLog

if TYPE_CHECKING:
    from dradiag.rulebook.loader import Rulebook
    from dradiag.rulebook.schema import Rule

PASTED = "pasted"
"""The name of the synthetic objects (event, pod): there is no real one."""

_CAMEL = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]*)+\b")
"""Event reasons are CamelCase words (FailedScheduling, FailedPrepareDynamicResources)."""
_CONTAINERS = re.compile(r"^\^\(?([A-Za-z0-9_.|-]+)\)?\$$")
"""A container filter that is a plain alternation (``^(gpus|compute-domains)$``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageMatch:
    """One rule a pasted text matched, and how."""

    rule: Rule
    matched_as: str
    """``event`` (as an Event message) or ``log`` (as a log line)."""
    reason: str | None
    """The Event reason it was matched under (``event`` only)."""
    captures: Mapping[str, str]
    explain: str
    next: tuple[str, ...]


def _reasons(rulebook: Rulebook, text: str) -> tuple[list[str], bool]:
    """Reasons to try, and whether the text named them itself."""
    named: set[str] = set()
    patterned = False
    for rule in rulebook.rules:
        em = rule.match.event if rule.match is not None else None
        if em is not None:
            named |= set(em.reasons or ())
            patterned = patterned or em.reason_pattern is not None
    in_text = set(_CAMEL.findall(text))
    found = sorted((named & in_text) | (in_text if patterned else set()))
    if named & in_text:
        return found, True
    return sorted(named) + [""] + (sorted(in_text) if patterned else []), False


def _event_shapes(rulebook: Rulebook) -> list[tuple[str | None, str]]:
    types: set[str | None] = {None}
    kinds = {"Pod"}
    for rule in rulebook.rules:
        em = rule.match.event if rule.match is not None else None
        if em is not None:
            types.add(em.type)
            kinds.add(em.involved_kind or "Pod")
    return [(t, k) for t in sorted(types, key=str) for k in sorted(kinds)]


def _synthetic_events(
    rulebook: Rulebook, text: str, reasons: Sequence[str]
) -> list[dict[str, Any]]:
    events = []
    for i, (reason, (type_, kind)) in enumerate(
        (r, shape) for r in reasons for shape in _event_shapes(rulebook)
    ):
        events.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{PASTED}-{i}", "namespace": ""},
                "reason": reason,
                "type": type_ or "Warning",
                "message": text,
                "count": 1,
                "involvedObject": {"kind": kind, "namespace": "", "name": f"{PASTED}-{i}"},
                "source": {"component": ""},
            }
        )
    return events


def _containers(rulebook: Rulebook) -> list[str]:
    names = {PASTED}
    for rule in rulebook.rules:
        lm = rule.match.log if rule.match is not None else None
        if lm is not None and lm.container is not None:
            m = _CONTAINERS.match(lm.container.source)
            if m:
                names |= set(m.group(1).split("|"))
    return sorted(names)


def _values(rule: Rule, captures: Mapping[str, str]) -> dict[str, str]:
    """Placeholders the paste cannot fill read ``<name>``, as in a command to adapt."""
    names: set[str] = set()
    for template in (rule.explain, *rule.next):
        for placeholder in explain_placeholders(template):
            names |= set(placeholder.split("|"))
    values = {name: f"<{name}>" for name in names}
    values["count"] = "1"
    return values | {k: v for k, v in captures.items() if v}


def explain_message(rulebook: Rulebook, text: str) -> list[MessageMatch]:
    """The rules ``text`` matches as an Event message or as log lines, in phase order."""
    text = text.strip()
    if not text:
        return []
    reasons, reasons_named = _reasons(rulebook, text)
    found: dict[str, MessageMatch] = {}
    events = _synthetic_events(rulebook, text, reasons)
    reason_of = {str(e["involvedObject"]["name"]): str(e["reason"]) for e in events}
    for hit in match_events(rulebook, events):
        em = hit.rule.match.event if hit.rule.match is not None else None
        if em is None or (not em.messages and not reasons_named):
            continue  # a reason-only rule would fire on any text
        if hit.rule.id not in found:
            reason = reason_of.get(hit.subject.name) or None
            found[hit.rule.id] = _match(hit.rule, "event", reason, hit.captures)
    for container in _containers(rulebook):
        log = ContainerLog(namespace="", pod=PASTED, container=container, text=text)
        for hit in match_log(rulebook, log):
            found.setdefault(hit.rule.id, _match(hit.rule, "log", None, hit.captures))
    standing = {r.id for r in resolve_overlaps([m.rule for m in found.values()])}
    order = {phase: i for i, phase in enumerate(_phase_order())}
    return sorted(
        (m for m in found.values() if m.rule.id in standing),
        key=lambda m: (order.get(m.rule.phase, 99), m.rule.id),
    )


def _match(rule: Rule, how: str, reason: str | None, captures: Mapping[str, str]) -> MessageMatch:
    values = _values(rule, captures)
    return MessageMatch(
        rule=rule,
        matched_as=how,
        reason=reason,
        captures=dict(captures),
        explain=rule.render_explain(values),
        next=rule.render_next(values),
    )


def _phase_order() -> tuple[Any, ...]:
    from dradiag.vocabulary import PHASE_ORDER

    return PHASE_ORDER
