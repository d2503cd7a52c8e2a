"""The Kubernetes DRA ``device`` variable: ``CelDevice`` and ``cel_device`` build it once per device.

Shape (k8s-dra-semantics.md §1.2, §1.3; DESIGN.md §7):

- ``device.driver``: the slice's driver;
- ``device.attributes[domain][name]``: a name without ``/`` belongs to the driver's
  domain; a name is split at its first ``/``; an unknown domain reads as an empty map
  (``"dom" in device.attributes`` is still false);
- ``device.capacity[domain][name]``: ``Quantity`` values;
- ``device.allowMultipleAllocations``: false when unset.

Attribute values become plain Python values (int, bool, str, ``Semver``, tuples for the list
types), so generated code reads them with no wrapper. Equal versions and quantities share one
immutable object across devices (converted once per distinct text).

Every attribute and capacity is also held flat: ``CelDevice.vals`` is a tuple of the values
and ``CelDevice.shape`` maps ``value_key(kind, domain, name)`` to a position in it. Devices
with the same keys in the same order (a fleet of one GPU model) share one ``shape`` dict, so
generated code reads ``device.attributes['d'].x`` as ``device.vals[device.shape[key]]``,
touching one per-device object besides the device. At 100,000 devices evaluation is bound
by memory latency, not by bytecodes: chasing domain map, domain dict and its entry per read
cost more than the rest of a simple selector (see docs/cel.md, Speed). A ``CelDevice`` is
immutable once built; ``shape``/``vals`` and the memo slots rely on that. A value Kubernetes cannot convert
(a version that is not strict semver, an attribute with no field set) makes every selector
on the device fail with the scheduler's message, which ``CelDevice.error`` carries.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from .quantity import Quantity, parse_quantity
from .semver import parse_semver

__all__ = ["CelDevice", "cel_device", "convert_entry", "DomainMap", "value_key"]

_EMPTY: dict[str, Any] = {}

# value_key's interned strings, by kind and domain; bounded so that hostile names cannot grow it.
_KEYS: dict[str, dict[str, dict[str, str]]] = {"attribute": {}, "capacity": {}}
_KEYS_MAX = 65_536
_keys_count = 0
_KIND_PREFIX = {"attribute": "A", "capacity": "C"}


def value_key(kind: str, domain: str, name: str) -> str:
    """The key of ``device.attributes[domain][name]`` (kind ``attribute``) or of a capacity in ``CelDevice.values``.

    Length-prefixed, so no two (kind, domain, name) triples share a key whatever characters
    they hold; interned, so a lookup with the generated code's constant compares identities.
    """
    global _keys_count
    by_domain = _KEYS[kind].get(domain)
    if by_domain is not None:
        found = by_domain.get(name)
        if found is not None:
            return found
    key = sys.intern(f"{_KIND_PREFIX[kind]}{len(domain)}:{domain}/{name}")
    if _keys_count < _KEYS_MAX:
        _keys_count += 1
        _KEYS[kind].setdefault(domain, {})[name] = key
    return key


# Shapes by layout: the domains and names of the attributes, then of the capacities, in
# order. A fleet has a few (one per model and driver layout).
_SHAPES: dict[tuple[Any, ...], dict[str, int]] = {}
_SHAPES_MAX = 4096
_CAPACITY = object()  # separates the attribute part of a layout from the capacity part


def _flatten(
    attributes: Mapping[str, Mapping[str, Any]], capacity: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, int], tuple[Any, ...]]:
    """``(shape, vals)`` of a device (see the module docstring)."""
    layout: list[Any] = []
    vals: list[Any] = []
    for maps in (attributes, capacity):
        for domain, names in maps.items():
            # (domain, count, *names): unambiguous whatever the names are.
            layout.append(domain)
            layout.append(len(names))
            layout.extend(names)
            vals.extend(names.values())
        layout.append(_CAPACITY)
    key = tuple(layout)
    shape = _SHAPES.get(key)
    if shape is None:
        keys = [
            value_key(kind, domain, name)
            for kind, maps in (("attribute", attributes), ("capacity", capacity))
            for domain, names in maps.items()
            for name in names
        ]
        shape = {k: i for i, k in enumerate(keys)}
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = shape
    return shape, tuple(vals)


class DomainMap(dict[str, Any]):
    """``device.attributes``/``device.capacity``: an unknown domain reads as an empty map."""

    __slots__ = ()

    def __missing__(self, key: str) -> dict[str, Any]:
        return _EMPTY


class CelDevice:
    """One device, prepared once for any number of selector evaluations.

    ``vals``/``shape``: attributes and capacities by ``value_key`` (module docstring);
    ``value(key)`` reads one. ``memo_keyset``/``memo_class``
    (and ``memo_more`` for further key sets) cache, per set of read keys, which distinct
    tuple of read values the device has (``CompiledSelector.sweep(..., memoize=True)``).
    """

    # The slots a sweep reads on every device come first (one cache line).
    __slots__ = (
        "error",
        "driver",
        "shape",
        "vals",
        "memo_keyset",
        "memo_class",
        "attributes",
        "capacity",
        "allow_multiple_allocations",
        "name",
        "memo_more",
        "_value",
    )

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
        self.shape, self.vals = _flatten(attributes, capacity)
        self.memo_keyset: object = None
        self.memo_class = 0
        self.memo_more: dict[object, int] | None = None

    @classmethod
    def assembled(
        cls,
        driver: str,
        attributes: DomainMap,
        capacity: DomainMap,
        allow_multiple_allocations: bool,
        shape: dict[str, int],
        vals: tuple[Any, ...],
        *,
        name: str = "",
    ) -> CelDevice:
        """A device whose flat ``shape``/``vals`` the caller built (no layout pass).

        For callers that assemble many devices of one layout (``DeviceInventory.cel_reading``):
        ``shape`` must map the ``value_key`` of every value in the maps to its position in
        ``vals``, and be shared by devices of the same layout, as ``_flatten``'s are.
        """
        self = cls.__new__(cls)
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allow_multiple_allocations = allow_multiple_allocations
        self.error = None
        self.name = name
        self._value = None
        self.shape = shape
        self.vals = vals
        self.memo_keyset = None
        self.memo_class = 0
        self.memo_more = None
        return self

    def value(self, key: str, default: Any = None) -> Any:
        """The attribute or capacity ``key`` (a ``value_key``), or ``default``."""
        i = self.shape.get(key)
        return default if i is None else self.vals[i]

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


# Parsed versions and quantities by text: immutable, so devices share them (a fleet repeats
# a handful of driver versions and memory sizes). Bounded; failures are not cached.
_PARSED_MAX = 4096
_VERSIONS: dict[str, Any] = {}
_QUANTITIES: dict[str, Quantity] = {}


def _parse_version(name: str, text: str) -> Any:
    found = _VERSIONS.get(text)
    if found is None:
        try:
            found = parse_semver(text)
        except ValueError as exc:
            raise ValueError(f"attribute {name}: parse semantic version: {exc}") from None
        if len(_VERSIONS) >= _PARSED_MAX:
            _VERSIONS.clear()
        _VERSIONS[text] = found
    return found


def _parse_quantity(text: str) -> Quantity:
    found = _QUANTITIES.get(text)
    if found is None:
        found = parse_quantity(text)
        if len(_QUANTITIES) >= _PARSED_MAX:
            _QUANTITIES.clear()
        _QUANTITIES[text] = found
    return found


def _scalar(name: str, kind: str, value: Any) -> Any:
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return int(value)
        return value
    if kind == "bool":
        return bool(value)
    if kind == "string":
        return str(value)
    return _parse_version(name, str(value))


def convert_entry(driver: str, holder: str, name: str, raw: Any) -> tuple[str, str, Any]:
    """One raw attribute (``holder`` "attributes") or capacity ("capacity") as ``cel_device`` converts it.

    Returns ``(domain, name, value)``; raises ValueError with the message ``cel_device``
    records as the device's error. For callers that convert only the values a selector
    reads (``DeviceInventory.cel_reading``).
    """
    domain, ident = _split_name(name, driver)
    if holder == "attributes":
        return domain, ident, _convert_attribute(name, raw)
    text = raw.get("value") if isinstance(raw, Mapping) else raw
    try:
        q = text if isinstance(text, Quantity) else _parse_quantity(str(text))
    except ValueError as exc:
        raise ValueError(f"capacity {name}: {exc}") from None
    return domain, ident, q


def cel_device(driver: str, device: Mapping[str, Any]) -> CelDevice:
    """Prepare a ResourceSlice device (resource.k8s.io/v1 shape) for CEL evaluation."""
    maps = {"attributes": DomainMap(), "capacity": DomainMap()}
    error: str | None = None
    for holder, target in maps.items():
        for name, raw in (device.get(holder) or {}).items():
            try:
                domain, ident, value = convert_entry(driver, holder, name, raw)
            except ValueError as exc:
                error = error or str(exc)
                continue
            target.setdefault(domain, {})[ident] = value
    return CelDevice(
        driver,
        maps["attributes"],
        maps["capacity"],
        bool(device.get("allowMultipleAllocations") or False),
        error=error,
        name=str(device.get("name", "")),
    )
