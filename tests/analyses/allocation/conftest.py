"""Realistic gpu.nvidia.com objects for allocator tests (nvidia-driver-facts §1, §9).

Shapes and values follow the reference: legacy slices with full GPUs and static MIG
devices (memorySliceN capacities, MIG UUIDs), DynamicMIG slices with per-GPU counter
sets ``gpu-<m>-counter-set`` (memory-slice-0..7) in the split (≥1.35: one counters-only
slice plus one per GPU) and combined (<1.35: counters and devices together) models,
VFIO devices, health taints. Builders are exposed through the ``nv`` fixture.
"""

from __future__ import annotations

import zlib
from types import SimpleNamespace
from typing import Any

import pytest

DRIVER = "gpu.nvidia.com"

# (profile, GI profile id, memory slices, placements, memory, multiprocessors)
H100_PROFILES = (
    ("1g.10gb", 19, 1, (0, 1, 2, 3, 4, 5, 6), "10Gi", 16),
    ("1g.20gb", 15, 2, (0, 2, 4, 6), "20Gi", 16),
    ("2g.20gb", 14, 2, (0, 2, 4), "20Gi", 32),
    ("3g.40gb", 9, 4, (0, 4), "40Gi", 48),
    ("4g.40gb", 5, 4, (0,), "40Gi", 64),
    ("7g.80gb", 0, 8, (0,), "80Gi", 112),
)


def common_attributes(product: str, arch: str, cc: str, pci: str) -> dict[str, Any]:
    return {
        "architecture": {"string": arch},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": cc},
        "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.126.20"},
        "productName": {"string": product},
        "resource.kubernetes.io/pciBusID": {"string": pci},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:64"},
    }


def gpu_uuid(node: str, minor: int) -> str:
    digest = zlib.crc32(f"{node}/{minor}".encode()) % 10**12
    return f"GPU-2fa81118-5a5f-aa66-7660-{digest:012d}"


def h100_devices(node: str, minor: int) -> list[dict[str, Any]]:
    """Full GPU plus every DynamicMIG partition of one H100 (no MIG uuid: abstract)."""
    pci = f"0000:{0x65 + minor:02x}:00.0"
    base = common_attributes("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", pci)
    cset = f"gpu-{minor}-counter-set"
    uuid = gpu_uuid(node, minor)
    full_counters = {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "112"}}
    full_counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(8)})
    devices = [
        {
            "name": f"gpu-{minor}",
            "attributes": {**base, "type": {"string": "gpu"}, "uuid": {"string": uuid}},
            "capacity": {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "112"}},
            "consumesCounters": [{"counterSet": cset, "counters": full_counters}],
        }
    ]
    for profile, gi, size, placements, memory, sms in H100_PROFILES:
        for start in placements:
            counters = {"memory": {"value": memory}, "multiprocessors": {"value": str(sms)}}
            counters.update(
                {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}
            )
            devices.append(
                {
                    "name": f"gpu-{minor}-mig-{profile.replace('.', '')}-{gi}-{start}",
                    "attributes": {
                        **base,
                        "type": {"string": "mig"},
                        "parentUUID": {"string": uuid},
                        "profile": {"string": profile},
                    },
                    "capacity": {
                        "memory": {"value": memory},
                        "multiprocessors": {"value": str(sms)},
                    },
                    "consumesCounters": [{"counterSet": cset, "counters": counters}],
                }
            )
    return devices


def counter_set(minor: int) -> dict[str, Any]:
    counters = {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "112"}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in range(8)})
    return {"name": f"gpu-{minor}-counter-set", "counters": counters}


def h100_split(node: str, gpus: int = 2, generation: int = 1) -> list[dict[str, Any]]:
    """Kubernetes ≥1.35 split model: counters-only slice, then one slice per GPU."""
    pool = {"name": node, "generation": generation, "resourceSliceCount": gpus + 1}
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"00000-gpu.nvidia.com-{node}-4lpks"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": dict(pool),
                "sharedCounters": [counter_set(m) for m in range(gpus)],
            },
        }
    ]
    for m in range(gpus):
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{m + 1:05x}-gpu.nvidia.com-{node}-9qz7m"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": dict(pool),
                    "devices": h100_devices(node, m),
                },
            }
        )
    return slices


def h100_combined(node: str, gpus: int = 2) -> list[dict[str, Any]]:
    """Kubernetes <1.35 combined model: per GPU one slice with its counter set and devices."""
    pool = {"name": node, "generation": 1, "resourceSliceCount": gpus}
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu.nvidia.com-c{m}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": dict(pool),
                "sharedCounters": [counter_set(m)],
                "devices": h100_devices(node, m),
            },
        }
        for m in range(gpus)
    ]


def a100_static_mig(node: str) -> list[dict[str, Any]]:
    """Legacy mode: one slice; GPU 0 in MIG mode (7 static 1g.5gb), GPU 1 a full GPU."""
    attrs0 = common_attributes("NVIDIA A100-PCIE-40GB", "Ampere", "8.0.0", "0000:65:00.0")
    attrs1 = common_attributes("NVIDIA A100-PCIE-40GB", "Ampere", "8.0.0", "0000:66:00.0")
    parent = gpu_uuid(node, 0)
    devices: list[dict[str, Any]] = [
        {
            "name": "gpu-1",
            "attributes": {
                **attrs1,
                "type": {"string": "gpu"},
                "uuid": {"string": gpu_uuid(node, 1)},
            },
            "capacity": {"memory": {"value": "40Gi"}},
        }
    ]
    for start in range(7):
        devices.append(
            {
                "name": f"gpu-0-mig-1g5gb-19-{start}",
                "attributes": {
                    **attrs0,
                    "type": {"string": "mig"},
                    "parentUUID": {"string": parent},
                    "profile": {"string": "1g.5gb"},
                    "uuid": {"string": f"MIG-1a2b3c4d-5e6f-7a8b-9c0d-{start:012d}"},
                },
                "capacity": {
                    "memory": {"value": "4864Mi"},
                    "multiprocessors": {"value": "14"},
                    f"memorySlice{start}": {"value": "1"},
                },
            }
        )
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"00000-gpu.nvidia.com-{node}-x7k2q"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": devices,
            },
        }
    ]


def vfio_slice(node: str) -> list[dict[str, Any]]:
    """PassthroughSupport: gpu-0 and its sibling gpu-vfio-0 (same PCI address)."""
    attrs = common_attributes("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "0000:65:00.0")
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"00000-gpu.nvidia.com-{node}-v1"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 3, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {
                            **attrs,
                            "type": {"string": "gpu"},
                            "uuid": {"string": gpu_uuid(node, 0)},
                        },
                        "capacity": {"memory": {"value": "40Gi"}},
                    },
                    {
                        "name": "gpu-vfio-0",
                        "attributes": {
                            "type": {"string": "vfio"},
                            "uuid": {"string": "8533fd84-02c8-5350-bd10-3cf08fc7bcd0"},
                            "deviceID": {"string": "0x20b0"},
                            "vendorID": {"string": "0x10de"},
                            "iommuFDEnabled": {"bool": True},
                            "productName": {"string": "GA100 [A100 SXM4 40GB]"},
                            "resource.kubernetes.io/pciBusID": {"string": "0000:65:00.0"},
                        },
                        "capacity": {"addressableMemory": {"value": "40Gi"}},
                    },
                ],
            },
        }
    ]


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


CLASSES = [
    device_class(
        "gpu.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    device_class(
        "mig.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    ),
    device_class(
        "vfio.gpu.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
    ),
]


def claim(
    name: str,
    requests: list[dict[str, Any]],
    *,
    namespace: str = "ml",
    constraints: list[dict[str, Any]] | None = None,
    allocated: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": requests}},
    }
    if constraints:
        obj["spec"]["devices"]["constraints"] = constraints
    if allocated is not None:
        obj["status"] = {"allocation": {"devices": {"results": allocated}}}
    return obj


def exactly(
    name: str, cls: str, *, count: int = 1, selectors: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if selectors:
        spec["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    spec.update(extra)
    return {"name": name, "exactly": spec}


def result(node: str, device: str, request: str = "r") -> dict[str, Any]:
    return {"request": request, "driver": DRIVER, "pool": node, "device": device}


def profile_selector(profile: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].profile == '{profile}'"


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


@pytest.fixture
def nv() -> SimpleNamespace:
    """The builders above, for tests in this folder."""
    return SimpleNamespace(
        DRIVER=DRIVER,
        CLASSES=CLASSES,
        h100_split=h100_split,
        h100_combined=h100_combined,
        h100_devices=h100_devices,
        a100_static_mig=a100_static_mig,
        vfio_slice=vfio_slice,
        claim=claim,
        exactly=exactly,
        result=result,
        profile_selector=profile_selector,
        node=node,
        device_class=device_class,
        gpu_uuid=gpu_uuid,
    )
