"""One selector on every device, read column by column: no CelDevice, each value converted once.

When a fleet's devices differ in what a selector reads (each its own ``uuid``), grouping
saves nothing and building a CelDevice per device cost more than the evaluation. Here
the selector's generated ``rows`` sweep (``CompiledSelector.rows``) runs over tuples of
just the values it reads: for each key, the raw value object of every device is picked
from the attribute/capacity maps as they are (in C), devices holding the same objects
for every key are evaluated once (the streaming loader shares equal values, so a
memo-friendly fleet still costs one evaluation per distinct device), and each distinct
object is converted once. A device some value of which does not convert fails every
selector with that message (``DeviceInventory.conversion_errors``), as on a CelDevice.
"""

from __future__ import annotations

import itertools
import operator
from typing import TYPE_CHECKING, Any

from dradiag.analyses.selection.grouping import is_str, string_members

if TYPE_CHECKING:
    from dradiag.analyses.cel import CompiledSelector
    from dradiag.analyses.selection.inventory import DeviceInventory

_PLAIN = {"string": str, "int": int, "bool": bool}
"""Attribute members whose value of this exact type is its own CEL value."""

_FAILS = object()
"""A value that does not convert (its devices are conversion errors)."""


def row_outcomes(inventory: DeviceInventory, selector: CompiledSelector) -> list[bool | str] | None:
    """``device_outcomes`` for a selector that ``rows`` can run; None when it cannot.

    True, False, or the runtime error's message per device, in order.
    """
    from dradiag.analyses.cel.runtime import MISSING

    found = selector.rows()
    if found is None:
        return None
    sweep, keys = found
    n = len(inventory)
    errors = inventory.conversion_errors()
    columns = [inventory.raw_column(key) for key in keys]
    # Devices with the same value objects at every key read share one evaluation.
    ids = [list(map(id, column)) for column in columns]
    signatures: Any = ids[0] if len(ids) == 1 else zip(*ids, strict=True) if ids else [()] * n
    first: dict[Any, int] = {}
    groups = list(map(first.setdefault, signatures, range(n)))
    representatives = list(first.values())
    if len(representatives) == n:
        picked = columns
    else:
        picked = [list(map(column.__getitem__, representatives)) for column in columns]
    converted = [
        _converted(column, "attributes" if kind == "attribute" else "capacity", name, MISSING)
        for column, (kind, _domain, name) in zip(picked, keys, strict=True)
    ]
    values = [column for column, _ in converted]
    # A group whose value does not convert is all conversion errors: no row for it.
    skip = {
        i
        for column, failed in converted
        if failed
        for i, value in enumerate(column)
        if value is _FAILS
    }
    if skip:
        representatives = [g for i, g in enumerate(representatives) if i not in skip]
        values = [[v for i, v in enumerate(column) if i not in skip] for column in values]
    rows = list(zip(*values, strict=True)) if values else [()] * len(representatives)
    swept: list[Any] = sweep(rows)
    out: list[bool | str]
    if len(swept) == n and swept.count(True) + swept.count(False) == n:
        out = swept  # every device its own group, none errs: the common memo-defeated case
    else:
        results: dict[int, bool | str] = {
            group: result if result is True or result is False else result.message
            for group, result in zip(representatives, swept, strict=True)
        }
        out = list(map(results.get, groups))  # type: ignore[arg-type]
    for index, message in errors.items():
        out[index] = message
    return out


def _converted(column: list[Any], holder: str, name: str, missing: Any) -> tuple[list[Any], bool]:
    """The CEL value of each raw value of ``column`` (``missing`` for None), by identity.

    And whether some value does not convert (``_FAILS`` in its place).
    """
    from dradiag.analyses.cel.environment import convert_entry

    if holder == "attributes" and None not in column:
        strings = string_members(column)
        if strings is not None and all(is_str(strings)):
            return strings, False  # all plain strings (per-device uuids): nothing to convert
    distinct = dict(zip(map(id, column), column, strict=True))
    distinct.pop(id(None), None)
    leaves = list(distinct.values())
    by_id: dict[int, Any] = {id(None): missing}
    if holder == "attributes":
        strings = string_members(leaves)
        if strings is not None:
            mask = list(is_str(strings))
            by_id.update(
                zip(
                    itertools.compress(distinct, mask),
                    itertools.compress(strings, mask),
                    strict=True,
                )
            )
            leaves = list(itertools.compress(leaves, map(operator.not_, mask)))
    failed = False
    for leaf in leaves:
        value: Any = _FAILS
        if holder == "attributes" and leaf.__class__ is dict and len(leaf) == 1:
            ((member, inner),) = leaf.items()
            if _PLAIN.get(member) is inner.__class__:
                by_id[id(leaf)] = inner
                continue
        try:
            # The driver names the domain only, which the key already fixed.
            value = convert_entry("", holder, name, leaf)[2]
        except ValueError:
            failed = True
        by_id[id(leaf)] = value
    return list(map(by_id.__getitem__, map(id, column))), failed
