"""``allocateDevice`` gives back what it took when a device fails its capacity recheck.

Upstream checks consumable capacity only after adding the claim's constraints, marking
the device in use and reserving its counters. Before kubernetes/kubernetes#140431 (1.37)
a failed recheck returned without undoing any of that (#140436); since, everything is
rolled back, so the failed device cannot poison the next candidate.
"""

from __future__ import annotations

from typing import Any

from dradiag.analyses.allocation import FeatureGates, simulate_allocation
from dradiag.analyses.allocation.candidates import DeviceEntry
from dradiag.analyses.allocation.search import AllocationContext, Allocator
from dradiag.snapshot.model import Kind, Snapshot

DRIVER = "net.example.com"
V136 = FeatureGates.for_version("1.36")
V137 = FeatureGates.for_version("1.37")


def nic(name: str, model: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": model}},
        "capacity": {"bandwidth": {"value": "10"}},
        **extra,
    }


def cluster(devices: list[dict[str, Any]], counters: list[dict[str, Any]] = ()) -> Snapshot:  # type: ignore[assignment]
    """One pool on node-a: its devices, and (≥1.35 split model) a counters-only slice."""
    pool = {"name": "node-a", "generation": 1, "resourceSliceCount": 2 if counters else 1}
    specs: list[dict[str, Any]] = [
        {"driver": DRIVER, "nodeName": "node-a", "pool": dict(pool), "devices": devices}
    ]
    if counters:
        specs.insert(
            0,
            {
                "driver": DRIVER,
                "nodeName": "node-a",
                "pool": dict(pool),
                "sharedCounters": list(counters),
            },
        )
    return Snapshot(
        objects={
            Kind.RESOURCE_SLICE: [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"node-a-nics-{i}"},
                    "spec": spec,
                }
                for i, spec in enumerate(specs)
            ],
            Kind.DEVICE_CLASS: [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": "nic"},
                    "spec": {
                        "selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]
                    },
                }
            ],
            Kind.NODE: [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}],
        }
    )


def model_is(model: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": f"device.attributes['{DRIVER}'].model == '{model}'"}}]


def bandwidth(amount: str) -> dict[str, Any]:
    return {"requests": {"bandwidth": amount}}


def claim(requests: list[dict[str, Any]], constraints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "net", "namespace": "ml", "uid": "uid-net"},
        "spec": {"devices": {"requests": requests, "constraints": constraints}},
    }


def picked(sim: Any) -> list[tuple[str, str]]:
    return [
        (r["request"], r["device"])
        for item in sim.results
        for r in item["allocation"]["devices"]["results"]
    ]


def shared_nic_claim() -> dict[str, Any]:
    # `a` takes 6 of nic-0's 10. `b` prefers every model-x NIC (allocationMode All, 6
    # each): nic-0 passes the constraint (model x) but fails the capacity recheck. `b`
    # then falls back to one model-y NIC, which the constraint over `b` allows only if
    # nic-0's add was undone.
    return claim(
        [
            {
                "name": "a",
                "exactly": {
                    "deviceClassName": "nic",
                    "selectors": model_is("x"),
                    "capacity": bandwidth("6"),
                },
            },
            {
                "name": "b",
                "firstAvailable": [
                    {
                        "name": "all",
                        "deviceClassName": "nic",
                        "allocationMode": "All",
                        "selectors": model_is("x"),
                        "capacity": bandwidth("6"),
                    },
                    {
                        "name": "one",
                        "deviceClassName": "nic",
                        "selectors": model_is("y"),
                        "capacity": bandwidth("6"),
                    },
                ],
            },
        ],
        [{"requests": ["b"], "matchAttribute": f"{DRIVER}/model"}],
    )


SHARED_NICS = [
    nic("nic-0", "x", allowMultipleAllocations=True),
    nic("nic-1", "y", allowMultipleAllocations=True),
]


def test_capacity_recheck_failure_does_not_poison_the_next_candidate() -> None:
    sim = simulate_allocation(cluster(SHARED_NICS), [shared_nic_claim()], "node-a", features=V137)
    assert sim.outcome == "allocated", sim.error
    assert picked(sim) == [("a", "nic-0"), ("b/one", "nic-1")]
    assert sim.upstream_bug is None


def test_before_137_the_capacity_recheck_leaks_the_constraint_as_upstream_did() -> None:
    sim = simulate_allocation(cluster(SHARED_NICS), [shared_nic_claim()], "node-a", features=V136)
    assert sim.outcome == "unschedulable"
    assert sim.upstream_bug == "kubernetes/kubernetes#140436"
    assert any("capacity recheck" in note for note in sim.notes)


def counter_pair(features: FeatureGates) -> tuple[Allocator, Any, Any, DeviceEntry, DeviceEntry]:
    """Two dedicated devices drawing on one counter set that holds one of them; request
    `big` asks for more bandwidth than a device has (the search's pre-check would skip
    it; here it stands for any failing recheck), `a` for a share that fits."""
    counters = [{"name": "cs", "counters": {"slots": {"value": "1"}}}]
    uses = [{"counterSet": "cs", "counters": {"slots": {"value": "1"}}}]
    devices = [
        nic("gpu-0", "x", consumesCounters=uses),
        nic("gpu-1", "y", consumesCounters=uses),
    ]
    want = claim(
        [
            {"name": "big", "exactly": {"deviceClassName": "nic", "capacity": bandwidth("11")}},
            {"name": "a", "exactly": {"deviceClassName": "nic", "capacity": bandwidth("6")}},
        ],
        [{"requests": ["big", "a"], "matchAttribute": f"{DRIVER}/model"}],
    )
    allocator = Allocator(AllocationContext(cluster(devices, counters), features), "node-a", [want])
    allocator.gather()
    allocator.validate()
    gpu0, gpu1 = (e for e in allocator.flat if isinstance(e, DeviceEntry))
    return (
        allocator,
        allocator.request_data[(0, 0, 0)],
        allocator.request_data[(0, 1, 0)],
        gpu0,
        gpu1,
    )


def test_failed_capacity_recheck_restores_constraints_holders_and_counters() -> None:
    # gpu-1 needs the counter, the constraint and the claim's slot that gpu-0 took back.
    allocator, big, small, gpu0, gpu1 = counter_pair(V137)
    assert allocator.allocate_device(big, gpu0, False) is None
    assert allocator.constraints[0][0].num_devices == 0  # type: ignore[attr-defined]
    assert not allocator.allocating.get(gpu0.ref)
    assert not any(
        used
        for sets in allocator.counters.consumed.values()
        for counters in sets.values()
        for used in counters.values()
    )
    assert not allocator.leaked
    assert allocator.allocate_device(small, gpu1, False) is not None
    assert [p.entry.name for p in allocator.results[0]] == ["gpu-1"]


def test_before_137_a_failed_capacity_recheck_keeps_what_it_took() -> None:
    # allocateDevice before #140431: constraint added, gpu-0 marked in use, counter kept.
    allocator, big, small, gpu0, gpu1 = counter_pair(V136)
    assert allocator.allocate_device(big, gpu0, False) is None
    assert allocator.leaked
    assert allocator.constraints[0][0].num_devices == 1  # type: ignore[attr-defined]
    assert allocator.allocating.get(gpu0.ref) == {0}
    assert allocator.allocate_device(small, gpu1, False) is None
