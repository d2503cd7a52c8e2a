"""The selection analysis: which devices a claim's class and request selectors pick, and why not.

For every request of a claim spec (and every ``firstAvailable`` subrequest) this answers
what the scheduler's selection step would: the DeviceClass's selectors, then the
request's own, each list in order and stopping at the first false (k8s-dra-semantics
§1.7, §3.4 step 3), on every device visible from the nodes in scope. Devices are counted
matched / not matched / errored, by node, device type and MIG profile, for the class
selectors and the request selectors separately. Then count, ``allocationMode: All`` and
``matchAttribute`` constraints are checked for feasibility on a single node.

A runtime error is not a non-match: kube-scheduler aborts the scheduling attempt
(SchedulerError) on the first device a selector errors on (DESIGN §7), so errors are
their own verdict, naming the device. Compile errors are hard errors too.

This analysis is pure: a Snapshot in, data out. ``selector-check`` and the diagnosis
engine's selection phase both call :func:`analyze_claim_selection` and turn the result
into findings with :func:`selection_findings` (rule ids ``DRA-SEL-*``).

Performance: a fleet has 10⁵ devices but a few hundred distinct ones as far as any
selector can tell (it reads a handful of attributes, and the driver publishes the same
values on every GPU of a model). :class:`DeviceInventory` keeps the devices as columns
and groups them by the raw values the selectors read (``CompiledSelector.read_keys``),
plus any conversion error (:class:`_Projection`); a selector then runs on one
representative per group, whose CelDevice alone is built, and the reports (by node,
type, MIG profile) are the groups' sizes, counted in C. Only error samples name
devices. The streaming loader (``sources.fleet``) notes what the inventory reads while
decoding, so the columns cost no second pass over the devices. ``grouped=False``
evaluates device by device, the reference the grouping is tested against.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, overload

from dradiag.diagnosis.model import Evidence, EvidenceSource, Finding, Phase, Severity
from dradiag.snapshot.model import K8sObject, Kind, Snapshot, name_of

if TYPE_CHECKING:
    from dradiag.analyses.cel import CelDevice, CompiledSelector
    from dradiag.sources.fleet import FleetIndex

ANY_NODE = "(any node)"
"""The node label of devices visible from every node (``allNodes``/``nodeSelector``)."""

MAX_ERRORS_KEPT = 20
"""Device errors kept per selector (the total is always counted)."""

CLAIM_DEVICE_LIMIT = 32
"""``AllocationResultsMaxSize``: devices per claim (k8s-dra-semantics §3.3)."""

BUILTIN_CLASSES_RESOURCE = "nvidia_device_classes.yaml"

SelectorOrigin = Literal["class", "request"]


class RequestStatus(StrEnum):
    """How one request (or subrequest) stands; the JSON document's spelling."""

    OK = "ok"
    NO_MATCH = "no-match"
    """No device in scope passes the class and request selectors."""
    ERROR = "error"
    """A selector errors at run time on some device: the scheduler would abort."""
    COMPILE_ERROR = "compile-error"
    CLASS_MISSING = "class-missing"
    COUNT_INFEASIBLE = "count-infeasible"
    """Devices match, but no single node has as many as the request needs."""
    INVALID = "invalid"
    """The request itself is malformed (no class, unknown allocation mode)."""


_BROKEN = frozenset(
    {
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COMPILE_ERROR,
        RequestStatus.CLASS_MISSING,
        RequestStatus.COUNT_INFEASIBLE,
        RequestStatus.INVALID,
    }
)


# -- the devices ----------------------------------------------------------------------


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


def _latest_generation_slices(snapshot: Snapshot) -> list[K8sObject]:
    """Slices of each pool's highest generation (older ones are obsolete, §7.10)."""
    newest: dict[tuple[str, str], int] = {}
    for sl in snapshot.slices:
        spec = sl.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        generation = int(pool.get("generation") or 0)
        if generation > newest.get(key, -1):
            newest[key] = generation
    out = []
    for sl in snapshot.slices:
        spec = sl.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        if int(pool.get("generation") or 0) == newest[key]:
            out.append(sl)
    return out


def builtin_device_classes() -> tuple[K8sObject, ...]:
    """The NVIDIA driver's DeviceClasses (nvidia-driver-facts §2), as shipped in ``data/``."""
    return _builtin_classes()


@functools.cache
def _builtin_classes() -> tuple[K8sObject, ...]:
    import yaml

    data = resources.files("dradiag").joinpath("data", BUILTIN_CLASSES_RESOURCE)
    text = data.read_text("utf-8")
    doc = yaml.safe_load(text)
    return tuple(item for item in doc.get("items") or () if isinstance(item, Mapping))


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
_MISSING = object()
_CONVERSION_ERROR = object()
"""Marks the grouping signature of a device whose values do not all convert."""
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
        token = table.setdefault(_freeze(leaf), len(table))
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
        """Convert one attribute/capacity through ``cel_device``; cache scalar ones."""
        from dradiag.analyses.cel import cel_device

        single = cel_device(driver, {holder: {name: value}})
        converted: tuple[str | None, Any]
        if single.error is not None:
            converted = (single.error, None)
        else:
            maps = single.attributes if holder == "attributes" else single.capacity
            ((domain, values),) = maps.items()
            ((ident, cel_value),) = values.items()
            converted = (None, (domain, ident, cel_value))
        if isinstance(value, Mapping) and len(value) == 1:
            ((member, inner),) = value.items()
            if isinstance(inner, str | int | float | bool):
                # Keyed by the scalar's type too: 1, 1.0 and True hash alike.
                self._converted[(holder, name, member, inner, inner.__class__)] = converted
        return converted

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

        def passes(index: int) -> bool:
            try:
                return all(fn(self.cel(index)) for fn in fns)
            except CelRuntimeError:
                return False

        if not fns:
            return range(len(self))
        if not self.grouped:
            return [index for index in range(len(self)) if passes(index)]
        projection = self.projection(_ReadSpec.of(selectors))
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
            wrong = {
                id(leaf)
                for leaf in index.attribute_values
                if not leaves.converts("attributes", leaf)
            }
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
            if self._index is not None and not self._primed:
                # Every value object of the snapshot is known: token them all up front.
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

    def _block_tokens(
        self,
        entries: list[dict[str, Any]],
        drivers: list[str],
        qualified: str | None,
        bare: str | None,
        domain: str,
    ) -> list[int]:
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


def _scalar_of(leaf: Any) -> Any:
    """The scalar of an attribute value (``string``, ``int``, ``bool``, ``version``), or None."""
    if isinstance(leaf, Mapping):
        for member in ("string", "int", "bool", "version"):
            if member in leaf:
                return leaf[member]
    return None


def build_inventory(
    snapshot: Snapshot,
    *,
    nodes: Sequence[str] | None = None,
    builtin_classes_fallback: bool = True,
    grouped: bool = True,
) -> DeviceInventory:
    """Every device visible from ``nodes`` (all when None), and the DeviceClasses to use.

    Only each pool's newest generation counts. When the source holds no DeviceClass at
    all and ``builtin_classes_fallback`` is set, the NVIDIA driver's built-in classes are
    used (the caller reports that as a note). ``grouped``: see :class:`DeviceInventory`.
    """
    wanted = set(nodes) if nodes is not None else None
    raws: list[Mapping[str, Any]] = []
    drivers: list[str] = []
    pools: list[str] = []
    device_nodes: list[str | None] = []
    names: list[str] = []
    types: list[str] = []
    profiles: list[str | None] = []
    # The type/profile of a shared value object, by identity (bounded; pinned in `seen`).
    scalars: dict[int, Any] = {}
    seen: list[Any] = []

    def scalar(leaf: Any) -> Any:
        value = scalars.get(id(leaf), _MISSING)
        if value is _MISSING:
            value = _scalar_of(leaf)
            if len(scalars) < LEAF_IDS_MAX:
                scalars[id(leaf)] = value
                seen.append(leaf)
        return value

    node_names: set[str] = set(snapshot.node_names())
    index = _fleet_index(snapshot)
    noted_all = index is not None
    in_order = True
    last: tuple[str, str, str, str] | None = None
    noted_attributes: list[dict[str, Any]] = []
    noted_capacities: list[dict[str, Any]] = []
    for sl in _latest_generation_slices(snapshot):
        spec = sl.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        slice_node = spec.get("nodeName")
        slice_node = str(slice_node) if slice_node else None
        qualified_type = f"{driver}/type"
        qualified_profile = f"{driver}/profile"
        before = len(raws)
        devices = spec.get("devices") or ()
        if not devices:
            continue
        noted = index.slices.get(id(devices)) if index is not None else None
        if noted is not None and noted.devices is devices and len(noted.names) == len(devices):
            # The streaming loader read these while decoding them (sources.fleet).
            own = noted.node_names
            if own is None:
                labels: list[str | None] = [slice_node] * len(devices)
            else:
                labels = [node or slice_node for node in own]
            if wanted is None:
                raws.extend(devices)
                noted_attributes.extend(noted.attributes)
                noted_capacities.extend(noted.capacities)
                names.extend(noted.names)
                device_nodes.extend(labels)
                types.extend(noted.types)
                profiles.extend(noted.profiles)
                if in_order:
                    # Still sorted by (node, driver, pool, name)? Then no sort is needed.
                    label = slice_node or ANY_NODE
                    first = (label, driver, pool, noted.names[0])
                    in_order = (
                        own is None
                        and (last is None or last <= first)
                        and all(
                            map(operator.le, noted.names, itertools.islice(noted.names, 1, None))
                        )
                    )
                    last = (label, driver, pool, noted.names[-1])
            else:
                in_order = False  # (sorted below, as any restricted inventory)
                for i, node in enumerate(labels):
                    if node is None or node in wanted:
                        raws.append(devices[i])
                        noted_attributes.append(noted.attributes[i])
                        noted_capacities.append(noted.capacities[i])
                        names.append(noted.names[i])
                        device_nodes.append(node)
                        types.append(noted.types[i])
                        profiles.append(noted.profiles[i])
            added = len(raws) - before
            drivers.extend([driver] * added)
            pools.extend([pool] * added)
            continue
        noted_all = in_order = False
        for raw in devices:
            if raw.__class__ is not dict and not isinstance(raw, Mapping):
                continue
            node = raw.get("nodeName")
            node = str(node) if node else slice_node
            if wanted is not None and node is not None and node not in wanted:
                continue
            attrs = raw.get("attributes") or {}
            if attrs.__class__ is dict:
                leaf = attrs.get("type")
                device_type = scalar(attrs.get(qualified_type) if leaf is None else leaf)
                leaf = attrs.get("profile")
                profile = scalar(attrs.get(qualified_profile) if leaf is None else leaf)
            else:
                device_type = _attribute(raw, driver, "type")
                profile = _attribute(raw, driver, "profile")
            raws.append(raw)
            names.append(str(raw.get("name") or ""))
            device_nodes.append(node)
            types.append(device_type if device_type.__class__ is str else str(device_type or ""))
            profiles.append(str(profile) if profile is not None else None)
        added = len(raws) - before
        drivers.extend([driver] * added)
        pools.extend([pool] * added)
    classes = {name_of(c): c for c in snapshot.device_classes}
    source: Literal["source", "builtin", "none"] = "source"
    if not classes:
        if builtin_classes_fallback:
            classes = {name_of(c): c for c in builtin_device_classes()}
            source = "builtin"
        else:
            source = "none"
    scope = sorted(wanted) if wanted is not None else sorted(node_names)
    columns: list[list[Any]] = [raws, drivers, pools, device_nodes, names, types, profiles]
    if not in_order:
        keys = list(zip([n or ANY_NODE for n in device_nodes], drivers, pools, names, strict=True))
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable, as before
        if order != list(range(len(keys))):
            columns = [[column[i] for i in order] for column in columns]
    inventory = DeviceInventory(
        (),
        classes=classes,
        classes_source=source,
        nodes=scope,
        restricted_to=sorted(wanted) if wanted is not None else None,
        grouped=grouped,
    )
    inventory._set_columns(*columns)  # type: ignore[arg-type]
    if noted_all and index is not None and index.complete:
        inventory._index = index
        if in_order:
            # The loader's per-device maps, in inventory order already.
            inventory._holders = {"attributes": noted_attributes, "capacity": noted_capacities}
    return inventory


def _fleet_index(snapshot: Snapshot) -> FleetIndex | None:
    """What the streaming loader noted about ``snapshot``'s devices, if it loaded it."""
    from dradiag.sources.fleet import fleet_index

    return fleet_index(snapshot)


# -- results --------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Devices matched / not matched / errored."""

    matched: int = 0
    not_matched: int = 0
    errored: int = 0

    @property
    def total(self) -> int:
        """Devices counted."""
        return self.matched + self.not_matched + self.errored

    def as_dict(self) -> dict[str, int]:
        """The JSON spelling."""
        return {"matched": self.matched, "notMatched": self.not_matched, "errored": self.errored}


@dataclass(frozen=True, slots=True, kw_only=True)
class StageResult:
    """One stage (class selectors or request selectors) over the devices it saw."""

    evaluated: bool
    """False when the stage could not run (compile error, missing class, earlier stage)."""
    total: Tally
    by_node: Mapping[str, Tally]
    by_type: Mapping[str, Tally]
    by_profile: Mapping[str, Tally]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompileProblem:
    """A selector that does not compile: cel-go's position and reason."""

    reason: str
    position: int | None
    line: int | None
    column: int | None
    caret: str
    """The expression line, a caret under the position, and the reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceError:
    """A runtime error of one selector on one device."""

    device: str
    """``<driver>/<pool>/<device>``."""
    node: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectorResult:
    """One selector (class or request) and what it did on the devices it was run on."""

    origin: SelectorOrigin
    owner: str
    """The DeviceClass name (class selectors) or the request label (request selectors)."""
    index: int
    expression: str
    compile_error: CompileProblem | None = None
    evaluated: int = 0
    true: int = 0
    false: int = 0
    error_count: int = 0
    errors: tuple[DeviceError, ...] = ()
    """The first :data:`MAX_ERRORS_KEPT` errors, in device order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSelection:
    """One request (``exactly``) or one ``firstAvailable`` subrequest."""

    request: str
    subrequest: str | None
    device_class: str
    class_found: bool
    class_source: Literal["source", "builtin", "none"]
    allocation_mode: str
    count: int
    admin_access: bool
    class_selectors: tuple[SelectorResult, ...]
    request_selectors: tuple[SelectorResult, ...]
    class_stage: StageResult
    request_stage: StageResult
    matched_indices: tuple[int, ...]
    """Inventory indices of the devices that pass both stages."""
    best_node: str | None
    best_node_count: int
    status: RequestStatus
    problem: str = ""
    """Why the request is invalid, for :attr:`RequestStatus.INVALID`."""

    @property
    def label(self) -> str:
        """``request`` or ``request/subrequest`` (how results and constraints name it)."""
        return f"{self.request}/{self.subrequest}" if self.subrequest else self.request

    @property
    def matched(self) -> int:
        """Devices in scope that pass the class and request selectors."""
        return len(self.matched_indices)

    @property
    def broken(self) -> bool:
        """True when this alternative cannot be allocated (or would abort scheduling)."""
        return self.status in _BROKEN

    def selectors(self) -> tuple[SelectorResult, ...]:
        """Class selectors, then request selectors: the order the scheduler runs them."""
        return self.class_selectors + self.request_selectors


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestGroup:
    """A request of the claim: one alternative (``exactly``) or its subrequests in order."""

    name: str
    first_available: bool
    alternatives: tuple[RequestSelection, ...]

    @property
    def chosen(self) -> RequestSelection | None:
        """The first alternative that can be satisfied; None when none can.

        An alternative whose selector errors aborts scheduling before later ones are
        tried, so an error stops the search here (§1.7, §3.8).
        """
        for alt in self.alternatives:
            if alt.status is RequestStatus.ERROR:
                return None
            if not alt.broken:
                return alt
        return None

    @property
    def status(self) -> RequestStatus:
        """The request's status: that of its chosen alternative, else of the first broken."""
        chosen = self.chosen
        if chosen is not None:
            return chosen.status
        for alt in self.alternatives:
            if alt.status is RequestStatus.ERROR:
                return alt.status
        return self.alternatives[0].status if self.alternatives else RequestStatus.INVALID


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintResult:
    """Feasibility of one ``matchAttribute`` constraint on a single node."""

    index: int
    attribute: str
    requests: tuple[str, ...]
    feasible: bool
    feasible_nodes: int
    detail: str
    lacking_attribute: int
    """Matching devices that do not publish the attribute at all (never usable here)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimSelection:
    """The selection analysis of one claim spec."""

    namespace: str
    claim_name: str | None
    requests: tuple[RequestGroup, ...]
    constraints: tuple[ConstraintResult, ...]
    devices_in_scope: int
    nodes_in_scope: tuple[str, ...]
    classes_source: Literal["source", "builtin", "none"]
    device_limit_exceeded: int | None = None
    """The claim's minimum device count when above :data:`CLAIM_DEVICE_LIMIT`."""
    free_now: Mapping[str, int] | None = None
    """Request label → matching devices not allocated now (with ``--now``)."""
    inventory: DeviceInventory | None = field(default=None, compare=False, repr=False)
    """The devices analysed, for near-miss explanations of broken requests."""

    @property
    def broken(self) -> bool:
        """True when some request cannot be satisfied or would abort scheduling."""
        return (
            any(g.status in _BROKEN for g in self.requests)
            or any(not c.feasible for c in self.constraints)
            or self.device_limit_exceeded is not None
        )


# -- evaluation -----------------------------------------------------------------------


def _compile(expression: str) -> tuple[CompiledSelector | None, CompileProblem | None]:
    from dradiag.analyses.cel import CelCompileError, compile_selector

    try:
        return compile_selector(expression), None
    except CelCompileError as exc:
        return None, CompileProblem(
            reason=exc.reason,
            position=exc.position,
            line=exc.line,
            column=exc.column,
            caret=exc.render_caret(),
        )


def _selector_expressions(selectors: Any) -> list[str]:
    out = []
    for sel in selectors or ():
        cel = sel.get("cel") if isinstance(sel, Mapping) else None
        expr = cel.get("expression") if isinstance(cel, Mapping) else None
        out.append(str(expr) if expr is not None else "")
    return out


@dataclass(slots=True)
class _SelectorRun:
    origin: SelectorOrigin
    owner: str
    index: int
    expression: str
    compiled: CompiledSelector | None
    problem: CompileProblem | None
    fn: Callable[[CelDevice], bool] | None = None
    evaluated: int = 0
    true: int = 0
    false: int = 0
    error_count: int = 0
    errors: list[DeviceError] = field(default_factory=list)

    def result(self) -> SelectorResult:
        problem: CompileProblem | None
        if self.problem is None and not self.expression:
            problem = CompileProblem(
                reason="CEL expression empty (unsupported selector type?)",
                position=None,
                line=None,
                column=None,
                caret="CEL expression empty (unsupported selector type?)",
            )
        else:
            problem = self.problem
        return SelectorResult(
            origin=self.origin,
            owner=self.owner,
            index=self.index,
            expression=self.expression,
            compile_error=problem,
            evaluated=self.evaluated,
            true=self.true,
            false=self.false,
            error_count=self.error_count,
            errors=tuple(self.errors),
        )


def _prepare(origin: SelectorOrigin, owner: str, expressions: Sequence[str]) -> list[_SelectorRun]:
    runs = []
    for index, expression in enumerate(expressions):
        compiled, problem = _compile(expression) if expression else (None, None)
        runs.append(
            _SelectorRun(
                origin=origin,
                owner=owner,
                index=index,
                expression=expression,
                compiled=compiled,
                problem=problem,
                fn=_memoized(compiled) if compiled is not None else None,
            )
        )
    return runs


# One memoized evaluator per compiled selector and run: the class selectors of
# gpu.nvidia.com are shared by every request of every claim checked in one run.
_MEMO: dict[int, tuple[Any, Callable[[Any], bool]]] = {}


def _memoized(compiled: CompiledSelector) -> Callable[[CelDevice], bool]:
    found = _MEMO.get(id(compiled))
    if found is not None and found[0] is compiled:
        return found[1]
    fn = compiled.memoized()
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[id(compiled)] = (compiled, fn)
    return fn


class _Breakdown:
    __slots__ = ("total", "by_node", "by_type", "by_profile")

    def __init__(self) -> None:
        self.total = Tally()
        self.by_node: dict[str, Tally] = defaultdict(Tally)
        self.by_type: dict[str, Tally] = defaultdict(Tally)
        self.by_profile: dict[str, Tally] = defaultdict(Tally)

    def add(self, device: CandidateDevice, outcome: int) -> None:
        self.add_many(device.node_label, device.device_type, device.mig_profile, outcome, 1)

    def add_many(
        self, node: str, device_type: str, profile: str | None, outcome: int, count: int
    ) -> None:
        tallies = [self.total, self.by_node[node], self.by_type[device_type]]
        if profile is not None:
            tallies.append(self.by_profile[profile])
        for tally in tallies:
            if outcome == 1:
                tally.matched += count
            elif outcome == 0:
                tally.not_matched += count
            else:
                tally.errored += count

    def freeze(self, evaluated: bool) -> StageResult:
        return StageResult(
            evaluated=evaluated,
            total=self.total,
            by_node=dict(sorted(self.by_node.items())),
            by_type=dict(sorted(self.by_type.items())),
            by_profile=dict(sorted(self.by_profile.items())),
        )


def _run_stage(
    inventory: DeviceInventory, indices: Iterable[int], runs: list[_SelectorRun]
) -> tuple[StageResult, list[int]]:
    """Run selectors in order on each device, as ``isSelectable`` does; return the matches.

    Outcome per device: matched (all true), not matched (a false came first) or errored
    (an error came first). The allocator stops at the first false, so a selector after
    a false never runs on that device, and cannot error there.
    """
    from dradiag.analyses.cel import CelRuntimeError

    breakdown = _Breakdown()
    matched: list[int] = []
    cel = inventory.cel
    fns = [(run, run.fn) for run in runs]
    for index in indices:
        device = inventory.device(index)
        outcome = 1
        cel_dev = cel(index)
        for run, fn in fns:
            assert fn is not None
            run.evaluated += 1
            try:
                ok = fn(cel_dev)
            except CelRuntimeError as exc:
                run.error_count += 1
                if len(run.errors) < MAX_ERRORS_KEPT:
                    run.errors.append(
                        DeviceError(device=device.ref, node=device.node_label, message=exc.message)
                    )
                outcome = -1
                break
            if ok:
                run.true += 1
            else:
                run.false += 1
                outcome = 0
                break
        breakdown.add(device, outcome)
        if outcome == 1:
            matched.append(index)
    return breakdown.freeze(True), matched


def _outcomes(
    inventory: DeviceInventory, groups: Iterable[int], runs: list[_SelectorRun]
) -> dict[int, tuple[int, int, str]]:
    """group → (outcome, position, error): how ``runs`` end on each group's device.

    Outcome 1 (all true; position is ``len(runs)``), 0 (false at ``position``) or -1
    (``CelRuntimeError`` at ``position``, with its message), as ``_run_stage`` counts a
    device. Each selector runs once over the devices still in the race, with the CEL
    engine's batch ``sweep`` (the same result per device as ``matches``).
    """
    alive = list(groups)
    out: dict[int, tuple[int, int, str]] = {}
    for position, run in enumerate(runs):
        if not alive:
            break
        assert run.compiled is not None
        results = run.compiled.sweep([inventory.cel(group) for group in alive])
        still = []
        for group, result in zip(alive, results, strict=True):
            if result is True:
                still.append(group)
            elif result is False:
                out[group] = (0, position, "")
            else:
                out[group] = (-1, position, result.message)
        alive = still
    for group in alive:
        out[group] = (1, len(runs), "")
    return out


def _run_stage_grouped(
    inventory: DeviceInventory,
    projection: _Projection,
    among: set[int] | None,
    runs: list[_SelectorRun],
) -> tuple[StageResult, set[int]]:
    """``_run_stage`` on the devices of the groups ``among`` (all when None), group by group.

    Every device of a group has the values the selectors read in common, so the
    representative's outcome is each device's: tallies and selector counts are the
    group's size times it, and only the errors' samples name devices (the first
    :data:`MAX_ERRORS_KEPT` per selector, in device order). Returns the stage and the
    groups whose devices match.
    """
    cells, cell_keys = inventory.cells()
    counts = projection.cell_counts(cells)
    present = dict.fromkeys(group for _, group in counts)
    outcomes = _outcomes(
        inventory, present if among is None else (g for g in present if g in among), runs
    )
    sizes: Counter[int] = Counter()
    breakdown = _Breakdown()
    for (cell, group), count in counts.items():
        if among is not None and group not in among:
            continue
        outcome = outcomes[group]
        node, device_type, profile = cell_keys[cell]
        breakdown.add_many(node, device_type, profile, outcome[0], count)
        sizes[group] += count
    failing: dict[int, set[int]] = defaultdict(set)
    for group, size in sizes.items():
        result, position, _ = outcomes[group]
        for run in runs[:position]:
            run.evaluated += size
            run.true += size
        if result == 1:
            continue
        run = runs[position]
        run.evaluated += size
        if result == 0:
            run.false += size
        else:
            run.error_count += size
            failing[position].add(group)
    order = range(len(inventory))
    for position, groups in sorted(failing.items()):
        run = runs[position]
        first = itertools.islice(
            itertools.compress(order, map(groups.__contains__, projection.groups)),
            MAX_ERRORS_KEPT,
        )
        run.errors.extend(
            DeviceError(
                device=inventory.ref(index),
                node=inventory.node_label(index),
                message=outcomes[projection.groups[index]][2],
            )
            for index in first
        )
    matched = {group for group, outcome in outcomes.items() if outcome[0] == 1}
    return breakdown.freeze(True), matched


_EMPTY_STAGE = StageResult(evaluated=False, total=Tally(), by_node={}, by_type={}, by_profile={})


def device_outcomes(inventory: DeviceInventory, selector: CompiledSelector) -> list[bool | str]:
    """One selector on every device of ``inventory``, in order: True, False, or the error.

    An error is the ``CelRuntimeError`` message. Grouped inventories evaluate it once per
    distinct tuple of the values it reads (:class:`_Projection`).
    """
    from dradiag.analyses.cel import CelRuntimeError

    fn = _memoized(selector)

    def one(index: int) -> bool | str:
        try:
            return bool(fn(inventory.cel(index)))
        except CelRuntimeError as exc:
            return exc.message

    if not inventory.grouped:
        return [one(index) for index in range(len(inventory))]
    groups = inventory.projection(_ReadSpec.of([selector])).groups
    representatives = list(dict.fromkeys(groups))
    swept = selector.sweep([inventory.cel(group) for group in representatives])
    results: dict[int, bool | str] = {
        group: result if result is True or result is False else result.message
        for group, result in zip(representatives, swept, strict=True)
    }
    return list(map(results.__getitem__, groups))


def _per_node(inventory: DeviceInventory, indices: Iterable[int]) -> Counter[str]:
    """Matching devices visible from each node in scope (node-less ones count for all)."""
    nodes: list[Any] = inventory._node
    counts: Counter[Any] = Counter(map(nodes.__getitem__, indices))
    anywhere = counts.pop(None, 0)
    if anywhere:
        for node in inventory.nodes or (ANY_NODE,):
            counts[node] += anywhere
    return counts


def _analyze_alternative(
    inventory: DeviceInventory,
    *,
    request: str,
    subrequest: str | None,
    spec: Mapping[str, Any],
) -> RequestSelection:
    label = f"{request}/{subrequest}" if subrequest else request
    class_name = str(spec.get("deviceClassName") or "")
    mode = str(spec.get("allocationMode") or "ExactCount")
    count_raw = spec.get("count")
    count = int(count_raw) if isinstance(count_raw, int) and count_raw > 0 else 1
    problem = ""
    if not class_name:
        problem = "missing device class name (unsupported request type?)"
    elif mode not in ("ExactCount", "All"):
        problem = f"unsupported count mode {mode}"
    device_class = inventory.classes.get(class_name) if class_name else None
    class_exprs = _selector_expressions(((device_class or {}).get("spec") or {}).get("selectors"))
    request_exprs = _selector_expressions(spec.get("selectors"))
    class_runs = _prepare("class", class_name, class_exprs)
    request_runs = _prepare("request", label, request_exprs)

    def unusable(runs: list[_SelectorRun]) -> bool:
        return any(r.compiled is None for r in runs)

    class_stage = request_stage = _EMPTY_STAGE
    matched: list[int] = []
    if device_class is not None and not problem and not unusable(class_runs):
        if inventory.grouped:
            stages = class_runs if unusable(request_runs) else class_runs + request_runs
            projection = inventory.projection(
                _ReadSpec.of(r.compiled for r in stages if r.compiled is not None)
            )
            class_stage, class_groups = _run_stage_grouped(inventory, projection, None, class_runs)
            if not unusable(request_runs):
                request_stage, groups = _run_stage_grouped(
                    inventory, projection, class_groups, request_runs
                )
                matched = inventory.indices_in(projection, groups)
        else:
            class_stage, class_matched = _run_stage(inventory, range(len(inventory)), class_runs)
            if not unusable(request_runs):
                request_stage, matched = _run_stage(inventory, class_matched, request_runs)
    per_node = _per_node(inventory, matched)
    best_node, best_count = (None, 0)
    if per_node:
        best_node, best_count = max(per_node.items(), key=lambda kv: (kv[1], _neg_key(kv[0])))
    runs = class_runs + request_runs
    if problem:
        status = RequestStatus.INVALID
    elif device_class is None:
        status = RequestStatus.CLASS_MISSING
    elif any(r.compiled is None for r in runs):
        status = RequestStatus.COMPILE_ERROR
    elif any(r.error_count for r in runs):
        status = RequestStatus.ERROR
    elif not matched:
        status = RequestStatus.NO_MATCH
    elif mode == "ExactCount" and best_count < count:
        status = RequestStatus.COUNT_INFEASIBLE
    else:
        status = RequestStatus.OK
    return RequestSelection(
        request=request,
        subrequest=subrequest,
        device_class=class_name,
        class_found=device_class is not None,
        class_source=inventory.classes_source,
        allocation_mode=mode,
        count=count,
        admin_access=bool(spec.get("adminAccess")),
        class_selectors=tuple(r.result() for r in class_runs),
        request_selectors=tuple(r.result() for r in request_runs),
        class_stage=class_stage,
        request_stage=request_stage,
        matched_indices=tuple(matched),
        best_node=best_node,
        best_node_count=best_count,
        status=status,
        problem=problem,
    )


def _neg_key(name: str) -> tuple[int, ...]:
    # max() picks the highest count; among equals, the alphabetically first node.
    return tuple(-ord(c) for c in name)


def _constraint_results(
    inventory: DeviceInventory,
    constraints: Sequence[Any],
    groups: Sequence[RequestGroup],
) -> list[ConstraintResult]:
    out = []
    for c_index, constraint in enumerate(constraints):
        if not isinstance(constraint, Mapping):
            continue
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        attribute = str(attribute)
        named = [str(r) for r in constraint.get("requests") or ()]
        alternatives: list[RequestSelection] = []
        for group in groups:
            for alt in group.alternatives:
                if not named or group.name in named or alt.label in named:
                    chosen = group.chosen
                    if chosen is alt or (chosen is None and alt is group.alternatives[0]):
                        alternatives.append(alt)
        if not alternatives:
            continue
        out.append(_one_constraint(inventory, c_index, attribute, alternatives, named))
    return out


def _one_constraint(
    inventory: DeviceInventory,
    c_index: int,
    attribute: str,
    alternatives: Sequence[RequestSelection],
    named: Sequence[str],
) -> ConstraintResult:
    """Whether some node has devices for every constrained request sharing one value.

    Necessary conditions per node and value: each request's own matches with that value
    cover its count (All: every match on the node carries it), and together they
    cover the sum of the counts (devices are exclusive). The allocator's backtracking
    search can still fail where this passes when requests compete for the same few
    devices; it never succeeds where this fails.
    """
    gathered = _constraint_counts(inventory, attribute, alternatives)
    if gathered is None:
        gathered = _constraint_sets(inventory, attribute, alternatives)
    per, unions, totals, lacking = gathered
    feasible_nodes = 0
    best: tuple[int, str, Any] | None = None
    for node, by_value in per.items():
        ok_here = False
        for value, haves in by_value.items():
            covered = 0
            ok = True
            for a_index, alt in enumerate(alternatives):
                have = haves[a_index]
                need = totals[node][a_index] if alt.allocation_mode == "All" else alt.count
                if alt.allocation_mode == "All" and have < totals[node][a_index]:
                    ok = False
                if have < need:
                    ok = False
                covered += min(have, need)
            union = unions[node, value]
            need_total = sum(
                totals[node][i] if a.allocation_mode == "All" else a.count
                for i, a in enumerate(alternatives)
            )
            if union < need_total:
                ok = False
            if ok:
                ok_here = True
                break
            if best is None or covered > best[0]:
                best = (covered, node, value)
        if ok_here:
            feasible_nodes += 1
    labels = tuple(a.label for a in alternatives)
    need_desc = ", ".join(
        f"{a.label}: {'all' if a.allocation_mode == 'All' else a.count}" for a in alternatives
    )
    if feasible_nodes:
        detail = (
            f"{feasible_nodes} node(s) have devices for {need_desc} that share one value of "
            f"{attribute}"
        )
    else:
        detail = f"no node has devices for {need_desc} that share one value of {attribute}"
        if best is not None:
            detail += f"; closest: node {best[1]} with {attribute}={best[2]}"
        if lacking:
            detail += (
                f"; {lacking} matching device(s) do not publish {attribute} and can never be "
                "part of the constrained set"
            )
    return ConstraintResult(
        index=c_index,
        attribute=attribute,
        requests=tuple(named) or labels,
        feasible=feasible_nodes > 0,
        feasible_nodes=feasible_nodes,
        detail=detail,
        lacking_attribute=lacking,
    )


_Gathered = tuple[
    dict[str, dict[Any, list[int]]], dict[tuple[str, Any], int], dict[str, list[int]], int
]
"""node → value → matching devices per request; (node, value) → devices of any request;
node → matching devices per request; matching devices without the attribute."""


def _constraint_sets(
    inventory: DeviceInventory, attribute: str, alternatives: Sequence[RequestSelection]
) -> _Gathered:
    """:func:`_one_constraint`'s counts, device by device (any device, any value)."""
    raws, device_nodes, drivers = inventory._raw, inventory._node, inventory._driver
    everywhere = list(inventory.nodes or (ANY_NODE,))
    # node -> value -> per-request device indices
    per: dict[str, dict[Any, list[set[int]]]] = defaultdict(
        lambda: defaultdict(lambda: [set() for _ in alternatives])
    )
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * len(alternatives))
    lacking = 0
    for a_index, alt in enumerate(alternatives):
        for index in alt.matched_indices:
            node_name = device_nodes[index]
            nodes = [node_name] if node_name else everywhere
            value = qualified_attribute(raws[index], drivers[index], attribute)
            for node in nodes:
                totals[node][a_index] += 1
            if value is None:
                lacking += 1
                continue
            values = value if isinstance(value, tuple) else (value,)
            for node in nodes:
                for v in values:
                    per[node][v][a_index].add(index)
    counts = {
        node: {value: [len(s) for s in sets] for value, sets in by_value.items()}
        for node, by_value in per.items()
    }
    unions = {
        (node, value): len(set().union(*sets))
        for node, by_value in per.items()
        for value, sets in by_value.items()
    }
    return counts, unions, totals, lacking


def _constraint_counts(
    inventory: DeviceInventory, attribute: str, alternatives: Sequence[RequestSelection]
) -> _Gathered | None:
    """:func:`_constraint_sets` by counting, in C: None unless every matching device has
    its own node and the attribute's values are scalars (the usual case)."""
    entries = inventory._entries("attributes")
    device_nodes, drivers = inventory._node, inventory._driver
    domain, _, ident = attribute.partition("/")
    per: dict[str, dict[Any, list[int]]] = {}
    totals: dict[str, list[int]] = {}
    where: dict[int, tuple[str, Any]] = {}
    lacking = 0
    width = len(alternatives)
    everyone = set(itertools.chain.from_iterable(alt.matched_indices for alt in alternatives))
    disjoint = len(everyone) == sum(len(alt.matched_indices) for alt in alternatives)
    pairs: Counter[tuple[str, Any]] = Counter()
    for a_index, alt in enumerate(alternatives):
        matched = alt.matched_indices
        if not matched:
            continue
        nodes: list[Any] = list(map(device_nodes.__getitem__, matched))
        if None in nodes:
            return None
        attrs = list(map(entries.__getitem__, matched))
        # qualified_attribute: the qualified name first, then the bare one in the driver's domain
        leaves = list(map(dict.get, attrs, itertools.repeat(attribute)))
        if leaves.count(None):
            own = list(map(drivers.__getitem__, matched))
            if leaves.count(None) == len(leaves) and own.count(domain) == len(own):
                leaves = list(map(dict.get, attrs, itertools.repeat(ident)))
            else:
                for i, leaf in enumerate(leaves):
                    if leaf is None and own[i] == domain:
                        leaves[i] = attrs[i].get(ident)
        distinct = dict(zip(map(id, leaves), leaves, strict=True))
        value_of = {key: _member_value(leaf) for key, leaf in distinct.items()}
        if any(isinstance(value, tuple) for value in value_of.values()):
            return None
        values = list(map(value_of.__getitem__, map(id, leaves)))
        for node, count in Counter(nodes).items():
            totals.setdefault(node, [0] * width)[a_index] += count
        counted = Counter(zip(nodes, values, strict=True))
        for (node, value), count in counted.items():
            if value is None:
                lacking += count
                continue
            per.setdefault(node, {}).setdefault(value, [0] * width)[a_index] += count
        if disjoint:
            pairs.update(counted)
        else:
            where.update(zip(matched, zip(nodes, values, strict=True), strict=True))
    unions = pairs if disjoint else Counter(where.values())
    return per, dict(unions), totals, lacking


_INVENTORY_CACHE: list[tuple[Snapshot, tuple[str, ...] | None, bool, DeviceInventory]] = []


def _cached_inventory(
    snapshot: Snapshot, nodes: Sequence[str] | None, fallback: bool
) -> DeviceInventory:
    key_nodes = tuple(sorted(nodes)) if nodes is not None else None
    for snap, cached_nodes, cached_fallback, inventory in _INVENTORY_CACHE:
        if snap is snapshot and cached_nodes == key_nodes and cached_fallback == fallback:
            return inventory
    inventory = build_inventory(snapshot, nodes=nodes, builtin_classes_fallback=fallback)
    _INVENTORY_CACHE[:] = [(snapshot, key_nodes, fallback, inventory)]
    return inventory


def claim_selectors(inventory: DeviceInventory, claim_spec: Mapping[str, Any]) -> list[Any]:
    """Every compiled selector a claim spec's requests would run (class and request)."""
    out = []
    for request in (claim_spec.get("devices") or {}).get("requests") or ():
        if not isinstance(request, Mapping):
            continue
        subs = request.get("firstAvailable")
        if isinstance(subs, list) and subs:
            specs = [sub for sub in subs if isinstance(sub, Mapping)]
        else:
            exactly = request.get("exactly")
            specs = [exactly if isinstance(exactly, Mapping) else {}]
        for spec in specs:
            class_name = str(spec.get("deviceClassName") or "")
            device_class = inventory.classes.get(class_name) if class_name else None
            expressions = _selector_expressions(
                ((device_class or {}).get("spec") or {}).get("selectors")
            ) + _selector_expressions(spec.get("selectors"))
            for expression in expressions:
                compiled, _ = _compile(expression) if expression else (None, None)
                if compiled is not None:
                    out.append(compiled)
    return out


def analyze_claim_selection(
    snapshot: Snapshot,
    claim_spec: Mapping[str, Any],
    *,
    namespace: str,
    claim_name: str | None,
    nodes: Sequence[str] | None = None,
    builtin_classes_fallback: bool = True,
    inventory: DeviceInventory | None = None,
) -> ClaimSelection:
    """Selection for one claim spec (v1 shape) against the devices of ``snapshot``.

    ``nodes`` restricts the devices to those visible from these nodes. ``inventory``
    may be passed to share device preparation between many claims; otherwise the last
    inventory built for this Snapshot is reused.
    """
    if inventory is None:
        inventory = _cached_inventory(snapshot, nodes, builtin_classes_fallback)
    devices_spec = claim_spec.get("devices") or {}
    groups: list[RequestGroup] = []
    for request in devices_spec.get("requests") or ():
        if not isinstance(request, Mapping):
            continue
        name = str(request.get("name") or "")
        subs = request.get("firstAvailable")
        if isinstance(subs, list) and subs:
            alternatives = tuple(
                _analyze_alternative(
                    inventory, request=name, subrequest=str(sub.get("name") or ""), spec=sub
                )
                for sub in subs
                if isinstance(sub, Mapping)
            )
            groups.append(RequestGroup(name=name, first_available=True, alternatives=alternatives))
        else:
            exactly = request.get("exactly")
            spec = exactly if isinstance(exactly, Mapping) else {}
            alternative = _analyze_alternative(inventory, request=name, subrequest=None, spec=spec)
            groups.append(
                RequestGroup(name=name, first_available=False, alternatives=(alternative,))
            )
    constraints = _constraint_results(inventory, devices_spec.get("constraints") or (), groups)
    minimum = sum(
        min((a.count if a.allocation_mode != "All" else 1) for a in g.alternatives)
        for g in groups
        if g.alternatives
    )
    return ClaimSelection(
        namespace=namespace,
        claim_name=claim_name,
        requests=tuple(groups),
        constraints=tuple(constraints),
        devices_in_scope=len(inventory),
        nodes_in_scope=inventory.nodes,
        classes_source=inventory.classes_source,
        device_limit_exceeded=minimum if minimum > CLAIM_DEVICE_LIMIT else None,
        inventory=inventory,
    )


def with_free_now(result: ClaimSelection, free_now: Mapping[str, int]) -> ClaimSelection:
    """``result`` with the ``--now`` counts attached."""
    from dataclasses import replace

    return replace(result, free_now=dict(free_now))


# -- findings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleInfo:
    """The catalogue entry of a code-backed selection rule (mirrored in rules/selection.yaml)."""

    severity: Severity
    title: str
    next: tuple[str, ...]


RULES: Mapping[str, RuleInfo] = {
    "DRA-SEL-CLASS-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="the request's DeviceClass does not exist",
        next=("kubectl get deviceclasses", "check the driver's Helm values resources.gpus.enabled"),
    ),
    "DRA-SEL-BUILTIN-CLASSES": RuleInfo(
        severity=Severity.INFO,
        title="DeviceClasses were taken from the NVIDIA driver's built-in set",
        next=("kubectl get deviceclasses -o yaml, to check against the cluster's real classes",),
    ),
    "DRA-SEL-CEL-COMPILE-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector does not compile",
        next=("fix the expression at the caret; the apiserver rejects it on create",),
    ),
    "DRA-SEL-CEL-RUNTIME-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector errors on a device: kube-scheduler would abort scheduling",
        next=(
            "guard optional attributes: has(device.attributes['d'].x), "
            "device.attributes['d'].?x.orValue(default), or 'x' in device.attributes['d']",
        ),
    ),
    "DRA-SEL-NO-MATCH": RuleInfo(
        severity=Severity.ERROR,
        title="no device matches the request's selectors",
        next=("compare the failing clause with the values devices publish",),
    ),
    "DRA-SEL-COUNT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="no single node has as many matching devices as the request's count",
        next=("lower count, or split the request across pods",),
    ),
    "DRA-SEL-ALL-MODE": RuleInfo(
        severity=Severity.INFO,
        title="allocationMode All takes every matching device on the chosen node",
        next=("check that no matching device on that node is in use or tainted",),
    ),
    "DRA-SEL-CONSTRAINT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="a matchAttribute constraint cannot be met on any single node",
        next=("compare the attribute's values across the matching devices per node",),
    ),
    "DRA-SEL-CLAIM-LIMIT": RuleInfo(
        severity=Severity.ERROR,
        title="the claim asks for more than 32 devices",
        next=("split the claim; AllocationResultsMaxSize is 32",),
    ),
    "DRA-SEL-REQUEST-INVALID": RuleInfo(
        severity=Severity.ERROR,
        title="a request is malformed (no device class, or an unknown allocation mode)",
        next=("set exactly.deviceClassName and allocationMode ExactCount or All",),
    ),
    "DRA-SEL-SUBREQUEST-FALLBACK": RuleInfo(
        severity=Severity.WARNING,
        title="a firstAvailable subrequest can never be satisfied; a later one is used",
        next=("drop or fix the subrequest that cannot match",),
    ),
    "DRA-SEL-UNKNOWN-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute or capacity no device publishes",
        next=("kubectl get resourceslices -o yaml: compare the key with what is published",),
    ),
    "DRA-SEL-WRONG-DOMAIN": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads a key under the wrong domain",
        next=("bare keys belong to the driver's domain; standard keys to resource.kubernetes.io",),
    ),
    "DRA-SEL-TYPE-MISMATCH": RuleInfo(
        severity=Severity.WARNING,
        title="a selector compares values of different types",
        next=("compare versions with semver(), quantities with quantity() and compareTo()",),
    ),
    "DRA-SEL-MIG-PROFILE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector names a MIG profile no device publishes",
        next=("use the profile attribute's spelling (1g.10gb), not the device name's (1g10gb)",),
    ),
    "DRA-SEL-PROFILE-CAPACITY": RuleInfo(
        severity=Severity.WARNING,
        title="a MIG profile's name is not its memory capacity",
        next=("select on the profile attribute, or compare memory with what is published",),
    ),
    "DRA-SEL-OPTIONAL-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute only some devices publish, without a guard",
        next=("guard with has(), .?key.orValue(default) or 'key' in device.attributes[domain]",),
    ),
    "DRA-SEL-CLAIM-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="a pod references a ResourceClaim or ResourceClaimTemplate that does not exist",
        next=("kubectl get resourceclaimtemplates,resourceclaims -n <namespace>",),
    ),
    "DRA-SEL-NONE-FREE": RuleInfo(
        severity=Severity.WARNING,
        title="devices match, but none of them is free now",
        next=("dradiag inventory, to see who holds the matching devices",),
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionProblem:
    """A finding and the selector (or request) it is about, so callers can locate it."""

    finding: Finding
    request: str | None = None
    subrequest: str | None = None
    origin: SelectorOrigin | None = None
    selector_index: int | None = None
    offset: int | None = None
    """Character offset in the expression (compile errors)."""


def _finding(rule: str, detail: str, *, title: str | None = None, **kw: Any) -> Finding:
    info = RULES[rule]
    return Finding(
        rule=rule,
        phase=Phase.SELECTION,
        severity=kw.pop("severity", info.severity),
        title=title or info.title,
        detail=detail,
        next=tuple(kw.pop("next", info.next)),
        evidence=tuple(kw.pop("evidence", ())),
        identifiers=tuple(kw.pop("identifiers", ())),
    )


def _tally_text(stage: StageResult, what: str) -> str:
    t = stage.total
    return (
        f"{what}: {t.matched} matched, {t.not_matched} not matched, {t.errored} errored "
        f"of {t.total}"
    )


def _claim_label(result: ClaimSelection) -> str:
    return f"{result.namespace}/{result.claim_name}" if result.claim_name else result.namespace


def selection_problems(result: ClaimSelection) -> list[SelectionProblem]:
    """Every problem of a claim's selection, with what it is about."""
    problems: list[SelectionProblem] = []
    claim = _claim_label(result)
    for group in result.requests:
        chosen = group.chosen
        for alt in group.alternatives:
            if group.first_available and chosen is not None and alt is not chosen:
                if alt.broken and group.alternatives.index(alt) < group.alternatives.index(chosen):
                    problems.append(
                        SelectionProblem(
                            finding=_finding(
                                "DRA-SEL-SUBREQUEST-FALLBACK",
                                f"claim {claim}, request {alt.label}: {alt.status.value}; "
                                f"subrequest {chosen.label} is used instead",
                            ),
                            request=alt.request,
                            subrequest=alt.subrequest,
                        )
                    )
                continue
            problems.extend(_alternative_problems(claim, alt, result))
    for c in result.constraints:
        if not c.feasible:
            problems.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CONSTRAINT-INFEASIBLE",
                        f"claim {claim}, constraint #{c.index} (matchAttribute {c.attribute}): "
                        + c.detail,
                    ),
                    request=c.requests[0] if c.requests else None,
                )
            )
    if result.device_limit_exceeded is not None:
        problems.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLAIM-LIMIT",
                    f"claim {claim}: number of requested devices {result.device_limit_exceeded} "
                    f"exceeds the claim limit of {CLAIM_DEVICE_LIMIT}",
                )
            )
        )
    return problems


def _near_miss_problems(
    alt: RequestSelection, result: ClaimSelection
) -> tuple[list[SelectionProblem], list[Evidence]]:
    """Hints as problems of their own, and the closest devices as evidence for NO-MATCH."""
    if result.inventory is None or alt.status not in (
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COUNT_INFEASIBLE,
    ):
        return [], []
    from dradiag.analyses.near_miss import explain_request

    report = explain_request(result.inventory, alt)
    problems = [
        SelectionProblem(
            finding=_finding(hint.rule, f"request {alt.label}: {hint.message}"),
            request=alt.request,
            subrequest=alt.subrequest,
            origin=hint.origin,
            selector_index=hint.selector_index,
            offset=hint.offset,
        )
        for hint in report.hints
    ]
    evidence = []
    for near in report.closest:
        parts = []
        for failure in near.failed:
            has = ", ".join(f"{k} = {v}" for k, v in failure.actual) or "no attribute read"
            what = f"error: {failure.message}" if failure.outcome == "error" else "false"
            parts.append(f"{failure.clause} -> {what} (device has {has})")
        evidence.append(
            Evidence(
                source=EvidenceSource.CEL,
                ref=f"{near.device} ({near.selector_origin} selector #{near.selector_index}, "
                f"{len(near.failed)} of {near.clauses} clause(s) fail)",
                excerpt="; ".join(parts),
            )
        )
    return problems, evidence


def _alternative_problems(
    claim: str, alt: RequestSelection, result: ClaimSelection
) -> list[SelectionProblem]:
    out: list[SelectionProblem] = []
    where: dict[str, Any] = {"request": alt.request, "subrequest": alt.subrequest}
    hint_problems, near_evidence = _near_miss_problems(alt, result)
    if alt.status is RequestStatus.INVALID:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-REQUEST-INVALID", f"claim {claim}, request {alt.label}: {alt.problem}"
                ),
                **where,
            )
        )
        return out
    if alt.status is RequestStatus.CLASS_MISSING:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLASS-NOT-FOUND",
                    f"request {alt.label}: device class {alt.device_class} does not exist",
                    identifiers=(("DeviceClass", alt.device_class),),
                ),
                **where,
            )
        )
        return out
    for sel in alt.selectors():
        owner = f"class {sel.owner}" if sel.origin == "class" else f"claim {claim}"
        if sel.compile_error is not None:
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-COMPILE-ERROR",
                        f"{owner}: selector #{sel.index}: CEL compile error: "
                        f"{sel.compile_error.reason}",
                        evidence=(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{sel.origin} selector #{sel.index}",
                                excerpt=sel.compile_error.caret,
                            ),
                        ),
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    offset=sel.compile_error.position,
                    **where,
                )
            )
        if sel.error_count:
            first = sel.errors[0]
            detail = (
                f"kube-scheduler would abort scheduling: {owner}: selector #{sel.index} on "
                f"device {first.device}: CEL runtime error: {first.message}"
            )
            if sel.error_count > 1:
                detail += f" (and {sel.error_count - 1} more device(s))"
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-RUNTIME-ERROR",
                        detail,
                        evidence=tuple(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{e.device} (node {e.node})",
                                excerpt=e.message,
                            )
                            for e in sel.errors[:5]
                        ),
                        identifiers=(("slice device", first.device),),
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    **where,
                )
            )
    if alt.status is RequestStatus.NO_MATCH:
        stage = "request" if alt.class_stage.total.matched else "class"
        failing = next(
            (
                s
                for s in (alt.request_selectors if stage == "request" else alt.class_selectors)
                if s.false
            ),
            None,
        )
        scope = f"{result.devices_in_scope} device(s)"
        if result.nodes_in_scope and len(result.nodes_in_scope) <= 3:
            scope += " on " + ", ".join(result.nodes_in_scope)
        detail = (
            f"claim {claim}, request {alt.label}: no device of {scope} matches; "
            + _tally_text(alt.class_stage, f"class {alt.device_class} selectors")
        )
        if alt.class_stage.total.matched:
            detail += "; " + _tally_text(alt.request_stage, "request selectors")
        out.append(
            SelectionProblem(
                finding=_finding("DRA-SEL-NO-MATCH", detail, evidence=near_evidence),
                origin=failing.origin if failing else None,
                selector_index=failing.index if failing else None,
                **where,
            )
        )
    elif alt.status is RequestStatus.COUNT_INFEASIBLE:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-COUNT-INFEASIBLE",
                    f"claim {claim}, request {alt.label}: count {alt.count}, but at most "
                    f"{alt.best_node_count} matching device(s) on one node "
                    f"({alt.best_node}); {alt.matched} match in all",
                ),
                **where,
            )
        )
    elif alt.status is RequestStatus.OK and alt.allocation_mode == "All":
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-ALL-MODE",
                    f"claim {claim}, request {alt.label}: allocationMode All would take "
                    f"{alt.best_node_count} device(s) on node {alt.best_node} (the most on one node)",
                ),
                **where,
            )
        )
    if result.free_now is not None and alt.status is RequestStatus.OK:
        free = result.free_now.get(alt.label)
        if free is not None and free < (1 if alt.allocation_mode == "All" else alt.count):
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-NONE-FREE",
                        f"claim {claim}, request {alt.label}: matches {alt.matched} device(s), "
                        f"{free} free now",
                    ),
                    **where,
                )
            )
    return out + hint_problems


def selection_findings(result: ClaimSelection) -> list[Finding]:
    """The findings (``DRA-SEL-*``) of a claim's selection, most decisive first."""
    problems = selection_problems(result)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return [p.finding for p in sorted(problems, key=lambda p: order[p.finding.severity])]


def inventory_kinds_read(snapshot: Snapshot) -> dict[str, bool]:
    """Whether slices and classes were collected (an empty source proves nothing otherwise)."""
    return {
        "ResourceSlice": snapshot.is_collected(Kind.RESOURCE_SLICE),
        "DeviceClass": snapshot.is_collected(Kind.DEVICE_CLASS),
    }
