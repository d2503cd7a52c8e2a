"""Which version of each component a Snapshot shows, and where it was read: pure look-ups.

Known-issue rules (``rules/known-issues.yaml``) need the version of the component a bug
lives in, per node where the component runs per node:

- ``kubelet``: the Node's ``status.nodeInfo.kubeletVersion``;
- ``containerd`` / ``cri-o``: the Node's ``status.nodeInfo.containerRuntimeVersion``
  (``containerd://1.7.27``, ``cri-o://1.30.4``);
- ``kube-scheduler`` / ``kube-apiserver``: the image tag of its static pod in
  ``kube-system`` when pods there were read; else the API server's ``gitVersion``
  (the scheduler is assumed to run the control plane's version, and the evidence says
  so); else the API server's ``major.minor``, which decides only a range covering the
  whole minor;
- ``nvidia-dra-driver``: the kubelet-plugin pod's image tag, else its
  ``app.kubernetes.io/version`` or ``helm.sh/chart`` label (nvidia-driver-facts §5.1);
- ``nvidia-gpu-driver``: the ``driverVersion`` attribute the gpu.nvidia.com plugin
  publishes on the node's devices.

Nothing here raises on odd input: a missing or junk version is simply not returned.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.rulebook.versions import Version, parse_component_version
from dradiag.snapshot.model import K8sObject, Kind, Snapshot, name_of, namespace_of

CONTROL_PLANE = ("kube-scheduler", "kube-apiserver")
_RUNTIME_PREFIX = {"containerd": "containerd://", "cri-o": "cri-o://"}
_CHART_VERSION = re.compile(r"-v?(\d+\.\d+\.\d+[0-9A-Za-z.+-]*)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentVersion:
    """One component's version as read from one object."""

    component: str
    version: Version
    """Normalized for comparison (``rulebook/versions.normalize_version``)."""
    raw: str
    """The text as the object holds it (``v1.34.1-eks-3cfe0ce``)."""
    ref: str
    """Where it was read, to quote as evidence (``Node gpu-1 .status.nodeInfo.kubeletVersion``)."""
    node: str | None = None
    note: str = ""
    """How it was inferred, when not read from the component itself."""


def _version(component: str, raw: Any, ref: str, node: str | None, note: str = "") -> list[Any]:
    if not isinstance(raw, str) or not raw.strip():
        return []
    version = parse_component_version(component, raw)
    if version is None:
        return []
    return [
        ComponentVersion(
            component=component, version=version, raw=raw.strip(), ref=ref, node=node, note=note
        )
    ]


def image_tag(image: Any) -> str | None:
    """``registry:5000/a/b:v1.2.3@sha256:...`` -> ``v1.2.3``; None without a tag."""
    if not isinstance(image, str):
        return None
    image = image.split("@", 1)[0]
    name, sep, tag = image.rpartition(":")
    if not sep or "/" in tag or not name:
        return None
    return tag or None


def _node_info(node: K8sObject) -> Mapping[str, Any]:
    info = (node.get("status") or {}).get("nodeInfo")
    return info if isinstance(info, Mapping) else {}


def _nodes(snapshot: Snapshot, node: str | None) -> list[K8sObject]:
    if node is not None:
        found = snapshot.node(node)
        return [found] if found is not None else []
    return sorted(snapshot.nodes, key=name_of)


def _from_nodes(snapshot: Snapshot, component: str, node: str | None) -> list[ComponentVersion]:
    out: list[ComponentVersion] = []
    for obj in _nodes(snapshot, node):
        info, name = _node_info(obj), name_of(obj)
        if component == "kubelet":
            ref = f"Node {name} .status.nodeInfo.kubeletVersion"
            out += _version(component, info.get("kubeletVersion"), ref, name)
            continue
        raw = info.get("containerRuntimeVersion")
        prefix = _RUNTIME_PREFIX[component]
        if isinstance(raw, str) and raw.startswith(prefix):
            ref = f"Node {name} .status.nodeInfo.containerRuntimeVersion"
            out += _version(component, raw[len(prefix) :], ref, name)
    return out


def _containers(pod: K8sObject) -> list[Mapping[str, Any]]:
    return [c for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, Mapping)]


def _control_plane(snapshot: Snapshot, component: str) -> list[ComponentVersion]:
    out: list[ComponentVersion] = []
    # ``mentioning`` decodes only the pods whose text holds the name: reading every pod of
    # a 100,000-pod --from input for two static pods would undo its deferred loading.
    for pod in snapshot.mentioning(Kind.POD, component):
        if namespace_of(pod) != "kube-system":
            continue
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get("component") != component and not name_of(pod).startswith(component + "-"):
            continue
        for c in _containers(pod):
            if c.get("name") != component and len(_containers(pod)) > 1:
                continue
            tag = image_tag(c.get("image"))
            ref = f"Pod kube-system/{name_of(pod)} container {c.get('name')} image"
            out += _version(component, tag, ref, str((pod.get("spec") or {}).get("nodeName") or ""))
    if out:
        return out
    source = snapshot.source
    git = getattr(source, "server_git_version", None)
    note = (
        ""
        if component == "kube-apiserver"
        else "assumed from the API server's version: the control plane runs one version"
    )
    if git:
        return _version(component, git, "API server /version gitVersion", None, note)
    if source.server_version:
        return _version(component, source.server_version, "API server /version", None, note)
    return []


_LAST_CONTROL_PLANE: list[tuple[Snapshot, dict[str, list[ComponentVersion]]]] = []
"""The control-plane readings of the last Snapshot asked about. Finding them walks every
pod, and a scan asks once per claim; one entry, compared by identity, so a Snapshot is
never confused with another and at most one is kept alive."""


def _control_plane_cached(snapshot: Snapshot, component: str) -> list[ComponentVersion]:
    if not _LAST_CONTROL_PLANE or _LAST_CONTROL_PLANE[0][0] is not snapshot:
        _LAST_CONTROL_PLANE[:] = [(snapshot, {})]
    cache = _LAST_CONTROL_PLANE[0][1]
    if component not in cache:
        cache[component] = _control_plane(snapshot, component)
    return cache[component]


def _plugin_pods(snapshot: Snapshot, node: str | None) -> list[K8sObject]:
    pods = (
        snapshot.pods_on_node(node)
        if node is not None
        else snapshot.mentioning(Kind.POD, "kubelet-plugin")
    )
    return sorted(
        (p for p in pods if ph.is_plugin_pod(p)), key=lambda p: (namespace_of(p), name_of(p))
    )


def _dra_driver(snapshot: Snapshot, component: str, node: str | None) -> list[ComponentVersion]:
    out: list[ComponentVersion] = []
    for pod in _plugin_pods(snapshot, node):
        where = str((pod.get("spec") or {}).get("nodeName") or "") or None
        key = f"{namespace_of(pod)}/{name_of(pod)}"
        found: list[ComponentVersion] = []
        containers = _containers(pod)
        preferred = [c for c in containers if c.get("name") == ph.GPU_CONTAINER] or containers
        for c in preferred[:1]:
            ref = f"Pod {key} container {c.get('name')} image"
            found = _version(component, image_tag(c.get("image")), ref, where)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if not found:
            ref = f"Pod {key} label app.kubernetes.io/version"
            found = _version(component, labels.get("app.kubernetes.io/version"), ref, where)
        if not found:
            chart = labels.get("helm.sh/chart")
            m = _CHART_VERSION.search(chart) if isinstance(chart, str) else None
            ref = f"Pod {key} label helm.sh/chart"
            found = _version(component, m.group(1) if m else None, ref, where)
        out += found
    return out


def _gpu_driver(snapshot: Snapshot, component: str, node: str | None) -> list[ComponentVersion]:
    out: list[ComponentVersion] = []
    seen: set[tuple[str, str]] = set()
    for slc in snapshot.slices_for(driver="gpu.nvidia.com", node=node):
        spec = slc.get("spec") or {}
        where = str(spec.get("nodeName") or "") or None
        for dev in spec.get("devices") or ():
            attrs = (dev or {}).get("attributes") if isinstance(dev, Mapping) else None
            if not isinstance(attrs, Mapping):
                continue
            value = attrs.get("driverVersion") or attrs.get("gpu.nvidia.com/driverVersion")
            raw = value.get("version") if isinstance(value, Mapping) else None
            if not isinstance(raw, str) or (str(where), raw) in seen:
                continue
            seen.add((str(where), raw))
            ref = f"ResourceSlice {name_of(slc)} device {dev.get('name')} attribute driverVersion"
            out += _version(component, raw, ref, where)
    return out


def component_versions(
    snapshot: Snapshot, component: str, node: str | None = None
) -> list[ComponentVersion]:
    """Every reading of ``component`` (on ``node`` for per-node components), sorted by
    node; empty when the snapshot shows none. Control-plane components ignore ``node``."""
    if component == "kubelet" or component in _RUNTIME_PREFIX:
        return _from_nodes(snapshot, component, node)
    if component in CONTROL_PLANE:
        return list(_control_plane_cached(snapshot, component))
    if component == "nvidia-dra-driver":
        return _dra_driver(snapshot, component, node)
    if component == "nvidia-gpu-driver":
        return _gpu_driver(snapshot, component, node)
    return []
