"""The selection analysis of one claim spec: its requests, its constraints, its device limit.

Each request, or each of its ``firstAvailable`` subrequests, runs through the class and
request stages (:mod:`.evaluate`) and gets a :class:`RequestStatus` (count and
``allocationMode: All`` judged on a single node); then come the claim's
``matchAttribute`` constraints (:mod:`.constraints`) and :data:`CLAIM_DEVICE_LIMIT`.
Unless an inventory is passed in, the last one built for the Snapshot is reused, so
the claims of one run share the device preparation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dradiag.analyses.selection.build import build_inventory
from dradiag.analyses.selection.constraints import _constraint_results
from dradiag.analyses.selection.devices import ANY_NODE
from dradiag.analyses.selection.evaluate import (
    _EMPTY_STAGE,
    _compile,
    _prepare,
    _run_stage,
    _run_stage_grouped,
    _selector_expressions,
    _SelectorRun,
)
from dradiag.analyses.selection.grouping import _ReadSpec
from dradiag.analyses.selection.inventory import DeviceInventory
from dradiag.analyses.selection.results import (
    CLAIM_DEVICE_LIMIT,
    ClaimSelection,
    RequestGroup,
    RequestSelection,
    RequestStatus,
)
from dradiag.snapshot.model import Snapshot


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
    """``result`` with the ``selector-check --free`` counts attached."""
    from dataclasses import replace

    return replace(result, free_now=dict(free_now))
