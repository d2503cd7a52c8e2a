"""What attribute and capacity names, types and values the devices in scope publish.

The near-miss explanations (:mod:`dradiag.analyses.near_miss`) hold a selector's reads
against it: a key nobody publishes, one under the wrong domain, a MIG profile spelled
the way no device spells it. An inventory collects it once, from its columns
(:meth:`AttributeCatalogue.collect_columns`).
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dradiag.analyses.selection.devices import CandidateDevice
from dradiag.analyses.selection.grouping import LEAF_IDS_MAX


class _CatalogueBuilder:
    """Accumulates an :class:`AttributeCatalogue`, one attribute or capacity value at a time.

    A value object met again under the same name (the streaming loader shares them)
    adds nothing: it is skipped by identity, within a bound for unshared sources.
    """

    def __init__(self) -> None:
        self.types: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.values: dict[tuple[str, str], set[Any]] = defaultdict(set)
        self.caps: dict[tuple[str, str], set[str]] = defaultdict(set)
        self.profile_memory: dict[str, set[str]] = defaultdict(set)
        self.seen: set[tuple[int, str, str, str | None]] = set()

    def _first(self, mark: tuple[int, str, str, str | None]) -> bool:
        if mark in self.seen:
            return False
        if len(self.seen) < LEAF_IDS_MAX:
            self.seen.add(mark)
        return True

    def add_attribute(self, leaf_id: int, name: str, driver: str, raw: Any) -> None:
        if not self._first((leaf_id, name, driver, None)):
            return
        domain, _, ident = name.partition("/") if "/" in name else ("", "", name)
        key = (domain or driver, ident)
        if isinstance(raw, Mapping):
            for member, value in raw.items():
                self.types[key].add(member)
                bucket = self.values[key]
                if len(bucket) < AttributeCatalogue.VALUE_CAP:
                    bucket.add(tuple(value) if isinstance(value, list) else value)

    def add_capacity(
        self, leaf_id: int, name: str, driver: str, mig_profile: str | None, raw: Any
    ) -> None:
        if not self._first((leaf_id, name, driver, mig_profile or "")):
            return
        domain, _, ident = name.partition("/") if "/" in name else ("", "", name)
        key = (domain or driver, ident)
        text = raw.get("value") if isinstance(raw, Mapping) else raw
        if text is not None and len(self.caps[key]) < AttributeCatalogue.VALUE_CAP:
            self.caps[key].add(str(text))
        if mig_profile and ident == "memory" and text is not None:
            self.profile_memory[mig_profile].add(str(text))

    def build(self) -> AttributeCatalogue:
        return AttributeCatalogue(
            attribute_types={k: frozenset(v) for k, v in self.types.items()},
            attribute_values={k: frozenset(v) for k, v in self.values.items()},
            capacities={k: frozenset(v) for k, v in self.caps.items()},
            mig_profile_memory={k: frozenset(v) for k, v in self.profile_memory.items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeCatalogue:
    """Attribute and capacity names published in scope, with their types and values.

    Keys are CEL's (domain, name): a bare ``productName`` of driver ``gpu.nvidia.com`` is
    ``("gpu.nvidia.com", "productName")``.
    """

    attribute_types: Mapping[tuple[str, str], frozenset[str]]
    """(domain, name) → the value members seen (``string``, ``version``, ``int`` ...)."""
    attribute_values: Mapping[tuple[str, str], frozenset[Any]]
    """(domain, name) → distinct values (capped per key)."""
    capacities: Mapping[tuple[str, str], frozenset[str]]
    """(domain, name) → distinct quantity strings (capped per key)."""
    mig_profile_memory: Mapping[str, frozenset[str]]
    """MIG profile → the ``memory`` capacities published for it."""

    VALUE_CAP = 64

    @staticmethod
    def of(devices: Iterable[CandidateDevice]) -> AttributeCatalogue:
        """Collect the catalogue of ``devices``."""
        return AttributeCatalogue.collect((d.driver, d.mig_profile, d.raw) for d in devices)

    @staticmethod
    def collect(
        devices: Iterable[tuple[str, str | None, Mapping[str, Any]]],
    ) -> AttributeCatalogue:
        """The catalogue of (driver, MIG profile, raw device) triples."""
        builder = _CatalogueBuilder()
        for driver, mig_profile, raw_device in devices:
            for name, raw in (raw_device.get("attributes") or {}).items():
                builder.add_attribute(id(raw), name, driver, raw)
            for name, raw in (raw_device.get("capacity") or {}).items():
                builder.add_capacity(id(raw), name, driver, mig_profile, raw)
        return builder.build()

    @staticmethod
    def collect_columns(
        drivers: Sequence[str],
        profiles: Sequence[str | None],
        attributes: Sequence[dict[str, Any]],
        capacities: Sequence[dict[str, Any]],
    ) -> AttributeCatalogue:
        """:meth:`collect` of an inventory's columns, exactly, in C where it can.

        Only the first time a value object appears under a name (and driver) can it add
        anything, so a block of devices is first reduced to those first appearances, in
        order, by ``dict.setdefault`` in C; the per-value work runs on what remains.
        """
        builder = _CatalogueBuilder()
        chain, repeat = itertools.chain.from_iterable, itertools.repeat
        step = 1 << 14
        for start in range(0, len(attributes), step):
            block = attributes[start : start + step]
            leaves = list(chain(map(dict.values, block)))
            owners = chain(map(repeat, drivers[start : start + step], map(len, block)))
            first: dict[tuple[int, str, str], Any] = {}
            keys = zip(map(id, leaves), chain(block), owners, strict=True)
            deque(map(first.setdefault, keys, leaves), 0)
            del leaves
            for (leaf_id, name, driver), raw in first.items():
                builder.add_attribute(leaf_id, name, driver, raw)
            maps: dict[tuple[int, str, str | None], dict[str, Any]] = {}
            caps_block = capacities[start : start + step]
            deque(
                map(
                    maps.setdefault,
                    zip(
                        map(id, caps_block),
                        drivers[start : start + step],
                        profiles[start : start + step],
                        strict=True,
                    ),
                    caps_block,
                ),
                0,
            )
            for (_, driver, mig_profile), entries in maps.items():
                for name, raw in entries.items():
                    builder.add_capacity(id(raw), name, driver, mig_profile, raw)
        return builder.build()

    def names(self) -> set[str]:
        """Every attribute and capacity name, whatever the domain."""
        return {n for _, n in self.attribute_types} | {n for _, n in self.capacities}

    def domains_of(self, name: str, kind: str = "attribute") -> list[str]:
        """Domains under which ``name`` is published, sorted."""
        table = self.attribute_types if kind == "attribute" else self.capacities
        return sorted({d for d, n in table if n == name})
