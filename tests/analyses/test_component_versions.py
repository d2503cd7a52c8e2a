"""Where each component's version is read in a Snapshot, and that odd input yields nothing."""

from __future__ import annotations

import copy
from typing import Any

from dradiag.analyses.component_versions import component_versions, image_tag
from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot, SourceInfo
from dradiag.snapshot.normalize import normalize


def _snap(*objs: dict[str, Any], source: SourceInfo | None = None) -> Snapshot:
    from dradiag.snapshot.normalize import kind_of

    objects: dict[Kind, list[Any]] = {}
    for obj in objs:
        kind = kind_of(obj)
        assert kind is not None
        objects.setdefault(kind, []).append(normalize(kind, copy.deepcopy(obj)))
    coverage = {k: KindRecord(kind=k, coverage=Coverage.COLLECTED) for k in Kind}
    return Snapshot(objects=objects, logs=[], coverage=coverage, source=source or SourceInfo())


def _node(name: str, **info: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"nodeInfo": info},
    }


def _pod(
    name: str, ns: str, image: str, *, container: str = "gpus", node: str = "n1", **meta: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": {"nodeName": node, "containers": [{"name": container, "image": image}]},
    }


def _raws(snapshot: Snapshot, component: str, node: str | None = None) -> list[str]:
    return [cv.raw for cv in component_versions(snapshot, component, node)]


def test_kubelet_and_runtime_versions_per_node() -> None:
    snap = _snap(
        _node(
            "n1",
            kubeletVersion="v1.34.1-eks-3cfe0ce",
            containerRuntimeVersion="containerd://1.7.27",
        ),
        _node("n2", kubeletVersion="v1.35.0", containerRuntimeVersion="cri-o://1.30.4"),
        _node("n3", kubeletVersion="garbage"),
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n4"},
            "status": {"nodeInfo": "x"},
        },
    )
    assert _raws(snap, "kubelet") == ["v1.34.1-eks-3cfe0ce", "v1.35.0"]
    assert _raws(snap, "kubelet", "n2") == ["v1.35.0"]
    assert _raws(snap, "kubelet", "missing") == []
    assert _raws(snap, "containerd") == ["1.7.27"] and _raws(snap, "cri-o") == ["1.30.4"]
    (cv,) = component_versions(snap, "kubelet", "n1")
    assert (cv.version.major, cv.version.minor, cv.version.patch) == (1, 34, 1)
    assert cv.ref == "Node n1 .status.nodeInfo.kubeletVersion" and cv.node == "n1"


def test_control_plane_from_static_pod_then_api_server_version() -> None:
    pod = _pod(
        "kube-scheduler-cp-1",
        "kube-system",
        "registry.k8s.io/kube-scheduler:v1.34.2",
        container="kube-scheduler",
    )
    assert _raws(_snap(pod), "kube-scheduler") == ["v1.34.2"]
    git = SourceInfo(server_version="1.34", server_git_version="v1.34.3-gke.100")
    (cv,) = component_versions(_snap(source=git), "kube-scheduler")
    assert cv.raw == "v1.34.3-gke.100" and "API server" in cv.note
    (api,) = component_versions(_snap(source=git), "kube-apiserver")
    assert api.note == ""
    (minor,) = component_versions(_snap(source=SourceInfo(server_version="1.34")), "kube-scheduler")
    assert minor.version.patch is None
    assert component_versions(_snap(), "kube-scheduler") == []


def test_nvidia_driver_from_image_then_labels_and_gpu_driver_from_slices() -> None:
    plugin = _pod(
        "nvidia-dra-driver-gpu-kubelet-plugin-abcde",
        "nvidia-dra-driver-gpu",
        "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.8.1",
        labels={"nvidia-dra-driver-gpu-component": "kubelet-plugin"},
    )
    (cv,) = component_versions(_snap(plugin), "nvidia-dra-driver", "n1")
    assert cv.raw == "v25.8.1" and (cv.version.major, cv.version.minor) == (0, 2)
    by_chart = _pod(
        "dra-driver-nvidia-gpu-kubelet-plugin-abcde",
        "dra-driver-nvidia-gpu",
        "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu@sha256:0d1e",
        labels={
            "dra-driver-nvidia-gpu-component": "kubelet-plugin",
            "helm.sh/chart": "dra-driver-nvidia-gpu-0.4.0",
        },
    )
    assert _raws(_snap(by_chart), "nvidia-dra-driver") == ["0.4.0"]
    assert _raws(_snap(plugin), "nvidia-dra-driver", "n2") == []
    slc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu.nvidia.com-a"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"driverVersion": {"version": "580.65.6"}}},
                {"name": "gpu-1", "attributes": {"driverVersion": {"version": "580.65.6"}}},
                {"name": "gpu-2", "attributes": {"driverVersion": {"string": "junk"}}},
            ],
        },
    }
    assert _raws(_snap(slc), "nvidia-gpu-driver", "n1") == ["580.65.6"]


def test_image_tags() -> None:
    assert image_tag("registry:5000/a/b:v1.2.3@sha256:ff") == "v1.2.3"
    assert image_tag("registry:5000/a/b") is None
    assert image_tag("b:latest") == "latest" and image_tag(None) is None
