"""The devices in scope, prepared once for any number of claims and selectors.

A fleet has 10⁵ devices but a few hundred distinct ones as far as any selector can
tell. :class:`DeviceInventory` keeps the devices as columns and groups them by the raw
values the selectors read (``CompiledSelector.read_keys``), plus any conversion error
(:class:`~dradiag.analyses.selection.grouping._Projection`); a selector then runs on
one representative per group, whose CelDevice alone is built, and the reports (by
node, type, MIG profile) are the groups' sizes, counted in C. Only error samples name
devices. The streaming loader (``sources.fleet``) notes what the inventory reads while
decoding, so the columns cost no second pass over the devices. ``grouped=False``
evaluates device by device, the reference the grouping is tested against.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from dradiag.analyses.selection.catalogue import AttributeCatalogue
from dradiag.analyses.selection.devices import ANY_NODE, CandidateDevice
from dradiag.analyses.selection.grouping import (
    LEAF_IDS_MAX,
    _Leaves,
    _Projection,
    _ReadSpec,
    is_str,
    string_members,
)
from dradiag.analyses.selection.memoized import _memoized
from dradiag.snapshot.model import K8sObject

if TYPE_CHECKING:
    from dradiag.analyses.cel import CelDevice, CompiledSelector
    from dradiag.sources.fleet import FleetIndex


class _DeviceView(Sequence[CandidateDevice]):
    """``DeviceInventory.devices``: each CandidateDevice is made when it is asked for.

    The inventory keeps its devices as columns; a fleet's 160k devices are then a few
    lists, not 160k objects, and only reports that name a device build one.
    """

    __slots__ = ("_inventory",)

    def __init__(self, inventory: DeviceInventory) -> None:
        self._inventory = inventory

    def __len__(self) -> int:
        return len(self._inventory._raw)

    @overload
    def __getitem__(self, index: int) -> CandidateDevice: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[CandidateDevice, ...]: ...

    def __getitem__(self, index: int | slice) -> CandidateDevice | tuple[CandidateDevice, ...]:
        inv = self._inventory
        if isinstance(index, slice):
            return tuple(inv.device(i) for i in range(len(inv._raw))[index])
        if index < 0:
            index += len(inv._raw)
        if not 0 <= index < len(inv._raw):
            raise IndexError("device index out of range")
        return inv.device(index)

    def __iter__(self) -> Iterator[CandidateDevice]:
        device = self._inventory.device
        return (device(i) for i in range(len(self._inventory._raw)))


_NO_ENTRIES: dict[str, Any] = {}


_CONVERSION_ERROR = object()
_PLAIN = {"string": str, "int": int, "bool": bool}
"""Attribute members whose value of this exact type is its own CEL value."""

_MIXED = object()
"""An attribute spelled both bare and qualified (``cel_readings`` leaves it to ``cel``)."""

_PlanStep = tuple[str, str, str, str | None, bool, str]
"""(holder, domain, name, qualified raw name or None, bare name possible, value_key)."""


def _reading_plan(spec: _ReadSpec) -> list[_PlanStep]:
    """Where each key of ``spec`` comes from in a raw device (``cel_device``'s name split)."""
    from dradiag.analyses.cel.environment import value_key

    plan: list[_PlanStep] = []
    for kind, domain, name in sorted(spec.keys):
        holder = "attributes" if kind == "attribute" else "capacity"
        # `domain/name` splits back at the first "/"; a bare `name` is the driver's domain.
        qualified = f"{domain}/{name}" if "/" not in domain else None
        plan.append(
            (holder, domain, name, qualified, "/" not in name, value_key(kind, domain, name))
        )
    return plan


"""Marks the grouping signature of a device whose values do not all convert."""


class DeviceInventory:
    """Every device in scope, prepared once for any number of claims and selectors.

    Build it with :func:`build_inventory`. ``cel(i)`` gives device ``i`` as a CelDevice,
    built on first use; value conversions (semver, quantities) are shared between
    devices, which publish the same few values over and over.

    Devices are kept as columns (``devices`` makes a CandidateDevice on demand). With
    ``grouped`` (the default) a selector runs once per distinct tuple of the values it
    reads, on one representative device (:class:`_Projection`); without, it runs on
    every device, the reference the grouped evaluation is tested against.
    """

    __slots__ = (
        "classes",
        "classes_source",
        "nodes",
        "restricted_to",
        "grouped",
        "_raw",
        "_driver",
        "_pool",
        "_node",
        "_name",
        "_type",
        "_profile",
        "_cel",
        "_cel_reading",
        "_reading_plans",
        "_reading_shapes",
        "_converted",
        "_catalogue",
        "_cells",
        "_cell_keys",
        "_leaves",
        "_errors",
        "_projections",
        "_holders",
        "_index",
        "_token_cache",
        "_primed",
        "_drivers",
    )

    def __init__(
        self,
        devices: Sequence[CandidateDevice],
        *,
        classes: Mapping[str, K8sObject],
        classes_source: Literal["source", "builtin", "none"],
        nodes: Sequence[str],
        restricted_to: Sequence[str] | None = None,
        grouped: bool = True,
    ) -> None:
        self._set_columns(
            [d.raw for d in devices],
            [d.driver for d in devices],
            [d.pool for d in devices],
            [d.node for d in devices],
            [d.slice_device_name for d in devices],
            [d.device_type for d in devices],
            [d.mig_profile for d in devices],
        )
        self.classes: Mapping[str, K8sObject] = dict(classes)
        self.classes_source = classes_source
        self.nodes: tuple[str, ...] = tuple(nodes)
        """Nodes in scope, sorted (every node a device or Node object names)."""
        self.restricted_to: tuple[str, ...] | None = (
            tuple(restricted_to) if restricted_to is not None else None
        )
        self.grouped = grouped

    def _set_columns(
        self,
        raw: list[Mapping[str, Any]],
        driver: list[str],
        pool: list[str],
        node: list[str | None],
        name: list[str],
        device_type: list[str],
        profile: list[str | None],
    ) -> None:
        self._raw = raw
        self._driver = driver
        self._pool = pool
        self._node = node
        self._name = name
        self._type = device_type
        self._profile = profile
        self._cel: list[CelDevice | None] = [None] * len(raw)
        self._cel_reading: dict[_ReadSpec, dict[int, CelDevice]] = {}
        self._reading_plans: dict[_ReadSpec, list[_PlanStep]] = {}
        self._reading_shapes: dict[tuple[str, ...], dict[str, int]] = {}
        self._converted: dict[tuple[str, str, str, Any, type], tuple[str | None, Any]] = {}
        self._catalogue: AttributeCatalogue | None = None
        self._cells: list[int] | None = None
        self._cell_keys: dict[int, tuple[str, str, str | None]] = {}
        self._leaves = _Leaves()
        self._errors: dict[int, str] | None = None
        self._projections: list[_Projection] = []
        self._holders: dict[str, list[dict[str, Any]]] = {}
        self._index: FleetIndex | None = None
        self._token_cache: dict[tuple[str, str, str], list[int]] = {}
        self._primed = False
        self._drivers: frozenset[str] | None = None

    def __len__(self) -> int:
        return len(self._raw)

    @property
    def devices(self) -> Sequence[CandidateDevice]:
        """The devices in scope, sorted by node, driver, pool and name."""
        return _DeviceView(self)

    def device(self, index: int) -> CandidateDevice:
        """Device ``index``."""
        return CandidateDevice(
            driver=self._driver[index],
            pool=self._pool[index],
            slice_device_name=self._name[index],
            node=self._node[index],
            device_type=self._type[index],
            mig_profile=self._profile[index],
            raw=self._raw[index],
        )

    def ref(self, index: int) -> str:
        """``<driver>/<pool>/<device>`` of device ``index``."""
        return f"{self._driver[index]}/{self._pool[index]}/{self._name[index]}"

    def node_label(self, index: int) -> str:
        """The node of device ``index`` for grouping (:data:`ANY_NODE` when node-less)."""
        return self._node[index] or ANY_NODE

    def cel(self, index: int) -> CelDevice:
        """Device ``index`` prepared for CEL (built once)."""
        found = self._cel[index]
        if found is None:
            found = self._build_cel(index)
            self._cel[index] = found
        return found

    def _build_cel(self, index: int) -> CelDevice:
        """``cel_device``, with each distinct (name, value) converted only once.

        The CEL engine converts a device's attributes and capacities (semver and
        quantity parsing) every time; a fleet repeats the same values on every GPU, so
        each distinct one is converted through ``cel_device`` once and the CelDevice is
        assembled from the shared results.
        """
        from dradiag.analyses.cel import CelDevice
        from dradiag.analyses.cel.environment import DomainMap

        raw = self._raw[index]
        driver = self._driver[index]
        attributes = DomainMap()
        capacity = DomainMap()
        error: str | None = None
        cache = self._converted
        for holder, target in (("attributes", attributes), ("capacity", capacity)):
            entries = raw.get(holder)
            if not isinstance(entries, Mapping):
                continue
            for name, value in entries.items():
                try:
                    # {"string": "mig"} / {"value": "80Gi"}: one member with a scalar.
                    ((member, inner),) = value.items()
                    failure, parts = cache[(holder, name, member, inner, inner.__class__)]
                except (KeyError, TypeError, ValueError, AttributeError):
                    failure, parts = self._convert(driver, holder, name, value)
                if failure is not None or parts is None:
                    error = error or failure
                    continue
                domain, ident, cel_value = parts
                target.setdefault(domain, {})[ident] = cel_value
        return CelDevice(
            driver,
            attributes,
            capacity,
            bool(raw.get("allowMultipleAllocations")),
            error=error,
            name=self._name[index],
        )

    def _convert(self, driver: str, holder: str, name: str, value: Any) -> tuple[str | None, Any]:
        """Convert one attribute/capacity as ``cel_device`` does; cache scalar ones."""
        from dradiag.analyses.cel.environment import convert_entry

        converted: tuple[str | None, Any]
        try:
            converted = (None, convert_entry(driver, holder, name, value))
        except ValueError as exc:
            converted = (str(exc), None)
        if isinstance(value, Mapping) and len(value) == 1:
            ((member, inner),) = value.items()
            if isinstance(inner, str | int | float | bool):
                # Keyed by the scalar's type too: 1, 1.0 and True hash alike.
                self._converted[(holder, name, member, inner, inner.__class__)] = converted
        return converted

    def cel_reading(self, index: int, spec: _ReadSpec) -> CelDevice:
        """Device ``index`` for selectors that read no more than ``spec``: only that converted.

        A fleet whose devices differ in what a selector reads (a ``uuid``, a ``pciBusID``)
        defeats grouping: every device is evaluated, and converting each one whole
        (a dozen attributes, semver and quantity parsing) cost more than evaluating it.
        Here only the values ``spec`` names are converted (each distinct one once); the
        selector cannot see the others, and a value that does not convert fails every
        selector, so such a device (``conversion_errors``) and a whole ``spec`` get the
        full ``cel(index)``, as does one that spells a key both ways.
        """
        if spec.whole or self._cel[index] is not None or index in self.conversion_errors():
            return self.cel(index)
        built = self._cel_reading.setdefault(spec, {})
        found = built.get(index)
        if found is None:
            found = built[index] = self._build_reading(index, spec)
        return found

    def cel_readings(self, indices: Iterable[int], spec: _ReadSpec) -> list[CelDevice]:
        """``cel_reading`` of each of ``indices``, in order, for a sweep over many devices.

        A selector that reads only plain attributes (a per-device uuid: every device its
        own group) makes each device cost its assembly alone, so the common case is
        assembled here with the look-ups hoisted out of the loop; any device it does not
        fit (a capacity, a value to convert, both spellings, a conversion error) goes
        through ``cel_reading``, which gives the same device.
        """
        from dradiag.analyses.cel import CelDevice
        from dradiag.analyses.cel.environment import DomainMap

        if spec.whole:
            return [self.cel_reading(index, spec) for index in indices]
        plan = self._reading_plans.get(spec)
        if plan is None:
            plan = self._reading_plans[spec] = _reading_plan(spec)
        if any(step[0] != "attributes" for step in plan):
            return [self.cel_reading(index, spec) for index in indices]
        errors = self.conversion_errors()
        built = self._cel_reading.setdefault(spec, {})
        raws, drivers, names, cels = self._raw, self._driver, self._name, self._cel
        shapes = self._reading_shapes
        assembled = CelDevice.assembled
        plain = _PLAIN
        steps = [
            (domain, name, qualified, bare_ok, key)
            for _h, domain, name, qualified, bare_ok, key in plan
        ]
        out: list[CelDevice] = []
        append = out.append
        for index in indices:
            found = built.get(index)
            if found is not None:
                append(found)
                continue
            raw = raws[index]
            entries = raw.get("attributes")
            if cels[index] is not None or index in errors or entries.__class__ is not dict:
                append(self.cel_reading(index, spec))
                continue
            driver = drivers[index]
            attributes = DomainMap()
            present: list[str] = []
            vals: list[Any] = []
            for domain, name, qualified_name, bare_ok, key in steps:
                qualified = entries.get(qualified_name) if qualified_name is not None else None
                bare = entries.get(name) if bare_ok and domain == driver else None
                value = bare if qualified is None else qualified if bare is None else _MIXED
                if value is None:
                    continue
                if value.__class__ is not dict or len(value) != 1:
                    break
                ((member, inner),) = value.items()
                if plain.get(member) is not inner.__class__:
                    break
                domain_map = attributes.get(domain)
                if domain_map is None:
                    domain_map = attributes[domain] = {}
                domain_map[name] = inner
                present.append(key)
                vals.append(inner)
            else:
                layout = tuple(present)
                shape = shapes.get(layout)
                if shape is None:
                    shape = shapes[layout] = {k: i for i, k in enumerate(layout)}
                found = built[index] = assembled(
                    driver,
                    attributes,
                    DomainMap(),
                    bool(raw.get("allowMultipleAllocations")),
                    shape,
                    tuple(vals),
                    name=names[index],
                )
                append(found)
                continue
            append(self.cel_reading(index, spec))
        return out

    def _build_reading(self, index: int, spec: _ReadSpec) -> CelDevice:
        from dradiag.analyses.cel import CelDevice
        from dradiag.analyses.cel.environment import DomainMap

        plan = self._reading_plans.get(spec)
        if plan is None:
            plan = self._reading_plans[spec] = _reading_plan(spec)
        raw = self._raw[index]
        driver = self._driver[index]
        maps = {"attributes": DomainMap(), "capacity": DomainMap()}
        present: list[str] = []
        vals: list[Any] = []
        cache = self._converted
        for holder, domain, name, qualified_name, bare_ok, key in plan:
            entries = raw.get(holder)
            if not isinstance(entries, Mapping):
                continue
            qualified = entries.get(qualified_name) if qualified_name is not None else None
            bare = entries.get(name) if bare_ok and domain == driver else None
            if qualified is not None and bare is not None:
                return self.cel(index)  # both spellings: cel_device keeps the later one
            if bare is not None:
                value, raw_name = bare, name
            elif qualified is not None and qualified_name is not None:
                value, raw_name = qualified, qualified_name
            else:
                continue
            try:
                ((member, inner),) = value.items()
                cls = inner.__class__
                if holder == "attributes" and _PLAIN.get(member) is cls:
                    # A string, int or bool attribute is its own CEL value (a per-device
                    # uuid or serial: not worth a cache entry).
                    cel_value = inner
                else:
                    failure, parts = cache[(holder, raw_name, member, inner, cls)]
                    if failure is not None or parts is None:
                        return self.cel(index)
                    cel_value = parts[2]
            except (KeyError, TypeError, ValueError, AttributeError):
                failure, parts = self._convert(driver, holder, raw_name, value)
                if failure is not None or parts is None:
                    return self.cel(index)
                cel_value = parts[2]
            maps[holder].setdefault(domain, {})[name] = cel_value
            present.append(key)
            vals.append(cel_value)
        layout = tuple(present)
        shape = self._reading_shapes.get(layout)
        if shape is None:
            shape = self._reading_shapes[layout] = {k: i for i, k in enumerate(layout)}
        return CelDevice.assembled(
            driver,
            maps["attributes"],
            maps["capacity"],
            bool(raw.get("allowMultipleAllocations")),
            shape,
            tuple(vals),
            name=self._name[index],
        )

    @property
    def catalogue(self) -> AttributeCatalogue:
        """What attributes and capacities the devices in scope publish (for near misses)."""
        if self._catalogue is None:
            self._catalogue = AttributeCatalogue.collect_columns(
                self._driver, self._profile, self._entries("attributes"), self._entries("capacity")
            )
        return self._catalogue

    def indices_passing(self, selectors: Sequence[CompiledSelector]) -> Iterable[int]:
        """Devices, in order, on which every one of ``selectors`` is true (no error first).

        As a stage of class selectors decides it (stopping at the first false or error).
        """
        from dradiag.analyses.cel import CelRuntimeError

        fns = [_memoized(sel) for sel in selectors]
        spec = _ReadSpec.of(selectors)
        # An ungrouped inventory is the reference the grouped one is tested against: whole devices.
        reading = self.cel_reading if self.grouped else lambda index, _spec: self.cel(index)

        def passes(index: int) -> bool:
            try:
                return all(fn(reading(index, spec)) for fn in fns)
            except CelRuntimeError:
                return False

        if not fns:
            return range(len(self))
        if not self.grouped:
            return [index for index in range(len(self)) if passes(index)]
        projection = self.projection(spec)
        return self.indices_in(
            projection, {group for group in dict.fromkeys(projection.groups) if passes(group)}
        )

    # -- grouping ---------------------------------------------------------------------

    def _entries(self, holder: str) -> list[dict[str, Any]]:
        """Each device's ``attributes`` (or ``capacity``) as a dict ({} when there is none)."""
        cached = self._holders.get(holder)
        if cached is not None:
            return cached
        found: list[Any]
        try:
            found = list(map(dict.get, self._raw, itertools.repeat(holder)))  # type: ignore[arg-type]
        except TypeError:  # a device that is a Mapping but not a dict
            found = [raw.get(holder) for raw in self._raw]
        if set(map(type, found)) != {dict}:
            for i, entries in enumerate(found):
                if entries.__class__ is not dict:
                    found[i] = dict(entries) if isinstance(entries, Mapping) else _NO_ENTRIES
        self._holders[holder] = found
        return found

    def cells(self) -> tuple[list[int], dict[int, tuple[str, str, str | None]]]:
        """Each device's report cell (node, type, MIG profile), and the cells' keys.

        A cell is numbered by the index of its first device.
        """
        if self._cells is None:
            index: dict[tuple[str, str, str | None], int] = {}
            labels = [node or ANY_NODE for node in self._node]
            self._cells = list(
                map(
                    index.setdefault,
                    zip(labels, self._type, self._profile, strict=True),
                    itertools.count(),
                )
            )
            self._cell_keys = {first: key for key, first in index.items()}
        return self._cells, self._cell_keys

    def conversion_errors(self) -> dict[int, str]:
        """Devices some attribute or capacity of which does not convert: index → the error.

        Such a device fails every selector with that message (``CelDevice.error``). Each
        distinct value object is checked once; only when one does not convert are the
        devices holding it looked for (by identity, in C).
        """
        if self._errors is not None:
            return self._errors
        leaves = self._leaves
        n = len(self._raw)
        bad: set[int] = set()
        step = 1 << 14
        index = self._index
        if index is not None:
            # Every value object of every device is in the loader's lists: check those.
            values = index.checked_values
            if values is None:
                values = index.attribute_values
                strings = string_members(values) if values else None
                if strings is not None:  # the plain strings need no look
                    values = list(itertools.compress(values, map(operator.not_, is_str(strings))))
            wrong = {id(leaf) for leaf in values if not leaves.converts("attributes", leaf)}
            maps = {
                id(m)
                for m in index.capacity_maps
                if not all(leaves.converts("capacity", leaf) for leaf in m.values())
            }
            if wrong:
                clean = map(
                    wrong.isdisjoint,
                    map(map, itertools.repeat(id), map(dict.values, self._entries("attributes"))),
                )
                bad.update(itertools.compress(range(n), map(operator.not_, clean)))
            if maps:
                bad.update(
                    itertools.compress(
                        range(n), map(maps.__contains__, map(id, self._entries("capacity")))
                    )
                )
        for holder in ("attributes", "capacity") if index is None else ():
            columns = self._entries(holder)
            for start in range(0, n, step):
                block = columns[start : start + step]
                values = list(itertools.chain.from_iterable(map(dict.values, block)))
                distinct = dict(zip(map(id, values), values, strict=True))
                del values
                wrong = {key for key, leaf in distinct.items() if not leaves.converts(holder, leaf)}
                if wrong:
                    clean = map(
                        wrong.isdisjoint, map(map, itertools.repeat(id), map(dict.values, block))
                    )
                    bad.update(
                        itertools.compress(
                            range(start, start + len(block)), map(operator.not_, clean)
                        )
                    )
        errors: dict[int, str] = {}
        for i in sorted(bad):
            error = self.cel(i).error
            assert error is not None, "a value that does not convert makes a device error"
            errors[i] = error
        self._errors = errors
        return errors

    def projection(self, spec: _ReadSpec) -> _Projection:
        """The devices grouped by what ``spec`` reads (a cached coarser grouping if one fits)."""
        fitting = [p for p in self._projections if p.spec.covers(spec)]
        if fitting:
            return min(fitting, key=lambda p: p.count)
        errors = self.conversion_errors()
        n = len(self._raw)
        columns: list[list[Any]] = []
        signatures: list[Any]
        if spec.whole:
            signatures = self._whole_signatures()
        else:
            if spec.driver:
                columns.append(self._driver)
            if spec.allow_multiple:
                columns.append([bool(raw.get("allowMultipleAllocations")) for raw in self._raw])
            columns.extend(self._token_columns(sorted(spec.keys)))
            # A column the same on every device tells no device apart.
            columns = [c for c in columns if c and c.count(c[0]) != n]
            if len(columns) == 1:
                signatures = list(columns[0])
            elif columns:
                signatures = list(zip(*columns, strict=True))
            else:
                signatures = [()] * n
        for i, error in errors.items():
            signatures[i] = (_CONVERSION_ERROR, error)
        first: dict[Any, int] = {}
        groups = list(map(first.setdefault, signatures, range(n)))
        projection = _Projection(spec, groups, len(first))
        self._projections.append(projection)
        return projection

    def prepare(self, selectors: Iterable[CompiledSelector]) -> None:
        """Group the devices once by everything ``selectors`` read (optional).

        Each request otherwise groups them by what its own selectors read; grouping by
        the union serves every request of a run with one sweep over the devices. Not
        done for selectors that read a device whole (their grouping would be per device).
        """
        if not self.grouped:
            return
        specs = [_ReadSpec.of([sel]) for sel in selectors]
        union = _ReadSpec.union(spec for spec in specs if not spec.whole)
        if union.keys or union.driver:
            self.projection(union)

    def _token_columns(self, keys: Sequence[tuple[str, str, str]]) -> list[list[int]]:
        """Per key, per device: the token of the raw value CEL reads there (or ``_ABSENT``).

        Keys not read before are read together, a block of devices at a time (the
        block's attribute maps stay in the cache from one key to the next).
        """
        cache = self._token_cache
        missing = [key for key in dict.fromkeys(keys) if key not in cache]
        if missing:
            if (
                self._index is not None
                and not self._primed
                and len(self._index.attribute_values) <= LEAF_IDS_MAX
            ):
                # Every value object of the snapshot is known: token them all up front
                # (unless there are more than can be remembered by identity: a fleet of
                # per-device values, of which only the columns read are worth a token).
                self._primed = True
                token = self._leaves.token
                for leaf in self._index.attribute_values:
                    token(leaf)
                for entries in self._index.capacity_maps:
                    for leaf in entries.values():
                        token(leaf)
            plans = [self._key_plan(key) for key in missing]
            columns: list[list[int]] = [[] for _ in missing]
            holders = {"attribute": self._entries("attributes"), "capacity": None}
            if any(key[0] == "capacity" for key in missing):
                holders["capacity"] = self._entries("capacity")
            n = len(self._raw)
            step = 2048
            for start in range(0, n, step):
                stop = min(n, start + step)
                drivers = self._driver[start:stop]
                blocks = {
                    kind: entries[start:stop]
                    for kind, entries in holders.items()
                    if entries is not None
                }
                for column, (kind, qualified, bare, domain) in zip(columns, plans, strict=True):
                    column.extend(
                        self._block_tokens(blocks[kind], drivers, qualified, bare, domain)
                    )
            for key, column in zip(missing, columns, strict=True):
                cache[key] = column
        return [cache[key] for key in keys]

    def _key_plan(self, key: tuple[str, str, str]) -> tuple[str, str | None, str | None, str]:
        """(kind, qualified name, bare name, domain): the raw names CEL's ``key`` can come from.

        A name without ``/`` belongs to the driver's domain, a qualified one to its own.
        Spellings no device publishes are dropped (when the streaming loader knows).
        """
        kind, domain, name = key
        qualified = f"{domain}/{name}" if "/" not in domain else None
        if self._drivers is None:
            self._drivers = frozenset(self._driver)
        bare = name if "/" not in name and domain in self._drivers else None
        if self._index is not None:
            published = (
                self._index.attribute_names if kind == "attribute" else self._index.capacity_names
            )
            qualified = qualified if qualified in published else None
            bare = bare if bare in published else None
        return kind, qualified, bare, domain

    def raw_column(self, key: tuple[str, str, str]) -> list[Any]:
        """Per device, the raw value CEL reads at ``key`` (``(kind, domain, name)``), or None.

        The value object itself (``{"string": "GPU-…"}``), as ``cel_device`` would pick it
        from either spelling of the name; for devices kept as columns
        (``CompiledSelector.rows``).
        """
        kind, qualified, bare, domain = self._key_plan(key)
        holder = "attributes" if kind == "attribute" else "capacity"
        return self._pick(self._entries(holder), self._driver, qualified, bare, domain)

    def _block_tokens(
        self,
        entries: list[dict[str, Any]],
        drivers: list[str],
        qualified: str | None,
        bare: str | None,
        domain: str,
    ) -> list[int]:
        picked = self._pick(entries, drivers, qualified, bare, domain)
        n = len(entries)
        leaves = self._leaves
        known = leaves.token_of_id.get
        tokens: list[int | None] = list(map(known, map(id, picked)))
        if None in tokens:
            # Give each distinct value object its token, then look them all up again.
            for leaf in dict(zip(map(id, picked), picked, strict=True)).values():
                leaves.token(leaf)
            tokens = list(map(known, map(id, picked)))
            if None in tokens:  # more distinct objects than remembered by identity
                token = leaves.token
                for i in range(n):
                    if tokens[i] is None:
                        tokens[i] = token(picked[i])
        return tokens  # type: ignore[return-value]

    def _pick(
        self,
        entries: list[dict[str, Any]],
        drivers: list[str],
        qualified: str | None,
        bare: str | None,
        domain: str,
    ) -> list[Any]:
        """Per device of ``entries``, the raw value of the name (either spelling), or None."""
        n = len(entries)
        picked: list[Any]
        if qualified is not None:
            picked = list(map(dict.get, entries, itertools.repeat(qualified)))
        else:
            picked = [None] * n
        if bare is not None:
            plain = list(map(dict.get, entries, itertools.repeat(bare)))
            if qualified is None or picked.count(None) == n:
                if self._drivers == {domain} or drivers.count(domain) == n:
                    picked = plain
                else:
                    picked = [
                        value if driver == domain else None
                        for value, driver in zip(plain, drivers, strict=True)
                    ]
            else:
                for i in range(n):
                    value = plain[i]
                    if value is None or drivers[i] != domain:
                        continue
                    if picked[i] is None:
                        picked[i] = value
                    else:
                        # Both spellings: the one later in the map is what cel_device keeps.
                        last = value
                        for entry in entries[i]:
                            if entry == qualified:
                                last = picked[i]
                            elif entry == bare:
                                last = value
                        picked[i] = last
        return picked

    def _whole_signatures(self) -> list[Any]:
        """Per device, everything CEL can see of it (for selectors that read it whole)."""
        token = self._leaves.token
        attributes = self._entries("attributes")
        capacity = self._entries("capacity")
        out: list[Any] = []
        for i, raw in enumerate(self._raw):
            out.append(
                (
                    1,
                    self._driver[i],
                    bool(raw.get("allowMultipleAllocations")),
                    tuple((name, token(leaf)) for name, leaf in attributes[i].items()),
                    tuple((name, token(leaf)) for name, leaf in capacity[i].items()),
                )
            )
        return out

    def indices_in(self, projection: _Projection, groups: set[int]) -> list[int]:
        """Device indices, in order, of the devices in ``groups`` of ``projection``."""
        if not groups:
            return []
        return list(
            itertools.compress(range(len(self._raw)), map(groups.__contains__, projection.groups))
        )
