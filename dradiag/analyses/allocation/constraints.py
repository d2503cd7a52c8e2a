"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (k8s-dra-semantics §3.5).

Both are incremental, like the allocator's: ``add`` is called for each device about to
be picked and may refuse it, ``remove`` undoes one ``add``. With DRAListTypeAttributes
list values use set semantics (non-empty running intersection, pairwise disjointness);
without it, scalar values are compared by type and value (versions as strings).

``distinctAttribute`` keeps one remembered attribute per *request name*, as upstream
does, so with ``count > 1`` a device is compared only with the last one picked for that
request (a quirk the simulator reproduces rather than fixes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dradiag.analyses.allocation.candidates import DeviceEntry

__all__ = ["Constraint", "MatchAttribute", "DistinctAttribute", "attribute_as_set"]

_SCALARS = ("string", "int", "bool", "version")
_LISTS = (("ints", "int"), ("bools", "bool"), ("strings", "string"), ("versions", "version"))


def attribute_as_set(attr: Mapping[str, Any]) -> tuple[str, frozenset[Any]] | None:
    """(type, values) of a scalar or list attribute; None for an unknown or empty one."""
    for list_key, kind in _LISTS:
        values = attr.get(list_key)
        if values:
            return kind, frozenset(values)
    for kind in ("int", "bool", "string", "version"):
        if kind in attr and attr[kind] is not None:
            return kind, frozenset([attr[kind]])
    return None


def _scalar(attr: Mapping[str, Any]) -> tuple[str, Any] | None:
    for kind in _SCALARS:
        if kind in attr and attr[kind] is not None:
            return kind, attr[kind]
    return None


class Constraint:
    """Base: which requests a constraint covers (empty list = every request)."""

    kind = ""

    def __init__(self, attribute: str, requests: list[str], list_types: bool) -> None:
        self.attribute = attribute
        self.requests = frozenset(requests)
        self.list_types = list_types

    def applies(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if not subrequest:
            return request in self.requests
        return request in self.requests or f"{request}/{subrequest}" in self.requests

    def add(self, request: str, subrequest: str, entry: DeviceEntry) -> bool:
        raise NotImplementedError

    def remove(self, request: str, subrequest: str, entry: DeviceEntry) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        scope = ", ".join(sorted(self.requests)) if self.requests else "all requests"
        return f"{self.kind} {self.attribute} ({scope})"


class MatchAttribute(Constraint):
    """Every covered device has the attribute, with one common value."""

    kind = "matchAttribute"

    def __init__(self, attribute: str, requests: list[str], list_types: bool) -> None:
        super().__init__(attribute, requests, list_types)
        self.num_devices = 0
        self.first: tuple[str, Any] | None = None
        self.intersection: tuple[str, frozenset[Any]] | None = None

    def add(self, request: str, subrequest: str, entry: DeviceEntry) -> bool:
        if not self.applies(request, subrequest):
            return True
        attr = entry.attribute(self.attribute)
        if attr is None:
            return False
        if self.num_devices == 0:
            if self.list_types:
                as_set = attribute_as_set(attr)
                if as_set is None:
                    return False
                self.intersection = as_set
            else:
                self.first = _scalar(attr)
            self.num_devices = 1
            return True
        if self.list_types:
            as_set = attribute_as_set(attr)
            if as_set is None or self.intersection is None:
                return False
            kind, values = as_set
            if kind != self.intersection[0] or not (values & self.intersection[1]):
                return False
            self.intersection = (kind, values & self.intersection[1])
        else:
            value = _scalar(attr)
            if value is None or self.first is None or value != self.first:
                return False
        self.num_devices += 1
        return True

    def remove(self, request: str, subrequest: str, entry: DeviceEntry) -> None:
        if not self.applies(request, subrequest):
            return
        # Like upstream, the narrowed intersection is kept until the set is empty again.
        self.num_devices -= 1


class DistinctAttribute(Constraint):
    """Covered devices have pairwise different (or, for lists, disjoint) values."""

    kind = "distinctAttribute"

    def __init__(self, attribute: str, requests: list[str], list_types: bool) -> None:
        super().__init__(attribute, requests, list_types)
        self.num_devices = 0
        self.attributes: dict[str, Mapping[str, Any]] = {}

    def add(self, request: str, subrequest: str, entry: DeviceEntry) -> bool:
        if not self.applies(request, subrequest):
            return True
        attr = entry.attribute(self.attribute)
        if attr is None:
            return False
        if self.num_devices == 0:
            self.attributes[request] = attr
            self.num_devices = 1
            return True
        if not self._distinct(attr):
            return False
        self.attributes[request] = attr
        self.num_devices += 1
        return True

    def _distinct(self, attr: Mapping[str, Any]) -> bool:
        if self.list_types:
            new = attribute_as_set(attr)
            if new is None:
                return False
            for other in self.attributes.values():
                existing = attribute_as_set(other)
                if existing is None:
                    continue
                if existing[0] == new[0] and existing[1] & new[1]:
                    return False
            return True
        value = _scalar(attr)
        if value is None:
            return False
        for other in self.attributes.values():
            if _scalar(other) == value:
                return False
        return True

    def remove(self, request: str, subrequest: str, entry: DeviceEntry) -> None:
        if not self.applies(request, subrequest):
            return
        self.attributes.pop(request, None)
        self.num_devices -= 1
