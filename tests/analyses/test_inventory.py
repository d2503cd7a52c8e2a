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
    assert (one.published, one.allocated, one.free, one.fits) == (14, 0, 14, 10)
    full = group(inv, "gpu")
    assert (full.published, full.fits) == (2, 1)
    doc = inv.to_dict()
    assert doc["schemaVersion"] == "dradiag.inventory/v1"


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
