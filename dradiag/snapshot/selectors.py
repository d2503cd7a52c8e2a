"""Label and field selectors in kubectl's syntax: one parser each, and how they match.

``-l/--selector`` follows apimachinery's ``labels.Parse``: comma-separated requirements
``key``, ``!key``, ``key=value`` (or ``==``), ``key!=value``, ``key in (a,b)``,
``key notin (a,b)``, ``key>N``, ``key<N``; ``!=`` and ``notin`` also match objects
without the key, as on the API server. ``--field-selector`` follows ``fields.ParseSelector``:
``field=value``, ``field==value``, ``field!=value``, comma-separated, with ``\\,``, ``\\=``
and ``\\\\`` escapes; a field the object lacks reads as the empty string (so
``spec.nodeName=`` selects unscheduled pods, as kubectl users know it).

Live collection sends the canonical strings (:meth:`LabelSelector.text`) to the API
server; offline runs match the same requirements against the snapshot, so ``--from``
gives the live answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dradiag.errors import UsageError

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_SPECIAL = set("!=(),<> \t\n")

POD_FIELDS = frozenset(
    {
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
"""The pod fields the API server indexes for field selectors (and only these)."""
METADATA_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
"""The fields every kind, ResourceClaims included, can be selected by."""


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """One requirement of a label selector."""

    key: str
    operator: str
    """``exists``, ``!``, ``=``, ``!=``, ``in``, ``notin``, ``gt``, ``lt``."""
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy this requirement (apimachinery's semantics)."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if not present:
            return False
        try:
            number = int(str(value))
        except ValueError:
            return False
        bound = int(self.values[0])
        return number > bound if self.operator == "gt" else number < bound

    def text(self) -> str:
        """The requirement as kubectl writes it."""
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(self.values)})"
        symbol = {"gt": ">", "lt": "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{self.values[0]}"


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed ``-l`` value; the empty selector matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s ``metadata.labels`` satisfy every requirement."""
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not isinstance(labels, Mapping):
            labels = {}
        return all(r.matches(labels) for r in self.requirements)

    def text(self) -> str:
        """The canonical selector string, as sent to the API server."""
        return ",".join(r.text() for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _tokens(text: str) -> list[str]:
    """apimachinery's lexer: identifiers, and the operators ``! = == != ( ) , < >``."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in " \t\n":
            i += 1
        elif ch in "=!" and text[i + 1 : i + 2] == "=":
            out.append(text[i : i + 2])
            i += 2
        elif ch in _SPECIAL:
            out.append(ch)
            i += 1
        else:
            j = i
            while j < len(text) and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _check_key(key: str, text: str) -> str:
    if not _KEY.match(key) or len(key.rpartition("/")[2]) > 63:
        raise UsageError(
            f"invalid label selector {text!r}: {key!r} is not a valid label key "
            "(name, or prefix/name: alphanumerics, '-', '_', '.', at most 63 characters)"
        )
    return key


def _check_value(value: str, text: str) -> str:
    if not _VALUE.match(value):
        raise UsageError(
            f"invalid label selector {text!r}: {value!r} is not a valid label value "
            "(alphanumerics, '-', '_', '.', at most 63 characters, or empty)"
        )
    return value


def parse_label_selector(text: str | None) -> LabelSelector:
    """``-l`` → LabelSelector; UsageError (exit 2) naming the problem otherwise."""
    if not text or not text.strip():
        return LabelSelector()
    tokens = _tokens(text)
    requirements: list[LabelRequirement] = []
    position = 0

    def fail(why: str) -> UsageError:
        return UsageError(f"invalid label selector {text!r}: {why}")

    def take() -> str | None:
        nonlocal position
        if position >= len(tokens):
            return None
        token = tokens[position]
        position += 1
        return token

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    while True:
        token = take()
        if token is None or token in _SPECIAL - {"!"} or token in ("==", "!="):
            raise fail("expected a label key" + (f", found {token!r}" if token else " at the end"))
        if token == "!":
            key = take()
            if key is None or key in _SPECIAL or key in ("==", "!="):
                raise fail("expected a label key after '!'")
            requirements.append(LabelRequirement(_check_key(key, text), "!"))
        else:
            key = _check_key(token, text)
            following = peek()
            if following is None or following == ",":
                requirements.append(LabelRequirement(key, "exists"))
            elif following in ("=", "==", "!="):
                take()
                value = peek()
                if value is None or value == "," or value in _SPECIAL:
                    value = ""
                else:
                    take()
                operator = "!=" if following == "!=" else "="
                requirements.append(LabelRequirement(key, operator, (_check_value(value, text),)))
            elif following in ("in", "notin"):
                take()
                if take() != "(":
                    raise fail(f"expected '(' after {following!r}")
                values: list[str] = []
                while True:
                    item = take()
                    if item is None:
                        raise fail("missing ')'")
                    if item == ")":
                        break
                    if item == ",":
                        continue
                    values.append(_check_value(item, text))
                if not values:
                    raise fail(f"'{following}' needs at least one value")
                requirements.append(LabelRequirement(key, following, tuple(values)))
            elif following in ("<", ">"):
                take()
                bound = take()
                if bound is None or not re.fullmatch(r"-?\d+", bound):
                    raise fail(f"'{following}' needs an integer value")
                operator = "gt" if following == ">" else "lt"
                requirements.append(LabelRequirement(key, operator, (bound,)))
            else:
                raise fail(f"unexpected {following!r} after key {key!r}")
        separator = take()
        if separator is None:
            break
        if separator != ",":
            raise fail(f"expected ',' between requirements, found {separator!r}")
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """One ``field=value`` or ``field!=value`` term."""

    field: str
    value: str
    negated: bool = False

    def text(self) -> str:
        """The term as the API server reads it (with kubectl's escapes)."""
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.field}{'!=' if self.negated else '='}{escaped}"


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """A parsed ``--field-selector`` value; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj``'s fields satisfy every term (a missing field reads as "")."""
        for r in self.requirements:
            actual = field_value(obj, r.field)
            if (actual == r.value) == r.negated:
                return False
        return True

    def fields(self) -> frozenset[str]:
        """The fields the terms name."""
        return frozenset(r.field for r in self.requirements)

    def restricted_to(self, allowed: frozenset[str]) -> FieldSelector:
        """The terms on ``allowed`` fields only."""
        return FieldSelector(tuple(r for r in self.requirements if r.field in allowed))

    def text(self) -> str:
        """The canonical selector string, as sent to the API server."""
        return ",".join(r.text() for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """``spec.nodeName`` of ``obj`` as the API server's field set has it: a string, ""
    when absent, ``true``/``false`` for booleans."""
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            current.append(text[i : i + 2])
            i += 2
            continue
        if ch == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
        i += 1
    parts.append("".join(current))
    return parts


def _unescape(value: str, text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise UsageError(
                    f"invalid field selector {text!r}: invalid escape in {value!r} "
                    "(only \\\\, \\, and \\= are escapes)"
                )
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise UsageError(f"invalid field selector {text!r}: unescaped {ch!r} in {value!r}")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_field_selector(
    text: str | None, *, supported: frozenset[str] = POD_FIELDS
) -> FieldSelector:
    """``--field-selector`` → FieldSelector; UsageError for bad syntax or a field that is
    not ``supported`` (the API server's words: ``field label not supported``)."""
    if not text or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for term in _split_unescaped(text.strip(), ","):
        term = term.strip()
        if not term:
            raise UsageError(f"invalid field selector {text!r}: empty term")
        match = re.match(r"^([^=!\\\s]+)\s*(!=|==|=)(.*)$", term)
        if match is None:
            raise UsageError(
                f"invalid field selector {text!r}: {term!r} is not field=value or field!=value"
            )
        field, operator, raw = match.group(1), match.group(2), match.group(3)
        if field not in supported:
            raise UsageError(
                f"invalid field selector {text!r}: field label not supported: {field} "
                f"(supported: {', '.join(sorted(supported))})"
            )
        requirements.append(FieldRequirement(field, _unescape(raw, text), operator == "!="))
    return FieldSelector(tuple(requirements))
