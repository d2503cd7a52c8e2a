"""Known issues by version: a published bug fires when its component's version is affected
and its symptom is present. Pure: a Snapshot (and optionally the evidence in scope) in,
RuleHits out.

A known-issue rule (``match.known_issue``, ``rulebook/schema.py``) names a component, the
version ranges a bug affects per release branch, the release that fixed it, the
upstream issue, and a symptom made of the same event / log / object parts as any other
rule. The symptom parts are found by the ordinary matchers (``rule_matching``) over the
rulebook's reduced copies of these rules (``Rulebook.symptom_rulebook``); what this module
adds is the version: where the symptom was seen (the event's node, the pod's node, the
plugin's node), which version of the component runs there (``component_versions``), and
whether that version is affected. A version dradiag cannot place (none recorded, junk,
``1.34`` against a patch-level range) never fires the rule: a known issue is a specific
cause, and claiming one on a guess would send the user to the wrong fix.

The hit quotes the symptom first, then the other symptom parts, then the version and
where it was read, and its explain names the fix release and the upstream URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dradiag.analyses.component_versions import ComponentVersion, component_versions
from dradiag.analyses.rule_matching import (
    RuleHit,
    Subject,
    match_events,
    match_logs,
    match_objects,
)
from dradiag.rulebook.versions import affected
from dradiag.snapshot.model import K8sObject, Snapshot, name_of
from dradiag.vocabulary import PHASE_ORDER, Evidence, EvidenceSource

if TYPE_CHECKING:
    from dradiag.rulebook.loader import Rulebook
    from dradiag.rulebook.schema import KnownIssueMatch, Rule
    from dradiag.snapshot.model import ContainerLog

PER_NODE = frozenset({"kubelet", "containerd", "cri-o", "nvidia-dra-driver", "nvidia-gpu-driver"})
"""Components that run on every node, so the symptom's node decides which version counts."""


def _part_hits(
    rulebook: Rulebook,
    events: Sequence[K8sObject],
    logs: Sequence[ContainerLog],
    objects: Sequence[tuple[str, K8sObject]],
) -> dict[tuple[str, str], list[RuleHit]]:
    """Per (symptom part key, rule id): the hits of that part over the evidence."""
    out: dict[tuple[str, str], list[RuleHit]] = {}
    for key in rulebook.symptom_keys:
        book = rulebook.symptom_rulebook(key)
        if key == "event":
            hits = match_events(book, events)
        elif key == "log":
            hits = match_logs(book, logs)
        else:
            hits = []
            kinds = {r.match.object.kind for r in book if r.match and r.match.object}
            for kind in sorted(kinds):
                hits += match_objects(book, kind, [o for k, o in objects if k == kind])
        for hit in hits:
            out.setdefault((key, hit.rule.id), []).append(hit)
    return out


def _node_of(snapshot: Snapshot, hit: RuleHit) -> str | None:
    """The node the evidence is about: named by it, or the node of the pod it is on."""
    node = hit.values.get("node")
    if node:
        return str(node)
    if hit.subject.kind == "Pod":
        pod = snapshot.pod(hit.subject.namespace, hit.subject.name)
        name = ((pod or {}).get("spec") or {}).get("nodeName")
        return str(name) if name else None
    return None


def _known_issue(rule: Rule) -> KnownIssueMatch:
    assert rule.match is not None and rule.match.known_issue is not None
    return rule.match.known_issue


def _evidence_nodes(
    snapshot: Snapshot, events: Sequence[K8sObject], logs: Sequence[ContainerLog]
) -> list[str]:
    """Nodes the events and logs in scope come from (the event's host, the pod's node)."""
    out: list[str] = []
    for ev in events:
        host = (ev.get("source") or {}).get("host")
        if host:
            out.append(str(host))
        involved = ev.get("involvedObject") or {}
        if involved.get("kind") == "Pod":
            pod = snapshot.pod(
                str(involved.get("namespace") or ""), str(involved.get("name") or "")
            )
            if node := ((pod or {}).get("spec") or {}).get("nodeName"):
                out.append(str(node))
    for log in logs:
        pod = snapshot.pod(log.namespace or "", log.pod)
        if node := ((pod or {}).get("spec") or {}).get("nodeName"):
            out.append(str(node))
    return out


class _Readings:
    """Component versions read once per (component, node) for one call."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._cache: dict[tuple[str, str | None], list[ComponentVersion]] = {}

    def get(self, component: str, node: str | None) -> list[ComponentVersion]:
        key = (component, node if component in PER_NODE else None)
        if key not in self._cache:
            self._cache[key] = component_versions(self.snapshot, component, key[1])
        return self._cache[key]


def _affected_version(
    readings: _Readings, ki: KnownIssueMatch, nodes: Sequence[str | None]
) -> ComponentVersion | None:
    """The first reading of the component on ``nodes`` that is affected, if any."""
    seen: set[str] = set()
    for node in nodes if ki.component in PER_NODE else [None]:
        for cv in readings.get(ki.component, node):
            if cv.ref in seen:
                continue
            seen.add(cv.ref)
            if affected(cv.version, ki.affected) is True:
                return cv
    return None


def _version_evidence(ki: KnownIssueMatch, cv: ComponentVersion) -> Evidence:
    excerpt = f"{ki.component} {cv.raw}: affected ({ki.affected_text}); fixed in {ki.fixed_in_text}"
    if cv.note:
        excerpt += f" ({cv.note})"
    return Evidence(source=EvidenceSource.OBJECT, ref=cv.ref, excerpt=excerpt)


def _hit(
    rule: Rule,
    ki: KnownIssueMatch,
    cv: ComponentVersion,
    primary: RuleHit | None,
    others: Iterable[RuleHit],
) -> RuleHit:
    others = list(others)
    values: dict[str, str] = {}
    for h in others[::-1]:
        values.update(h.values)
    if primary is not None:
        values.update(primary.values)
    values.update(
        {
            "component": ki.component,
            "version": cv.raw,
            "fixed_in": ki.fixed_in_text,
            "upstream": ki.upstream,
            "affected": ki.affected_text,
        }
    )
    if cv.node and not values.get("node"):
        values["node"] = cv.node
    version_evidence = _version_evidence(ki, cv)
    if primary is None:
        subject = (
            Subject(kind="Node", namespace="", name=cv.node)
            if cv.node
            else Subject(kind="Cluster", namespace="", name=ki.component)
        )
        return RuleHit(
            rule=rule,
            captures={},
            explain=rule.render_explain(values),
            evidence=version_evidence,
            subject=subject,
            values=values,
        )
    captures: dict[str, str] = {}
    for h in [primary, *others]:
        for key, value in h.captures.items():
            captures.setdefault(key, value)
    extra = [*primary.extra_evidence]
    for h in others:
        extra += [h.evidence, *h.extra_evidence]
    return replace(
        primary,
        rule=rule,
        captures=captures,
        explain=rule.render_explain(values),
        values=values,
        extra_evidence=(*extra, version_evidence),
    )


def match_known_issues(
    rulebook: Rulebook,
    snapshot: Snapshot,
    *,
    events: Sequence[K8sObject] | None = None,
    logs: Sequence[ContainerLog] | None = None,
    objects: Iterable[tuple[str, K8sObject]] | None = None,
    nodes: Sequence[str] | None = None,
    clean_nodes: set[str | None] | None = None,
) -> list[RuleHit]:
    """Hits of the known-issue rules over the evidence in scope (default: the snapshot).

    ``nodes`` are the nodes a symptom without a node of its own (a claim's status)
    concerns, e.g. the claim's nodes; by default every node of the snapshot. A symptom-
    less rule fires once per affected reading on those nodes.

    ``objects`` is read only when some version is affected (so it may be lazy).
    ``clean_nodes``, for many calls on one snapshot (a scan's claims): the nodes on
    which no rule's component reading is affected, as earlier calls found; a call whose
    nodes are all in it matches nothing and reads no version, and a call that finds
    none affected adds its nodes. (Whether a reading is affected depends on the
    snapshot and the node alone, so the set must not outlive the snapshot.)
    """
    rules = rulebook.known_issues
    if not rules:
        return []
    if events is None:
        events = snapshot.events
    if logs is None:
        logs = snapshot.logs
    if objects is None:
        objects = [
            (kind, obj)
            for kind, objs in (
                ("Pod", snapshot.pods),
                ("ResourceClaim", snapshot.claims),
                ("ResourceSlice", snapshot.slices),
                ("Node", snapshot.nodes),
                ("DeviceClass", snapshot.device_classes),
            )
            for obj in objs
        ]
    scope_nodes: list[str | None] = list(
        nodes if nodes is not None else [name_of(n) for n in snapshot.nodes]
    )
    # Versions first: they are a few look-ups, matching symptoms is not. On a cluster
    # whose components are all fixed (the usual case) no symptom is matched at all.
    readings = _Readings(snapshot)
    in_scope = list(dict.fromkeys([*scope_nodes, *_evidence_nodes(snapshot, events, logs)]))
    if clean_nodes is not None and clean_nodes.issuperset(in_scope):
        return []
    if not any(_affected_version(readings, _known_issue(r), in_scope) for r in rules):
        if clean_nodes is not None:
            clean_nodes.update(in_scope)
        return []
    parts = _part_hits(rulebook, events, logs, list(objects))
    hits: list[RuleHit] = []
    for rule in rules:
        ki = _known_issue(rule)
        if not ki.symptom:
            for node in scope_nodes if ki.component in PER_NODE else [None]:
                cv = _affected_version(readings, ki, [node])
                if cv is not None:
                    hits.append(_hit(rule, ki, cv, None, ()))
            continue
        found = [parts.get((key, rule.id), []) for key, _part in ki.symptom]
        if not all(found):
            continue
        primary_hits, *rest = found
        others = [h[0] for h in rest]
        for primary in primary_hits:
            node = _node_of(snapshot, primary)
            candidates: list[str | None] = [node] if node else scope_nodes
            cv = _affected_version(readings, ki, candidates)
            if cv is not None:
                hits.append(_hit(rule, ki, cv, primary, others))
    return sorted(hits, key=_sort_key)


def _sort_key(hit: RuleHit) -> tuple[object, ...]:
    s = hit.subject
    return (PHASE_ORDER.index(hit.rule.phase), hit.rule.id, s.kind, s.namespace, s.name)
