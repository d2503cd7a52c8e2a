"""Label and field selectors as the Kubernetes API server parses and applies them.

Label selectors: equality (``k=v``, ``k==v``, ``k!=v``), set-based (``k in (a,b)``,
``k notin (a,b)``), existence (``k``, ``!k``), requirements ANDed by commas
(k8s.io/apimachinery ``labels.Parse``). Field selectors: ``f=v``, ``f==v``, ``f!=v``,
ANDed by commas, and only on the fields each resource registers; any other field is a
400 ``field label not supported`` as the real server answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SelectorError(ValueError):
    """A selector the real server would reject with 400 BadRequest."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        # "!=" and "notin" also match objects without the label (apimachinery semantics).
        return not present or value not in self.values


_SET_RE = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s,()]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse a labelSelector query value; SelectorError when the server would refuse it."""
    if not text.strip():
        return []
    out = []
    for part in _split_top_level(text):
        if m := _SET_RE.match(part):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            out.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ_RE.match(part):
            op = "=" if m.group(2) in ("=", "==") else "!="
            out.append(Requirement(m.group(1), op, (m.group(3),)))
        elif m := _EXISTS_RE.match(part):
            out.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {part.strip()!r}")
    return out


def labels_match(requirements: list[Requirement], obj: Mapping[str, Any]) -> bool:
    """True when the object's labels satisfy every requirement."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in requirements)


# -- field selectors ------------------------------------------------------------------


def _path(*keys: str) -> Callable[[Mapping[str, Any]], str]:
    def read(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for key in keys:
            if not isinstance(cur, Mapping):
                return ""
            cur = cur.get(key)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return read


_COMMON = {"metadata.name": _path("metadata", "name")}
_NAMESPACED = {**_COMMON, "metadata.namespace": _path("metadata", "namespace")}

FIELD_LABELS: dict[str, dict[str, Callable[[Mapping[str, Any]], str]]] = {
    # pkg/registry/core/pod/strategy.go PodToSelectableFields
    "pods": {
        **_NAMESPACED,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    # pkg/registry/core/event/strategy.go ToSelectableFields
    "events": {
        **_NAMESPACED,
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "nodes": {**_COMMON, "spec.unschedulable": _path("spec", "unschedulable")},
    # resource.k8s.io ResourceSlice field label conversion: metadata.name, spec.nodeName,
    # spec.driver. (No spec.pool.name: the real server refuses it, so this one does too.)
    "resourceslices": {
        **_COMMON,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.driver": _path("spec", "driver"),
    },
    "deviceclasses": dict(_COMMON),
    "devicetaintrules": dict(_COMMON),
    "resourceclaims": dict(_NAMESPACED),
    "resourceclaimtemplates": dict(_NAMESPACED),
}


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str


def parse_field_selector(resource: str, text: str) -> list[FieldRequirement]:
    """Parse a fieldSelector for ``resource``; SelectorError on syntax or unknown field."""
    if not text.strip():
        return []
    supported = FIELD_LABELS.get(resource, _COMMON)
    out = []
    for part in text.split(","):
        m = re.match(r"^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = m.groups()
        if field not in supported:
            raise SelectorError(f"field label not supported: {field}")
        out.append(FieldRequirement(field, op == "!=", value))
    return out


def fields_match(
    resource: str, requirements: list[FieldRequirement], obj: Mapping[str, Any]
) -> bool:
    """True when the object satisfies every field requirement."""
    readers = FIELD_LABELS.get(resource, _COMMON)
    for req in requirements:
        equal = readers[req.field](obj) == req.value
        if equal == req.negate:
            return False
    return True
