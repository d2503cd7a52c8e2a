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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
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


def _value_nanos(entry: Any) -> int:
    """``{value: 80Gi}`` (or a bare quantity) → nanos; unreadable values count as 0."""
    raw = entry.get("value") if isinstance(entry, Mapping) else entry
    try:
        return quantity_nanos(str(raw if raw is not None else "0"))
    except ValueError:
        return 0


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
            out[name] = {str(k): _value_nanos(v) for k, v in (cs.get("counters") or {}).items()}
    return out, None


def _duplicate_device(slices: Iterable[K8sObject]) -> str | None:
    seen: set[str] = set()
    for slc in slices:
        for dev in (slc.get("spec") or {}).get("devices") or []:
            name = str(dev.get("name") or "")
            if name in seen:
                return f"duplicate device name {name}"
            seen.add(name)
    return None


def _consumption_problem(
    counter_sets: Mapping[str, Mapping[str, int]], slices: Iterable[K8sObject]
) -> str | None:
    for slc in slices:
        for dev in (slc.get("spec") or {}).get("devices") or []:
            for use in dev.get("consumesCounters") or []:
                set_name = str(use.get("counterSet") or "")
                counters = counter_sets.get(set_name)
                if counters is None:
                    return f"counter set {set_name} not found"
                for counter in use.get("counters") or {}:
                    if counter not in counters:
                        return f"counter {counter} not found in counter set {set_name}"
    return None


def _has_binding_conditions(slices: Iterable[K8sObject]) -> bool:
    return any(
        dev.get("bindingConditions") is not None
        for slc in slices
        for dev in (slc.get("spec") or {}).get("devices") or []
    )


class PoolIndex:
    """Slices of a snapshot indexed so pools can be gathered for many nodes cheaply.

    ``partitionable`` is the DRAPartitionableDevices gate (without it slices with
    per-device node selection or shared counters are skipped); ``legacy`` selects the
    ≤1.34 completeness rule.
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
        for slc in self.all_slices:
            node = slice_node_name(slc)
            if node:
                self.by_node[node].append(slc)
            else:
                self.shared.append(slc)
            driver, pool, _gen, _count = _slice_pool(slc)
            self.by_pool[(driver, pool)].append(slc)

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
        grouped: dict[tuple[str, str], list[K8sObject]] = {}
        for slc in (*self.by_node.get(node_name, ()), *self.shared):
            spec = slc.get("spec") or {}
            if not self.partitionable and (
                spec.get("perDeviceNodeSelection") is not None or spec.get("sharedCounters")
            ):
                continue
            if not self._relevant(slc, node):
                continue
            driver, slice_pool, gen, _count = _slice_pool(slc)
            current = grouped.get((driver, slice_pool))
            if current is None:
                grouped[(driver, slice_pool)] = [slc]
                continue
            have = _slice_pool(current[0])[2]
            if gen < have:
                continue
            if gen > have:
                grouped[(driver, slice_pool)] = [slc]
            else:
                current.append(slc)

        plain: list[Pool] = []
        with_binding: list[Pool] = []
        pool: Pool
        for (driver, pool_name), pool_slices in grouped.items():
            _d, _p, gen, expected = _slice_pool(pool_slices[0])
            if self.legacy:
                pool = self._build(driver, pool_name, gen, pool_slices, None)
                pool.incomplete = len(pool_slices) != expected
                pool.slices_found, pool.slices_expected = len(pool_slices), expected
            elif len(pool_slices) == expected:
                pool = self._build(driver, pool_name, gen, pool_slices, None)
                pool.slices_found = pool.slices_expected = expected
            else:
                obsolete, whole = self._slices_in_pool(driver, pool_name, gen)
                if obsolete:
                    continue
                if len(whole) != expected:
                    pool = Pool(driver=driver, name=pool_name, generation=gen, incomplete=True)
                    pool.slices_found, pool.slices_expected = len(whole), expected
                    plain.append(pool)
                    continue
                pool = self._build(driver, pool_name, gen, pool_slices, whole)
                pool.slices_found, pool.slices_expected = len(whole), expected
            (with_binding if pool.has_binding_conditions else plain).append(pool)

        # Sorted by (driver, pool), binding-condition pools last: the ≥1.36 order. Older
        # schedulers iterate a Go map here, so their pick may differ (feasibility doesn't).
        plain.sort(key=lambda p: (p.driver, p.name))
        with_binding.sort(key=lambda p: (p.driver, p.name))
        return plain + with_binding

    def _slices_in_pool(
        self, driver: str, pool: str, generation: int
    ) -> tuple[bool, list[K8sObject]]:
        same: list[K8sObject] = []
        for slc in self.by_pool.get((driver, pool), ()):
            gen = _slice_pool(slc)[2]
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
        ordered = sorted(pool_slices, key=name_of)
        if self.legacy:
            # ≤1.34: counters are per slice (the combined model); only names are validated.
            legacy = Pool(
                driver=driver,
                name=pool_name,
                generation=generation,
                slices=ordered,
                has_binding_conditions=_has_binding_conditions(ordered),
                slice_counter_sets={name_of(s): _counter_sets_of([s])[0] for s in ordered},
            )
            legacy.invalid_reason = _duplicate_device(ordered)
            return legacy
        device_slices: list[K8sObject] = []
        counter_slices: list[K8sObject] = []
        for slc in ordered:
            if self.partitionable and (slc.get("spec") or {}).get("sharedCounters"):
                counter_slices.append(slc)
            else:
                device_slices.append(slc)
        others: list[K8sObject] = []
        if whole is not None and len(whole) > len(pool_slices):
            targeting = {id(s) for s in pool_slices}
            for slc in whole:
                if id(slc) in targeting:
                    continue
                if self.partitionable and (slc.get("spec") or {}).get("sharedCounters"):
                    counter_slices.append(slc)
                else:
                    others.append(slc)
        pool = Pool(
            driver=driver,
            name=pool_name,
            generation=generation,
            slices=device_slices,
            other_slices=others,
            has_binding_conditions=_has_binding_conditions(device_slices),
        )
        reason = _duplicate_device(device_slices)
        if reason is None and self.partitionable:
            counter_sets, reason = _counter_sets_of(counter_slices)
            if reason is None:
                reason = _consumption_problem(counter_sets, device_slices) or _consumption_problem(
                    counter_sets, others
                )
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


def pool_problems(snapshot: Snapshot, *, partitionable: bool = True) -> list[PoolProblem]:
    """Every incomplete, invalid or stale pool in the snapshot, sorted by driver/pool/kind.

    Completeness is judged over all slices of the pool (the ≥1.35 rule); the nodes a
    problem affects are those the pool's slices name (``spec.nodeName``, or per-device
    ``nodeName``), empty for network-attached pools.
    """
    out: list[PoolProblem] = []
    by_pool: dict[tuple[str, str], list[K8sObject]] = defaultdict(list)
    for slc in snapshot.slices:
        driver, pool, _g, _c = _slice_pool(slc)
        by_pool[(driver, pool)].append(slc)
    for (driver, pool), slices in sorted(by_pool.items()):
        newest = max(_slice_pool(s)[2] for s in slices)
        current = sorted((s for s in slices if _slice_pool(s)[2] == newest), key=name_of)
        older = sorted((s for s in slices if _slice_pool(s)[2] < newest), key=name_of)
        nodes = sorted(
            {slice_node_name(s) for s in current if slice_node_name(s)}
            | {
                str(d.get("nodeName"))
                for s in current
                for d in (s.get("spec") or {}).get("devices") or []
                if d.get("nodeName")
            }
        )
        counts = sorted({_slice_pool(s)[3] for s in current})
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
        device_slices = [
            s
            for s in current
            if not (partitionable and (s.get("spec") or {}).get("sharedCounters"))
        ]
        reason = _duplicate_device(device_slices)
        if reason is None and partitionable:
            counter_sets, reason = _counter_sets_of(
                s for s in current if (s.get("spec") or {}).get("sharedCounters")
            )
            if reason is None:
                reason = _consumption_problem(counter_sets, device_slices)
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
            gens = sorted({_slice_pool(s)[2] for s in older})
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
