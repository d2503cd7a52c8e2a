"""Pool gathering and pool problems on gpu.nvidia.com-shaped slices (k8s-dra-semantics §3.2)."""

from __future__ import annotations

import copy
from typing import Any

from dradiag.analyses.pools import PoolIndex, node_matches, pool_problems
from dradiag.snapshot.model import Kind, Snapshot


def slice_(
    node: str,
    name: str,
    *,
    generation: int = 1,
    count: int = 1,
    devices: list[str] = ("gpu-0",),
    **spec: Any,
) -> dict:  # type: ignore[assignment]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": [{"name": d, "attributes": {"type": {"string": "gpu"}}} for d in devices],
            **spec,
        },
    }


def snap(slices: list[dict]) -> Snapshot:
    return Snapshot(objects={Kind.RESOURCE_SLICE: slices})


def test_incomplete_pool_is_reported_with_its_node() -> None:
    problems = pool_problems(
        snap([slice_("node-a", "s0", count=3), slice_("node-a", "s1", count=3, devices=["gpu-1"])])
    )
    (problem,) = problems
    assert (problem.kind, problem.pool_id, problem.nodes) == (
        "incomplete",
        "gpu.nvidia.com/node-a",
        ("node-a",),
    )
    assert problem.reason == "2 of 3 slices of generation 1 published"


def test_duplicate_device_and_missing_counter_set_make_a_pool_invalid() -> None:
    dup = pool_problems(snap([slice_("node-a", "s0", count=2), slice_("node-a", "s1", count=2)]))
    assert [(p.kind, p.reason) for p in dup] == [("invalid", "duplicate device name gpu-0")]
    orphan = slice_("node-b", "s0")
    orphan["spec"]["devices"][0]["consumesCounters"] = [
        {"counterSet": "gpu-0-counter-set", "counters": {"memory-slice-0": {"value": "1"}}}
    ]
    assert [(p.kind, p.reason) for p in pool_problems(snap([orphan]))] == [
        ("invalid", "counter set gpu-0-counter-set not found")
    ]


def test_stale_generation_is_reported_but_only_newest_counts() -> None:
    slices = [
        slice_("node-a", "old", generation=1),
        slice_("node-a", "new", generation=2, devices=["gpu-7"]),
    ]
    problems = pool_problems(snap(slices))
    assert [(p.kind, p.slices) for p in problems] == [("stale", ("old",))]
    (pool,) = PoolIndex(slices).gather({"metadata": {"name": "node-a"}})
    assert [d["name"] for s in pool.slices for d in s["spec"]["devices"]] == ["gpu-7"]


def test_obsolete_generation_elsewhere_hides_the_pool() -> None:
    # A network pool spread over nodes: node-a sees generation 1, node-b already has 2.
    a = slice_("node-a", "a", count=2)
    b = slice_("node-b", "b", count=2, generation=2)
    for s in (a, b):
        s["spec"]["pool"]["name"] = "shared"
    assert PoolIndex([a, b]).gather({"metadata": {"name": "node-a"}}) == []
    legacy = PoolIndex([a, b], legacy=True).gather({"metadata": {"name": "node-a"}})
    assert [p.incomplete for p in legacy] == [True]


def test_node_selector_slice_and_per_device_selection() -> None:
    node = {
        "metadata": {"name": "node-a", "labels": {"nvidia.com/gpu.present": "true", "zone": "z1"}}
    }
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}
        ]
    }
    assert node_matches(node, None, False, selector)
    assert not node_matches(node, None, False, {"nodeSelectorTerms": [{}]})
    network = slice_("x", "net")
    del network["spec"]["nodeName"]
    network["spec"]["nodeSelector"] = selector
    network["spec"]["pool"]["name"] = "fabric"
    (pool,) = PoolIndex([network]).gather(node)
    assert pool.pool_id == "gpu.nvidia.com/fabric"
    per_device = copy.deepcopy(network)
    del per_device["spec"]["nodeSelector"]
    per_device["spec"]["perDeviceNodeSelection"] = True
    per_device["spec"]["devices"][0]["nodeName"] = "node-b"
    assert PoolIndex([per_device]).gather(node) == []
    assert (
        PoolIndex([per_device], partitionable=False).gather({"metadata": {"name": "node-b"}}) == []
    )
    assert len(PoolIndex([per_device]).gather({"metadata": {"name": "node-b"}})) == 1


def test_134_counter_references_are_checked_per_slice() -> None:
    # ≤1.34 (legacy): counters lived beside their devices; a device may consume only
    # counter sets its own slice declares, whatever other slices of the pool hold.
    counters = [{"name": "cs-0", "counters": {"memory-slice-0": {"value": "1"}}}]
    uses = [{"counterSet": "cs-0", "counters": {"memory-slice-0": {"value": "1"}}}]
    own = slice_("node-a", "s0", count=2, sharedCounters=counters)
    own["spec"]["devices"][0]["consumesCounters"] = copy.deepcopy(uses)
    other = slice_("node-a", "s1", count=2, devices=["gpu-1"])
    other["spec"]["devices"][0]["consumesCounters"] = copy.deepcopy(uses)
    alone = copy.deepcopy(own)
    alone["spec"]["pool"]["resourceSliceCount"] = 1
    assert pool_problems(snap([alone]), legacy=True) == []
    assert [(p.kind, p.reason) for p in pool_problems(snap([own, other]), legacy=True)] == [
        ("invalid", "slice s1: counter set cs-0 not found")
    ]
    twice = copy.deepcopy(alone)
    twice["spec"]["sharedCounters"] = counters * 2
    assert [(p.kind, p.reason) for p in pool_problems(snap([twice]), legacy=True)] == [
        ("invalid", "slice s0: duplicate counter set name cs-0")
    ]
    # Without the gate such slices never reach the allocator; nothing is judged.
    assert pool_problems(snap([own, other]), legacy=True, partitionable=False) == []
