"""The allocator's search: validation, then a depth-first search with backtracking.

This reproduces ``Allocate`` of k8s.io/dynamic-resource-allocation/structured
(k8s-dra-semantics §3.3–3.14): claims in order, their requests in order, for
``firstAvailable`` the subrequests in order, then one device slot after the other, each
slot trying candidates in pool → slice → device order and resuming after the previous
pick of the same request (combinations, not permutations). The first complete solution
wins. A greedy search would answer "unschedulable" where constraints, counters or
several claims interact and a different earlier pick would have worked.

Checks per candidate run in the allocator's order — in use, selectors (cached per
device and request), capacity, then counters, taints, constraints — because the order
decides which CEL runtime error (if any) the scheduler hits first. Known upstream
quirks are reproduced on purpose, since the point is to predict the scheduler: before
1.37, counters taken by a device that a taint or constraint then rejects are not given
back within the attempt (nor, after a failed capacity recheck, its constraints and
in-use mark; nor, when the search backtracks, the counters a shared device's first share
took), and counter/availability bookkeeping is keyed by pool name.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dradiag.analyses.allocation.candidates import (
    AllocatorError,
    DeviceEntry,
    DeviceRef,
    PreparedSelectors,
    SelectorEngine,
    device_entries,
)
from dradiag.analyses.allocation.constraints import Constraint, DistinctAttribute, MatchAttribute
from dradiag.analyses.allocation.counters import (
    CounterState,
    capacity_fits,
    consumed_capacity,
)
from dradiag.analyses.allocation.features import FeatureGates
from dradiag.analyses.allocation.taints import blocking_taints
from dradiag.analyses.pools import NodeSelectionError, Pool, PoolIndex, node_matches
from dradiag.snapshot.model import K8sObject, Snapshot, allocated_devices, name_of, namespace_of

__all__ = [
    "ALLOCATION_RESULTS_MAX_SIZE",
    "AllocatedState",
    "AllocationContext",
    "Allocator",
    "RequestData",
    "SnapshotStore",
    "claim_label",
    "forget_snapshots",
    "invalid_pools_error",
    "snapshot_store",
]

ALLOCATION_RESULTS_MAX_SIZE = 32
"""``resourceapi.AllocationResultsMaxSize``: devices per claim."""

INVALID_POOLS_MESSAGE = "invalid resource pools were encountered"


def claim_label(claim: K8sObject) -> str:
    """``klog.KObj`` of a claim: ``ns/name``, or ``name`` without a namespace."""
    ns, name = namespace_of(claim), name_of(claim)
    return f"{ns}/{name}" if ns else name


def invalid_pools_error() -> AllocatorError:
    return AllocatorError(INVALID_POOLS_MESSAGE, kind="invalid-pools")


class _MaxSizeExceeded(Exception):
    """``errAllocationResultMaxSizeExceeded``: backtrack harder, try other subrequests."""


# -- what is already allocated in the cluster ----------------------------------------------


@dataclass(slots=True)
class AllocatedState:
    """``AllocatedState``: devices in use, shared devices and capacity consumed on them."""

    devices: set[DeviceRef] = field(default_factory=set)
    shared: set[DeviceRef] = field(default_factory=set)
    capacity: dict[DeviceRef, dict[str, int]] = field(default_factory=dict)
    holders: dict[DeviceRef, list[str]] = field(default_factory=dict)
    """Device → claims (``ns/name``) whose allocation holds it; for explanations."""

    def is_allocated(self, ref: DeviceRef) -> bool:
        return ref in self.devices or ref in self.shared or ref in self.capacity

    @classmethod
    def from_claims(
        cls, claims: Iterable[K8sObject], *, exclude: Iterable[tuple[str, str]] = ()
    ) -> AllocatedState:
        """Every allocation result of ``claims`` except ``exclude`` keys and adminAccess ones."""
        from dradiag.analyses.pools import quantity_nanos

        skip = set(exclude)
        state = cls()
        for claim in claims:
            if (namespace_of(claim), name_of(claim)) in skip:
                continue
            label = claim_label(claim)
            for result in allocated_devices(claim):
                if result.get("adminAccess"):
                    continue
                ref = (
                    str(result.get("driver") or ""),
                    str(result.get("pool") or ""),
                    str(result.get("device") or ""),
                )
                state.holders.setdefault(ref, []).append(label)
                if result.get("shareID"):
                    state.shared.add(ref)
                    consumed = result.get("consumedCapacity") or {}
                    if consumed:
                        agg = state.capacity.setdefault(ref, {})
                        for name, value in consumed.items():
                            try:
                                agg[str(name)] = agg.get(str(name), 0) + quantity_nanos(str(value))
                            except ValueError:
                                continue
                else:
                    state.devices.add(ref)
        return state


# -- what every analysis of one snapshot shares ----------------------------------------------


class SnapshotStore:
    """What allocation analyses of one snapshot share, call after call.

    Pool indexes (slices read once, pools built and validated once), device records per
    pool (with what they cache: parsed counters, CEL convertibility, selector results)
    and selector engines (compiled selectors, results per distinct attribute values)
    depend only on the snapshot and a few feature flags, so a second explanation of the
    same snapshot (the diagnosis engine explains every pending claim; a bench explains
    for two versions, then takes the inventory) starts warm. The snapshot must not change
    afterwards, as :class:`~dradiag.snapshot.model.Snapshot` requires of every analysis.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._indexes: dict[tuple[bool, bool], PoolIndex] = {}
        self._engines: dict[tuple[bool, bool], SelectorEngine] = {}
        # Keyed by id(pool); every pool is held by its index, so ids stay unique.
        self._entries: dict[tuple[int, bool, bool], list[DeviceEntry]] = {}
        self._allocated: AllocatedState | None = None

    def pool_index(self, *, partitionable: bool, legacy: bool) -> PoolIndex:
        found = self._indexes.get((partitionable, legacy))
        if found is None:
            found = self._indexes[(partitionable, legacy)] = PoolIndex.from_snapshot(
                self.snapshot, partitionable=partitionable, legacy=legacy
            )
        return found

    def selector_engine(self, *, list_types: bool, allow_multiple: bool) -> SelectorEngine:
        found = self._engines.get((list_types, allow_multiple))
        if found is None:
            found = self._engines[(list_types, allow_multiple)] = SelectorEngine(
                list_types=list_types, allow_multiple=allow_multiple
            )
        return found

    def pool_entries(
        self, pool: Pool, taint_rules: Sequence[K8sObject], *, others: bool = False
    ) -> list[DeviceEntry]:
        """Device records of ``pool``'s node-targeting slices (with ``others``: of its
        other slices), built once; ``taint_rules`` are the snapshot's or none."""
        key = (id(pool), bool(taint_rules) and not others, others)
        found = self._entries.get(key)
        if found is None:
            if others:
                found = device_entries(pool, slices=pool.other_slices)
            else:
                found = device_entries(pool, taint_rules=taint_rules)
            self._entries[key] = found
        return found

    def allocated(self, exclude: Iterable[tuple[str, str]]) -> AllocatedState:
        """The cluster's allocated devices, leaving out the claims ``exclude`` names.

        The full state is shared when the excluded claims hold no devices (claims being
        explained are usually not allocated); otherwise it is worked out afresh.
        """
        skip = set(exclude)
        claims = self.snapshot.claims
        if skip and any(
            (namespace_of(c), name_of(c)) in skip and allocated_devices(c) for c in claims
        ):
            return AllocatedState.from_claims(claims, exclude=skip)
        if self._allocated is None:
            self._allocated = AllocatedState.from_claims(claims)
        return self._allocated


_STORE: list[SnapshotStore] = []
"""The store of the snapshot analysed last (one: a process analyses one snapshot)."""


def snapshot_store(snapshot: Snapshot) -> SnapshotStore:
    """The :class:`SnapshotStore` of ``snapshot``, made on first use; replaces the last one."""
    if _STORE and _STORE[0].snapshot is snapshot:
        return _STORE[0]
    store = SnapshotStore(snapshot)
    _STORE[:] = [store]
    return store


def forget_snapshots() -> None:
    """Drop the shared store (tests; or a caller that changed a snapshot in place)."""
    _STORE.clear()


# -- per-snapshot context shared by every node of a sweep -----------------------------------


class AllocationContext:
    """What stays the same across nodes for one set of claims: pools index, classes,
    compiled selectors, DeviceTaintRules and the cluster's allocated devices.

    Pool indexes, device records and selector engines come from the snapshot's
    :class:`SnapshotStore` (``store=None``) or from a fresh one (``store=False``: nothing
    shared with earlier calls).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        features: FeatureGates,
        *,
        exclude: Iterable[tuple[str, str]] = (),
        allocated: AllocatedState | None = None,
        store: SnapshotStore | bool | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.features = features
        if isinstance(store, SnapshotStore):
            self.store = store
        else:
            self.store = snapshot_store(snapshot) if store is None else SnapshotStore(snapshot)
        self.pool_index = self.store.pool_index(
            partitionable=features.partitionable_devices, legacy=features.legacy_pools
        )
        self.taint_rules: tuple[K8sObject, ...] = (
            tuple(snapshot.taint_rules) if features.device_taint_rules else ()
        )
        # 1.36.0 converted list attributes for CEL only with DRAListTypeAttributes; later
        # releases always do (k8s-dra-semantics §1.3); earlier ones had none to convert.
        self.selectors = self.store.selector_engine(
            list_types=features.list_type_attributes or features.version != (1, 36),
            allow_multiple=features.variant != "stable",
        )
        self.leak_counters = features.version < (1, 37)
        """Before the fix for kubernetes/kubernetes#140436 (merged for 1.37), counters taken by
        a device that a taint or constraint then refuses stayed taken for the attempt, a
        device refused on its capacity recheck also kept its constraints and in-use mark,
        and undoing a shared device's first share gave back its capacity, not its counters."""
        self.allocated = allocated if allocated is not None else self.store.allocated(exclude)

    def pool_entries(self, pool: Pool, *, others: bool = False) -> list[DeviceEntry]:
        """Device records of ``pool``'s node-targeting slices (or, with ``others``, of its
        other slices), built once and shared by every allocator of this snapshot.

        Pools come from the shared :class:`PoolIndex`, so nodes that see the same pool get
        the same records, and with them the selector results cached on each record.
        """
        return self.store.pool_entries(pool, self.taint_rules, others=others)

    def node_object(self, node_name: str) -> K8sObject:
        """The Node object, or a stand-in with only the name (labels then unknown)."""
        node = self.snapshot.node(node_name)
        return node if node is not None else {"metadata": {"name": node_name}}

    def device_class(self, name: str) -> K8sObject | None:
        return self.snapshot.device_class(name)


# -- requests ---------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class RequestData:
    """One request (or one subrequest) of one claim, validated."""

    claim_index: int
    request_index: int
    sub_index: int
    name: str
    parent: str | None
    spec: Mapping[str, Any]
    class_name: str
    device_class: K8sObject | None
    mode: str
    count: int
    admin_access: bool
    num_devices: int = 0
    all_devices: list[DeviceEntry] | None = None
    class_prepared: PreparedSelectors | None = None
    request_prepared: PreparedSelectors | None = None
    class_owner: str = ""
    """``class <name>``: how selector errors of the class are prefixed."""
    claim_owner: str = ""
    """``claim <ns>/<name>``: how selector errors of the request are prefixed."""
    selectable: dict[int, bool] = field(default_factory=dict)
    """``isSelectable`` per device record (by id; records outlive the search)."""
    _capacity: Mapping[str, Any] | None = None
    _tolerations: list[Mapping[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        cap = self.spec.get("capacity")
        self._capacity = cap if isinstance(cap, Mapping) else None
        self._tolerations = list(self.spec.get("tolerations") or [])

    @property
    def request_name(self) -> str:
        """``req`` or ``req/sub``: the name in allocation results."""
        return f"{self.parent}/{self.name}" if self.parent else self.name

    @property
    def selectors(self) -> list[Mapping[str, Any]]:
        return list(self.spec.get("selectors") or [])

    @property
    def tolerations(self) -> list[Mapping[str, Any]]:
        return self._tolerations

    @property
    def capacity(self) -> Mapping[str, Any] | None:
        return self._capacity

    @property
    def class_selectors(self) -> list[Mapping[str, Any]]:
        if self.device_class is None:
            return []
        return list((self.device_class.get("spec") or {}).get("selectors") or [])


class _PoolDevices:
    """Every device record of a pool, node-targeting ones first: what counters read.

    A separate object (not a bound method of the allocator) so that an allocator and its
    counter state form no reference cycle and are freed as soon as a node is done.
    """

    __slots__ = ("ctx", "entries_by_pool")

    def __init__(self, ctx: AllocationContext, entries_by_pool: dict[int, list[DeviceEntry]]):
        self.ctx = ctx
        self.entries_by_pool = entries_by_pool

    def __call__(self, pool: Pool) -> Iterable[DeviceEntry]:
        own = self.entries_by_pool.get(id(pool), ())
        if not pool.other_slices:
            return own
        return itertools.chain(own, self.ctx.pool_entries(pool, others=True))


@dataclass(slots=True)
class _Picked:
    entry: DeviceEntry
    request: RequestData
    share_id: str | None = None
    consumed: dict[str, tuple[int, str]] | None = None


# -- the allocator --------------------------------------------------------------------------


class Allocator:
    """One ``Allocate`` call: a node and the claims of one pod."""

    def __init__(
        self, context: AllocationContext, node_name: str, claims: Sequence[K8sObject]
    ) -> None:
        self.ctx = context
        self.features = context.features
        self.node_name = node_name
        self.node = context.node_object(node_name)
        self.claims = list(claims)
        self.pools: list[Pool] = []
        self.entries_by_pool: dict[int, list[DeviceEntry]] = {}
        self.flat: list[DeviceEntry | Pool] = []
        self.request_data: dict[tuple[int, int, int], RequestData] = {}
        self.selected_sub: dict[tuple[int, int], int] = {}
        self.constraints: list[list[Constraint]] = []
        self.allocating: dict[DeviceRef, set[int]] = {}
        self.allocating_capacity: dict[DeviceRef, dict[str, int]] = {}
        self.results: list[list[_Picked]] = [[] for _ in self.claims]
        self._pool_devices = _PoolDevices(context, self.entries_by_pool)
        self.counters = CounterState(context.allocated.is_allocated, self._pool_devices)
        self.steps = 0
        self.validated = False
        self.leak_counters = context.leak_counters
        self.leaked = False
        """Whether the search hit the pre-1.37 leak of reserved state (#140436) at least once."""
        features = self.features
        self._consumable = features.consumable_capacity
        self._partitionable = features.partitionable_devices
        self._taints = features.device_taints
        self.invalid_in_flat = False
        """A ≤1.34 invalid pool sits in :attr:`flat` (meeting it in the search is an error)."""

    # -- setup ------------------------------------------------------------------------

    def gather(self) -> list[Pool]:
        """Gather the node's pools and flatten their devices in visiting order."""
        try:
            self.pools = self.ctx.pool_index.gather(self.node)
        except NodeSelectionError as exc:
            raise AllocatorError(f"gather pool information: {exc}", kind="node-selection") from None
        self.flat = []
        for pool in self.pools:
            if pool.invalid:
                if self.features.legacy_pools:
                    self.flat.append(pool)
                    self.invalid_in_flat = True
                continue
            if pool.incomplete and not self.features.legacy_pools:
                continue
            entries = self.ctx.pool_entries(pool)
            self.entries_by_pool[id(pool)] = entries
            self.flat.extend(entries)
        return self.pools

    def node_entries(self) -> list[DeviceEntry]:
        """Every device the search may visit on this node, in order."""
        if not self.invalid_in_flat:
            return cast("list[DeviceEntry]", list(self.flat))  # only records then
        return [e for e in self.flat if isinstance(e, DeviceEntry)]

    def validate(self) -> None:
        """The up-front checks of ``Allocate`` (k8s-dra-semantics §3.3); AllocatorError."""
        features = self.features
        for ci, claim in enumerate(self.claims):
            label = claim_label(claim)
            devices = (claim.get("spec") or {}).get("devices") or {}
            min_per_claim = 0
            for ri, request in enumerate(devices.get("requests") or []):
                rname = str(request.get("name") or "")
                subs = request.get("firstAvailable") or []
                exactly = request.get("exactly")
                if subs and not features.prioritized_list:
                    raise AllocatorError(
                        f"claim {label}, request {rname}: has subrequests, but the "
                        "DRAPrioritizedList feature is disabled",
                        kind="validation",
                    )
                if not features.consumable_capacity:
                    if isinstance(exactly, Mapping) and exactly.get("capacity") is not None:
                        raise AllocatorError(
                            f"claim {label}, request {rname}: has capacity requests, but the "
                            "DRAConsumableCapacity feature is disabled",
                            kind="validation",
                        )
                    for sub in subs:
                        if sub.get("capacity") is not None:
                            raise AllocatorError(
                                f"claim {label}, subrequest {sub.get('name')}: has capacity "
                                "requests, but the DRAConsumableCapacity feature is disabled",
                                kind="validation",
                            )
                if subs:
                    smallest: int | None = None
                    for si, sub in enumerate(subs):
                        data = self._validate_request(ci, ri, si, sub, rname, label)
                        self.request_data[(ci, ri, si)] = data
                        smallest = (
                            data.num_devices
                            if smallest is None
                            else min(smallest, data.num_devices)
                        )
                    min_per_claim += smallest or 0
                else:
                    if not isinstance(exactly, Mapping):
                        raise AllocatorError(
                            f"claim {label}, request {rname}: unknown request type",
                            kind="validation",
                        )
                    data = self._validate_request(ci, ri, 0, exactly, None, label, name=rname)
                    self.request_data[(ci, ri, 0)] = data
                    min_per_claim += data.num_devices
            if min_per_claim > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocatorError(
                    f"claim {label}: number of requested devices {min_per_claim} exceeds the "
                    f"claim limit of {ALLOCATION_RESULTS_MAX_SIZE}",
                    kind="claim-limit",
                )
            constraints: list[Constraint] = []
            for i, constraint in enumerate(devices.get("constraints") or []):
                reqs = [str(r) for r in constraint.get("requests") or []]
                if constraint.get("matchAttribute"):
                    constraints.append(
                        MatchAttribute(
                            str(constraint["matchAttribute"]), reqs, features.list_type_attributes
                        )
                    )
                elif constraint.get("distinctAttribute") and features.variant != "stable":
                    constraints.append(
                        DistinctAttribute(
                            str(constraint["distinctAttribute"]),
                            reqs,
                            features.list_type_attributes,
                        )
                    )
                else:
                    raise AllocatorError(
                        f"claim {label}, constraint #{i}: empty constraint (unsupported "
                        "constraint type?)",
                        kind="validation",
                    )
            self.constraints.append(constraints)
        self.validated = True

    def _validate_request(
        self,
        ci: int,
        ri: int,
        si: int,
        spec: Mapping[str, Any],
        parent: str | None,
        label: str,
        *,
        name: str | None = None,
    ) -> RequestData:
        rname = name if name is not None else str(spec.get("name") or "")
        for i, selector in enumerate(spec.get("selectors") or []):
            if not (selector.get("cel") or {}).get("expression"):
                raise AllocatorError(
                    f"claim {label}, request {rname}, selector #{i}: CEL expression empty "
                    "(unsupported selector type?)",
                    kind="validation",
                )
        admin = spec.get("adminAccess") if parent is None else None
        if not self.features.admin_access and admin is not None:
            raise AllocatorError(
                f"claim {label}, request {rname}: admin access is requested, but the feature "
                "is disabled",
                kind="validation",
            )
        class_name = str(spec.get("deviceClassName") or "")
        if not class_name:
            raise AllocatorError(
                f"claim {label}, request {rname}: missing device class name (unsupported "
                "request type?)",
                kind="validation",
            )
        device_class = self.ctx.device_class(class_name)
        if device_class is None:
            raise AllocatorError(
                f"claim {label}, request {rname}: could not retrieve device class {class_name}: "
                f'deviceclass.resource.k8s.io "{class_name}" not found',
                kind="class-missing",
                device_class=class_name,
            )
        mode = str(spec.get("allocationMode") or "ExactCount")
        count = spec.get("count")
        data = RequestData(
            claim_index=ci,
            request_index=ri,
            sub_index=si,
            name=rname,
            parent=parent,
            spec=spec,
            class_name=class_name,
            device_class=device_class,
            mode=mode,
            count=int(count) if count is not None else 1,
            admin_access=bool(admin),
        )
        engine = self.ctx.selectors
        data.class_prepared = engine.prepare(data.class_selectors)
        data.request_prepared = engine.prepare(data.selectors)
        data.class_owner = f"class {class_name}"
        data.claim_owner = f"claim {label}"
        if mode == "ExactCount":
            data.num_devices = data.count
        elif mode == "All":
            data.all_devices = []
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocatorError(
                        f"claim {label}, request {rname}: asks for all devices, but resource "
                        f"pool {pool.pool_id} is currently being updated",
                        kind="pool-incomplete",
                        pool=pool.pool_id,
                    )
                if pool.invalid:
                    raise AllocatorError(
                        f"claim {label}, request {rname}: asks for all devices, but resource "
                        f"pool {pool.pool_id} is currently invalid",
                        kind="pool-invalid",
                        pool=pool.pool_id,
                    )
                for entry in self.entries_by_pool.get(id(pool), ()):
                    if not self.is_selectable(data, entry):
                        continue
                    if self.features.consumable_capacity and not self._capacity_ok(data, entry):
                        continue
                    data.all_devices.append(entry)
            data.num_devices = len(data.all_devices)
        else:
            raise AllocatorError(
                f"claim {label}, request {rname}: unsupported count mode {mode}",
                kind="validation",
            )
        return data

    # -- per-candidate checks ---------------------------------------------------------------

    def is_selectable(self, data: RequestData, entry: DeviceEntry) -> bool:
        """Class selectors, request selectors, per-device node selection (cached)."""
        if entry.binding_conditions and not self.features.binding_conditions:
            return False
        cache = data.selectable
        key = id(entry)
        cached = cache.get(key)
        if cached is not None:
            return cached
        engine = self.ctx.selectors
        ok = True
        if data.device_class is not None and not engine.matches_prepared(
            self._class_selectors(data), entry, owner=data.class_owner
        ):
            ok = False
        if ok and not engine.matches_prepared(
            self._request_selectors(data), entry, owner=data.claim_owner
        ):
            ok = False
        if ok and entry.per_device_node:
            dev = entry.device
            try:
                ok = node_matches(
                    self.node,
                    dev.get("nodeName"),
                    bool(dev.get("allNodes")),
                    dev.get("nodeSelector"),
                )
            except NodeSelectionError as exc:
                raise AllocatorError(str(exc), kind="node-selection") from None
        cache[key] = ok
        return ok

    def _class_selectors(self, data: RequestData) -> PreparedSelectors:
        prepared = data.class_prepared
        if prepared is None:
            prepared = data.class_prepared = self.ctx.selectors.prepare(data.class_selectors)
            data.class_owner = f"class {data.class_name}"
        return prepared

    def _request_selectors(self, data: RequestData) -> PreparedSelectors:
        prepared = data.request_prepared
        if prepared is None:
            prepared = data.request_prepared = self.ctx.selectors.prepare(data.selectors)
            data.claim_owner = f"claim {claim_label(self.claims[data.claim_index])}"
        return prepared

    def _capacity_ok(self, data: RequestData, entry: DeviceEntry) -> bool:
        if (
            not entry.allow_multiple
            and data.capacity is None
            and entry.ref not in self.ctx.allocated.capacity
            and entry.ref not in self.allocating_capacity
            and entry.plain_capacity
        ):
            # A dedicated device with no request policy consumes its whole capacity: fits.
            return True
        fits = capacity_fits(
            entry,
            data.capacity,
            self.ctx.allocated.capacity.get(entry.ref, {}),
            self.allocating_capacity.get(entry.ref, {}),
        )
        return bool(fits)

    def device_in_use(self, ref: DeviceRef) -> bool:
        return ref in self.ctx.allocated.devices or bool(self.allocating.get(ref))

    def _capacity_in_use(self, ref: DeviceRef) -> bool:
        return ref in self.ctx.allocated.capacity or ref in self.allocating_capacity

    def shares_counters(self, entry: DeviceEntry) -> bool:
        """Whether taking ``entry`` now skips its counters (``skipCounterCheck``).

        A device that allows multiple allocations draws on its counters once, when its
        first share is taken: while some of its capacity is held (by a stored claim or
        this attempt), further shares consume no counters. Explanations ask the same
        question, so that a counter check never refuses a share the search would take.
        """
        return self._consumable and entry.allow_multiple and self._capacity_in_use(entry.ref)

    def allocate_device(
        self, data: RequestData, entry: DeviceEntry, must: bool
    ) -> Callable[[], None] | None:
        """``allocateDevice``: take the device if it is usable; returns the undo, or None."""
        ci = data.claim_index
        ref = entry.ref
        consumable = self._consumable
        allow_multiple = consumable and entry.allow_multiple
        if not allow_multiple and data.admin_access and ci in self.allocating.get(ref, ()):
            return None
        if not data.admin_access and (
            ref in self.ctx.allocated.devices or self.allocating.get(ref)
        ):
            return None
        has_counters = entry.has_counters
        if has_counters and not self._partitionable:
            return None
        skip_counters = self.shares_counters(entry)
        if not skip_counters and has_counters and not self.counters.check_and_consume(entry):
            return None
        base = data.parent or data.name
        sub = data.name if data.parent else ""
        counted = not skip_counters and has_counters
        if self._taints and entry.taints and blocking_taints(entry.taints, data.tolerations):
            if counted:
                if self.leak_counters:
                    self.leaked = True
                else:
                    self.counters.release(entry)
            return None
        constraints = self.constraints[ci]
        for i, constraint in enumerate(constraints):
            if not constraint.add(base, sub, entry):
                if counted:
                    if self.leak_counters:
                        self.leaked = True
                    else:
                        self.counters.release(entry)
                if must:
                    raise AllocatorError(
                        f"claim {claim_label(self.claims[ci])}, request {data.name}: cannot add "
                        f"device {entry.device_id} because a claim constraint would not be "
                        "satisfied",
                        kind="constraint",
                        device=entry.device_id,
                    )
                for earlier in constraints[:i]:
                    earlier.remove(base, sub, entry)
                return None
        holders = self.allocating.setdefault(entry.ref, set())
        if not allow_multiple:
            holders.add(ci)
        picked = _Picked(entry=entry, request=data)
        if consumable:
            if not self._capacity_ok(data, entry):
                # Upstream ``allocateDevice`` rechecks capacity (``CmpRequestOverCapacity``)
                # only after the constraints were added, the device marked in use for the
                # claim and its counters reserved. Before the fix (kubernetes/kubernetes
                # #140431, for 1.37) this path returned without undoing any of that
                # (#140436), so a device rejected here poisoned later candidates of the
                # attempt; since, ``rollbackDevice`` reverses it all. Only reachable for
                # ``All`` requests: ExactCount candidates pass the same check just before.
                if self.leak_counters:
                    self.leaked = True
                    return None
                for constraint in constraints:
                    constraint.remove(base, sub, entry)
                if not allow_multiple:
                    holders.discard(ci)
                if counted:
                    self.counters.release(entry)
                return None
            if allow_multiple:
                picked.consumed = consumed_capacity(entry, data.capacity)
                picked.share_id = str(uuid.uuid4())
                agg = self.allocating_capacity.setdefault(entry.ref, {})
                for name, (nanos, _text) in picked.consumed.items():
                    agg[name] = agg.get(name, 0) + nanos
        self.results[ci].append(picked)
        position = len(self.results[ci]) - 1

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(base, sub, entry)
            self.allocating.get(entry.ref, set()).discard(ci)
            if allow_multiple:
                if counted:
                    if self.leak_counters:
                        self.leaked = True
                    else:
                        self.counters.release(entry)
                if picked.consumed:
                    agg = self.allocating_capacity.get(entry.ref, {})
                    for name, (nanos, _text) in picked.consumed.items():
                        agg[name] = agg.get(name, 0) - nanos
                    if not any(agg.values()):
                        self.allocating_capacity.pop(entry.ref, None)
            elif self._partitionable and has_counters:
                self.counters.release(entry)
            del self.results[ci][position:]

        return undo

    # -- the search ---------------------------------------------------------------------------

    def allocate_one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> bool:
        """``allocateOne``; raises AllocatorError to abort, _MaxSizeExceeded to backtrack."""
        self.steps += 1
        if ci >= len(self.claims):
            return True
        requests = ((self.claims[ci].get("spec") or {}).get("devices") or {}).get("requests") or []
        if ri >= len(requests):
            try:
                return self.allocate_one(ci + 1, 0, 0, 0, False, 0)
            except _MaxSizeExceeded:
                return False
        data = self.request_data[(ci, ri, si)]
        if not in_sub and data.parent is not None:
            all_exceeded = True
            sub_index = 0
            while (ci, ri, sub_index) in self.request_data:
                try:
                    ok = self.allocate_one(ci, ri, sub_index, di, True, 0)
                except _MaxSizeExceeded:
                    sub_index += 1
                    continue
                all_exceeded = False
                if ok:
                    self.selected_sub[(ci, ri)] = sub_index
                    return True
                sub_index += 1
            if all_exceeded:
                raise _MaxSizeExceeded
            return False

        if data.mode == "All" and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self.allocate_one(ci, ri + 1, 0, 0, False, 0)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _MaxSizeExceeded

        if data.all_devices is not None and data.mode == "All":
            entry = data.all_devices[di]
            undo = self.allocate_device(data, entry, True)
            if undo is None:
                return False
            try:
                done = self.allocate_one(ci, ri, si, di + 1, in_sub, 0)
            except BaseException:
                undo()
                raise
            if not done:
                undo()
            return done

        allocated = self.ctx.allocated.devices
        allocating = self.allocating
        flat = self.flat
        capacity_check = self._consumable
        admin = data.admin_access
        selectable = data.selectable
        for position in range(start, len(flat)):
            item = flat[position]
            if isinstance(item, Pool):
                # ≤1.34: meeting an invalid pool during the search aborts scheduling.
                raise AllocatorError(
                    f"pool {item.name} is invalid: {item.invalid_reason}", kind="pool-invalid"
                )
            entry = item
            ref = entry.ref
            if admin:
                if ci in allocating.get(ref, ()):
                    continue
            elif ref in allocated or allocating.get(ref):
                continue
            known = selectable.get(id(entry))
            if not (self.is_selectable(data, entry) if known is None else known):
                continue
            if capacity_check and not self._capacity_ok(data, entry):
                continue
            undo = self.allocate_device(data, entry, False)
            if undo is None:
                continue
            try:
                done = self.allocate_one(ci, ri, si, di + 1, in_sub, position + 1)
            except BaseException:
                undo()
                raise
            if done:
                return True
            undo()
        return False

    def run(self) -> list[dict[str, Any]] | None:
        """Gather, validate and search: allocation results per claim, or None (no solution).

        Raises AllocatorError for everything the scheduler reports as an error, including
        ``invalid resource pools were encountered`` (≥1.35, no solution and an invalid pool).
        """
        self.gather()
        self.validate()
        return self.search()

    def search(self, *, known_infeasible: bool = False) -> list[dict[str, Any]] | None:
        """The search proper (after :meth:`gather` and :meth:`validate`).

        ``known_infeasible`` skips it when the caller has proved no solution exists
        without any error the search could meet (see ``explain.py``).
        """
        done = False
        if not known_infeasible:
            try:
                done = self.allocate_one(0, 0, 0, 0, False, 0)
            except _MaxSizeExceeded:
                done = False
        if not done:
            if not self.features.legacy_pools and any(p.invalid for p in self.pools):
                raise invalid_pools_error()
            return None
        return [self._result(ci) for ci in range(len(self.claims))]

    # -- results ------------------------------------------------------------------------------

    def _result(self, ci: int) -> dict[str, Any]:
        claim = self.claims[ci]
        features = self.features
        results: list[dict[str, Any]] = []
        for picked in self.results[ci]:
            data = picked.request
            item: dict[str, Any] = {
                "request": data.request_name,
                "driver": picked.entry.driver,
                "pool": picked.entry.pool_name,
                "device": picked.entry.name,
            }
            if data.admin_access:
                item["adminAccess"] = True
            if data.tolerations:
                item["tolerations"] = [dict(t) for t in data.tolerations]
            if features.binding_conditions and picked.entry.binding_conditions:
                item["bindingConditions"] = list(picked.entry.binding_conditions)
            if features.binding_conditions and picked.entry.binding_failure_conditions:
                item["bindingFailureConditions"] = list(picked.entry.binding_failure_conditions)
            if picked.share_id:
                item["shareID"] = picked.share_id
            if picked.consumed:
                item["consumedCapacity"] = {k: text for k, (_n, text) in picked.consumed.items()}
            results.append(item)
        allocation: dict[str, Any] = {"devices": {"results": results}}
        config = self._config(ci, claim)
        if config:
            allocation["devices"]["config"] = config
        selector = self._node_selector(self.results[ci])
        if selector is not None:
            allocation["nodeSelector"] = selector
        return allocation

    def _chosen(self, ci: int, ri: int) -> RequestData:
        si = self.selected_sub.get((ci, ri), 0)
        return self.request_data[(ci, ri, si)]

    def _config(self, ci: int, claim: K8sObject) -> list[dict[str, Any]]:
        devices = (claim.get("spec") or {}).get("devices") or {}
        requests = devices.get("requests") or []
        config: list[dict[str, Any]] = []
        class_ranges: dict[str, tuple[int, int]] = {}
        for ri in range(len(requests)):
            data = self._chosen(ci, ri)
            cls = data.device_class
            if cls is None:
                continue
            cname = name_of(cls)
            if cname in class_ranges:
                lo, hi = class_ranges[cname]
                for i in range(lo, hi):
                    config[i]["requests"].append(data.request_name)
                continue
            lo = len(config)
            for entry in (cls.get("spec") or {}).get("config") or []:
                item = {k: v for k, v in entry.items()}
                config.append({"source": "FromClass", "requests": [data.request_name], **item})
            class_ranges[cname] = (lo, len(config))
        for entry in devices.get("config") or []:
            wanted = [str(r) for r in entry.get("requests") or []]
            body = {k: v for k, v in entry.items() if k != "requests"}
            if not wanted:
                config.append({"source": "FromClaim", **body})
                continue
            for ri, request in enumerate(requests):
                if request.get("name") in wanted:
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    break
                data = self._chosen(ci, ri)
                if data.parent is not None and data.request_name in wanted:
                    config.append({"source": "FromClaim", "requests": wanted, **body})
                    break
        for item in config:
            listed = item.get("requests")
            if not listed:
                continue
            covers_all = all(
                request.get("name") in listed
                or (
                    self._chosen(ci, ri).parent is not None
                    and self._chosen(ci, ri).request_name in listed
                )
                for ri, request in enumerate(requests)
            )
            if covers_all:
                item.pop("requests", None)
        # Field order as the API prints it: source, requests, then the configuration.
        return [
            {
                "source": c["source"],
                **({"requests": c["requests"]} if c.get("requests") else {}),
                **{k: v for k, v in c.items() if k not in ("source", "requests")},
            }
            for c in config
        ]

    def _node_selector(self, picks: Sequence[_Picked]) -> dict[str, Any] | None:
        fields: list[Mapping[str, Any]] = []
        exprs: list[Mapping[str, Any]] = []
        for picked in picks:
            spec = picked.entry.slice.get("spec") or {}
            if spec.get("perDeviceNodeSelection"):
                node_name = picked.entry.device.get("nodeName")
                selector = picked.entry.device.get("nodeSelector")
            else:
                node_name = spec.get("nodeName")
                selector = spec.get("nodeSelector")
            if node_name is not None or picked.entry.device.get("bindsToNode"):
                return {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [self.node_name],
                                }
                            ]
                        }
                    ]
                }
            if isinstance(selector, Mapping):
                terms = selector.get("nodeSelectorTerms") or []
                if len(terms) == 1:
                    _merge_requirements(terms[0].get("matchFields") or [], fields)
                    _merge_requirements(terms[0].get("matchExpressions") or [], exprs)
                elif len(terms) > 1:
                    raise AllocatorError(
                        f"create NodeSelector for claim {name_of(self.claims[0])}: unsupported "
                        f"ResourceSlice.NodeSelector with {len(terms)} terms",
                        kind="node-selection",
                    )
        if not fields and not exprs:
            return None
        term: dict[str, Any] = {}
        if exprs:
            term["matchExpressions"] = [dict(r) for r in exprs]
        if fields:
            term["matchFields"] = [dict(r) for r in fields]
        return {"nodeSelectorTerms": [term]}


def _merge_requirements(source: Iterable[Mapping[str, Any]], into: list[Mapping[str, Any]]) -> None:
    for req in source:
        values = set(req.get("values") or [])
        if not any(
            r.get("key") == req.get("key")
            and r.get("operator") == req.get("operator")
            and set(r.get("values") or []) == values
            for r in into
        ):
            into.append(req)
