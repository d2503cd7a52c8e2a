"""Conversion of stored (v1-shaped) resource.k8s.io objects to the version a client asked for.

A real API server stores one version and converts on the way out, so a cluster that
serves only ``v1beta1`` hands out ``basic:`` devices and flat requests even for objects
created as ``v1``. The local server does the same, the inverse of
``dradiag.snapshot.normalize`` (k8s-dra-semantics §4.2), so the client's normalization
is exercised on realistic wire shapes:

- ``v1beta2``: the v1 layout under another apiVersion.
- ``v1beta1``: slice devices wrap their fields in ``basic``; ``nodeName``/``allNodes``
  are plain (``""``/``false`` when unset); requests carry ``exactly``'s fields at top level.
- ``v1alpha3``: as v1beta1, plus capacities are bare quantities (``memory: 40Gi``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

GROUP = "resource.k8s.io"


def _unwrap_capacity(values: Any) -> Any:
    if not isinstance(values, Mapping):
        return values
    return {k: (v.get("value") if isinstance(v, Mapping) else v) for k, v in values.items()}


def _slice_to(obj: dict[str, Any], version: str) -> dict[str, Any]:
    spec = obj.get("spec") or {}
    if version in ("v1beta1", "v1alpha3"):
        devices = []
        for device in spec.get("devices") or []:
            basic = {k: v for k, v in device.items() if k != "name"}
            if version == "v1alpha3" and "capacity" in basic:
                basic["capacity"] = _unwrap_capacity(basic["capacity"])
            devices.append({"name": device.get("name"), "basic": basic})
        if "devices" in spec:
            spec["devices"] = devices
        spec.setdefault("nodeName", "")
        spec.setdefault("allNodes", False)
    obj["spec"] = spec
    return obj


def _requests_to(spec: dict[str, Any], version: str) -> None:
    devices = spec.get("devices")
    if not isinstance(devices, dict) or version not in ("v1beta1", "v1alpha3"):
        return
    flat = []
    for request in devices.get("requests") or []:
        request = dict(request)
        exactly = request.pop("exactly", None)
        if isinstance(exactly, Mapping):
            request.update(exactly)
        flat.append(request)
    devices["requests"] = flat


def to_version(kind: str, obj: Mapping[str, Any], version: str) -> dict[str, Any]:
    """``obj`` (stored, v1 shape) as the client sees it at ``resource.k8s.io/<version>``."""
    out = copy.deepcopy(dict(obj))
    out["apiVersion"] = f"{GROUP}/{version}"
    if version in ("v1", "v1beta2"):
        return out
    if kind == "ResourceSlice":
        return _slice_to(out, version)
    if kind == "ResourceClaim" and isinstance(out.get("spec"), dict):
        _requests_to(out["spec"], version)
    if kind == "ResourceClaimTemplate":
        inner = (out.get("spec") or {}).get("spec")
        if isinstance(inner, dict):
            _requests_to(inner, version)
    return out
