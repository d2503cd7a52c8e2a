"""Matching events, logs and objects against the rulebook: pure functions returning RuleHits.

Each hit carries what a finding needs: the rule, the regex captures, the explain text
rendered from them, and the evidence quoted precisely enough to read it again (the
event's reason, message, count and last timestamp; the log line with its number; the
object field that matched).

Logs can be large (a kubelet-plugin log at verbosity 6 runs to tens of MB), so a log is
not split into lines up front. Each rule pattern carries literals one of which any match
must contain (``rulebook/patterns.py``); every distinct literal costs one ``str.find``
pass over the text, and only the lines it lands on are cut out and given to the regex.
The regexes themselves are RE2 where possible, so no line can make matching blow up.

Overlapping rules resolve per evidence item (one event, one log line, one object): a
rule marked ``fallback`` is dropped when a specific rule matched the same item, and a
rule's ``supersedes`` list drops the named rules. Hits are sorted (phase order, id,
subject), so output stays stable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dradiag.analyses.error_chain import clip_middle
from dradiag.rulebook.patterns import Pattern, clean_captures, first_match
from dradiag.snapshot.model import K8sObject, Snapshot, event_time, name_of, namespace_of
from dradiag.vocabulary import PHASE_ORDER, Evidence, EvidenceSource, Finding

if TYPE_CHECKING:
    from dradiag.rulebook.loader import Rulebook
    from dradiag.rulebook.schema import ObjectMatch, PathStep, Rule, ValueTest
    from dradiag.snapshot.model import ContainerLog

IDENTIFIER_LAYERS: Mapping[str, str] = {
    "claim_uid": "claim UID",
    "slice_device_name": "slice device name",
    "cdi_device_id": "CDI device ID",
    "pci_bus_id": "PCI bus ID",
    "gpu_uuid": "GPU UUID",
    "mig_uuid": "MIG UUID",
}
"""Capture names that are identifiers of one layer, labelled as DESIGN §2 asks."""

EXCERPT_LIMIT = 800
"""Characters of a message or log line quoted as evidence."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    """What a hit is about: the event's involved object, the log's pod, the object itself."""

    kind: str
    namespace: str
    name: str
    container: str | None = None
    uid: str | None = None

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}" + (f" container {self.container}" if self.container else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleHit:
    """One rule firing on one subject, with the evidence that made it fire."""

    rule: Rule
    captures: Mapping[str, str]
    explain: str
    evidence: Evidence
    subject: Subject
    count: int = 1
    """Occurrences behind the hit: the events' summed counts, or the matching log lines."""
    first_seen: str | None = None
    last_seen: str | None = None
    line: int | None = None
    """For log hits: the 1-based number of the quoted (latest matching) line."""
    values: Mapping[str, str] = field(default_factory=dict)
    """Captures plus context fields (pod, claim, node, ...): what the templates were filled with."""
    extra_evidence: tuple[Evidence, ...] = field(default=())

    def to_finding(self, next_extra: Iterable[str] = ()) -> Finding:
        """The finding a diagnosis shows for this hit; ``next_extra`` follows the rule's own."""
        nexts = list(self.rule.render_next(self.values))
        nexts += [n for n in next_extra if n not in nexts]
        identifiers = tuple(
            (layer, self.captures[name])
            for name, layer in IDENTIFIER_LAYERS.items()
            if self.captures.get(name)
        )
        return Finding(
            rule=self.rule.id,
            phase=self.rule.phase,
            severity=self.rule.severity,
            title=self.rule.title,
            detail=self.explain,
            evidence=(self.evidence, *self.extra_evidence),
            next=tuple(nexts),
            identifiers=identifiers,
        )


def _clip(text: str, limit: int = EXCERPT_LIMIT) -> str:
    # The end of an error chain is its innermost cause: clip the middle, never the end.
    return clip_middle(text, limit)


def _resolve_overlaps(rules: Sequence[Rule]) -> list[Rule]:
    """Rules that stand for one evidence item once fallbacks and superseded ones go."""
    if len(rules) < 2:
        return list(rules)
    dropped = {target for r in rules for target in r.supersedes}
    kept = [r for r in rules if r.id not in dropped]
    if any(not r.fallback for r in kept):
        kept = [r for r in kept if not r.fallback]
    return kept


def resolve_overlaps(rules: Sequence[Rule]) -> list[Rule]:
    """The rules that stand when all of ``rules`` matched one evidence item (fallbacks
    and superseded rules dropped); ``dradiag explain`` treats a pasted text as one."""
    return _resolve_overlaps(rules)


def _sort_key(hit: RuleHit) -> tuple[Any, ...]:
    s = hit.subject
    return (
        PHASE_ORDER.index(hit.rule.phase),
        hit.rule.id,
        s.kind,
        s.namespace,
        s.name,
        s.container or "",
        hit.line or 0,
    )


# -- events ---------------------------------------------------------------------------


def _event_captures(rule: Rule, event: K8sObject) -> dict[str, str] | None:
    assert rule.match is not None and rule.match.event is not None
    em = rule.match.event
    reason = str(event.get("reason") or "")
    if em.reasons is not None and reason not in em.reasons:
        return None
    if em.reason_pattern is not None and em.reason_pattern.search(reason) is None:
        return None
    if em.type is not None and event.get("type") != em.type:
        return None
    involved = event.get("involvedObject") or {}
    if em.involved_kind is not None and involved.get("kind") != em.involved_kind:
        return None
    if em.source is not None:
        source = event.get("source") or {}
        component = str(source.get("component") or event.get("reportingComponent") or "")
        if em.source.search(component) is None:
            return None
    if not em.messages:
        return {}
    found = first_match(em.messages, str(event.get("message") or ""))
    return None if found is None else clean_captures(found[1])


def _event_context(event: K8sObject) -> dict[str, str]:
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind") or "")
    ns = str(involved.get("namespace") or namespace_of(event))
    name = str(involved.get("name") or "")
    ctx = {
        "reason": str(event.get("reason") or ""),
        "message": str(event.get("message") or ""),
        "count": str(event.get("count") or 1),
        "kind": kind,
        "namespace": ns,
        "name": name,
        "object": f"{kind} {ns}/{name}" if ns else f"{kind} {name}",
    }
    if kind == "Pod":
        ctx["pod"] = f"{ns}/{name}"
    elif kind == "ResourceClaim":
        ctx["claim"] = f"{ns}/{name}"
    elif kind == "Node":
        ctx["node"] = name
    host = (event.get("source") or {}).get("host")
    if host:
        ctx.setdefault("node", str(host))
    return ctx


def _first_time(event: K8sObject) -> str:
    for key in ("firstTimestamp", "eventTime", "lastTimestamp"):
        if event.get(key):
            return str(event[key])
    return str((event.get("metadata") or {}).get("creationTimestamp") or "")


def match_events(rulebook: Rulebook, events: Iterable[K8sObject]) -> list[RuleHit]:
    """Hits of event rules, one per (rule, involved object), counts summed over its events.

    The quoted evidence and the captures come from the latest matching event, since
    kubelet and scheduler retry and the latest message is the current cause.
    """
    groups: dict[tuple[str, str, str, str], list[tuple[K8sObject, dict[str, str]]]] = {}
    rules_by_id: dict[str, Rule] = {}
    for event in events:
        reason = str(event.get("reason") or "")
        candidates = rulebook.event_rules(reason)
        matched: list[tuple[Rule, dict[str, str]]] = []
        for rule in candidates:
            captures = _event_captures(rule, event)
            if captures is not None:
                matched.append((rule, captures))
        if not matched:
            continue
        standing = {r.id for r in _resolve_overlaps([r for r, _ in matched])}
        involved = event.get("involvedObject") or {}
        for rule, captures in matched:
            if rule.id not in standing:
                continue
            key = (
                rule.id,
                str(involved.get("kind") or ""),
                str(involved.get("namespace") or namespace_of(event)),
                str(involved.get("name") or ""),
            )
            rules_by_id[rule.id] = rule
            groups.setdefault(key, []).append((event, captures))
    hits = []
    for (rule_id, kind, ns, name), items in groups.items():
        items.sort(key=lambda item: event_time(item[0]))
        latest, captures = items[-1]
        rule = rules_by_id[rule_id]
        count = sum(int(ev.get("count") or 1) for ev, _ in items)
        values = _event_context(latest) | captures
        last_ts = event_time(latest)
        excerpt = f"{latest.get('type') or 'Event'} {latest.get('reason')}: " + _clip(
            str(latest.get("message") or "")
        )
        excerpt += f" (x{count}" + (f", last {last_ts})" if last_ts else ")")
        event_ref = f"{namespace_of(latest)}/{name_of(latest)}" if name_of(latest) else "?"
        involved_uid = (latest.get("involvedObject") or {}).get("uid")
        hits.append(
            RuleHit(
                rule=rule,
                captures=captures,
                explain=rule.render_explain(values),
                evidence=Evidence(
                    source=EvidenceSource.EVENT,
                    ref=f"Event {event_ref} on {kind} {ns}/{name}"
                    if ns
                    else f"Event {event_ref} on {kind} {name}",
                    excerpt=excerpt,
                ),
                subject=Subject(
                    kind=kind,
                    namespace=ns,
                    name=name,
                    uid=str(involved_uid) if involved_uid else None,
                ),
                count=count,
                first_seen=min((_first_time(ev) for ev, _ in items), default=None) or None,
                last_seen=last_ts or None,
                values=values,
            )
        )
    return sorted(hits, key=_sort_key)


# -- logs -----------------------------------------------------------------------------

_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))\s")


def _log_rules_for(rulebook: Rulebook, log: ContainerLog) -> list[Rule]:
    out = []
    for rule in rulebook.rules:
        lm = rule.match.log if rule.match is not None else None
        if lm is None:
            continue
        if lm.container is not None and lm.container.search(log.container) is None:
            continue
        if lm.pod is not None and lm.pod.search(log.pod) is None:
            continue
        out.append(rule)
    return out


class _Text:
    """A log's text with lazily computed views shared by every rule scanning it."""

    __slots__ = ("text", "_lower")

    def __init__(self, text: str) -> None:
        self.text = text
        self._lower: str | None = None

    def view(self, pattern: Pattern) -> str:
        if not pattern.ignore_case:
            return self.text
        if self._lower is None:
            # ASCII-only lowering keeps offsets aligned with the original text.
            self._lower = self.text.translate(_ASCII_LOWER)
        return self._lower


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def _candidate_lines(text: _Text, rules: Sequence[Rule]) -> dict[int, list[Rule]]:
    """Start offsets of lines that contain a literal of a rule's pattern, with those rules."""
    out: dict[int, list[Rule]] = {}
    scanned: dict[tuple[str, bool], list[int]] = {}
    raw = text.text
    for rule in rules:
        assert rule.match is not None and rule.match.log is not None
        starts: set[int] = set()
        for pattern in rule.match.log.patterns:
            if not pattern.literals:
                starts.update(_all_line_starts(raw))
                continue
            hay = text.view(pattern)
            for literal in pattern.literals:
                key = (literal, pattern.ignore_case)
                if key not in scanned:
                    scanned[key] = _lines_containing(hay, literal)
                starts.update(scanned[key])
        for start in starts:
            out.setdefault(start, []).append(rule)
    return out


def _lines_containing(hay: str, literal: str) -> list[int]:
    found = []
    pos = hay.find(literal)
    while pos >= 0:
        start = hay.rfind("\n", 0, pos) + 1
        end = hay.find("\n", pos)
        found.append(start)
        if end < 0:
            break
        pos = hay.find(literal, end)
    return found


def _all_line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos >= 0:
        if pos + 1 < len(text):
            starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def _log_ref(log: ContainerLog, line: int) -> str:
    ns = log.namespace or ""
    where = f"{ns}/{log.pod}/{log.container}" if ns else f"{log.pod}/{log.container}"
    return f"log {where}{' (previous)' if log.previous else ''}:{line}"


@dataclass(slots=True)
class _LogAcc:
    rule: Rule
    count: int = 0
    first_line: int = 0
    first_ts: str | None = None
    last_line: int = 0
    last_text: str = ""
    last_ts: str | None = None
    captures: dict[str, str] = field(default_factory=dict)


def match_log(rulebook: Rulebook, log: ContainerLog) -> list[RuleHit]:
    """Hits in one container log: one per rule, quoting its latest matching line."""
    rules = _log_rules_for(rulebook, log)
    if not rules or not log.text:
        return []
    text = _Text(log.text)
    candidates = _candidate_lines(text, rules)
    raw = text.text
    acc: dict[str, _LogAcc] = {}
    line_no, counted_to = 1, 0
    for start in sorted(candidates):
        line_no += raw.count("\n", counted_to, start)
        counted_to = start
        end = raw.find("\n", start)
        line = raw[start : end if end >= 0 else len(raw)].rstrip("\r")
        matched: list[tuple[Rule, dict[str, str]]] = []
        for rule in candidates[start]:
            assert rule.match is not None and rule.match.log is not None
            found = first_match(rule.match.log.patterns, line)
            if found is not None:
                matched.append((rule, clean_captures(found[1])))
        if not matched:
            continue
        standing = {r.id for r in _resolve_overlaps([r for r, _ in matched])}
        ts_match = _TIMESTAMP.match(line)
        ts = ts_match.group(1) if ts_match else None
        for rule, captures in matched:
            if rule.id not in standing:
                continue
            a = acc.get(rule.id)
            if a is None:
                a = acc[rule.id] = _LogAcc(rule=rule, first_line=line_no, first_ts=ts)
            a.count += 1
            a.last_line, a.last_text, a.last_ts, a.captures = line_no, line, ts, captures
    hits = []
    ns = log.namespace or ""
    for a in acc.values():
        values = {
            "namespace": ns,
            "pod": f"{ns}/{log.pod}" if ns else log.pod,
            "container": log.container,
            "line": _clip(a.last_text, 300),
            "line_number": str(a.last_line),
        } | a.captures
        excerpt = _clip(a.last_text)
        if a.count > 1:
            excerpt += f" ({a.count} matching lines, first at line {a.first_line})"
        hits.append(
            RuleHit(
                rule=a.rule,
                captures=a.captures,
                explain=a.rule.render_explain(values),
                evidence=Evidence(
                    source=EvidenceSource.LOG, ref=_log_ref(log, a.last_line), excerpt=excerpt
                ),
                subject=Subject(kind="Pod", namespace=ns, name=log.pod, container=log.container),
                count=a.count,
                first_seen=a.first_ts,
                last_seen=a.last_ts,
                line=a.last_line,
                values=values,
            )
        )
    return hits


def match_logs(rulebook: Rulebook, logs: Iterable[ContainerLog]) -> list[RuleHit]:
    """Hits of log rules over several container logs, sorted."""
    hits: list[RuleHit] = []
    for log in logs:
        hits.extend(match_log(rulebook, log))
    return sorted(hits, key=_sort_key)


# -- objects --------------------------------------------------------------------------

_MISSING = object()


def _walk(values: list[tuple[Any, str]], steps: Sequence[PathStep]) -> list[tuple[Any, str]]:
    """Follow a path from each (value, label) to the values it reaches, with their labels."""
    for step in steps:
        nxt: list[tuple[Any, str]] = []
        for value, label in values:
            if not isinstance(value, Mapping) or step.key not in value:
                continue
            child = value[step.key]
            child_label = f"{label}.{step.key}"
            if step.each:
                if isinstance(child, list):
                    for i, item in enumerate(child):
                        tag = item.get("name") if isinstance(item, Mapping) else None
                        nxt.append((item, f"{child_label}[{f'name={tag}' if tag else i}]"))
            else:
                nxt.append((child, child_label))
        values = nxt
    return values


def _test_value(test: ValueTest, element: Any) -> tuple[bool, dict[str, str], Any]:
    """Whether the test holds on ``element``; regex captures; the value that decided it."""
    reached = [v for v, _ in _walk([(element, "")], test.path)] if test.path else [element]
    reached = [v for v in reached if v is not None]
    ok, captures, shown = False, {}, reached[0] if reached else _MISSING
    if test.exists is not None:
        ok = bool(reached) == test.exists
    elif test.one_of is not None:
        hits = [v for v in reached if v in test.one_of]
        ok, shown = bool(hits), hits[0] if hits else shown
    elif test.pattern is not None:
        for v in reached:
            if isinstance(v, (str, int, float)) and not isinstance(v, bool):
                found = test.pattern.search(str(v))
                if found is not None:
                    ok, captures, shown = True, clean_captures(found), v
                    break
    else:
        hits = [v for v in reached if v == test.equals]
        ok, shown = bool(hits), hits[0] if hits else shown
    if test.negate:
        return (not ok), {}, shown
    return ok, captures, shown


def _path_text(steps: Sequence[PathStep]) -> str:
    return ".".join(s.key + ("[]" if s.each else "") for s in steps)


def _show(value: Any) -> str:
    if value is _MISSING:
        return "<absent>"
    if isinstance(value, (Mapping, list)):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _object_context(kind: str, obj: K8sObject) -> dict[str, str]:
    ns, name = namespace_of(obj), name_of(obj)
    ctx = {
        "kind": kind,
        "namespace": ns,
        "name": name,
        "object": f"{kind} {ns}/{name}" if ns else f"{kind} {name}",
    }
    if kind == "Pod":
        ctx["pod"] = f"{ns}/{name}"
        node = (obj.get("spec") or {}).get("nodeName")
        if node:
            ctx["node"] = str(node)
    elif kind == "ResourceClaim":
        ctx["claim"] = f"{ns}/{name}"
    elif kind == "Node":
        ctx["node"] = name
    return ctx


def _match_object(rule: Rule, om: ObjectMatch, kind: str, obj: K8sObject) -> RuleHit | None:
    elements = _walk([(obj, "")], om.path)
    matching: list[tuple[str, dict[str, str], list[str]]] = []
    for element, label in elements:
        captures: dict[str, str] = {}
        shown: list[str] = []
        for test in om.tests:
            ok, caps, value = _test_value(test, element)
            if not ok:
                break
            captures |= caps
            sub = _path_text(test.path)
            shown.append(f"{sub}={_show(value)}" if sub else _show(value))
        else:
            for name, steps in om.captures:
                reached = [v for v, _ in _walk([(element, "")], steps) if v is not None]
                if reached and name not in captures:
                    captures[name] = _show(reached[0])
            matching.append((label, captures, shown))
    if not matching:
        return None
    label, captures, shown = matching[0]
    ctx = _object_context(kind, obj)
    values = ctx | captures
    excerpt = _clip(", ".join(shown))
    if len(matching) > 1:
        excerpt += f" (and {len(matching) - 1} more)"
    return RuleHit(
        rule=rule,
        captures=captures,
        explain=rule.render_explain(values),
        evidence=Evidence(
            source=EvidenceSource.OBJECT, ref=f"{ctx['object']} {label or '.'}", excerpt=excerpt
        ),
        subject=Subject(
            kind=kind,
            namespace=ctx["namespace"],
            name=ctx["name"],
            uid=str((obj.get("metadata") or {}).get("uid") or "") or None,
        ),
        count=len(matching),
        values=values,
    )


def match_objects(rulebook: Rulebook, kind: str, objects: Iterable[K8sObject]) -> list[RuleHit]:
    """Hits of object predicates for objects of ``kind`` (``Pod``, ``ResourceClaim``, ...)."""
    rules = rulebook.object_rules(kind)
    if not rules:
        return []
    hits: list[RuleHit] = []
    for obj in objects:
        found: list[RuleHit] = []
        for rule in rules:
            assert rule.match is not None and rule.match.object is not None
            hit = _match_object(rule, rule.match.object, kind, obj)
            if hit is not None:
                found.append(hit)
        standing = {r.id for r in _resolve_overlaps([h.rule for h in found])}
        hits.extend(h for h in found if h.rule.id in standing)
    return sorted(hits, key=_sort_key)


def match_snapshot(rulebook: Rulebook, snapshot: Snapshot) -> list[RuleHit]:
    """Every data rule over a whole Snapshot: its events, logs and objects, and the known
    issues whose version and symptom it shows, sorted."""
    from dradiag.analyses.known_issues import match_known_issues

    hits = match_known_issues(rulebook, snapshot)
    hits += match_events(rulebook, snapshot.events)
    hits += match_logs(rulebook, snapshot.logs)
    for kind, objects in (
        ("Pod", snapshot.pods),
        ("ResourceClaim", snapshot.claims),
        ("ResourceSlice", snapshot.slices),
        ("Node", snapshot.nodes),
        ("DeviceClass", snapshot.device_classes),
    ):
        hits += match_objects(rulebook, kind, objects)
    return sorted(hits, key=_sort_key)
