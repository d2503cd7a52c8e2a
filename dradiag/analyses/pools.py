"""Resource pools: which slices a node sees, generations, completeness and validity.

A pool is (driver, pool name); its slices carry ``pool.generation`` and
``pool.resourceSliceCount``. The scheduler's allocator (``GatherPools``,
k8s-dra-semantics §3.2) keeps only the highest generation per pool, calls the pool
*complete* when it has all ``resourceSliceCount`` slices of that generation, and
*invalid* when device names repeat or counters are referenced that no counter set
declares. From 1.35 incomplete and invalid pools are never allocated from; before, only
``All`` refused an incomplete pool and an invalid pool was a hard scheduling error.

Two consumers share this module: the allocation simulator (:class:`PoolIndex` gathers
the pools visible from one node, in the allocator's order) and the publication phase
and ``inventory`` (:func:`pool_problems` lists every incomplete, invalid or stale pool
in the cluster, with the nodes it serves).

A fleet repeats itself, so the index reads each slice once (pool fields; device names,
binding conditions and counters consumed, for validation), builds each pool once per
distinct set of node-visible slices, and quantity strings are parsed once per process
(:func:`nanos_or_zero`); validation takes the exact device-by-device scan only when a
slice's summary shows a problem, so messages name the same first offender.
"""

from __future__ import annotations

import gc
import operator
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from dradiag.snapshot.model import K8sObject, Snapshot, name_of

__all__ = [
    "Pool",
    "PoolIndex",
    "PoolProblem",
    "NodeSelectionError",
    "node_matches",
    "paused_gc",
    "pool_problems",
    "quantity_nanos",
    "slice_node_name",
]


class NodeSelectionError(Exception):
    """A node selector could not be evaluated; the scheduler aborts the attempt with it."""


@lru_cache(maxsize=65536)
def quantity_nanos(text: str) -> int:
    """A Kubernetes quantity as exact integer nano-units (cached: fleets repeat values)."""
    from dradiag.analyses.cel.quantity import parse_quantity

    return parse_quantity(str(text)).nanos


NANOS_OR_ZERO: dict[str, int] = {}
"""Quantity text → nano-units, 0 when unreadable: the cache behind :func:`nanos_or_zero`.

Hot loops may read it directly (``NANOS_OR_ZERO.get(text)``) and call
:func:`nanos_or_zero` on a miss; a fleet has a handful of distinct counter values
(``"1"``, ``"10Gi"`` …) but hundreds of thousands of occurrences."""
_NANOS_CACHE_MAX = 65536


def nanos_or_zero(raw: Any) -> int:
    """``quantity_nanos(str(raw))`` (``None`` reads as ``"0"``), or 0 when unreadable; cached."""
    text = raw if raw.__class__ is str else str(raw if raw is not None else "0")
    found = NANOS_OR_ZERO.get(text)
    if found is None:
        try:
            found = quantity_nanos(text)
        except ValueError:
            found = 0
        if len(NANOS_OR_ZERO) >= _NANOS_CACHE_MAX:
            NANOS_OR_ZERO.clear()
        NANOS_OR_ZERO[text] = found
    return found


def _value_nanos(entry: Any) -> int:
    """``{value: 80Gi}`` (or a bare quantity) → nanos; unreadable values count as 0."""
    raw = entry.get("value") if entry.__class__ is dict or isinstance(entry, Mapping) else entry
    found = NANOS_OR_ZERO.get(raw) if raw.__class__ is str else None
    return found if found is not None else nanos_or_zero(raw)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for a fleet-sized sweep (restored afterwards).

    A sweep allocates hundreds of thousands of small, acyclic records while a snapshot
    of millions of objects is alive; every collection of the oldest generation walks
    the whole snapshot (0.85 s of CPU each for the 1,000-node bench fleet, two or three
    per sweep). The sweeps create no reference cycles, so nothing accumulates: records
    are freed by reference counting as each node is done.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def slice_node_name(slc: K8sObject) -> str:
    """``spec.nodeName`` of a slice, or ``""``."""
    return str((slc.get("spec") or {}).get("nodeName") or "")


def _slice_pool(slc: K8sObject) -> tuple[str, str, int, int]:
    spec = slc.get("spec") or {}
    pool = spec.get("pool") or {}
    return (
        str(spec.get("driver") or ""),
        str(pool.get("name") or ""),
        int(pool.get("generation") or 0),
        int(pool.get("resourceSliceCount") or 0),
    )


# -- node selection (component-helpers nodeaffinity semantics) --------------------------


def _requirement_matches(req: Mapping[str, Any], value: str | None) -> bool:
    op = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None:
            return False
        try:
            have, want = int(value), int(values[0])
        except (ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    raise NodeSelectionError(f"{op!r} is not a valid node selector operator")


def _selector_matches(selector: Mapping[str, Any], node: K8sObject) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    node_name = name_of(node)
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields = term.get("matchFields") or []
        if not exprs and not fields:
            continue  # an empty term matches no node
        ok = all(_requirement_matches(r, labels.get(r.get("key"))) for r in exprs)
        if ok:
            for r in fields:
                if r.get("key") != "metadata.name":
                    raise NodeSelectionError(f"not a valid field selector key: {r.get('key')!r}")
                if not _requirement_matches(r, node_name):
                    ok = False
                    break
        if ok:
            return True
    return False


def node_matches(
    node: K8sObject, node_name: str | None, all_nodes: bool, selector: Mapping[str, Any] | None
) -> bool:
    """The allocator's ``NodeMatches``: nodeName, then allNodes, then a node selector."""
    if node_name:
        return name_of(node) == node_name
    if all_nodes:
        return True
    if selector is not None:
        return _selector_matches(selector, node)
    return False


# -- pools as the allocator sees them from one node -------------------------------------


@dataclass(slots=True)
class Pool:
    """One pool as gathered for a node (the allocator's ``Pool``)."""

    driver: str
    name: str
    generation: int = 0
    incomplete: bool = False
    invalid_reason: str | None = None
    slices: list[K8sObject] = field(default_factory=list)
    """Slices with devices that target the node, in the order the allocator visits them."""
    other_slices: list[K8sObject] = field(default_factory=list)
    """Device slices of the same pool that do not target the node (they consume counters)."""
    counter_sets: dict[str, dict[str, int]] = field(default_factory=dict)
    """Counter set name → counter name → capacity in nano-units."""
    has_binding_conditions: bool = False
    slice_counter_sets: dict[str, dict[str, dict[str, int]]] | None = None
    """≤1.34 only: counter sets per slice name (counters lived beside their devices)."""
    slices_found: int = 0
    slices_expected: int = 0

    @property
    def invalid(self) -> bool:
        return self.invalid_reason is not None

    @property
    def pool_id(self) -> str:
        """``driver/pool``, as the allocator prints it."""
        return f"{self.driver}/{self.name}"


def _counter_sets_of(slices: Iterable[K8sObject]) -> tuple[dict[str, dict[str, int]], str | None]:
    out: dict[str, dict[str, int]] = {}
    for slc in slices:
        for cs in (slc.get("spec") or {}).get("sharedCounters") or []:
            name = str(cs.get("name") or "")
            if name in out:
                return out, f"duplicate counter set name {name}"
            counters = cs.get("counters") or {}
            if counters.__class__ is dict:
                # Every value a {value: <cached quantity text>}, every name a string (the
                # join fails otherwise): read in C, what the loop below makes of them.
                try:
                    values = list(map(NANOS_OR_ZERO.__getitem__, map(_VALUE, counters.values())))
                    "".join(counters)
                except (KeyError, TypeError):
                    pass
                else:
                    out[name] = dict(zip(counters, values, strict=True))
                    continue
            parsed: dict[str, int] = {}
            for k, v in counters.items():
                raw = v.get("value") if v.__class__ is dict or isinstance(v, Mapping) else v
                nanos = NANOS_OR_ZERO.get(raw) if raw.__class__ is str else None
                parsed[k if k.__class__ is str else str(k)] = (
                    nanos if nanos is not None else nanos_or_zero(raw)
                )
            out[name] = parsed
    return out, None


def _scan_devices(
    slices: Iterable[K8sObject],
    counter_sets: Mapping[str, Mapping[str, int]] | None,
    *,
    names: bool = True,
) -> tuple[str | None, str | None, bool]:
    """One pass over the devices of ``slices``: (first duplicate-name problem, first
    counter-consumption problem, whether any device has binding conditions).

    The consumption problem is looked for only when ``counter_sets`` is given, the
    duplicate only when ``names``; each is the first in visiting order, worded as the
    allocator words it.
    """
    seen: set[str] = set()
    duplicate: str | None = None
    consumption: str | None = None
    binding = False
    for slc in slices:
        for dev in (slc.get("spec") or {}).get("devices") or []:
            if names and duplicate is None:
                name = dev.get("name")
                if name.__class__ is not str:
                    name = str(name or "")
                if name in seen:
                    duplicate = f"duplicate device name {name}"
                else:
                    seen.add(name)
            if not binding and dev.get("bindingConditions") is not None:
                binding = True
            if counter_sets is None or consumption is not None:
                continue
            uses = dev.get("consumesCounters")
            if not uses:
                continue
            for use in uses:
                set_name = str(use.get("counterSet") or "")
                counters = counter_sets.get(set_name)
                if counters is None:
                    consumption = f"counter set {set_name} not found"
                    break
                wanted = use.get("counters") or {}
                if wanted.__class__ is dict and wanted.keys() <= counters.keys():
                    continue
                for counter in wanted:
                    if counter not in counters:
                        consumption = f"counter {counter} not found in counter set {set_name}"
                        break
                if consumption is not None:
                    break
    return duplicate, consumption, binding


@dataclass(slots=True)
class _SliceDevices:
    """What pool validation reads from one slice's devices, read once per slice."""

    names: list[str]
    """Device names as the allocator compares them, in order."""
    name_set: set[str]
    repeats: bool
    """A name occurs twice within the slice."""
    binding: bool
    """A device has binding conditions."""
    refs: dict[str, set[str]]
    """Counter set → counters the slice's devices consume from it."""
    unusual: bool
    """``counters`` that are not a plain mapping: only the exact scan can judge them."""


_GET_NAME = operator.methodcaller("get", "name")
_VALUE = operator.itemgetter("value")
_GET_BINDING = operator.methodcaller("get", "bindingConditions")
_GET_USES = operator.methodcaller("get", "consumesCounters")


def _slice_devices(slc: K8sObject) -> _SliceDevices:
    devices = (slc.get("spec") or {}).get("devices") or []
    names = list(map(_GET_NAME, devices))
    if set(map(type, names)) - {str}:
        names = [n if n.__class__ is str else str(n or "") for n in names]
    name_set = set(names)
    bindings = list(map(_GET_BINDING, devices))
    refs: dict[str, set[str]] = {}
    unusual = False
    for uses in map(_GET_USES, devices):
        if not uses:
            continue
        for use in uses:
            set_name = use.get("counterSet")
            if set_name.__class__ is not str:
                set_name = str(set_name or "")
            counters = use.get("counters") or {}
            if counters.__class__ is not dict:
                unusual = True
                continue
            found = refs.get(set_name)
            if found is None:
                refs[set_name] = set(counters)
            else:
                found.update(counters)
    return _SliceDevices(
        names=names,
        name_set=name_set,
        repeats=len(name_set) != len(names),
        binding=bindings.count(None) != len(bindings),
        refs=refs,
        unusual=unusual,
    )


def _check_devices(
    slices: Sequence[K8sObject],
    counter_sets: Mapping[str, Mapping[str, int]] | None,
    summaries: dict[int, _SliceDevices],
    *,
    names: bool = True,
) -> tuple[str | None, str | None, bool]:
    """:func:`_scan_devices` from per-slice summaries (``summaries``, by slice id, filled
    as needed): the same answers, and the exact scan only where there is a problem."""
    parts = []
    for slc in slices:
        found = summaries.get(id(slc))
        if found is None:
            found = summaries[id(slc)] = _slice_devices(slc)
        parts.append(found)
    duplicate: str | None = None
    if names:
        seen: set[str] = set()
        for part in parts:
            if not part.repeats and seen.isdisjoint(part.name_set):
                seen |= part.name_set
                continue
            for name in part.names:
                if name in seen:
                    duplicate = f"duplicate device name {name}"
                    break
                seen.add(name)
            break
    binding = any(part.binding for part in parts)
    consumption: str | None = None
    if counter_sets is not None:
        for part in parts:
            problem = part.unusual
            if not problem:
                for set_name, used in part.refs.items():
                    have = counter_sets.get(set_name)
                    if have is None or not used <= have.keys():
                        problem = True
                        break
            if problem:
                # Something is missing (or unusual): the exact scan words the first problem.
                consumption = _scan_devices(slices, counter_sets, names=False)[1]
                break
    return duplicate, consumption, binding


def slice_counter_problem(
    slc: K8sObject, summaries: dict[int, _SliceDevices] | None = None
) -> str | None:
    """≤1.34: the first counter reference ``slc`` cannot satisfy from its own counter sets.

    Before 1.35 counters lived beside their devices and the apiserver rejected a slice
    whose devices consume a counter set (or counter) the same slice does not declare, or
    that declares a counter set twice. The scheduler itself never checked (1.34's
    ``GatherPools``/``poolIsInvalid`` looks only at device names, and
    ``checkAvailableCounters`` skips counters no set declares), so :class:`PoolIndex`
    keeps such a pool valid for the allocator; reports and the inventory call it invalid.
    """
    counter_sets, duplicate = _counter_sets_of([slc])
    problem = duplicate
    if problem is None:
        problem = _check_devices(
            [slc], counter_sets, {} if summaries is None else summaries, names=False
        )[1]
    return None if problem is None else f"slice {name_of(slc)}: {problem}"


def _duplicate_device(slices: Iterable[K8sObject]) -> str | None:
    return _scan_devices(slices, None)[0]


def _consumption_problem(
    counter_sets: Mapping[str, Mapping[str, int]], slices: Iterable[K8sObject]
) -> str | None:
    return _scan_devices(slices, counter_sets, names=False)[1]


def _has_binding_conditions(slices: Iterable[K8sObject]) -> bool:
    return _scan_devices(slices, None, names=False)[2]


@dataclass(frozen=True, slots=True)
class _SliceInfo:
    """What gathering reads from a slice, read once per index."""

    driver: str
    pool: str
    generation: int
    count: int
    name: str
    direct: bool
    """``spec.nodeName`` is a non-empty string: relevant to exactly that node."""
    counters: bool
    """``spec.sharedCounters`` is set (a counters slice with partitionable devices)."""
    partitionable_only: bool
    """Skipped without DRAPartitionableDevices (per-device node selection or counters)."""


def _slice_info(slc: K8sObject) -> _SliceInfo:
    spec = slc.get("spec") or {}
    driver, pool, generation, count = _slice_pool(slc)
    node_name = spec.get("nodeName")
    counters = bool(spec.get("sharedCounters"))
    return _SliceInfo(
        driver=driver,
        pool=pool,
        generation=generation,
        count=count,
        name=name_of(slc),
        direct=bool(node_name) and node_name.__class__ is str,
        counters=counters,
        partitionable_only=spec.get("perDeviceNodeSelection") is not None or counters,
    )


_UNSET: Any = object()


class PoolIndex:
    """Slices of a snapshot indexed so pools can be gathered for many nodes cheaply.

    ``partitionable`` is the DRAPartitionableDevices gate (without it slices with
    per-device node selection or shared counters are skipped); ``legacy`` selects the
    ≤1.34 completeness rule.

    Each slice is read once, and each pool is built (validated, counter sets parsed)
    once per distinct set of node-visible slices: nodes that see the same slices of a
    pool (a network pool, or the same node gathered again) share one :class:`Pool`.
    Gathered pools are therefore shared and must be treated as read-only.
    """

    def __init__(
        self, slices: Sequence[K8sObject], *, partitionable: bool = True, legacy: bool = False
    ) -> None:
        self.partitionable = partitionable
        self.legacy = legacy
        self.all_slices = list(slices)
        self.by_node: dict[str, list[K8sObject]] = defaultdict(list)
        self.shared: list[K8sObject] = []
        self.by_pool: dict[tuple[str, str], list[K8sObject]] = defaultdict(list)
        # Keyed by id(): every slice is held by all_slices, so ids stay unique.
        self._info: dict[int, _SliceInfo] = {}
        self._pools: dict[tuple[int, ...], Pool | None] = {}
        self._devices: dict[int, _SliceDevices] = {}
        for slc in self.all_slices:
            info = _slice_info(slc)
            self._info[id(slc)] = info
            node = slice_node_name(slc)
            if node:
                self.by_node[node].append(slc)
            else:
                self.shared.append(slc)
            self.by_pool[(info.driver, info.pool)].append(slc)

    @classmethod
    def from_snapshot(
        cls, snapshot: Snapshot, *, partitionable: bool = True, legacy: bool = False
    ) -> PoolIndex:
        return cls(snapshot.slices, partitionable=partitionable, legacy=legacy)

    def _relevant(self, slc: K8sObject, node: K8sObject) -> bool:
        spec = slc.get("spec") or {}
        node_name = spec.get("nodeName")
        all_nodes = bool(spec.get("allNodes"))
        selector = spec.get("nodeSelector")
        if node_name or all_nodes or selector is not None:
            try:
                return node_matches(node, node_name, all_nodes, selector)
            except NodeSelectionError as exc:
                raise NodeSelectionError(
                    f"failed to perform node selection for slice {name_of(slc)}: {exc}"
                ) from None
        if spec.get("perDeviceNodeSelection"):
            for dev in spec.get("devices") or []:
                try:
                    if node_matches(
                        node,
                        dev.get("nodeName"),
                        bool(dev.get("allNodes")),
                        dev.get("nodeSelector"),
                    ):
                        return True
                except NodeSelectionError as exc:
                    raise NodeSelectionError(
                        f"failed to perform node selection for device {dev.get('name')} "
                        f"in slice {name_of(slc)}: {exc}"
                    ) from None
        # Nothing known set: a future extension the allocator skips silently.
        return False

    def gather(self, node: K8sObject) -> list[Pool]:
        """The pools visible from ``node``, ordered as the allocator visits them.

        Raises NodeSelectionError when a node selector is malformed (the scheduler
        aborts with that error).
        """
        node_name = name_of(node)
        info = self._info
        partitionable = self.partitionable
        grouped: dict[tuple[str, str], list[K8sObject]] = {}
        generations: dict[tuple[str, str], int] = {}
        for slc in (*self.by_node.get(node_name, ()), *self.shared):
            si = info[id(slc)]
            if not partitionable and si.partitionable_only:
                continue
            # A slice indexed under this node's name with a string nodeName targets it.
            if not si.direct and not self._relevant(slc, node):
                continue
            key = (si.driver, si.pool)
            current = grouped.get(key)
            if current is None:
                grouped[key] = [slc]
                generations[key] = si.generation
                continue
            have = generations[key]
            if si.generation < have:
                continue
            if si.generation > have:
                grouped[key] = [slc]
                generations[key] = si.generation
            else:
                current.append(slc)

        plain: list[Pool] = []
        with_binding: list[Pool] = []
        built = self._pools
        for (driver, pool_name), pool_slices in grouped.items():
            key_ids = tuple([id(s) for s in pool_slices])
            pool = built.get(key_ids, _UNSET)
            if pool is _UNSET:
                pool = built[key_ids] = self._pool_for(driver, pool_name, pool_slices)
            if pool is None:
                continue
            (with_binding if pool.has_binding_conditions else plain).append(pool)

        # Sorted by (driver, pool), binding-condition pools last: the ≥1.36 order. Older
        # schedulers iterate a Go map here, so their pick may differ (feasibility doesn't).
        plain.sort(key=lambda p: (p.driver, p.name))
        with_binding.sort(key=lambda p: (p.driver, p.name))
        return plain + with_binding

    def _pool_for(self, driver: str, pool_name: str, pool_slices: list[K8sObject]) -> Pool | None:
        """The pool made of ``pool_slices`` (a node's newest-generation slices of it), or
        None when a newer generation elsewhere makes it obsolete."""
        first = self._info[id(pool_slices[0])]
        gen, expected = first.generation, first.count
        if self.legacy:
            pool = self._build(driver, pool_name, gen, pool_slices, None)
            pool.incomplete = len(pool_slices) != expected
            pool.slices_found, pool.slices_expected = len(pool_slices), expected
            return pool
        if len(pool_slices) == expected:
            pool = self._build(driver, pool_name, gen, pool_slices, None)
            pool.slices_found = pool.slices_expected = expected
            return pool
        obsolete, whole = self._slices_in_pool(driver, pool_name, gen)
        if obsolete:
            return None
        if len(whole) != expected:
            pool = Pool(driver=driver, name=pool_name, generation=gen, incomplete=True)
            pool.slices_found, pool.slices_expected = len(whole), expected
            return pool
        pool = self._build(driver, pool_name, gen, pool_slices, whole)
        pool.slices_found, pool.slices_expected = len(whole), expected
        return pool

    def _slices_in_pool(
        self, driver: str, pool: str, generation: int
    ) -> tuple[bool, list[K8sObject]]:
        same: list[K8sObject] = []
        info = self._info
        for slc in self.by_pool.get((driver, pool), ()):
            gen = info[id(slc)].generation
            if gen > generation:
                return True, []
            if gen == generation:
                same.append(slc)
        return False, same

    def _build(
        self,
        driver: str,
        pool_name: str,
        generation: int,
        pool_slices: list[K8sObject],
        whole: list[K8sObject] | None,
    ) -> Pool:
        info = self._info
        ordered = sorted(pool_slices, key=lambda s: info[id(s)].name)
        if self.legacy:
            # ≤1.34: counters are per slice (the combined model); only names are validated,
            # as 1.34's ``poolIsInvalid`` does (counter references: slice_counter_problem).
            duplicate, _none, binding = _check_devices(ordered, None, self._devices)
            legacy = Pool(
                driver=driver,
                name=pool_name,
                generation=generation,
                slices=ordered,
                has_binding_conditions=binding,
                slice_counter_sets={info[id(s)].name: _counter_sets_of([s])[0] for s in ordered},
            )
            legacy.invalid_reason = duplicate
            return legacy
        partitionable = self.partitionable
        device_slices: list[K8sObject] = []
        counter_slices: list[K8sObject] = []
        for slc in ordered:
            if partitionable and info[id(slc)].counters:
                counter_slices.append(slc)
            else:
                device_slices.append(slc)
        others: list[K8sObject] = []
        if whole is not None and len(whole) > len(pool_slices):
            targeting = {id(s) for s in pool_slices}
            for slc in whole:
                if id(slc) in targeting:
                    continue
                if partitionable and info[id(slc)].counters:
                    counter_slices.append(slc)
                else:
                    others.append(slc)
        counter_sets: dict[str, dict[str, int]] = {}
        sets_problem: str | None = None
        if partitionable:
            counter_sets, sets_problem = _counter_sets_of(counter_slices)
        check = counter_sets if partitionable and sets_problem is None else None
        duplicate, consumption, binding = _check_devices(device_slices, check, self._devices)
        pool = Pool(
            driver=driver,
            name=pool_name,
            generation=generation,
            slices=device_slices,
            other_slices=others,
            has_binding_conditions=binding,
        )
        reason = duplicate
        if reason is None and partitionable:
            reason = sets_problem
            if reason is None:
                reason = consumption
                if reason is None and others:
                    reason = _check_devices(others, counter_sets, self._devices, names=False)[1]
            pool.counter_sets = counter_sets
        if reason is not None:
            pool.invalid_reason = reason
            pool.slices, pool.other_slices = [], []
        return pool


# -- cluster-wide pool health (publication phase, inventory) ----------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolProblem:
    """Something wrong with one pool's publication, as the publication phase reports it."""

    driver: str
    pool: str
    kind: str
    """``incomplete`` (fewer or more slices than resourceSliceCount at the newest
    generation), ``invalid`` (the allocator refuses it) or ``stale`` (older-generation
    slices still present; harmless unless they persist)."""
    reason: str
    generation: int
    nodes: tuple[str, ...] = ()
    slices: tuple[str, ...] = ()
    slices_found: int = 0
    slices_expected: int = 0

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.pool}"


def pool_problems(
    snapshot: Snapshot,
    *,
    partitionable: bool = True,
    index: PoolIndex | None = None,
    legacy: bool = False,
) -> list[PoolProblem]:
    """Every incomplete, invalid or stale pool in the snapshot, sorted by driver/pool/kind.

    Completeness is judged over all slices of the pool (the ≥1.35 rule); the nodes a
    problem affects are those the pool's slices name (``spec.nodeName``, or per-device
    ``nodeName``), empty for network-attached pools. ``index``, a :class:`PoolIndex` over
    the snapshot's slices, lends what it has already read from each slice. ``legacy``
    (≤1.34) checks counter references per slice (:func:`slice_counter_problem`), where
    counters lived then, instead of across the pool.
    """
    out: list[PoolProblem] = []
    infos: dict[int, _SliceInfo] = index._info if index is not None else {}
    summaries: dict[int, _SliceDevices] = index._devices if index is not None else {}
    by_pool: dict[tuple[str, str], list[tuple[K8sObject, _SliceInfo]]] = defaultdict(list)
    for slc in snapshot.slices:
        info = infos.get(id(slc))
        if info is None:
            info = _slice_info(slc)
        by_pool[(info.driver, info.pool)].append((slc, info))
    for (driver, pool), members in sorted(by_pool.items(), key=lambda kv: kv[0]):
        newest = max(info.generation for _s, info in members)
        current_members = sorted(
            (m for m in members if m[1].generation == newest), key=lambda m: m[1].name
        )
        current = [s for s, _i in current_members]
        older = [
            s
            for s, _i in sorted(
                (m for m in members if m[1].generation < newest), key=lambda m: m[1].name
            )
        ]
        nodes = sorted(
            {slice_node_name(s) for s in current if slice_node_name(s)}
            | {
                str(d.get("nodeName"))
                for s in current
                for d in (s.get("spec") or {}).get("devices") or []
                if d.get("nodeName")
            }
        )
        counts = sorted({info.count for _s, info in current_members})
        expected = counts[-1]
        names = tuple(name_of(s) for s in current)
        if len(counts) > 1:
            out.append(
                PoolProblem(
                    driver=driver,
                    pool=pool,
                    kind="incomplete",
                    reason=f"slices of generation {newest} disagree on resourceSliceCount "
                    f"({', '.join(map(str, counts))})",
                    generation=newest,
                    nodes=tuple(nodes),
                    slices=names,
                    slices_found=len(current),
                    slices_expected=expected,
                )
            )
        elif len(current) != expected:
            out.append(
                PoolProblem(
                    driver=driver,
                    pool=pool,
                    kind="incomplete",
                    reason=f"{len(current)} of {expected} slices of generation {newest} published",
                    generation=newest,
                    nodes=tuple(nodes),
                    slices=names,
                    slices_found=len(current),
                    slices_expected=expected,
                )
            )
        counter_sets: dict[str, dict[str, int]] | None = None
        sets_problem: str | None = None
        if legacy:
            # ≤1.34 combined model: a slice's devices sit beside its own counter sets.
            duplicate, _none, _binding = _check_devices(current, None, summaries)
            if duplicate is None and partitionable:
                for slc in current:
                    sets_problem = slice_counter_problem(slc, summaries)
                    if sets_problem is not None:
                        break
            consumption = None
        else:
            device_slices = [
                s for s, info in current_members if not (partitionable and info.counters)
            ]
            if partitionable:
                counter_sets, sets_problem = _counter_sets_of(
                    s for s, info in current_members if info.counters
                )
            duplicate, consumption, _binding = _check_devices(
                device_slices, counter_sets if sets_problem is None else None, summaries
            )
        reason = duplicate
        if reason is None and partitionable:
            reason = sets_problem or consumption
        if reason is not None:
            out.append(
                PoolProblem(
                    driver=driver,
                    pool=pool,
                    kind="invalid",
                    reason=reason,
                    generation=newest,
                    nodes=tuple(nodes),
                    slices=names,
                    slices_found=len(current),
                    slices_expected=expected,
                )
            )
        if older:
            gens = sorted({info.generation for _s, info in members if info.generation < newest})
            out.append(
                PoolProblem(
                    driver=driver,
                    pool=pool,
                    kind="stale",
                    reason=f"{len(older)} slice(s) of older generation(s) "
                    f"{', '.join(map(str, gens))} still present beside generation {newest}",
                    generation=newest,
                    nodes=tuple(nodes),
                    slices=tuple(name_of(s) for s in older),
                    slices_found=len(current),
                    slices_expected=expected,
                )
            )
    return out
