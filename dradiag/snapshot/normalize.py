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

APPS_V1 = "apps/v1"
"""The one Deployment version read: served by every supported cluster (since 1.16)."""

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
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if type(api_version) is str and type(kind) is str:
        try:
            return _KIND_CACHE[(api_version, kind)]
        except KeyError:
            found = _KIND_CACHE[(api_version, kind)] = _kind_of(api_version, kind)
            return found
    return _kind_of(str(api_version or ""), str(kind or ""))


_KIND_CACHE: dict[tuple[str, str], Kind | None] = {}
_RESOURCE_KINDS = frozenset(
    {
        Kind.RESOURCE_SLICE,
        Kind.DEVICE_CLASS,
        Kind.DEVICE_TAINT_RULE,
        Kind.RESOURCE_CLAIM,
        Kind.RESOURCE_CLAIM_TEMPLATE,
    }
)


def _kind_of(api_version: str, kind_name: str) -> Kind | None:
    kind = _KIND_BY_NAME.get(kind_name)
    if kind is None:
        return None
    group = api_version.rpartition("/")[0] if "/" in api_version else ""
    if kind in _RESOURCE_KINDS:
        return kind if group == RESOURCE_GROUP else None
    if kind is Kind.EVENT:
        return kind if group in ("", "events.k8s.io") else None
    if kind is Kind.DEPLOYMENT:
        return kind if api_version == APPS_V1 else None
    return kind if group == "" else None


def normalize(kind: Kind, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` in the v1 shape of its kind; ``obj`` itself is never changed.

    Parts that are already in shape are shared with ``obj``, not copied (an object
    already in the v1 shape is returned as it is): loading a 100,000-claim snapshot
    must not rebuild every dict. Snapshots are read-only, so sharing is safe. A
    ``resource.k8s.io/v1`` object is taken as it is: the API server accepts only the v1
    layout under that version, and the shape checks below cost more than the whole
    rest of a large load.
    """
    if obj.get("apiVersion") == _V1:
        return obj
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
    return obj


_V1 = f"{RESOURCE_GROUP}/v1"


def _with_v1_api_version(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    api_version = obj.get("apiVersion")
    if api_version == _V1 or not str(api_version or "").startswith(RESOURCE_GROUP + "/"):
        return obj
    return {**obj, "apiVersion": _V1}


def _replaced(
    obj: Mapping[str, Any], changes: Mapping[str, Any], drop: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """``obj`` with ``changes`` applied and ``drop`` keys removed; ``obj`` itself if none apply."""
    if not drop and all(obj.get(k, _MISSING) is v for k, v in changes.items()):
        return obj
    out = {k: v for k, v in obj.items() if k not in drop}
    out.update(changes)
    return out


_MISSING = object()


# -- ResourceSlice ------------------------------------------------------------------


def _wrap_quantities(values: Any) -> Any:
    """``{memory: 40Gi}`` → ``{memory: {value: 40Gi}}``; already wrapped values are kept."""
    if not isinstance(values, Mapping):
        return values
    if all(type(v) is dict or isinstance(v, Mapping) for v in values.values()):
        return values
    return {
        key: value
        if isinstance(value, Mapping)
        else {"value": value if isinstance(value, str) else str(value)}
        for key, value in values.items()
    }


def _wrap_counter_sets(entries: Any) -> Any:
    """Counter lists (``sharedCounters``, ``consumesCounters``) with wrapped quantities."""
    if not isinstance(entries, list):
        return entries
    out = []
    for entry in entries:
        if isinstance(entry, Mapping) and "counters" in entry:
            entry = _replaced(entry, {"counters": _wrap_quantities(entry["counters"])})
        out.append(entry)
    return entries if all(a is b for a, b in zip(out, entries, strict=True)) else out


def _unset_node_fields(holder: Mapping[str, Any]) -> tuple[str, ...]:
    """Keys meaning "unset": v1alpha3/v1beta1 plain ``nodeName: ""``, ``allNodes: false``."""
    drop = []
    if "nodeName" in holder and holder["nodeName"] in ("", None):
        drop.append("nodeName")
    if "allNodes" in holder and holder["allNodes"] in (False, None):
        drop.append("allNodes")
    if "nodeSelector" in holder and holder["nodeSelector"] is None:
        drop.append("nodeSelector")
    return tuple(drop)


def normalize_device(device: Mapping[str, Any]) -> Mapping[str, Any]:
    """One slice device in the v1 shape: ``basic`` flattened, capacities wrapped."""
    basic = device.get("basic")
    if isinstance(basic, Mapping):
        merged = {k: v for k, v in device.items() if k != "basic"}
        for key, value in basic.items():
            merged.setdefault(key, value)
        device = merged
    changes = {}
    if "capacity" in device:
        changes["capacity"] = _wrap_quantities(device["capacity"])
    if "consumesCounters" in device:
        changes["consumesCounters"] = _wrap_counter_sets(device["consumesCounters"])
    return _replaced(device, changes, _unset_node_fields(device))


def normalize_slice(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceSlice of any version in the v1 shape."""
    out = _with_v1_api_version(obj)
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return out
    changes: dict[str, Any] = {}
    devices = spec.get("devices")
    if isinstance(devices, list):
        new = [normalize_device(d) if isinstance(d, Mapping) else d for d in devices]
        changes["devices"] = (
            devices if all(a is b for a, b in zip(new, devices, strict=True)) else new
        )
    if "sharedCounters" in spec:
        changes["sharedCounters"] = _wrap_counter_sets(spec["sharedCounters"])
    new_spec = _replaced(spec, changes, _unset_node_fields(spec))
    return _replaced(out, {"spec": new_spec})


# -- ResourceClaim / ResourceClaimTemplate ------------------------------------------


def normalize_request(request: Mapping[str, Any]) -> Mapping[str, Any]:
    """A device request in the v1 shape: ``{name, exactly: {...}}`` or ``{name, firstAvailable}``."""
    if "exactly" in request:
        return request
    if request.get("firstAvailable"):
        # v1beta1 spells "no top-level class" as empty fields beside firstAvailable.
        empty = tuple(k for k in _EXACT_REQUEST_FIELDS if k in request and not request[k])
        return _replaced(request, {}, empty)
    out = dict(request)
    exactly: dict[str, Any] = {}
    for key in _EXACT_REQUEST_FIELDS:
        if key in out:
            exactly[key] = out.pop(key)
    if exactly:
        out["exactly"] = exactly
    return out


def normalize_claim_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """A claim spec (as in a claim or a template) in the v1 shape."""
    devices = spec.get("devices")
    if not isinstance(devices, Mapping):
        return spec
    requests = devices.get("requests")
    if not isinstance(requests, list):
        return spec
    new = [normalize_request(r) if isinstance(r, Mapping) else r for r in requests]
    if all(a is b for a, b in zip(new, requests, strict=True)):
        return spec
    return {**spec, "devices": {**devices, "requests": new}}


def normalize_claim(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceClaim of any version in the v1 shape (status kept as is)."""
    out = _with_v1_api_version(obj)
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        out = _replaced(out, {"spec": normalize_claim_spec(spec)})
    return out


def normalize_claim_template(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A ResourceClaimTemplate of any version in the v1 shape."""
    out = _with_v1_api_version(obj)
    spec = obj.get("spec")
    if isinstance(spec, Mapping) and isinstance(spec.get("spec"), Mapping):
        out = _replaced(
            out, {"spec": _replaced(spec, {"spec": normalize_claim_spec(spec["spec"])})}
        )
    return out


# -- Pod ----------------------------------------------------------------------------


def normalize_pod_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """A pod spec with pre-1.31 ``resourceClaims[].source`` flattened."""
    claims = spec.get("resourceClaims")
    if not claims or not isinstance(claims, list):
        return spec
    for ref in claims:
        if isinstance(ref, Mapping) and "source" in ref and isinstance(ref["source"], Mapping):
            break
    else:
        return spec
    flat = []
    for ref in claims:
        if isinstance(ref, Mapping) and isinstance(ref.get("source"), Mapping):
            merged = {k: v for k, v in ref.items() if k != "source"}
            for key, value in ref["source"].items():
                merged.setdefault(key, value)
            flat.append(merged)
        else:
            flat.append(ref)
    return {**spec, "resourceClaims": flat}


def normalize_pod(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Pod with its claim references in the 1.31+ shape."""
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        new_spec = normalize_pod_spec(spec)
        if new_spec is not spec:
            return {**obj, "spec": new_spec}
    return obj


# -- Event --------------------------------------------------------------------------


def normalize_event(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An Event in the core/v1 field layout, whichever API it was read from.

    ``events.k8s.io/v1`` names the fields differently (``regarding``, ``note``,
    ``deprecatedCount``/``series.count``, ``eventTime``/``series.lastObservedTime``);
    the core/v1 names are what users see in ``kubectl describe`` and what rules match.
    """
    if (
        "involvedObject" in obj
        and "message" in obj
        and "reason" in obj
        and not str(obj.get("apiVersion") or "").startswith("events.k8s.io/")
    ):
        return obj
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
