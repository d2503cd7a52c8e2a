"""Normalization of every resource.k8s.io version (and both Event APIs) to one shape.

Analyses read the resource.k8s.io/v1 layout only (DESIGN §1). The differences handled
here are those of k8s-dra-semantics §4.2:

- ResourceSlice ``v1alpha3``/``v1beta1``: ``devices[].basic`` is flattened; plain
  ``nodeName: ""`` / ``allNodes: false`` mean unset and are dropped; ``v1alpha3`` bare
  capacity quantities (``memory: 40Gi``) are wrapped as ``{value: 40Gi}``.
- ResourceClaim(Template) ``v1alpha3``/``v1beta1``: a request's top-level
  ``deviceClassName``/``selectors``/``count``/... move under ``exactly``.
- Pods before 1.31: ``resourceClaims[].source.{resourceClaimName,resourceClaimTemplateName}``
  is flattened.
- ``events.k8s.io/v1`` Events are mapped to the core/v1 field names (``involvedObject``,
  ``message``, ``count``, ``lastTimestamp``) that kubectl shows and rules match on.

Normalization is shape-driven rather than version-driven where it can be (a ``basic:``
block is flattened whatever apiVersion claims), so hand-edited or mislabelled input
still reads right. Every field not named here is copied untouched: unknown and newer
fields survive. Input objects are never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dradiag.snapshot.model import Kind

RESOURCE_GROUP = "resource.k8s.io"
RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")
"""resource.k8s.io versions dradiag reads, in order of preference (k8s-dra-semantics §4.1)."""

_KIND_BY_NAME: dict[str, Kind] = {k.value: k for k in Kind if k is not Kind.LOG}

# Fields a v1alpha3/v1beta1 request carries at top level that v1 keeps under `exactly`.
_EXACT_REQUEST_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def kind_of(obj: Mapping[str, Any]) -> Kind | None:
    """The Snapshot kind of a raw object, or None when dradiag does not read it.

    resource.k8s.io kinds must come from that group (any version): a ``DeviceClass`` of
    another API group is someone else's CRD, not ours.
    """
    kind = _KIND_BY_NAME.get(str(obj.get("kind") or ""))
    if kind is None:
        return None
    api_version = str(obj.get("apiVersion") or "")
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if kind in (
        Kind.RESOURCE_SLICE,
        Kind.DEVICE_CLASS,
        Kind.DEVICE_TAINT_RULE,
        Kind.RESOURCE_CLAIM,
        Kind.RESOURCE_CLAIM_TEMPLATE,
    ):
        return kind if group == RESOURCE_GROUP else None
    if kind is Kind.EVENT:
        return kind if group in ("", "events.k8s.io") else None
    return kind if group == "" else None


def normalize(kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``obj`` in the v1 shape of its kind (a new dict; ``obj`` is not changed)."""
    if kind is Kind.RESOURCE_SLICE:
        return normalize_slice(obj)
    if kind is Kind.RESOURCE_CLAIM:
        return normalize_claim(obj)
    if kind is Kind.RESOURCE_CLAIM_TEMPLATE:
        return normalize_claim_template(obj)
    if kind is Kind.POD:
        return normalize_pod(obj)
    if kind is Kind.EVENT:
        return normalize_event(obj)
    if kind in (Kind.DEVICE_CLASS, Kind.DEVICE_TAINT_RULE):
        return _with_v1_api_version(obj)
    return dict(obj)


def _with_v1_api_version(obj: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(obj)
    if str(out.get("apiVersion") or "").startswith(RESOURCE_GROUP + "/"):
        out["apiVersion"] = f"{RESOURCE_GROUP}/v1"
    return out


# -- ResourceSlice ------------------------------------------------------------------


def _wrap_quantities(values: Any) -> Any:
    """``{memory: 40Gi}`` → ``{memory: {value: 40Gi}}``; already-wrapped values stay."""
    if not isinstance(values, Mapping):
        return values
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out[key] = dict(value)
        else:
            out[key] = {"value": value if isinstance(value, str) else str(value)}
    return out


def _normalize_node_fields(holder: dict[str, Any]) -> None:
    """v1alpha3/v1beta1 plain ``nodeName: ""`` and ``allNodes: false`` mean unset."""
    if holder.get("nodeName") in ("", None):
        holder.pop("nodeName", None)
    if holder.get("allNodes") in (False, None):
        holder.pop("allNodes", None)
    if holder.get("nodeSelector") is None:
        holder.pop("nodeSelector", None)


def normalize_device(device: Mapping[str, Any]) -> dict[str, Any]:
    """One slice device in the v1 shape: ``basic`` flattened, capacities wrapped."""
    out = {k: v for k, v in device.items() if k != "basic"}
    basic = device.get("basic")
    if isinstance(basic, Mapping):
        for key, value in basic.items():
            out.setdefault(key, value)
    if "capacity" in out:
        out["capacity"] = _wrap_quantities(out["capacity"])
    consumes = out.get("consumesCounters")
    if isinstance(consumes, list):
        out["consumesCounters"] = [
            {**c, "counters": _wrap_quantities(c.get("counters"))} if isinstance(c, Mapping) else c
            for c in consumes
        ]
    _normalize_node_fields(out)
    return out


def normalize_slice(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceSlice of any version in the v1 shape."""
    out = _with_v1_api_version(obj)
    spec = dict(obj.get("spec") or {})
    devices = spec.get("devices")
    if isinstance(devices, list):
        spec["devices"] = [normalize_device(d) if isinstance(d, Mapping) else d for d in devices]
    counters = spec.get("sharedCounters")
    if isinstance(counters, list):
        spec["sharedCounters"] = [
            {**c, "counters": _wrap_quantities(c.get("counters"))} if isinstance(c, Mapping) else c
            for c in counters
        ]
    _normalize_node_fields(spec)
    out["spec"] = spec
    return out


# -- ResourceClaim / ResourceClaimTemplate ------------------------------------------


def normalize_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """A device request in the v1 shape: ``{name, exactly: {...}}`` or ``{name, firstAvailable}``."""
    out = dict(request)
    if "exactly" in out:
        return out
    if out.get("firstAvailable"):
        # v1beta1 spells "no top-level class" as empty fields beside firstAvailable.
        for key in _EXACT_REQUEST_FIELDS:
            if key in out and not out[key]:
                del out[key]
        return out
    exactly: dict[str, Any] = {}
    for key in _EXACT_REQUEST_FIELDS:
        if key in out:
            exactly[key] = out.pop(key)
    if exactly:
        out["exactly"] = exactly
    return out


def normalize_claim_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A claim spec (as in a claim or a template) in the v1 shape."""
    out = dict(spec)
    devices = out.get("devices")
    if isinstance(devices, Mapping):
        devices = dict(devices)
        requests = devices.get("requests")
        if isinstance(requests, list):
            devices["requests"] = [
                normalize_request(r) if isinstance(r, Mapping) else r for r in requests
            ]
        out["devices"] = devices
    return out


def normalize_claim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceClaim of any version in the v1 shape (status kept as is)."""
    out = _with_v1_api_version(obj)
    if isinstance(obj.get("spec"), Mapping):
        out["spec"] = normalize_claim_spec(obj["spec"])
    return out


def normalize_claim_template(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceClaimTemplate of any version in the v1 shape."""
    out = _with_v1_api_version(obj)
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("spec"), Mapping):
        out["spec"] = {**spec, "spec": normalize_claim_spec(spec["spec"])}
    return out


# -- Pod ----------------------------------------------------------------------------


def normalize_pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A pod spec with pre-1.31 ``resourceClaims[].source`` flattened."""
    out = dict(spec)
    claims = out.get("resourceClaims")
    if isinstance(claims, list):
        flat = []
        for ref in claims:
            if isinstance(ref, Mapping) and isinstance(ref.get("source"), Mapping):
                merged = {k: v for k, v in ref.items() if k != "source"}
                for key, value in ref["source"].items():
                    merged.setdefault(key, value)
                flat.append(merged)
            else:
                flat.append(ref)
        out["resourceClaims"] = flat
    return out


def normalize_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Pod with its claim references in the 1.31+ shape."""
    out = dict(obj)
    if isinstance(obj.get("spec"), Mapping):
        out["spec"] = normalize_pod_spec(obj["spec"])
    return out


# -- Event --------------------------------------------------------------------------


def normalize_event(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An Event in the core/v1 field layout, whichever API it was read from.

    ``events.k8s.io/v1`` names the fields differently (``regarding``, ``note``,
    ``deprecatedCount``/``series.count``, ``eventTime``/``series.lastObservedTime``);
    the core/v1 names are what users see in ``kubectl describe`` and what rules match.
    """
    out = dict(obj)
    if str(obj.get("apiVersion") or "").startswith("events.k8s.io/"):
        series: Mapping[str, Any] = obj["series"] if isinstance(obj.get("series"), Mapping) else {}
        if "regarding" in obj:
            out["involvedObject"] = obj["regarding"]
        if "note" in obj:
            out["message"] = obj["note"]
        count = obj.get("deprecatedCount") or series.get("count")
        if count:
            out["count"] = count
        first = obj.get("deprecatedFirstTimestamp") or obj.get("eventTime")
        last = (
            series.get("lastObservedTime")
            or obj.get("deprecatedLastTimestamp")
            or obj.get("eventTime")
        )
        if first:
            out["firstTimestamp"] = first
        if last:
            out["lastTimestamp"] = last
        source = obj.get("deprecatedSource")
        if isinstance(source, Mapping):
            out["source"] = source
        elif obj.get("reportingController"):
            out["source"] = {"component": obj["reportingController"]}
        if obj.get("reportingController"):
            out["reportingComponent"] = obj["reportingController"]
        out["apiVersion"] = "v1"
    out.setdefault("involvedObject", {})
    out.setdefault("message", "")
    out.setdefault("reason", "")
    return out
