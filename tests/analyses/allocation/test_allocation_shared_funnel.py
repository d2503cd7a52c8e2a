"""Shared devices (``allowMultipleAllocations``) and what may prove a claim infeasible.

Before the search runs, the explanation funnels may prove that no allocation exists and
skip it. Each funnel stage must therefore be a necessary condition of the search; three
were not, and each made a feasible claim "unschedulable" (found by
``test_allocation_differential.py``):

- counters: a shared device whose capacity is already held draws on no counters for a
  further share (``skipCounterCheck``), yet its counters were checked again, so a
  second claim on the same devices looked blocked by exhausted counters;
- a matchAttribute over several requests counted each device once across them, but a
  shared device can serve every request of the claim;
- two matchAttributes on one request kept only the largest group of the first, which
  is not necessarily the one the second can use.

The search itself also has to give back everything a share took when it backtracks
(from 1.37; before, a shared device's counters stayed taken, as upstream's did).
"""

from __future__ import annotations

from typing import Any

from dradiag.analyses.allocation import FeatureGates, simulate_allocation
from dradiag.analyses.allocation.candidates import DeviceEntry
from dradiag.analyses.allocation.search import AllocationContext, Allocator
from dradiag.snapshot.model import Kind, Snapshot

DRIVER = "net.example.com"
V137 = FeatureGates.for_version("1.37")


def nic(name: str, model: str, *, shared: bool = True, **extra: Any) -> dict[str, Any]:
    device: dict[str, Any] = {
        "name": name,
        "attributes": {"model": {"string": model}},
        "capacity": {"bandwidth": {"value": "10"}},
        **extra,
    }
    if shared:
        device["allowMultipleAllocations"] = True
    return device


def cluster(
    devices: list[dict[str, Any]],
    counters: list[dict[str, Any]] | None = None,
    claims: list[dict[str, Any]] | None = None,
) -> Snapshot:
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
                "sharedCounters": counters,
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
            Kind.RESOURCE_CLAIM: claims or [],
        }
    )


def request(name: str, *, count: int = 1, bandwidth: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "nic", "count": count}
    if bandwidth is not None:
        exactly["capacity"] = {"requests": {"bandwidth": bandwidth}}
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None = None,
    allocation: dict[str, Any] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests, "constraints": constraints or []}},
    }
    if allocation is not None:
        obj["status"] = {"allocation": allocation}
    return obj


def devices_of(sim: Any) -> list[tuple[str, str]]:
    return [
        (r["request"], r["device"])
        for item in sim.results
        for r in item["allocation"]["devices"]["results"]
    ]


SLOTS = [{"name": "cs", "counters": {"slots": {"value": "2"}}}]
ONE_SLOT = [{"counterSet": "cs", "counters": {"slots": {"value": "1"}}}]


def test_a_second_share_of_a_held_device_draws_no_counters() -> None:
    # nic-0 and nic-1 take both slots with the first claim's shares; the second claim
    # asks for a share of each, which consumes bandwidth only.
    devices = [
        nic("nic-0", "x", consumesCounters=ONE_SLOT),
        nic("nic-1", "x", consumesCounters=ONE_SLOT),
    ]
    first = claim("first", [request("a", count=2, bandwidth="4")])
    done = simulate_allocation(cluster(devices, SLOTS), [first], "node-a", features=V137)
    assert done.outcome == "allocated"
    held = claim(
        "first", first["spec"]["devices"]["requests"], allocation=done.results[0]["allocation"]
    )
    second = claim("second", [request("b", count=2, bandwidth="5")])
    snapshot = cluster(devices, SLOTS, claims=[held])

    sim = simulate_allocation(snapshot, [second], "node-a", features=V137)
    assert sim.outcome == "allocated", sim.explanation
    assert devices_of(sim) == [("b", "nic-0"), ("b", "nic-1")]
    # A third share no longer fits the bandwidth (4 + 5 + 5 > 10): capacity, not
    # counters, is what refuses it, and the funnel says so.
    third = claim("third", [request("c", bandwidth="5")])
    held2 = claim(
        "second", second["spec"]["devices"]["requests"], allocation=sim.results[0]["allocation"]
    )
    full = simulate_allocation(
        cluster(devices, SLOTS, claims=[held, held2]), [third], "node-a", features=V137
    )
    assert full.outcome == "unschedulable"
    assert [f.blocking for f in full.explanation] == ["request-selectors"]


def test_one_shared_device_can_serve_every_request_a_constraint_spans() -> None:
    # Only nic-1 and gpu-2 share numa 1: `a` takes the shared nic-1, `b` needs two
    # devices, nic-1 (again) and the dedicated dev-2.
    devices = [
        {**nic("dev-0", "x", shared=False), "attributes": {"numa": {"int": 0}}},
        {**nic("nic-1", "x"), "attributes": {"numa": {"int": 1}}},
        {**nic("dev-2", "y", shared=False), "attributes": {"numa": {"int": 1}}},
    ]
    want = claim(
        "pair",
        [request("a", bandwidth="1"), request("b", count=2, bandwidth="1")],
        [{"matchAttribute": f"{DRIVER}/numa"}],
    )
    sim = simulate_allocation(cluster(devices), [want], "node-a", features=V137)
    assert sim.outcome == "allocated", sim.explanation
    assert devices_of(sim) == [("a", "nic-1"), ("b", "nic-1"), ("b", "dev-2")]


def test_two_match_attributes_on_one_request_do_not_pick_a_value_early() -> None:
    # By model, dev-0 (x) and dev-1 (y) tie; only dev-1 has a numa attribute. Keeping
    # the first model group would leave nothing for the numa constraint.
    devices = [
        nic("dev-0", "x", shared=False),
        {
            **nic("dev-1", "y", shared=False),
            "attributes": {"model": {"string": "y"}, "numa": {"int": 1}},
        },
    ]
    want = claim(
        "one",
        [request("a")],
        [{"matchAttribute": f"{DRIVER}/model"}, {"matchAttribute": f"{DRIVER}/numa"}],
    )
    sim = simulate_allocation(cluster(devices), [want], "node-a", features=V137)
    assert sim.outcome == "allocated", sim.explanation
    assert devices_of(sim) == [("a", "dev-1")]


def test_undoing_a_share_gives_back_capacity_counters_and_constraints() -> None:
    # Two requests take shares of nic-0 under a matchAttribute; undoing them (in the
    # search's order) leaves no trace, so a request needing the whole bandwidth fits.
    devices = [nic("nic-0", "x", consumesCounters=ONE_SLOT)]
    want = claim(
        "shares",
        [request("a", bandwidth="4"), request("b", bandwidth="6"), request("c", bandwidth="10")],
        [{"matchAttribute": f"{DRIVER}/model", "requests": ["a", "b"]}],
    )
    allocator = Allocator(AllocationContext(cluster(devices, SLOTS), V137), "node-a", [want])
    allocator.gather()
    allocator.validate()
    (entry,) = (e for e in allocator.flat if isinstance(e, DeviceEntry))
    a, b, c = (allocator.request_data[(0, i, 0)] for i in range(3))
    undo_a = allocator.allocate_device(a, entry, False)
    undo_b = allocator.allocate_device(b, entry, False)
    assert undo_a is not None and undo_b is not None
    assert allocator.allocating_capacity[entry.ref] == {"bandwidth": 10 * 10**9}
    assert not allocator._capacity_ok(c, entry)
    undo_b()
    undo_a()
    assert entry.ref not in allocator.allocating_capacity
    assert not allocator.allocating.get(entry.ref)
    assert allocator.constraints[0][0].num_devices == 0  # type: ignore[attr-defined]
    assert all(
        used == 0
        for sets in allocator.counters.consumed.values()
        for counters in sets.values()
        for used in counters.values()
    )
    assert not allocator.results[0]
    assert allocator._capacity_ok(c, entry)
    assert allocator.allocate_device(c, entry, False) is not None


def test_backtracking_gives_a_shared_devices_counters_back_from_137() -> None:
    # One slot for both NICs. `a` first takes nic-0 (its first share reserves the slot);
    # `b` must be model y, so the search backtracks and tries nic-1 for `a`, which needs
    # the slot nic-0's share held. 1.37 gives it back; 1.36 kept it (#140436).
    devices = [
        nic("nic-0", "x", consumesCounters=ONE_SLOT),
        nic("nic-1", "y", consumesCounters=ONE_SLOT),
    ]
    one = [{"name": "cs", "counters": {"slots": {"value": "1"}}}]
    b = request("b", bandwidth="1")
    b["exactly"]["selectors"] = [
        {"cel": {"expression": f"device.attributes['{DRIVER}'].model == 'y'"}}
    ]
    want = claim("pair", [request("a", bandwidth="1"), b], [{"matchAttribute": f"{DRIVER}/model"}])
    fixed = simulate_allocation(cluster(devices, one), [want], "node-a", features=V137)
    assert fixed.outcome == "allocated", fixed.explanation
    assert devices_of(fixed) == [("a", "nic-1"), ("b", "nic-1")]
    assert fixed.upstream_bug is None
    leaky = simulate_allocation(
        cluster(devices, one), [want], "node-a", features=FeatureGates.for_version("1.36")
    )
    assert leaky.outcome == "unschedulable"
    assert leaky.upstream_bug == "kubernetes/kubernetes#140436"
    assert any("backtracks" in note for note in leaky.notes)
