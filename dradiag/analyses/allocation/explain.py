"""Simulations and their explanations: the per-request funnel and the cross-node summary.

The scheduler says only ``cannot allocate all claims``. For each request this module
counts how many devices on the node survive each of the allocator's checks in turn —
class selectors, request selectors, free (not held by another claim), counters left,
untainted or tolerated, constraints — and names the devices and claims at the stage
where the count falls below what the request needs. Across nodes it groups the nodes by
that stage ("on 12 of 14 nodes every mig 1g.10gb partition is in use") and names the
binding constraint, and turns the result into ``DRA-ALLOC-*`` findings.

The funnel is an explanation, not the decision: the decision is the search in
``search.py`` (which can fail although every request passes its funnel alone, when
requests compete for the same devices or counters; that is reported as such).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dradiag.analyses.allocation.candidates import AllocatorError, DeviceEntry
from dradiag.analyses.allocation.constraints import (
    Constraint,
    DistinctAttribute,
    MatchAttribute,
)
from dradiag.analyses.allocation.features import FeatureGates
from dradiag.analyses.allocation.search import (
    AllocationContext,
    Allocator,
    RequestData,
    claim_label,
)
from dradiag.analyses.allocation.taints import blocking_taints
from dradiag.analyses.pools import paused_gc
from dradiag.snapshot.model import K8sObject, Snapshot, name_of, namespace_of
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

__all__ = [
    "ClusterExplanation",
    "FunnelStage",
    "NodeOutcome",
    "RequestFunnel",
    "Simulation",
    "explain_across_nodes",
    "simulate_allocation",
]

SCHEMA_VERSION = "dradiag.simulation/v1"
_EXAMPLES = 8
"""Devices named per funnel stage; the rest are counted."""

STAGES = (
    "on-node",
    "class-selectors",
    "request-selectors",
    "free",
    "counters",
    "tolerated",
    "constraints",
)

ORDER_NOTE = (
    "The allocation shown follows the allocator's visiting order (pools by driver/pool, "
    "slices by name, devices as published). A real cluster's slice order and, before 1.36 "
    "or on the stable allocator, Go map order can make the scheduler pick other devices; "
    "whether the claims fit does not depend on it. The scheduler also counts in-flight "
    "allocations this snapshot cannot see."
)


# -- funnel ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class FunnelStage:
    """How many devices remain after one check, and examples of those it removed."""

    stage: str
    count: int
    removed: tuple[Mapping[str, Any], ...] = ()
    removed_total: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "remaining": self.count}
        if self.removed_total:
            out["removed"] = self.removed_total
            out["examples"] = [dict(r) for r in self.removed]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFunnel:
    """One request (or subrequest) of one claim on one node, counted stage by stage."""

    claim: str
    request: str
    needed: int | None
    """Devices needed; None for ``allocationMode: All`` (all that pass the selectors)."""
    stages: tuple[FunnelStage, ...]
    blocking: str | None = None
    """The first stage that leaves fewer devices than needed, or None."""
    reason: str = ""
    description: str = "device"
    """What the request asks for, in words: ``mig 1g.10gb partition``, ``GPU``."""
    holders: tuple[str, ...] = ()
    """Claims holding devices this request could otherwise use."""
    counters: tuple[str, ...] = ()
    """Short counters, ``<counter set>/<counter>``."""
    errors: tuple[str, ...] = ()
    """Selector errors the scheduler would abort on if it evaluated these devices."""
    usable: tuple[DeviceEntry, ...] = field(default=(), repr=False, compare=False)
    """Devices left before the constraints stage (not serialized)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "claim": self.claim,
            "request": self.request,
            "needed": self.needed if self.needed is not None else "all",
            "devices": self.description,
            "funnel": [s.to_dict() for s in self.stages],
            "blocking": self.blocking,
            "reason": self.reason,
        }
        if self.holders:
            out["holders"] = list(self.holders)
        if self.counters:
            out["counters"] = list(self.counters)
        if self.errors:
            out["selectorErrors"] = list(self.errors)
        return out


def _describe(entries: Sequence[DeviceEntry], class_name: str) -> str:
    """``mig 1g.10gb partition``, ``GPU``, ``vfio device`` or ``device of class X``."""
    first: tuple[str, str] | None = None
    for e in entries:
        kind_of = (str(e.plain_attribute("type") or ""), str(e.plain_attribute("profile") or ""))
        if first is None:
            first = kind_of
        elif kind_of != first:
            first = None
            break
    if first is not None:
        kind, profile = first
        if kind == "mig" and profile:
            return f"mig {profile} partition"
        if kind == "gpu":
            return "GPU"
        if kind:
            return f"{kind} device"
    return f"device of class {class_name}"


def _plural(description: str) -> str:
    """``device of class x`` → ``devices of class x``; ``GPU`` → ``GPUs``."""
    head, sep, rest = description.partition(" of ")
    if sep:
        return f"{_plural(head)} of {rest}"
    return description if description.endswith("s") else description + "s"


def _short(entry: DeviceEntry, why: str, **extra: Any) -> dict[str, Any]:
    return {
        "device": entry.name,
        "pool": entry.pool_name,
        "driver": entry.driver,
        "why": why,
        **extra,
    }


def request_funnel(
    allocator: Allocator, data: RequestData, entries: Sequence[DeviceEntry]
) -> RequestFunnel:
    """Count ``entries`` through the allocator's checks for one request."""
    ctx = allocator.ctx
    features = allocator.features
    engine = ctx.selectors
    claim = allocator.claims[data.claim_index]
    stages: list[FunnelStage] = [FunnelStage(stage="on-node", count=len(entries))]
    errors: list[str] = []

    # Only the first _EXAMPLES removals of a stage are described; the rest are counted.
    removed: list[dict[str, Any]] = []
    removed_total = 0

    def drop(entry: DeviceEntry, why: str, **extra: Any) -> None:
        nonlocal removed_total
        removed_total += 1
        if len(removed) < _EXAMPLES:
            removed.append(_short(entry, why, **extra))

    def stage(name: str, kept: list[DeviceEntry]) -> None:
        nonlocal removed, removed_total
        stages.append(
            FunnelStage(
                stage=name,
                count=len(kept),
                removed=tuple(removed),
                removed_total=removed_total,
            )
        )
        removed, removed_total = [], 0

    class_selectors = allocator._class_selectors(data)
    class_owner = data.class_owner
    class_false = f"class {data.class_name} selectors false"
    kept: list[DeviceEntry] = []
    for entry, ok in zip(
        entries, engine.match_many(class_selectors, entries, owner=class_owner), strict=True
    ):
        if ok is True:
            kept.append(entry)
        elif ok is False:
            drop(entry, class_false)
        else:
            errors.append(ok.message)
            drop(entry, "selector error")
    stage("class-selectors", kept)

    request_selectors = allocator._request_selectors(data)
    claim_owner = data.claim_owner
    binding_off = not features.binding_conditions
    capacity_check = features.consumable_capacity
    current, kept = kept, []
    # Selectors of every device first (no side effects beyond caches), the other
    # checks per device in order, so removals and errors keep the device order.
    eligible = [e for e in current if not e.binding_conditions] if binding_off else current
    outcomes = iter(engine.match_many(request_selectors, eligible, owner=claim_owner))
    for entry in current:
        if binding_off and entry.binding_conditions:
            drop(entry, "has binding conditions (feature off)")
            continue
        ok = next(outcomes)
        if ok is not True and ok is not False:
            errors.append(ok.message)
            drop(entry, "selector error")
            continue
        if not ok:
            drop(entry, "request selectors false")
            continue
        if entry.per_device_node:
            try:
                here = allocator.is_selectable(data, entry)
            except AllocatorError as exc:
                errors.append(exc.message)
                drop(entry, "node selection error")
                continue
            if not here:
                drop(entry, "device not available on this node")
                continue
        if capacity_check:
            fits = allocator._capacity_ok(data, entry)
            if not fits:
                drop(entry, "not enough capacity left")
                continue
        kept.append(entry)
    stage("request-selectors", kept)
    description = _describe(kept or current, data.class_name)
    needed = data.count if data.mode != "All" else None
    want = needed if needed is not None else len(kept)

    holders: Counter[str] = Counter()
    current, kept = kept, []
    allocated = ctx.allocated
    in_use = allocated.devices
    for entry in current:
        if not data.admin_access and entry.ref in in_use:
            names = allocated.holders.get(entry.ref, [])
            holders.update(names)
            drop(entry, "allocated", claims=list(names))
        else:
            kept.append(entry)
    stage("free", kept)

    counter_names: Counter[str] = Counter()
    gate_off = 0
    current, kept = kept, []
    counters = allocator.counters
    partitionable = features.partitionable_devices
    for entry in current:
        if entry.has_counters and not partitionable:
            gate_off += 1
            drop(entry, "consumes counters (DRAPartitionableDevices off)")
            continue
        if (
            entry.has_counters
            and not allocator.shares_counters(entry)
            and not counters.fits_now(entry)
        ):
            short = counters.short_counters(entry)
            claims: set[str] = set()
            for set_name, counter, refs in short:
                counter_names[f"{set_name}/{counter}"] += 1
                for ref in refs:
                    claims.update(allocated.holders.get(ref, []))
            holders.update(claims)
            drop(
                entry,
                "counters exhausted",
                counters=[f"{s}/{c}" for s, c, _r in short],
                claims=sorted(claims),
            )
            continue
        kept.append(entry)
    stage("counters", kept)

    current, kept = kept, []
    taints_on = features.device_taints
    for entry in current:
        blocking = (
            blocking_taints(entry.taints, data.tolerations) if taints_on and entry.taints else []
        )
        if blocking:
            drop(
                entry,
                "tainted",
                taints=[
                    f"{t.get('key')}={t.get('value') or ''}:{t.get('effect')}"
                    + (f" (DeviceTaintRule {t['_rule']})" if t.get("_rule") else "")
                    for t in blocking
                ],
            )
        else:
            kept.append(entry)
    stage("tolerated", kept)

    # Constraints: the largest group of remaining devices that can satisfy every
    # constraint covering this request (see _constraint_group).
    current = kept
    base = data.parent or data.name
    sub = data.name if data.parent else ""
    covering = [c for c in allocator.constraints[data.claim_index] if c.applies(base, sub)]
    group, constraint_notes = _constraint_group(covering, current)
    if len(group) != len(current):
        grouped = {id(e) for e in group}
        for entry in current:
            if id(entry) not in grouped:
                drop(entry, "constraint")
    stage("constraints", group)

    blocking_stage = None
    for s in stages[1:]:
        if s.count < want or (needed is None and s.count < len(current) and s.stage != "on-node"):
            blocking_stage = s.stage
            break
    if needed is None:
        # All mode: zero selectable devices is unschedulable; every selectable one must pass.
        selectable = stages[2].count
        blocking_stage = None
        if selectable == 0:
            blocking_stage = "request-selectors"
        else:
            for s in stages[3:]:
                if s.count < selectable:
                    blocking_stage = s.stage
                    break
    reason = _reason(
        blocking_stage,
        stages,
        want,
        description,
        data,
        holders,
        counter_names,
        constraint_notes,
        errors,
        gate_off=gate_off,
    )
    return RequestFunnel(
        claim=claim_label(claim),
        request=data.request_name,
        needed=needed,
        stages=tuple(stages),
        blocking=blocking_stage,
        reason=reason,
        description=description,
        holders=tuple(name for name, _n in holders.most_common()),
        counters=tuple(name for name, _n in counter_names.most_common()),
        errors=tuple(dict.fromkeys(errors)),
        usable=tuple(current),
    )


def _value_key(attr: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in attr.items()))


def _constraint_group(
    constraints: Sequence[Constraint], devices: Sequence[DeviceEntry]
) -> tuple[list[DeviceEntry], list[str]]:
    """The most devices one request can take under ``constraints``, and a note on each.

    The count must bound what the search can do (a funnel that blocks here may prove the
    claim infeasible), so no value is chosen early: every matchAttribute splits each
    candidate group by value, and only the largest group after all of them counts.
    Within it, each distinctAttribute allows one device per value; the group shown keeps
    that many (the fewest any distinctAttribute allows).
    """
    groups: list[list[DeviceEntry]] = [list(devices)]
    notes: dict[int, str] = {}
    for i, constraint in enumerate(constraints):
        if not isinstance(constraint, MatchAttribute):
            continue
        refined: list[list[DeviceEntry]] = []
        missing = 0
        for members in groups:
            by_value: dict[Any, list[DeviceEntry]] = {}
            for entry in members:
                attr = entry.attribute(constraint.attribute)
                if attr is None:
                    missing += 1
                    continue
                by_value.setdefault(_value_key(attr), []).append(entry)
            refined.extend(by_value.values())
        groups = refined
        notes[i] = (
            f"matchAttribute {constraint.attribute}: at most "
            f"{max(map(len, groups), default=0)} usable device(s) share one value"
            + (f" ({missing} lack the attribute)" if missing else "")
        )
    matched = max(groups, key=len, default=[])
    group = matched
    for i, constraint in enumerate(constraints):
        if not isinstance(constraint, DistinctAttribute):
            continue
        firsts: dict[Any, DeviceEntry] = {}
        missing = 0
        for entry in matched:
            attr = entry.attribute(constraint.attribute)
            if attr is None:
                missing += 1
                continue
            firsts.setdefault(_value_key(attr), entry)
        if len(firsts) < len(group) or group is matched:
            group = list(firsts.values())
        notes[i] = f"distinctAttribute {constraint.attribute}: {len(firsts)} distinct values" + (
            f" ({missing} lack the attribute)" if missing else ""
        )
    return group, [notes[i] for i in sorted(notes)]


def _reason(
    blocking: str | None,
    stages: Sequence[FunnelStage],
    want: int,
    description: str,
    data: RequestData,
    holders: Counter[str],
    counters: Counter[str],
    constraint_notes: Sequence[str],
    errors: Sequence[str],
    *,
    gate_off: int = 0,
) -> str:
    """``gate_off``: devices the counters stage removed only because they consume
    counters while DRAPartitionableDevices is off (no counter is short then)."""
    by_name = {s.stage: s for s in stages}
    need = f"need {want}" if data.mode != "All" else "allocationMode All needs every one"
    plural = _plural(description)
    if blocking is None:
        return f"{by_name['constraints'].count} usable {plural} ({need})"
    count = by_name[blocking].count
    if blocking == "class-selectors":
        if errors:
            return f"class {data.class_name} selectors fail with an error: {errors[0]}"
        return f"{count} device(s) on the node match class {data.class_name} ({need})"
    if blocking == "request-selectors":
        if errors:
            return f"request selectors fail with an error: {errors[0]}"
        return f"{count} {plural if count != 1 else description} match the request's selectors ({need})"
    if blocking == "free":
        who = ", ".join(name for name, _n in holders.most_common(5)) or "other claims"
        if count == 0:
            return f"every {description} is in use (held by {who})"
        return f"only {count} {plural if count != 1 else description} free ({need}); others held by {who}"
    if blocking == "counters":
        refused = by_name["free"].count - count
        if not counters:
            # No counter is short: with the gate off, ``allocateDevice`` refuses every
            # device that consumes counters before looking at them.
            if gate_off:
                return (
                    f"{gate_off} free {plural if gate_off != 1 else description} consume "
                    "shared counters, which the allocator refuses while "
                    f"DRAPartitionableDevices is off ({count} left, {need})"
                )
            return f"{refused} free {plural} unusable at the counters check ({count} left, {need})"
        which = ", ".join(name for name, _n in counters.most_common(3))
        who = ", ".join(name for name, _n in holders.most_common(5))
        return (
            f"counters exhausted for {refused} free {plural}: {which}"
            + (f" consumed by {who}" if who else "")
            + f" ({count} left, {need})"
        )
    if blocking == "tolerated":
        removed = by_name["tolerated"].removed
        taints = sorted({t for r in removed for t in r.get("taints", [])})
        return (
            f"{by_name['tolerated'].removed_total} {plural} carry taints the request does not "
            f"tolerate: {', '.join(taints[:3])} ({count} left, {need})"
        )
    if blocking == "constraints":
        return "; ".join(constraint_notes) + f" ({need})"
    return f"{count} left after {blocking} ({need})"


# -- simulation -------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Simulation:
    """The allocator's answer for one pod's claims on one node, and why."""

    node: str
    outcome: str
    """``allocated``, ``unschedulable`` or ``error``."""
    error: str | None = None
    error_kind: str | None = None
    scheduler_status: str | None = None
    """What the scheduler's Filter reports: ``UnschedulableAndUnresolvable`` or ``Error``."""
    results: list[dict[str, Any]] = field(default_factory=list)
    explanation: list[RequestFunnel] = field(default_factory=list)
    features: FeatureGates = field(default_factory=FeatureGates)
    pools: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    combination: bool = False
    """True when every request passes its funnel alone but not all fit together."""
    upstream_bug: str | None = None
    """An upstream allocator bug that decides this outcome, when one does."""

    @property
    def allocated(self) -> bool:
        return self.outcome == "allocated"

    def blocking(self) -> list[RequestFunnel]:
        """Funnels that explain the failure (empty when allocated)."""
        return [f for f in self.explanation if f.blocking is not None]

    def to_dict(self) -> dict[str, Any]:
        """The ``dradiag simulate`` JSON document."""
        return {
            "schemaVersion": SCHEMA_VERSION,
            "node": self.node,
            "outcome": self.outcome,
            "error": self.error,
            "errorKind": self.error_kind,
            "schedulerStatus": self.scheduler_status,
            "results": self.results,
            "explanation": [f.to_dict() for f in self.explanation],
            "combination": self.combination,
            "upstreamBug": self.upstream_bug,
            "pools": self.pools,
            "allocator": self.features.to_dict(),
            "notes": self.notes,
        }


def _pool_summary(allocator: Allocator) -> list[dict[str, Any]]:
    out = []
    for pool in allocator.pools:
        state = "invalid" if pool.invalid else "incomplete" if pool.incomplete else "ok"
        item: dict[str, Any] = {
            "driver": pool.driver,
            "pool": pool.name,
            "generation": pool.generation,
            "state": state,
            "devices": len(allocator.entries_by_pool.get(id(pool), ())),
        }
        if pool.invalid_reason:
            item["reason"] = pool.invalid_reason
        if pool.incomplete:
            item["reason"] = (
                f"{pool.slices_found} of {pool.slices_expected} slices of generation "
                f"{pool.generation} published"
            )
        out.append(item)
    return out


def _explain(allocator: Allocator) -> list[RequestFunnel]:
    entries = allocator.node_entries()
    keys = sorted(allocator.request_data)
    funnels = [request_funnel(allocator, allocator.request_data[key], entries) for key in keys]
    return _joint_constraints(allocator, keys, funnels)


def _joint_constraints(
    allocator: Allocator, keys: Sequence[tuple[int, int, int]], funnels: list[RequestFunnel]
) -> list[RequestFunnel]:
    """Check matchAttribute constraints that span several requests of one claim.

    Each request's funnel sees only its own devices; a constraint over requests ``a`` and
    ``b`` also needs one value that gives every covered request enough devices, with
    distinct devices for all of them (a device that allows multiple allocations may
    serve each of them once). When no value does, the first covered request is
    marked as blocked by the constraint (scalar values only; claims with firstAvailable
    are left to the search).
    """
    if allocator.features.list_type_attributes:
        return funnels
    consumable = allocator.features.consumable_capacity
    by_key = dict(zip(keys, funnels, strict=True))
    out = list(funnels)
    for ci, constraints in enumerate(allocator.constraints):
        claim_keys = [k for k in keys if k[0] == ci]
        if any(k[2] > 0 for k in claim_keys) or any(
            allocator.request_data[k].parent is not None for k in claim_keys
        ):
            continue
        for constraint in constraints:
            if not isinstance(constraint, MatchAttribute):
                continue
            covered = [
                k for k in claim_keys if constraint.applies(allocator.request_data[k].name, "")
            ]
            if len(covered) < 2 or any(by_key[k].blocking for k in covered):
                continue
            per_value: dict[Any, list[set[str]]] = {}
            shared: set[str] = set()
            for position, k in enumerate(covered):
                for entry in by_key[k].usable:
                    attr = entry.attribute(constraint.attribute)
                    if attr is None:
                        continue
                    value = tuple(sorted((a, str(b)) for a, b in attr.items()))
                    sets = per_value.setdefault(value, [set() for _ in covered])
                    sets[position].add(entry.device_id)
                    if consumable and entry.allow_multiple:
                        shared.add(entry.device_id)
            needs = [allocator.request_data[k].num_devices for k in covered]
            feasible = False
            best = 0
            for sets in per_value.values():
                slots = _slots(sets, shared)
                enough = all(len(s) >= n for s, n in zip(sets, needs, strict=True))
                best = max(best, slots)
                if enough and slots >= sum(needs):
                    feasible = True
                    break
            if feasible:
                continue
            first = covered[0]
            names = ", ".join(allocator.request_data[k].name for k in covered)
            reason = (
                f"matchAttribute {constraint.attribute} across requests {names}: no single "
                f"value offers enough usable devices (best: {best}, need {sum(needs)})"
            )
            position = keys.index(first)
            out[position] = replace(out[position], blocking="constraints", reason=reason)
            by_key[first] = out[position]
    return out


def _slots(sets: Sequence[set[str]], shared: set[str]) -> int:
    """How many (request, device) picks the covered requests can make at most: a
    dedicated device serves one request of the attempt, a device that allows multiple
    allocations one pick in each request that can use it (never two in one request)."""
    union = set().union(*sets)
    return len(union - shared) + sum(1 for s in sets for device in s if device in shared)


def _claim_keys(claims: Sequence[K8sObject]) -> set[tuple[str, str]]:
    return {(namespace_of(c), name_of(c)) for c in claims}


def _proves_infeasible(allocator: Allocator, funnels: Sequence[RequestFunnel]) -> bool:
    """Whether the funnels alone prove that the search finds nothing, and meets no error.

    Every funnel stage is a necessary condition that the search can only tighten
    (in-attempt picks add to what is in use and to counters consumed), and the funnel
    evaluates a superset of the (device, selector) pairs the search would. Excluded:
    selector errors seen, ``All`` requests (a constraint failure there is an error),
    distinctAttribute and list-valued matchAttribute (not a partition by value), and
    ≤1.34 invalid pools (meeting one in the search is an error).
    """
    if any(f.errors for f in funnels):
        return False
    if allocator.invalid_in_flat:
        return False
    by_request: dict[tuple[int, int], list[RequestFunnel]] = {}
    keys = sorted(allocator.request_data)
    for key, funnel in zip(keys, funnels, strict=True):
        by_request.setdefault(key[:2], []).append(funnel)
    for (ci, ri), members in by_request.items():
        if not all(f.blocking for f in members):
            continue
        usable = True
        for si, funnel in enumerate(members):
            data = allocator.request_data[(ci, ri, si)]
            if data.mode == "All":
                usable = False
            elif funnel.blocking == "constraints" and (
                allocator.features.list_type_attributes
                or any(isinstance(c, DistinctAttribute) for c in allocator.constraints[ci])
            ):
                usable = False
        if usable:
            return True
    return False


def _run_on_node(
    context: AllocationContext, claims: Sequence[K8sObject], node: str, *, explain: bool
) -> Simulation:
    features = context.features
    allocator = Allocator(context, node, claims)
    sim = Simulation(node=node, outcome="unschedulable", features=features)
    results = None
    try:
        allocator.gather()
        allocator.validate()
        funnels: list[RequestFunnel] = []
        infeasible = False
        if explain:
            funnels = _explain(allocator)
            infeasible = _proves_infeasible(allocator, funnels)
        results = allocator.search(known_infeasible=infeasible)
    except AllocatorError as exc:
        sim.outcome = "error"
        sim.error = exc.message
        sim.error_kind = exc.kind
        sim.scheduler_status = (
            "UnschedulableAndUnresolvable" if exc.kind == "invalid-pools" else "Error"
        )
        results = None
    sim.pools = _pool_summary(allocator)
    if results is not None:
        sim.outcome = "allocated"
        sim.results = [
            {"claim": claim_label(claim), "allocation": allocation}
            for claim, allocation in zip(claims, results, strict=True)
        ]
    elif sim.outcome == "unschedulable":
        sim.error = "cannot allocate all claims"
        sim.scheduler_status = "UnschedulableAndUnresolvable"
    if sim.outcome == "unschedulable" and allocator.leaked:
        fixed = Allocator(context, node, claims)
        fixed.leak_counters = False
        try:
            if fixed.run() is not None:
                sim.upstream_bug = "kubernetes/kubernetes#140436"
                sim.notes.append(
                    "A correct allocator finds devices here: this Kubernetes version's allocator "
                    "keeps what it reserved for a device it then rejects (counters, on a taint "
                    "or constraint; constraints and the device itself, on a capacity recheck) "
                    "or abandons (the counters of a shared device's first share, when the "
                    "search backtracks) (kubernetes/kubernetes#140436, fixed in 1.37 by "
                    "#140431), so the scheduler reports the pod unschedulable on this node."
                )
        except AllocatorError:
            pass
    if explain and results is None and allocator.validated:
        sim.explanation = funnels if funnels else _explain(allocator)
        if sim.outcome == "unschedulable" and not any(f.blocking for f in sim.explanation):
            sim.combination = True
    sim.notes.append(ORDER_NOTE)
    if features.assumed:
        sim.notes.append(
            "The cluster's Kubernetes version is unknown; the allocator was simulated with "
            f"the defaults of {features.version[0]}.{features.version[1]} "
            "(pass --feature-gates to match the cluster)."
        )
    return sim


def _default_features(snapshot: Snapshot) -> FeatureGates:
    return FeatureGates.for_snapshot(snapshot)


def simulate_allocation(
    snapshot: Snapshot,
    claims: Sequence[K8sObject],
    node: str,
    *,
    features: FeatureGates | None = None,
    explain: bool = True,
) -> Simulation:
    """Allocate ``claims`` (one pod's, in order) on ``node`` as the scheduler would.

    Devices in use are every allocation result of every other claim in the snapshot
    (adminAccess results excepted). The claims may be synthesized (a template's spec with
    metadata name/namespace set): they need not exist in the snapshot.
    """
    context = AllocationContext(
        snapshot, features or _default_features(snapshot), exclude=_claim_keys(claims)
    )
    return _run_on_node(context, claims, node, explain=explain)


# -- across nodes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOutcome:
    """One node's answer in a cross-node explanation."""

    node: str
    outcome: str
    reason: str
    key: str
    """What blocks, as a grouping key: ``<claim>/<request>:<stage>:<devices>``."""
    simulation: Simulation

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "outcome": self.outcome, "reason": self.reason}


_STAGE_RULES = {
    "class-selectors": "DRA-ALLOC-TOO-FEW-DEVICES",
    "request-selectors": "DRA-ALLOC-TOO-FEW-DEVICES",
    "on-node": "DRA-ALLOC-TOO-FEW-DEVICES",
    "free": "DRA-ALLOC-ALL-IN-USE",
    "counters": "DRA-ALLOC-COUNTERS-EXHAUSTED",
    "tolerated": "DRA-ALLOC-TAINTED",
    "constraints": "DRA-ALLOC-CONSTRAINT-UNSATISFIABLE",
    "combination": "DRA-ALLOC-COMBINATION-UNSATISFIABLE",
    "upstream-bug": "DRA-ALLOC-COMBINATION-UNSATISFIABLE",
}
_STAGE_TITLES = {
    "DRA-ALLOC-TOO-FEW-DEVICES": "Too few devices match the request on any node",
    "DRA-ALLOC-ALL-IN-USE": "Every matching device is allocated to other claims",
    "DRA-ALLOC-COUNTERS-EXHAUSTED": "Shared counters (e.g. MIG memory slices) are exhausted",
    "DRA-ALLOC-TAINTED": "Matching devices carry taints the request does not tolerate",
    "DRA-ALLOC-CONSTRAINT-UNSATISFIABLE": "No set of devices satisfies the claim's constraints",
    "DRA-ALLOC-COMBINATION-UNSATISFIABLE": "Requests fit one by one but not all together",
    "DRA-ALLOC-ALLOCATOR-ERROR": "The scheduler's allocator aborts with an error",
    "DRA-ALLOC-INVALID-POOLS": "Only invalid resource pools could serve the claim",
}
_NEXT = {
    "DRA-ALLOC-TOO-FEW-DEVICES": (
        "compare the request's count and selectors with `dradiag inventory`",
        "check the DeviceClass selectors: `kubectl get deviceclass <class> -o yaml`",
    ),
    "DRA-ALLOC-ALL-IN-USE": (
        "list the holders: `dradiag inventory --node <node>`; are their pods still running?",
        "look for claims still allocated for finished pods (`dradiag scan`)",
    ),
    "DRA-ALLOC-COUNTERS-EXHAUSTED": (
        "see which partitions still fit per GPU: `dradiag inventory -o json` (fits)",
        "ask for a smaller profile, or wait for the claims consuming the counters to end",
    ),
    "DRA-ALLOC-TAINTED": (
        "read the taints: `kubectl get resourceslice -o yaml` (devices[].taints) and DeviceTaintRules",
        "for a health taint, check the GPU (`nvidia-smi -q`, kernel log XIDs) before tolerating it",
    ),
    "DRA-ALLOC-CONSTRAINT-UNSATISFIABLE": (
        "check how many free devices share the constrained attribute: `dradiag inventory`",
        "relax matchAttribute/distinctAttribute or lower the count",
    ),
    "DRA-ALLOC-COMBINATION-UNSATISFIABLE": (
        "simulate each claim alone: `dradiag simulate --node <node> --claim NS/NAME`",
    ),
    "DRA-ALLOC-ALLOCATOR-ERROR": (
        "fix the selector or claim named in the error; the scheduler retries with backoff",
        "check the pod's PodScheduled condition for reason SchedulerError",
    ),
    "DRA-ALLOC-INVALID-POOLS": (
        "see the pool problem: `dradiag inventory` / the publication phase",
        "restart the driver's kubelet plugin on the node to republish its slices",
    ),
}


@dataclass(slots=True, kw_only=True)
class ClusterExplanation:
    """Per-node outcomes for one pod's claims, summarized."""

    nodes: list[NodeOutcome]
    summary: list[str]
    binding: str | None
    """The stage that blocks on most failing nodes (``free``, ``counters`` …)."""
    binding_rule: str | None
    features: FeatureGates

    @property
    def fitting_nodes(self) -> list[str]:
        return [n.node for n in self.nodes if n.outcome == "allocated"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.to_dict() for n in self.nodes],
            "fits": self.fitting_nodes,
            "summary": self.summary,
            "binding": self.binding,
            "bindingRule": self.binding_rule,
            "allocator": self.features.to_dict(),
        }

    def findings(self) -> list[Finding]:
        """``DRA-ALLOC-*`` findings for the diagnosis engine's allocation phase."""
        total = len(self.nodes)
        fits = self.fitting_nodes
        if fits:
            shown = ", ".join(fits[:10]) + (" …" if len(fits) > 10 else "")
            return [
                Finding(
                    rule="DRA-ALLOC-FITS",
                    phase=Phase.ALLOCATION,
                    severity=Severity.INFO,
                    title="The claims can be allocated now",
                    detail=f"the allocator finds devices on {len(fits)} of {total} node(s): {shown}",
                    next=(
                        "if the pod still does not schedule, check its other constraints "
                        "(node affinity, resources) in its FailedScheduling event",
                    ),
                    identifiers=tuple(("node", n) for n in fits[:10]),
                )
            ]
        errors = [n for n in self.nodes if n.outcome == "error"]
        findings: list[Finding] = []
        hard = [n for n in errors if n.simulation.error_kind != "invalid-pools"]
        if hard:
            message = hard[0].simulation.error or ""
            findings.append(
                Finding(
                    rule="DRA-ALLOC-ALLOCATOR-ERROR",
                    phase=Phase.ALLOCATION,
                    severity=Severity.ERROR,
                    title=_STAGE_TITLES["DRA-ALLOC-ALLOCATOR-ERROR"],
                    detail=f'on {len(hard)} of {total} node(s): running "DynamicResources" '
                    f"filter plugin: {message}",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.CEL, ref="allocator simulation", excerpt=message
                        ),
                    ),
                    next=_NEXT["DRA-ALLOC-ALLOCATOR-ERROR"],
                )
            )
        if self.binding_rule and self.binding_rule != "DRA-ALLOC-ALLOCATOR-ERROR":
            evidence = tuple(
                Evidence(source=EvidenceSource.OBJECT, ref=f"node {n.node}", excerpt=n.reason)
                for n in self.nodes
                if n.outcome != "allocated"
                and _STAGE_RULES.get(n.key.split(":")[1], "") == self.binding_rule
            )[:_EXAMPLES]
            holders = sorted(
                {
                    h
                    for n in self.nodes
                    for f in n.simulation.explanation
                    if f.blocking
                    for h in f.holders
                }
            )
            findings.append(
                Finding(
                    rule=self.binding_rule,
                    phase=Phase.ALLOCATION,
                    severity=Severity.ERROR,
                    title=_STAGE_TITLES.get(self.binding_rule, self.binding_rule),
                    detail="; ".join(self.summary),
                    evidence=evidence,
                    next=_NEXT.get(self.binding_rule, ()),
                    identifiers=tuple(("claim", h) for h in holders[:10]),
                    cause=_cause_of(self.summary),
                )
            )
        return findings


_NODE_COUNT = re.compile(r"^on \d+ of \d+ nodes?:?\s*")


def _cause_of(summary: Sequence[str]) -> str:
    """The binding stage's first reason without its node tally ("on 1 of 1 nodes: …")."""
    return _NODE_COUNT.sub("", summary[0]).strip() if summary else ""


def _node_key(sim: Simulation) -> tuple[str, str]:
    """(grouping key, one-line reason) for a node that did not allocate."""
    if sim.outcome == "error":
        kind = "invalid-pools" if sim.error_kind == "invalid-pools" else "error"
        return f"-:{kind}:-", sim.error or ""
    blocking = sim.blocking()
    if sim.upstream_bug:
        return "-:upstream-bug:-", (
            f"a correct allocator fits the claims, but this version's scheduler does not "
            f"({sim.upstream_bug}: what rejected devices reserved stays reserved)"
        )
    if not blocking:
        if sim.combination:
            return "-:combination:-", (
                "each request fits on its own, but not all together (they compete for the "
                "same devices or counters, or a constraint spans requests)"
            )
        return "-:unknown:-", "cannot allocate all claims"
    first = blocking[0]
    return f"{first.claim}/{first.request}:{first.blocking}:{first.description}", first.reason


def _summary_line(key: str, nodes: list[NodeOutcome], total: int) -> str:
    _who, stage, description = key.split(":", 2)
    count = f"on {len(nodes)} of {total} nodes"
    sample = nodes[0].reason
    if stage == "free" and sample.startswith("every "):
        blocking = [f for n in nodes for f in n.simulation.blocking()]
        held = sorted(
            {
                f"{r.get('device')}"
                for f in blocking
                for st in f.stages
                if st.stage == "free"
                for r in st.removed
                if r.get("device")
            }
        )
        holding = sorted({h for f in blocking for h in f.holders})
        text = f"{count} every {description} is in use"
        if held:
            text += f" ({', '.join(held[:3])}" + (" …" if len(held) > 3 else "") + ")"
        if holding:
            text += f", held by {', '.join(holding[:3])}" + (" …" if len(holding) > 3 else "")
        return text
    if stage == "counters":
        counters = Counter(
            c for n in nodes for f in n.simulation.blocking() for c in f.counters
        ).most_common(2)
        holders = Counter(
            h for n in nodes for f in n.simulation.blocking() for h in f.holders
        ).most_common(3)
        names = [c for c, _ in counters]
        if not names:
            # No counter is short (DRAPartitionableDevices off): the node's reason says why.
            return f"{count}: {sample}"
        text = (
            f"{count} counter {names[0]} is consumed"
            if len(names) == 1
            else f"{count} counters {', '.join(names)} are consumed"
        )
        if holders:
            text += f" by claim {', '.join(h for h, _ in holders)}"
        return text
    if stage in ("error", "invalid-pools", "combination", "unknown", "upstream-bug"):
        return f"{count}: {sample}"
    return f"{count}: {sample}"


def explain_across_nodes(
    snapshot: Snapshot,
    claims: Sequence[K8sObject],
    *,
    nodes: Sequence[str] | None = None,
    features: FeatureGates | None = None,
) -> ClusterExplanation:
    """Simulate ``claims`` on every node (or ``nodes``) and say what blocks where."""
    with paused_gc():
        return _explain_across_nodes(snapshot, claims, nodes, features)


def _explain_across_nodes(
    snapshot: Snapshot,
    claims: Sequence[K8sObject],
    nodes: Sequence[str] | None,
    features: FeatureGates | None,
) -> ClusterExplanation:
    gates = features or _default_features(snapshot)
    context = AllocationContext(snapshot, gates, exclude=_claim_keys(claims))
    names = list(nodes) if nodes is not None else snapshot.node_names()
    outcomes: list[NodeOutcome] = []
    for node in names:
        sim = _run_on_node(context, claims, node, explain=True)
        if sim.outcome == "allocated":
            outcomes.append(
                NodeOutcome(node=node, outcome=sim.outcome, reason="fits", key="", simulation=sim)
            )
            continue
        key, reason = _node_key(sim)
        outcomes.append(
            NodeOutcome(node=node, outcome=sim.outcome, reason=reason, key=key, simulation=sim)
        )
    failing = [n for n in outcomes if n.outcome != "allocated"]
    groups: dict[str, list[NodeOutcome]] = {}
    for n in failing:
        groups.setdefault(n.key, []).append(n)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    summary = [_summary_line(key, members, len(outcomes)) for key, members in ordered]
    fits = [n.node for n in outcomes if n.outcome == "allocated"]
    if fits:
        summary.insert(
            0,
            f"fits on {len(fits)} of {len(outcomes)} nodes: {', '.join(fits[:5])}"
            + (" …" if len(fits) > 5 else ""),
        )
    binding = None
    binding_rule = None
    if ordered and not fits:
        stage_counts = Counter(n.key.split(":")[1] for n in failing)
        binding = stage_counts.most_common(1)[0][0]
        binding_rule = _STAGE_RULES.get(binding)
        if binding == "error":
            binding_rule = "DRA-ALLOC-ALLOCATOR-ERROR"
        elif binding == "invalid-pools":
            binding_rule = "DRA-ALLOC-INVALID-POOLS"
    return ClusterExplanation(
        nodes=outcomes, summary=summary, binding=binding, binding_rule=binding_rule, features=gates
    )
