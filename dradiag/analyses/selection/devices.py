"""A published device in scope, and its attribute values as selectors and constraints read them.

Each device is labelled by the layers reports group by (node, driver ``type``, MIG
profile); one visible from many nodes (``allNodes``/``nodeSelector``) is grouped under
:data:`ANY_NODE`. The value readers here return raw member values, as the allocator
compares them, not CEL values (those are :mod:`dradiag.analyses.cel`'s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ANY_NODE = "(any node)"
"""The node label of devices visible from every node (``allNodes``/``nodeSelector``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateDevice:
    """One published device in scope, labelled by the layers reports group by."""

    driver: str
    pool: str
    slice_device_name: str
    node: str | None
    """``spec.nodeName`` of its slice (or the device's own); None when visible from many."""
    device_type: str
    """The driver's ``type`` attribute (``gpu``, ``mig``, ``vfio``), or ``""``."""
    mig_profile: str | None
    raw: Mapping[str, Any]
    """The slice device, v1 shape."""

    @property
    def ref(self) -> str:
        """``<driver>/<pool>/<device>``, as the allocator's messages name a device."""
        return f"{self.driver}/{self.pool}/{self.slice_device_name}"

    @property
    def node_label(self) -> str:
        """The node for grouping; :data:`ANY_NODE` for node-less devices."""
        return self.node or ANY_NODE


def _attribute(device: Mapping[str, Any], driver: str, name: str) -> Any:
    """The raw value of attribute ``name`` (bare or ``<driver>/name``), or None."""
    attrs = device.get("attributes") or {}
    raw = attrs.get(name)
    if raw is None:
        raw = attrs.get(f"{driver}/{name}")
    if isinstance(raw, Mapping):
        for member in ("string", "int", "bool", "version"):
            if member in raw:
                return raw[member]
    return None


def qualified_attribute(device: Mapping[str, Any], driver: str, qualified: str) -> Any:
    """A ``domain/name`` attribute as ``matchAttribute`` looks it up.

    Fully qualified first, then the bare name when the domain is the driver's own
    (``lookupAttribute``, k8s-dra-semantics §3.5). Returns the raw member value; versions
    stay strings, because the constraint compares them as strings. None when absent.
    """
    attrs = device.get("attributes") or {}
    domain, _, ident = qualified.partition("/")
    raw = attrs.get(qualified)
    if raw is None and domain == driver:
        raw = attrs.get(ident)
    return _member_value(raw)


def _member_value(raw: Any) -> Any:
    """The value of a raw attribute for ``matchAttribute`` (lists as tuples), or None."""
    if isinstance(raw, Mapping):
        for member in ("string", "int", "bool", "version", "strings", "ints", "bools", "versions"):
            if member in raw:
                value = raw[member]
                return tuple(value) if isinstance(value, list) else value
    return None


def _scalar_of(leaf: Any) -> Any:
    """The scalar of an attribute value (``string``, ``int``, ``bool``, ``version``), or None."""
    if isinstance(leaf, Mapping):
        for member in ("string", "int", "bool", "version"):
            if member in leaf:
                return leaf[member]
    return None
