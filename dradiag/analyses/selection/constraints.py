"""Whether a claim's ``matchAttribute`` constraints can be met on a single node.

Judged on the devices each constrained request matches, by necessary conditions only
(:func:`_one_constraint`): a constraint found infeasible here is infeasible for the
allocator too, while one found feasible may still lose to requests competing for the
same few devices. Counting runs in C (:func:`_constraint_counts`) in the usual case,
and device by device (:func:`_constraint_sets`) when it cannot.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from dradiag.analyses.selection.devices import ANY_NODE, _member_value, qualified_attribute
from dradiag.analyses.selection.inventory import DeviceInventory
from dradiag.analyses.selection.results import ConstraintResult, RequestGroup, RequestSelection


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
