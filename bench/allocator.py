"""Benchmark: explain a 4-partition claim across a 1,000-node DynamicMIG fleet, and inventory it.

Fleet: 1,000 nodes x 8 H100 in DynamicMIG (split model: one counters slice plus one slice
per GPU, 19 devices per GPU: the full GPU and 18 MIG placements), with about 60% of each
GPU's memory slices held by 1g.10gb partitions of other claims. The claim asks for four
1g.10gb partitions with ``matchAttribute: gpu.nvidia.com/parentUUID`` (same GPU).
Targets (issue #4): both under 2 s. Run by hand: ``.venv/bin/python bench/allocator.py``.

Each step prints wall and CPU time (``time.process_time``: comparable on a loaded machine)
and the load average. Analyses of one snapshot share pool indexes, device records and
selector results (``allocation.search.SnapshotStore``), so the first explanation is the
cold one; the inventory is timed both after the explanations and cold (store dropped).
As the CLI's loaders do, the fleet is frozen into the permanent GC generation once built.
"""

from __future__ import annotations

import functools
import gc
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dradiag.analyses.allocation import FeatureGates, explain_across_nodes  # noqa: E402
from dradiag.analyses.allocation.search import forget_snapshots  # noqa: E402
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
    base: dict[str, Any] = {
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
    devices: list[dict[str, Any]] = [
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


def _timed(label: str, step: Callable[[], Any]) -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    result = step()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label}: {wall:.2f} s wall, {cpu:.2f} s CPU (load {os.getloadavg()[0]:.1f})")
    return result


def main() -> None:
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    t0 = time.perf_counter()
    snapshot = fleet()
    gc.collect()
    gc.freeze()
    t1 = time.perf_counter()
    devices = sum(len(s["spec"].get("devices", [])) for s in snapshot.slices)
    print(
        f"fleet: {len(snapshot.node_names())} nodes, {len(snapshot.slices)} slices, {devices} devices, built in {t1 - t0:.2f} s"
    )
    for version, note in (
        ("1.36", "cold"),
        ("1.37", "after 1.36: pools and device records shared"),
        ("1.36", "warm: as for the next claim of a scan"),
    ):
        gates = FeatureGates.for_version(version)
        explanation = _timed(
            f"explain 4x1g.10gb + matchAttribute parentUUID across all nodes ({version} "
            f"allocator, {note}; target < 2 s)",
            functools.partial(explain_across_nodes, snapshot, [CLAIM], features=gates),
        )
        print(f"    fits on {len(explanation.fitting_nodes)} nodes")
        for line in explanation.summary[:3]:
            print("   ", line)
    gates = FeatureGates.for_version("1.36")
    inventory = _timed(
        "inventory (after the explanations; target < 2 s)",
        lambda: build_inventory(snapshot, features=gates),
    )
    forget_snapshots()
    inventory = _timed(
        "inventory (cold; target < 2 s)", lambda: build_inventory(snapshot, features=gates)
    )
    groups = sum(len(n.groups) for n in inventory.nodes)
    print(f"    {len(inventory.nodes)} nodes, {groups} device groups")
    print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
