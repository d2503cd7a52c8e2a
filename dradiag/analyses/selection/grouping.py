"""Grouping devices by what selectors read, so that a selector runs once per distinct device.

:class:`_ReadSpec` is what a set of selectors reads (``CompiledSelector.read_keys``);
:class:`_Projection` is the devices grouped by those raw values (plus any conversion
error), one representative per group; :class:`_Leaves` gives each distinct raw value a
token, and knows whether it converts, by identity where the streaming loader shares
value objects. Why grouping pays off on a fleet: :mod:`.inventory`.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.cel import CompiledSelector


_ABSENT = -1
"""The token of a key a device does not publish."""

LEAF_IDS_MAX = 1 << 16
"""Distinct raw values remembered by identity (beyond, they are compared by value)."""


def _freeze(value: Any) -> Any:
    """A hashable stand-in for a raw JSON value that tells apart what CEL tells apart.

    1, 1.0 and True are equal in Python; -0.0 and 0.0 too; the stand-in keeps each
    value's type (and a float's exact bits) so that only values that convert alike share it.
    """
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:
        return (cls, value)
    if cls is float:
        return (float, value.hex())
    if isinstance(value, Mapping):
        return (dict, tuple((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return (list, tuple(_freeze(v) for v in value))
    return (cls, id(value))  # anything else: only itself


def string_members(leaves: list[Any]) -> list[Any] | None:
    """Each raw value's ``string`` member (None where it has another), in C.

    A one-member ``{"string": <str>}`` is its own CEL value and always converts: a fleet's
    10⁵ per-device values (uuid, serial, PCI address) are told apart from the few that
    need a look without a Python step per value. None unless every leaf is a one-member
    dict (then the caller looks at each itself).
    """
    if set(map(type, leaves)) != {dict} or set(map(len, leaves)) != {1}:
        return None
    return list(map(dict.get, leaves, repeat("string")))


def is_str(values: Iterable[Any]) -> Iterator[bool]:
    """``value.__class__ is str`` for each of ``values``, in C."""
    return map(operator.is_, map(type, values), repeat(str))


class _Leaves:
    """Raw attribute and capacity values: whether they convert, and a token per distinct value.

    A fleet publishes the same few thousand values on every device (and the streaming
    loader shares them), so both questions are answered once per distinct value object
    and then by identity. Objects remembered by identity are pinned, so their ids stay
    theirs.
    """

    __slots__ = ("ok", "token_of_id", "token_of_value", "valid", "pinned")

    def __init__(self) -> None:
        self.ok: dict[str, set[int]] = {"attributes": set(), "capacity": set()}
        self.token_of_id: dict[int, int] = {id(None): _ABSENT}
        self.token_of_value: dict[Any, int] = {}
        self.valid: dict[tuple[str, Any], bool] = {}
        self.pinned: list[Any] = []

    def token(self, leaf: Any) -> int:
        found = self.token_of_id.get(id(leaf))
        if found is not None:
            return found
        table = self.token_of_value
        if leaf.__class__ is dict and len(leaf) == 1:
            ((member, value),) = leaf.items()
            # {"string": "GPU-…"}: a (member, str) key, which no _freeze key equals
            # (those start with a class), saves freezing a per-device value.
            key = (member, value) if value.__class__ is str else _freeze(leaf)
        else:
            key = _freeze(leaf)
        token = table.setdefault(key, len(table))
        if len(self.token_of_id) < LEAF_IDS_MAX:
            self.token_of_id[id(leaf)] = token
            self.pinned.append(leaf)
        return token

    def converts(self, holder: str, leaf: Any) -> bool:
        """Whether ``cel_device`` converts ``leaf`` as a value of ``holder`` without error."""
        known = self.ok[holder]
        if id(leaf) in known:
            return True
        if holder == "attributes" and leaf.__class__ is dict and len(leaf) == 1:
            ((member, value),) = leaf.items()
            # str(), bool() and an int never fail (environment._scalar).
            if (
                (member == "string" and value.__class__ is str)
                or (member == "bool" and value is not None)
                or (member == "int" and value.__class__ is int)
            ):
                return True
        key = (holder, _freeze(leaf))
        valid = self.valid.get(key)
        if valid is None:
            from dradiag.analyses.cel import cel_device

            valid = cel_device("", {holder: {"x": leaf}}).error is None
            self.valid[key] = valid
        if valid and len(known) < LEAF_IDS_MAX:
            known.add(id(leaf))
            self.pinned.append(leaf)
        return valid


@dataclass(frozen=True, slots=True)
class _ReadSpec:
    """What a set of selectors reads of a device (``CompiledSelector.read_keys`` and flags)."""

    whole: bool
    driver: bool = False
    allow_multiple: bool = False
    keys: frozenset[tuple[str, str, str]] = frozenset()

    def covers(self, other: _ReadSpec) -> bool:
        """True when devices alike in what this reads are alike in what ``other`` reads."""
        if self.whole:
            return True
        if other.whole:
            return False
        return (
            (self.driver or not other.driver)
            and (self.allow_multiple or not other.allow_multiple)
            and other.keys <= self.keys
        )

    @staticmethod
    def union(specs: Iterable[_ReadSpec]) -> _ReadSpec:
        keys: set[tuple[str, str, str]] = set()
        driver = allow = False
        for spec in specs:
            if spec.whole:
                return spec
            keys |= spec.keys
            driver = driver or spec.driver
            allow = allow or spec.allow_multiple
        return _ReadSpec(whole=False, driver=driver, allow_multiple=allow, keys=frozenset(keys))

    @staticmethod
    def of(selectors: Iterable[CompiledSelector]) -> _ReadSpec:
        keys: set[tuple[str, str, str]] = set()
        driver = allow = False
        for sel in selectors:
            # A selector that uses `device` (or a whole domain map) as a value reads it all.
            if getattr(sel, "_reads_whole_device", True):
                return _ReadSpec(whole=True)
            for kind, domain, name in sel.read_keys:
                if domain is None or name is None:
                    return _ReadSpec(whole=True)
                keys.add((kind, domain, name))
            driver = driver or bool(sel.reads_driver)
            allow = allow or bool(sel.reads_allow_multiple_allocations)
        return _ReadSpec(whole=False, driver=driver, allow_multiple=allow, keys=frozenset(keys))


class _Projection:
    """Devices grouped by what a :class:`_ReadSpec` reads: alike devices, alike outcomes.

    ``groups[i]`` is the index of the first device with the same values as device ``i``
    for every key read (and the same conversion error, if any): that device represents
    the group, and a selector reading no more than the spec gives every device of the
    group the representative's result.
    """

    __slots__ = ("spec", "groups", "count", "_cells")

    def __init__(self, spec: _ReadSpec, groups: list[int], count: int) -> None:
        self.spec = spec
        self.groups = groups
        self.count = count
        self._cells: Counter[tuple[int, int]] | None = None

    def cell_counts(self, cells: list[int]) -> Counter[tuple[int, int]]:
        """Devices per (report cell, group)."""
        if self._cells is None:
            self._cells = Counter(zip(cells, self.groups, strict=True))
        return self._cells
