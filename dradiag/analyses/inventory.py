"""Device inventory: per node, per device type and MIG profile, what is published, allocated and free.

Counts come from the pools the allocator would see from each node (``pools.PoolIndex``:
newest generation, complete and valid pools only; problem pools are listed apart), so
"free" means what the scheduler could hand out. For partitionable devices (DynamicMIG)
a device no claim holds is still not free when allocated devices consume its counters
(a GPU with a MIG partition allocated, a placement overlapping one): it is ``held``.
Free partitions may not all fit together: ``fits`` says how many more of each profile
the remaining counters allow, packing free placements in the allocator's order. Devices
with a NoSchedule/NoExecute taint are counted and named as unhealthy.

Before 1.35 a device could only consume counter sets of its own slice (the apiserver
rejected anything else, though the scheduler never checked); a pool breaking that rule
is listed as invalid, as from 1.35, rather than counted with counters it cannot have.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dradiag.analyses.allocation.candidates import DeviceEntry
from dradiag.analyses.allocation.counters import CounterState
from dradiag.analyses.allocation.features import FeatureGates
from dradiag.analyses.allocation.search import AllocationContext
from dradiag.analyses.allocation.taints import BLOCKING_EFFECTS
from dradiag.analyses.pools import (
    NANOS_OR_ZERO,
    Pool,
    nanos_or_zero,
    paused_gc,
    pool_problems,
    slice_counter_problem,
)
from dradiag.snapshot.model import Snapshot

__all__ = ["DeviceGroup", "Inventory", "NodeInventory", "build_inventory"]

SCHEMA_VERSION = "dradiag.inventory/v1"


@dataclass(slots=True, kw_only=True)
class DeviceGroup:
    """Devices of one driver, type, MIG profile and product on one node."""

    driver: str
    type: str
    profile: str | None
    product: str | None
    published: int = 0
    allocated: int = 0
    held: int = 0
    """Not allocated, but their counters are consumed by allocated devices of the same
    GPU (a MIG partition of it, or the whole GPU): not free, though no claim names them."""
    tainted: int = 0
    fits: int | None = None
    """Partitionable devices only: how many more can be allocated given the counters."""
    holders: dict[str, list[str]] = field(default_factory=dict)
    """Claim (``ns/name``) → devices of this group it holds."""

    @property
    def free(self) -> int:
        """Neither allocated nor held: each could be allocated on its own right now."""
        return self.published - self.allocated - self.held

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "driver": self.driver,
            "type": self.type,
            "profile": self.profile,
            "product": self.product,
            "published": self.published,
            "allocated": self.allocated,
            "free": self.free,
            "held": self.held,
            "tainted": self.tainted,
        }
        if self.fits is not None:
            out["fits"] = self.fits
        out["allocatedTo"] = [
            {"claim": claim, "devices": sorted(devices)}
            for claim, devices in sorted(self.holders.items())
        ]
        return out


@dataclass(slots=True, kw_only=True)
class NodeInventory:
    node: str
    groups: list[DeviceGroup] = field(default_factory=list)
    tainted: list[dict[str, Any]] = field(default_factory=list)
    pools: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "devices": [g.to_dict() for g in self.groups],
            "unhealthy": self.tainted,
            "pools": self.pools,
        }


@dataclass(slots=True, kw_only=True)
class Inventory:
    nodes: list[NodeInventory]
    problems: list[dict[str, Any]]
    features: FeatureGates

    def to_dict(self) -> dict[str, Any]:
        return {
            "schemaVersion": SCHEMA_VERSION,
            "nodes": [n.to_dict() for n in self.nodes],
            "poolProblems": self.problems,
            "allocator": self.features.to_dict(),
        }


def _kind(entry: DeviceEntry) -> tuple[str, str, str | None, str | None]:
    attrs = entry.device.get("attributes") or _NO_ATTRIBUTES
    kind = attrs.get("type")
    profile = attrs.get("profile")
    product = attrs.get("productName")
    return (
        entry.driver,
        str(kind.get("string")) if isinstance(kind, dict) else "device",
        str(profile.get("string")) if isinstance(profile, dict) else None,
        str(product.get("string")) if isinstance(product, dict) else None,
    )


_NO_ATTRIBUTES: dict[str, Any] = {}
_NO_COUNTERS: dict[str, int] = {}


def _fits_in(entry: DeviceEntry, have: dict[str, dict[str, int]]) -> bool:
    """Whether every counter ``entry`` consumes has enough left in ``have``.

    Reads the device's counters as ``entry.consumes`` would, but only up to the first
    that is short: most free partitions of a busy GPU fail on their first memory slice,
    and parsing all their counters would be wasted.
    """
    parsed = entry._consumes
    if parsed is not None:
        for set_name, consumed in parsed:
            in_set = have.get(set_name, _NO_COUNTERS)
            for counter, value in consumed:
                if in_set.get(counter, 0) < value:
                    return False
        return True
    cache = NANOS_OR_ZERO
    for use in entry.device.get("consumesCounters") or ():
        in_set = have.get(str(use.get("counterSet") or ""), _NO_COUNTERS)
        for k, v in (use.get("counters") or {}).items():
            raw = v.get("value") if v.__class__ is dict or isinstance(v, Mapping) else v
            nanos = cache.get(raw) if raw.__class__ is str else None
            if nanos is None:
                nanos = nanos_or_zero(raw)
            if in_set.get(k if k.__class__ is str else str(k), 0) < nanos:
                return False
    return True


def _fits(counters: CounterState, free: Sequence[DeviceEntry]) -> int:
    """How many of ``free`` can be allocated together (first-fit, allocator order).

    Per-counter arithmetic on a copy of what each counter scope (a pool; a slice before
    1.35) has left: a device fits when every counter it consumes still has enough.
    """
    left: dict[str, dict[str, dict[str, int]]] = {}
    count = 0
    for entry in free:
        scope = counters.scope(entry)
        have = left.get(scope)
        if have is None:
            have = {k: dict(v) for k, v in counters.available_for(entry).items()}
            left[scope] = have
        if _fits_in(entry, have):
            for set_name, consumed in entry.consumes:
                # A counter nobody declares fitted only because nothing was asked of it.
                in_set = have.get(set_name)
                if in_set is None:
                    continue
                for counter, value in consumed:
                    if counter in in_set:
                        in_set[counter] -= value
            count += 1
    return count


def build_inventory(
    snapshot: Snapshot,
    *,
    nodes: Sequence[str] | None = None,
    features: FeatureGates | None = None,
) -> Inventory:
    """The inventory of ``nodes`` (default: every node the snapshot names)."""
    with paused_gc():
        return _build_inventory(snapshot, nodes, features)


def _build_inventory(
    snapshot: Snapshot, nodes: Sequence[str] | None, features: FeatureGates | None
) -> Inventory:
    gates = features or FeatureGates.for_snapshot(snapshot)
    # The allocator's view: pools gathered per node from one index, device records shared
    # by the nodes that see the same pool, the cluster's allocated devices.
    context = AllocationContext(snapshot, gates)
    index = context.pool_index
    allocated = context.allocated
    is_allocated = allocated.is_allocated
    partitionable = gates.partitionable_devices
    # ≤1.34 pools the allocator keeps although a slice's counter references are broken.
    check_slices = partitionable and gates.legacy_pools
    slice_problems: dict[int, str | None] = {}

    def invalid_reason(pool: Pool) -> str | None:
        if pool.invalid_reason is not None or not check_slices:
            return pool.invalid_reason
        key = id(pool)
        if key not in slice_problems:
            slice_problems[key] = next(
                (
                    problem
                    for slc in pool.slices
                    if (problem := slice_counter_problem(slc, index._devices)) is not None
                ),
                None,
            )
        return slice_problems[key]

    def pool_devices(pool: Pool) -> Iterable[DeviceEntry]:
        own = context.pool_entries(pool)
        if not pool.other_slices:
            return own
        return itertools.chain(own, context.pool_entries(pool, others=True))

    out: list[NodeInventory] = []
    for node_name in nodes if nodes is not None else snapshot.node_names():
        node = snapshot.node(node_name) or {"metadata": {"name": node_name}}
        pools = index.gather(node)
        counters = CounterState(is_allocated, pool_devices)
        inv = NodeInventory(node=node_name)
        groups: dict[tuple[str, str, str | None, str | None], DeviceGroup] = {}
        free_partitions: dict[tuple[str, str, str | None, str | None], list[DeviceEntry]] = {}
        for pool in pools:
            invalid = invalid_reason(pool) is not None
            state = "invalid" if invalid else "incomplete" if pool.incomplete else "ok"
            inv.pools.append({"driver": pool.driver, "pool": pool.name, "state": state})
            if invalid or (pool.incomplete and not gates.legacy_pools):
                continue
            for entry in context.pool_entries(pool):
                key = _kind(entry)
                group = groups.get(key)
                if group is None:
                    group = groups[key] = DeviceGroup(
                        driver=key[0], type=key[1], profile=key[2], product=key[3]
                    )
                group.published += 1
                ref = entry.ref
                if is_allocated(ref):
                    group.allocated += 1
                    for claim in allocated.holders.get(ref, ()):
                        group.holders.setdefault(claim, []).append(entry.name)
                elif entry.has_counters and partitionable:
                    # A full GPU one of whose partitions is allocated (or a partition
                    # overlapping one) is not free: the allocator would refuse it.
                    if not counters.fits_now(entry):
                        group.held += 1
                    free = free_partitions.get(key)
                    if free is None:
                        free = free_partitions[key] = []
                    free.append(entry)
                if entry.taints:
                    blocking = [t for t in entry.taints if t.get("effect") in BLOCKING_EFFECTS]
                    if blocking:
                        group.tainted += 1
                        inv.tainted.append(
                            {
                                "device": entry.name,
                                "pool": entry.pool_name,
                                "driver": entry.driver,
                                "taints": [
                                    f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
                                    for t in blocking
                                ],
                            }
                        )
                if entry.has_counters and partitionable and group.fits is None:
                    group.fits = 0
        for key, free in free_partitions.items():
            groups[key].fits = _fits(counters, free)
        inv.groups = sorted(
            groups.values(),
            key=lambda g: (g.driver, g.type, g.product or "", g.profile or ""),
        )
        out.append(inv)
    problems = [
        {
            "driver": p.driver,
            "pool": p.pool,
            "kind": p.kind,
            "reason": p.reason,
            "generation": p.generation,
            "nodes": list(p.nodes),
        }
        for p in pool_problems(
            snapshot, partitionable=partitionable, index=index, legacy=gates.legacy_pools
        )
    ]
    return Inventory(nodes=out, problems=problems, features=gates)
