"""Builders of realistic cluster objects for the diagnosis, render and CLI tests.

Shapes and values follow the reference: slices as in nvidia-driver-facts §9.1 (A100,
legacy mode) and §9.3 (DynamicMIG names), the kubelet-plugin pod of §5.1 (both chart
generations), kubelet/scheduler event texts of k8s-dra-semantics §5 and §5.4 F. Each
builder returns a plain dict in the API's own shape, so the Snapshot normalizes it the
way it normalizes real input.
"""

from __future__ import annotations

import copy
from typing import Any

from dradiag.snapshot.model import (
    CollectionError,
    ContainerLog,
    Coverage,
    Kind,
    KindRecord,
    Snapshot,
    SourceInfo,
)

COLLECTED_AT = "2026-05-01T12:00:00Z"
NODE = "gpu-node-1"
CLAIM_UID = "3c8337ad-f366-4541-883d-30b9e99fd6be"
POD_UID = "9f1e2d3c-4b5a-4697-8877-665544332211"
GPU_UUID = "GPU-5e4c0c43-1111-2222-3333-444455556666"


def gpu_device(minor: int, uuid: str = GPU_UUID, bus: str = "0000:66:00.0") -> dict[str, Any]:
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "architecture": {"string": "Ampere"},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"},
            "productName": {"string": "NVIDIA A100-PCIE-40GB"},
            "resource.kubernetes.io/pciBusID": {"string": bus},
            "type": {"string": "gpu"},
            "uuid": {"string": uuid},
        },
        "capacity": {"memory": {"value": "40Gi"}},
    }


def resource_slice(
    node: str = NODE,
    devices: list[dict[str, Any]] | None = None,
    *,
    api_version: str = "resource.k8s.io/v1",
    generation: int = 1,
    count: int = 1,
    index: int = 0,
) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{index:05x}-gpu.nvidia.com-{node}-x7k2q",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": "n-1"}],
        },
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices if devices is not None else [gpu_device(0)],
        },
    }


def device_class(name: str = "gpu.nvidia.com", device_type: str = "gpu") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && "
                        f"device.attributes['gpu.nvidia.com'].type == '{device_type}'"
                    }
                }
            ]
        },
    }


def claim(
    name: str = "train-gpu",
    namespace: str = "ml",
    *,
    allocated: list[str] | None = None,
    reserved_for: list[tuple[str, str]] | None = None,
    class_name: str = "gpu.nvidia.com",
    uid: str = CLAIM_UID,
    node: str = NODE,
    selectors: list[str] | None = None,
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": "2026-05-01T11:00:00Z",
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": class_name,
                            **(
                                {"selectors": [{"cel": {"expression": e}} for e in selectors]}
                                if selectors
                                else {}
                            ),
                        },
                    }
                ]
            }
        },
        "status": {},
    }
    if allocated:
        obj["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        obj["status"]["allocation"] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": d}
                    for d in allocated
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    if reserved_for:
        obj["status"]["reservedFor"] = [
            {"resource": "pods", "name": n, "uid": u} for n, u in reserved_for
        ]
    return obj


def pod(
    name: str = "train-0",
    namespace: str = "ml",
    *,
    uid: str = POD_UID,
    claim_name: str | None = "train-gpu",
    template_name: str | None = None,
    node: str | None = NODE,
    state: str = "running",
    container_lists_claim: bool = True,
    scheduled_at: str = "2026-05-01T11:00:05Z",
    unschedulable_message: str | None = None,
) -> dict[str, Any]:
    """A workload pod; ``state`` is running | creating | pending | crashloop | create-error."""
    ref: dict[str, Any] = {"name": "gpu"}
    if claim_name and not template_name:
        ref["resourceClaimName"] = claim_name
    if template_name:
        ref["resourceClaimTemplateName"] = template_name
    container: dict[str, Any] = {"name": "trainer", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}
    if container_lists_claim:
        container["resources"] = {"claims": [{"name": "gpu"}]}
    status: dict[str, Any] = {"phase": "Pending", "conditions": []}
    if node:
        status["conditions"].append(
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled_at}
        )
    if state == "running":
        status["phase"] = "Running"
        status["startTime"] = scheduled_at
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-05-01T11:00:30Z"}},
                "containerID": "containerd://abc",
            }
        ]
    elif state == "creating":
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ]
    elif state == "create-error":
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "ready": False,
                "restartCount": 0,
                "state": {
                    "waiting": {
                        "reason": "CreateContainerError",
                        "message": "failed to create containerd container: CDI device injection "
                        "failed: unresolvable CDI devices k8s.gpu.nvidia.com/claim="
                        f"{CLAIM_UID}-gpu-0",
                    }
                },
            }
        ]
    elif state == "crashloop":
        status["phase"] = "Running"
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "ready": False,
                "restartCount": 6,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                "containerID": "containerd://abc",
            }
        ]
    if unschedulable_message:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": unschedulable_message,
                "lastTransitionTime": scheduled_at,
            }
        ]
    spec: dict[str, Any] = {"containers": [container], "resourceClaims": [ref]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "creationTimestamp": "2026-05-01T11:00:00Z",
        },
        "spec": spec,
        "status": status,
    }


def plugin_pod(
    node: str = NODE,
    *,
    chart: str = "dra-driver-nvidia-gpu",
    gpus_state: str = "running",
    restarts: int = 0,
    with_gpus: bool = True,
    init_done: bool = True,
) -> dict[str, Any]:
    """The kubelet-plugin pod of a chart generation (nvidia-driver-facts §5.1)."""
    statuses = []
    if with_gpus:
        if gpus_state == "running":
            state: dict[str, Any] = {"running": {"startedAt": "2026-05-01T10:00:00Z"}}
        elif gpus_state == "crashloop":
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}
        else:
            state = {"waiting": {"reason": "PodInitializing"}}
        statuses.append(
            {
                "name": "gpus",
                "ready": gpus_state == "running",
                "restartCount": restarts,
                "state": state,
                **(
                    {"lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}
                    if gpus_state == "crashloop"
                    else {}
                ),
            }
        )
    init_state = (
        {"terminated": {"exitCode": 0, "reason": "Completed"}}
        if init_done
        else {"running": {"startedAt": "2026-05-01T10:00:00Z"}}
    )
    containers = [
        {"name": "gpus", "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"}
    ]
    if not with_gpus:
        containers = [{"name": "compute-domains", "image": containers[0]["image"]}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{chart}-kubelet-plugin-x7k2q",
            "namespace": chart,
            "uid": f"plugin-{node}",
            "labels": {f"{chart}-component": "kubelet-plugin", "app.kubernetes.io/name": chart},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": f"{chart}-kubelet-plugin"}
            ],
        },
        "spec": {
            "nodeName": node,
            "containers": containers,
            "initContainers": [{"name": "init-container"}],
        },
        "status": {
            "phase": "Running" if init_done else "Pending",
            "initContainerStatuses": [{"name": "init-container", "state": init_state}],
            "containerStatuses": statuses,
        },
    }


def event(
    reason: str,
    message: str,
    *,
    kind: str = "Pod",
    name: str = "train-0",
    namespace: str = "ml",
    uid: str = POD_UID,
    last: str = "2026-05-01T11:59:00Z",
    count: int = 1,
    event_type: str = "Warning",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{abs(hash((reason, message))) % 10**12:x}",
            "namespace": namespace,
        },
        "involvedObject": {"kind": kind, "name": name, "namespace": namespace, "uid": uid},
        "reason": reason,
        "message": message,
        "type": event_type,
        "count": count,
        "firstTimestamp": "2026-05-01T11:01:00Z",
        "lastTimestamp": last,
    }


def snapshot(
    *,
    slices: list[dict[str, Any]] | None = None,
    classes: list[dict[str, Any]] | None = None,
    claims: list[dict[str, Any]] | None = None,
    templates: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    events: list[dict[str, Any]] | None = None,
    logs: list[ContainerLog] | None = None,
    unknown: tuple[Kind, ...] = (),
    errors: list[CollectionError] | None = None,
    collected_at: str | None = COLLECTED_AT,
) -> Snapshot:
    """A Snapshot as live collection would build it: every kind collected unless named."""
    from dradiag.snapshot.normalize import normalize

    objects = {
        Kind.RESOURCE_SLICE: slices if slices is not None else [resource_slice()],
        Kind.DEVICE_CLASS: classes if classes is not None else [device_class()],
        Kind.RESOURCE_CLAIM: claims or [],
        Kind.RESOURCE_CLAIM_TEMPLATE: templates or [],
        Kind.POD: pods or [],
        Kind.EVENT: events or [],
    }
    normalized = {k: [normalize(k, copy.deepcopy(o)) for o in v] for k, v in objects.items()}
    coverage = {
        k: KindRecord(
            kind=k,
            coverage=Coverage.UNKNOWN if k in unknown else Coverage.COLLECTED,
            reason="forbidden" if k in unknown else None,
            scope="cluster",
        )
        for k in Kind
    }
    return Snapshot(
        objects=normalized,
        logs=logs or [],
        coverage=coverage,
        errors=errors or [],
        source=SourceInfo(kind="live", context="test", collected_at=collected_at),
    )


def healthy_objects() -> dict[str, list[dict[str, Any]]]:
    """A running pod with its allocated, reserved claim and a healthy plugin."""
    return {
        "slices": [resource_slice()],
        "classes": [device_class()],
        "claims": [claim(allocated=["gpu-0"], reserved_for=[("train-0", POD_UID)])],
        "pods": [pod(), plugin_pod()],
    }


def write_input(
    directory: Any,
    *,
    objects: dict[str, list[dict[str, Any]]],
    logs: dict[str, str] | None = None,
    collection: dict[str, Any] | None = None,
) -> Any:
    """Write objects as a ``--from`` directory: one JSON List per kind, logs, collection.json.

    ``objects`` maps a file stem (``pods``, ``events``...) to objects; ``logs`` maps a
    bundle-style relative path (``logs/<ns>/<pod>/<container>.log``) to its text.
    """
    import json
    from pathlib import Path

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    for stem, items in objects.items():
        (root / f"{stem}.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
    for rel, text in (logs or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    record = collection or {
        "kinds": {
            k: {"coverage": "collected"}
            for k in (
                "ResourceSlice",
                "DeviceClass",
                "ResourceClaim",
                "Pod",
                "Node",
                "Event",
                "Log",
            )
        },
        "source": {"kind": "bundle", "collectedAt": COLLECTED_AT, "context": "test"},
    }
    (root / "collection.json").write_text(json.dumps(record))
    return root


def healthy_input(directory: Any) -> Any:
    """A ``--from`` directory of :func:`healthy_objects`."""
    objs = healthy_objects()
    return write_input(
        directory,
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
    )
