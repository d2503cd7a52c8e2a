"""The Kubernetes DRA ``device`` variable: ``CelDevice`` and ``cel_device`` build it once per device.

Shape (k8s-dra-semantics.md §1.2, §1.3; DESIGN.md §7):

- ``device.driver``: the slice's driver;
- ``device.attributes[domain][name]``: a name without ``/`` belongs to the driver's
  domain; a name is split at its first ``/``; an unknown domain reads as an empty map
  (``"dom" in device.attributes`` is still false);
- ``device.capacity[domain][name]``: ``Quantity`` values;
- ``device.allowMultipleAllocations``: false when unset.

Attribute values become plain Python values (int, bool, str, ``Semver``, tuples for the list
types), so generated code reads them with no wrapper. A value Kubernetes cannot convert
(a version that is not strict semver, an attribute with no field set) makes every selector
on the device fail with the scheduler's message, which ``CelDevice.error`` carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .quantity import Quantity, parse_quantity
from .semver import parse_semver

__all__ = ["CelDevice", "cel_device", "DomainMap"]

_EMPTY: dict[str, Any] = {}


class DomainMap(dict[str, Any]):
    """``device.attributes``/``device.capacity``: an unknown domain reads as an empty map."""

    __slots__ = ()

    def __missing__(self, key: str) -> dict[str, Any]:
        return _EMPTY


class CelDevice:
    """One device, prepared once for any number of selector evaluations."""

    __slots__ = ("driver", "attributes", "capacity", "allow_multiple_allocations", "error", "name", "_value")

    def __init__(
        self,
        driver: str,
        attributes: DomainMap,
        capacity: DomainMap,
        allow_multiple_allocations: bool = False,
        *,
        error: str | None = None,
        name: str = "",
    ) -> None:
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allow_multiple_allocations = allow_multiple_allocations
        self.error = error
        self.name = name
        self._value: dict[str, Any] | None = None

    def as_value(self) -> dict[str, Any]:
        """The device as a CEL map, for an expression that uses ``device`` as a whole."""
        if self._value is None:
            self._value = {
                "driver": self.driver,
                "attributes": self.attributes,
                "capacity": self.capacity,
                "allowMultipleAllocations": self.allow_multiple_allocations,
            }
        return self._value

    def __repr__(self) -> str:
        return f"CelDevice(driver={self.driver!r}, name={self.name!r})"


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.partition("/")
    if not sep:
        return driver, name
    return domain, ident


_LIST_FIELDS = {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}


def _convert_attribute(name: str, raw: Any) -> Any:
    if not isinstance(raw, Mapping):
        raise ValueError(f"attribute {name}: unsupported attribute value")
    for key in ("int", "bool", "string", "version"):
        if key in raw and raw[key] is not None:
            return _scalar(name, key, raw[key])
    for key, scalar in _LIST_FIELDS.items():
        if key in raw and raw[key] is not None:
            return tuple(_scalar(name, scalar, v) for v in raw[key])
    raise ValueError(f"attribute {name}: unsupported attribute value")


def _scalar(name: str, kind: str, value: Any) -> Any:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return int(value)
        return value
    if kind == "bool":
        return bool(value)
    if kind == "string":
        return str(value)
    try:
        return parse_semver(str(value))
    except ValueError as exc:
        raise ValueError(f"attribute {name}: parse semantic version: {exc}") from None


def cel_device(driver: str, device: Mapping[str, Any]) -> CelDevice:
    """Prepare a ResourceSlice device (resource.k8s.io/v1 shape) for CEL evaluation."""
    attributes = DomainMap()
    capacity = DomainMap()
    error: str | None = None
    for name, raw in (device.get("attributes") or {}).items():
        domain, ident = _split_name(name, driver)
        try:
            value = _convert_attribute(name, raw)
        except ValueError as exc:
            error = error or str(exc)
            continue
        attributes.setdefault(domain, {})[ident] = value
    for name, raw in (device.get("capacity") or {}).items():
        domain, ident = _split_name(name, driver)
        text = raw.get("value") if isinstance(raw, Mapping) else raw
        try:
            q = text if isinstance(text, Quantity) else parse_quantity(str(text))
        except ValueError as exc:
            error = error or f"capacity {name}: {exc}"
            continue
        capacity.setdefault(domain, {})[ident] = q
    return CelDevice(
        driver,
        attributes,
        capacity,
        bool(device.get("allowMultipleAllocations") or False),
        error=error,
        name=str(device.get("name", "")),
    )
