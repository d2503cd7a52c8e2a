"""Does a pod's node selection admit a node? The scheduler's NodeAffinity filter, in short.

kube-scheduler runs the NodeAffinity filter before DynamicResources: a node the pod's
``spec.nodeSelector`` or ``requiredDuringSchedulingIgnoredDuringExecution`` node affinity
excludes never reaches the allocator, and the FitError counts it as ``node(s) didn't match
Pod's node affinity/selector`` (k8s-dra-semantics §5.1). When the allocation simulation
finds devices for a claim only on such nodes, the claim cannot be allocated for that pod
although devices are free: ``DRA-ALLOC-NODE-AFFINITY``.

The semantics follow ``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``: every
``nodeSelector`` pair must match a label; the required terms are ORed, the requirements of
a term ANDed, and a term without requirements matches nothing. Taints are left out: they
are the TaintToleration filter's, not the pod's placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dradiag.snapshot.model import K8sObject, name_of


def _labels(node: K8sObject) -> Mapping[str, Any]:
    labels = (node.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _requirement_holds(req: Mapping[str, Any], value: str | None) -> bool:
    """One ``{key, operator, values}`` requirement against the value (None: no such key)."""
    operator = str(req.get("operator") or "")
    values = [str(v) for v in req.get("values") or ()]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, want = int(value), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def _term_matches(term: Mapping[str, Any], node: K8sObject) -> bool:
    expressions = [r for r in term.get("matchExpressions") or () if isinstance(r, Mapping)]
    fields = [r for r in term.get("matchFields") or () if isinstance(r, Mapping)]
    if not expressions and not fields:
        return False
    labels = _labels(node)
    for req in expressions:
        key = str(req.get("key") or "")
        value = labels.get(key)
        if not _requirement_holds(req, None if value is None else str(value)):
            return False
    for req in fields:
        if req.get("key") != "metadata.name" or not _requirement_holds(req, name_of(node)):
            return False
    return True


def required_terms(pod: K8sObject) -> Sequence[Mapping[str, Any]] | None:
    """The pod's required node-affinity terms, or None when it has none."""
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return None
    return [t for t in terms if isinstance(t, Mapping)]


def node_selector(pod: K8sObject) -> Mapping[str, Any]:
    selector = (pod.get("spec") or {}).get("nodeSelector")
    return selector if isinstance(selector, Mapping) else {}


def has_node_selection(pod: K8sObject) -> bool:
    """True when the pod restricts its nodes by selector or required node affinity."""
    return bool(node_selector(pod)) or required_terms(pod) is not None


def placement_mismatch(pod: K8sObject, node: K8sObject) -> str:
    """Why the pod's node selection excludes ``node`` (one line), or ``""`` when it admits it."""
    labels = _labels(node)
    for key, want in node_selector(pod).items():
        have = labels.get(key)
        if have is None or str(have) != str(want):
            shown = "no such label" if have is None else f"{key}={have}"
            return f"nodeSelector {key}={want} ({shown})"
    terms = required_terms(pod)
    if terms is not None and not any(_term_matches(t, node) for t in terms):
        keys = sorted(
            {
                str(r.get("key"))
                for t in terms
                for r in t.get("matchExpressions") or ()
                if isinstance(r, Mapping)
            }
        )
        has = ", ".join(f"{k}={labels[k]}" if k in labels else f"no {k}" for k in keys)
        return "no required node-affinity term matches" + (f" (node has {has})" if has else "")
    return ""


def describe_selection(pod: K8sObject) -> str:
    """The pod's node selection as one line for evidence."""
    parts = []
    selector = node_selector(pod)
    if selector:
        parts.append("nodeSelector " + ", ".join(f"{k}={v}" for k, v in selector.items()))
    terms = required_terms(pod)
    if terms is not None:
        rendered = []
        for term in terms:
            reqs = [
                f"{r.get('key')} {r.get('operator')}"
                + (f" [{', '.join(str(v) for v in r['values'])}]" if r.get("values") else "")
                for r in (*(term.get("matchExpressions") or ()), *(term.get("matchFields") or ()))
                if isinstance(r, Mapping)
            ]
            rendered.append(" && ".join(reqs) or "(empty term)")
        parts.append("required node affinity: " + " || ".join(rendered))
    return "; ".join(parts)


def selector_admits(selector: Mapping[str, Any], node: K8sObject) -> bool:
    """True when a NodeSelector (``nodeSelectorTerms``, ORed) admits ``node``."""
    terms = selector.get("nodeSelectorTerms") or ()
    return any(_term_matches(t, node) for t in terms if isinstance(t, Mapping))


def describe_selector(selector: Mapping[str, Any]) -> str:
    """A NodeSelector in one line: ``region In [region-1]`` terms, ``or``-joined."""
    out = []
    for term in selector.get("nodeSelectorTerms") or ():
        if not isinstance(term, Mapping):
            continue
        reqs = [
            f"{r.get('key')} {r.get('operator')} [{', '.join(map(str, r.get('values') or ()))}]"
            for r in list(term.get("matchExpressions") or ()) + list(term.get("matchFields") or ())
            if isinstance(r, Mapping)
        ]
        out.append(" and ".join(reqs) or "(empty term)")
    return " or ".join(out) or "(no terms)"
