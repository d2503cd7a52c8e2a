"""Inventory on gpu.nvidia.com-shaped slices: counts per type/profile, holders, fits, taints."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from dradiag.analyses.allocation import FeatureGates
from dradiag.analyses.inventory import build_inventory
from dradiag.snapshot.model import Kind, Snapshot

_spec = importlib.util.spec_from_file_location(
    "allocation_fixtures", Path(__file__).parent / "allocation" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
nv: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nv)


def group(inv: Any, kind: str, profile: str | None = None) -> Any:
    (found,) = [g for g in inv.nodes[0].groups if g.type == kind and g.profile == profile]
    return found


def test_dynamic_mig_counts_holders_and_fits() -> None:
    holder = nv.claim(
        "half",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="team",
        allocated=[nv.result("node-h", "gpu-0-mig-3g40gb-9-0")],
    )
    snap = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: nv.h100_split("node-h"),
            Kind.RESOURCE_CLAIM: [holder],
            Kind.NODE: [nv.node("node-h")],
        }
    )
    inv = build_inventory(snap, features=FeatureGates.for_version("1.36"))
    three = group(inv, "mig", "3g.40gb")
    assert (three.published, three.allocated, three.free, three.fits) == (4, 1, 3, 3)
    assert three.holders == {"team/half": ["gpu-0-mig-3g40gb-9-0"]}
    one = group(inv, "mig", "1g.10gb")
    # The four 1g placements under the allocated 3g partition are held, not free.
    assert (one.published, one.allocated, one.held, one.free, one.fits) == (14, 0, 4, 10, 10)
    full = group(inv, "gpu")
    # GPU 0 has a partition allocated: the whole GPU is held, not free.
    assert (full.published, full.allocated, full.held, full.free, full.fits) == (2, 0, 1, 1, 1)
    doc = inv.to_dict()
    assert doc["schemaVersion"] == "dradiag.inventory/v1"
    gpu_doc = next(d for d in doc["nodes"][0]["devices"] if d["type"] == "gpu")
    assert (gpu_doc["free"], gpu_doc["held"]) == (1, 1)


def test_a_gpu_whose_counters_a_partition_consumes_is_not_free() -> None:
    # The whole of GPU 1 goes to one 7g.80gb partition: GPU 1 itself and every other
    # placement of it are held; only GPU 0 and its placements stay free.
    holder = nv.claim(
        "big",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="team",
        allocated=[nv.result("node-h", "gpu-1-mig-7g80gb-0-0")],
    )
    snap = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: nv.h100_split("node-h"),
            Kind.RESOURCE_CLAIM: [holder],
            Kind.NODE: [nv.node("node-h")],
        }
    )
    inv = build_inventory(snap, features=FeatureGates.for_version("1.36"))
    full = group(inv, "gpu")
    assert (full.published, full.allocated, full.free) == (2, 0, 1)
    one = group(inv, "mig", "1g.10gb")
    assert (one.published, one.free, one.fits) == (14, 7, 7)
    # With the gate off the allocator ignores counters: nothing is held.
    off = build_inventory(
        snap,
        features=FeatureGates.parse(
            "DRAPartitionableDevices=false", base=FeatureGates.for_version("1.36")
        ),
    )
    assert group(off, "gpu").free == 2


def test_static_mig_and_tainted_devices_called_out() -> None:
    slices = nv.a100_static_mig("node-a")
    slices[0]["spec"]["devices"][0]["taints"] = [
        {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}
    ]
    snap = Snapshot(objects={Kind.RESOURCE_SLICE: slices, Kind.NODE: [nv.node("node-a")]})
    inv = build_inventory(snap, features=FeatureGates.for_version("1.36"))
    assert group(inv, "gpu").tainted == 1
    assert group(inv, "mig", "1g.5gb").fits is None  # static MIG: no counters
    assert inv.nodes[0].tainted == [
        {
            "device": "gpu-1",
            "pool": "node-a",
            "driver": "gpu.nvidia.com",
            "taints": ["gpu.nvidia.com/gpu-lost=:NoSchedule"],
        }
    ]


def test_incomplete_pool_is_excluded_and_reported() -> None:
    slices = nv.h100_split("node-h")[1:]  # the counters slice is missing
    inv = build_inventory(
        Snapshot(objects={Kind.RESOURCE_SLICE: slices}), features=FeatureGates.for_version("1.36")
    )
    assert inv.nodes[0].groups == []
    assert inv.nodes[0].pools == [
        {"driver": "gpu.nvidia.com", "pool": "node-h", "state": "incomplete"}
    ]
    assert [p["kind"] for p in inv.problems] == ["incomplete", "invalid"]


V134_PARTITIONABLE = FeatureGates.parse(
    "DRAPartitionableDevices=true", base=FeatureGates.for_version("1.34")
)


def test_134_undeclared_counter_set_is_an_invalid_pool_not_a_crash() -> None:
    # ≤1.34 counters live beside their devices. A partition consuming (even zero of) a
    # counter set its slice does not declare used to raise KeyError in `fits`.
    broken = nv.h100_combined("node-b", gpus=1)
    broken[0]["spec"]["devices"][1]["consumesCounters"].append(
        {"counterSet": "gpu-9-counter-set", "counters": {"memory": {"value": "0"}}}
    )
    snap = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: nv.h100_combined("node-a", gpus=1) + broken,
            Kind.NODE: [nv.node("node-a"), nv.node("node-b")],
        }
    )
    inv = build_inventory(snap, features=V134_PARTITIONABLE)
    good, bad = inv.nodes
    assert good.pools == [{"driver": "gpu.nvidia.com", "pool": "node-a", "state": "ok"}]
    assert bad.pools == [{"driver": "gpu.nvidia.com", "pool": "node-b", "state": "invalid"}]
    assert bad.groups == []
    assert [(p["pool"], p["kind"], p["reason"]) for p in inv.problems] == [
        (
            "node-b",
            "invalid",
            "slice node-b-gpu.nvidia.com-c0: counter set gpu-9-counter-set not found",
        )
    ]
    one = [g for g in good.groups if g.profile == "1g.10gb"]
    assert [(g.published, g.fits) for g in one] == [(7, 7)]
    assert inv.to_dict()["nodes"][1]["pools"][0]["state"] == "invalid"


def test_134_undeclared_counter_is_reported_too() -> None:
    slices = nv.h100_combined("node-a", gpus=1)
    uses = slices[0]["spec"]["devices"][2]["consumesCounters"][0]
    uses["counters"]["engines"] = {"value": "1"}
    snap = Snapshot(objects={Kind.RESOURCE_SLICE: slices, Kind.NODE: [nv.node("node-a")]})
    inv = build_inventory(snap, features=V134_PARTITIONABLE)
    assert inv.nodes[0].pools[0]["state"] == "invalid"
    (problem,) = inv.problems
    assert problem["reason"] == (
        "slice node-a-gpu.nvidia.com-c0: counter engines not found in counter set gpu-0-counter-set"
    )


def test_fits_never_raises_on_counters_nobody_declares() -> None:
    # Defence in depth: whatever reaches the first-fit count, a zero consumption of an
    # undeclared counter set or counter fits and takes nothing.
    from dradiag.analyses.allocation.candidates import device_entries
    from dradiag.analyses.allocation.counters import CounterState
    from dradiag.analyses.inventory import _fits
    from dradiag.analyses.pools import PoolIndex

    slices = nv.h100_split("node-h", gpus=1)
    device = slices[1]["spec"]["devices"][1]
    device["consumesCounters"] = [
        {"counterSet": "nowhere", "counters": {"memory": {"value": "0"}}},
        {"counterSet": "gpu-0-counter-set", "counters": {"nothing": {"value": "0"}}},
    ]
    (pool,) = PoolIndex(slices, legacy=True).gather(nv.node("node-h"))
    entries = [e for e in device_entries(pool) if e.name == device["name"]]
    counters = CounterState(lambda _ref: False, lambda p: device_entries(p))
    assert _fits(counters, entries) == 1
