"""Benchmark: explain a 4-partition claim across a 1,000-node DynamicMIG fleet, and inventory it.

Fleet: 1,000 nodes x 8 H100 in DynamicMIG (split model: one counters slice plus one slice
per GPU, 19 devices per GPU: the full GPU and 18 MIG placements), with about 60% of each
GPU's memory slices held by 1g.10gb partitions of other claims. The claim asks for four
1g.10gb partitions with ``matchAttribute: gpu.nvidia.com/parentUUID`` (same GPU).
Targets (issue #4): both under 2 s. Run by hand: ``.venv/bin/python bench/allocator.py``.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dradiag.analyses.allocation import FeatureGates, explain_across_nodes  # noqa: E402
from dradiag.analyses.inventory import build_inventory  # noqa: E402
from dradiag.snapshot.model import Kind, Snapshot  # noqa: E402

DRIVER = "gpu.nvidia.com"
PROFILES = (
    ("1g.10gb", 19, 1, (0, 1, 2, 3, 4, 5, 6), "10Gi", 16),
    ("1g.20gb", 15, 2, (0, 2, 4, 6), "20Gi", 16),
    ("2g.20gb", 14, 2, (0, 2, 4), "20Gi", 32),
    ("3g.40gb", 9, 4, (0, 4), "40Gi", 48),
    ("4g.40gb", 5, 4, (0,), "40Gi", 64),
    ("7g.80gb", 0, 8, (0,), "80Gi", 112),
)


def gpu_devices(node: str, minor: int) -> list[dict[str, Any]]:
    uuid = f"GPU-{abs(hash((node, minor))) % 10**12:012d}-0000-0000-0000-000000000000"
    base = {
        "architecture": {"string": "Hopper"},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.126.20"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + minor:02x}:00.0"},
    }
    cset = f"gpu-{minor}-counter-set"
    full = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
    full.update({"memory": {"value": "80Gi"}, "multiprocessors": {"value": "112"}})
    devices = [
        {
            "name": f"gpu-{minor}",
            "attributes": {**base, "type": {"string": "gpu"}, "uuid": {"string": uuid}},
            "capacity": {"memory": {"value": "80Gi"}},
            "consumesCounters": [{"counterSet": cset, "counters": full}],
        }
    ]
    for profile, gi, size, placements, memory, sms in PROFILES:
        for start in placements:
            counters = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}
            counters.update({"memory": {"value": memory}, "multiprocessors": {"value": str(sms)}})
            devices.append(
                {
                    "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-{gi}-{start}",
                    "attributes": {
                        **base,
                        "type": {"string": "mig"},
                        "parentUUID": {"string": uuid},
                        "profile": {"string": profile},
                    },
                    "capacity": {"memory": {"value": memory}},
                    "consumesCounters": [{"counterSet": cset, "counters": counters}],
                }
            )
    return devices


def fleet(nodes: int = 1000, gpus: int = 8, seed: int = 4) -> Snapshot:
    rng = random.Random(seed)
    slices: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    node_objs = []
    for n in range(nodes):
        node = f"h100-{n:04d}"
        node_objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        pool = {"name": node, "generation": 1, "resourceSliceCount": gpus + 1}
        counter_sets = []
        for m in range(gpus):
            counters = {f"memory-slice-{i}": {"value": "1"} for i in range(8)}
            counters.update({"memory": {"value": "80Gi"}, "multiprocessors": {"value": "112"}})
            counter_sets.append({"name": f"gpu-{m}-counter-set", "counters": counters})
        slices.append(
            {
                "metadata": {"name": f"00000-gpu.nvidia.com-{node}-c"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": dict(pool),
                    "sharedCounters": counter_sets,
                },
            }
        )
        results = []
        for m in range(gpus):
            slices.append(
                {
                    "metadata": {"name": f"{m + 1:05x}-gpu.nvidia.com-{node}-d"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": node,
                        "pool": dict(pool),
                        "devices": gpu_devices(node, m),
                    },
                }
            )
            # ~60% of the memory slices in use: 4 or 5 (a few nodes 3) 1g partitions per GPU.
            used = rng.choice((3, 4, 5, 5)) if n % 10 == 0 else rng.choice((4, 5, 5))
            for start in sorted(rng.sample(range(7), used)):
                results.append(
                    {
                        "request": "r",
                        "driver": DRIVER,
                        "pool": node,
                        "device": f"gpu-{m}-mig-1g10gb-19-{start}",
                    }
                )
        claims.append(
            {
                "metadata": {"name": f"jobs-{node}", "namespace": "batch"},
                "spec": {"devices": {"requests": []}},
                "status": {"allocation": {"devices": {"results": results}}},
            }
        )
    classes = [
        {
            "metadata": {"name": "mig.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"
                        }
                    }
                ]
            },
        }
    ]
    return Snapshot(
        objects={
            Kind.RESOURCE_SLICE: slices,
            Kind.DEVICE_CLASS: classes,
            Kind.RESOURCE_CLAIM: claims,
            Kind.NODE: node_objs,
        }
    )


CLAIM = {
    "metadata": {"name": "four-on-one-gpu", "namespace": "ml"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "parts",
                    "exactly": {
                        "deviceClassName": "mig.nvidia.com",
                        "count": 4,
                        "selectors": [
                            {
                                "cel": {
                                    "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
                                }
                            }
                        ],
                    },
                }
            ],
            "constraints": [{"matchAttribute": "gpu.nvidia.com/parentUUID"}],
        }
    },
}


def main() -> None:
    t0 = time.perf_counter()
    snapshot = fleet()
    t1 = time.perf_counter()
    devices = sum(len(s["spec"].get("devices", [])) for s in snapshot.slices)
    print(
        f"fleet: {len(snapshot.node_names())} nodes, {len(snapshot.slices)} slices, {devices} devices, built in {t1 - t0:.2f} s"
    )
    for version in ("1.36", "1.37"):
        gates = FeatureGates.for_version(version)
        t2 = time.perf_counter()
        explanation = explain_across_nodes(snapshot, [CLAIM], features=gates)
        t3 = time.perf_counter()
        print(
            f"explain 4x1g.10gb + matchAttribute parentUUID across all nodes ({version} allocator): {t3 - t2:.2f} s "
            f"(target < 2 s); fits on {len(explanation.fitting_nodes)} nodes"
        )
        for line in explanation.summary[:3]:
            print("   ", line)
    t4 = time.perf_counter()
    inventory = build_inventory(snapshot, features=FeatureGates.for_version("1.36"))
    t5 = time.perf_counter()
    groups = sum(len(n.groups) for n in inventory.nodes)
    print(
        f"inventory: {t5 - t4:.2f} s (target < 2 s); {len(inventory.nodes)} nodes, {groups} device groups"
    )


if __name__ == "__main__":
    main()
