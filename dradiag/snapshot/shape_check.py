"""The one shape check of every object entering a Snapshot: keep, trim or skip it.

Every source hands its objects through :func:`check_object` before normalization (files
in ``sources.manifests``, deferred JSON items when the Snapshot decodes them, live
responses in ``sources.live_plan``). A field whose value has the wrong shape for the
schema of its kind and version (``snapshot.shapes``) is a :class:`ShapeProblem`:

- ``null`` where a field is optional means "unset" in Kubernetes: the key is dropped
  without a word (kubectl writes ``creationTimestamp: null``).
- Otherwise the offending key (or list element) is dropped from a copy of the object
  and the check runs again, unless the field is one an analysis would read as evidence
  by its absence (:data:`ESSENTIAL`: a claim's ``status.allocation``, a slice's
  ``spec.devices``, an object's name); then the whole object is skipped, and the
  Snapshot marks its kind not fully read, so the phases that need it say ``unknown``
  rather than ``ok``.

The input object is never changed, and an object without problems is returned as it
is (the check costs one msgspec pass, no copy). Unknown fields pass untouched.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import msgspec

from dradiag.snapshot import shapes
from dradiag.snapshot.model import RESOURCE_OF_KIND, CollectionError, Kind

__all__ = [
    "ESSENTIAL",
    "Checked",
    "ShapeProblem",
    "as_collection_error",
    "check_object",
    "schema_for",
    "skipped_reason",
]

_LEGACY_OR_V1: dict[Kind, tuple[type, type]] = {
    Kind.RESOURCE_SLICE: (shapes.ResourceSliceV1, shapes.ResourceSliceLegacy),
    Kind.RESOURCE_CLAIM: (shapes.ResourceClaimV1, shapes.ResourceClaimLegacy),
    Kind.RESOURCE_CLAIM_TEMPLATE: (
        shapes.ResourceClaimTemplateV1,
        shapes.ResourceClaimTemplateLegacy,
    ),
    Kind.DEVICE_CLASS: (shapes.DeviceClass, shapes.DeviceClass),
    Kind.DEVICE_TAINT_RULE: (shapes.DeviceTaintRule, shapes.DeviceTaintRule),
}

_COMMON_ESSENTIAL = frozenset({("metadata",), ("metadata", "name"), ("metadata", "namespace")})
ESSENTIAL: dict[Kind, frozenset[tuple[str, ...]]] = {
    Kind.RESOURCE_SLICE: frozenset(
        {
            ("spec",),
            ("spec", "driver"),
            ("spec", "pool"),
            ("spec", "pool", "name"),
            ("spec", "nodeName"),
            ("spec", "devices"),
            ("spec", "devices", "name"),
        }
    ),
    Kind.DEVICE_CLASS: frozenset({("spec",), ("spec", "selectors")}),
    Kind.DEVICE_TAINT_RULE: frozenset({("spec",), ("spec", "taint"), ("spec", "deviceSelector")}),
    Kind.RESOURCE_CLAIM: frozenset(
        {
            ("spec",),
            ("spec", "devices"),
            ("spec", "devices", "requests"),
            ("status",),
            ("status", "allocation"),
            ("status", "allocation", "devices"),
            ("status", "allocation", "devices", "results"),
            ("status", "allocation", "devices", "results", "driver"),
            ("status", "allocation", "devices", "results", "pool"),
            ("status", "allocation", "devices", "results", "device"),
            ("status", "allocation", "devices", "results", "request"),
            ("status", "reservedFor"),
            ("status", "reservedFor", "uid"),
            ("status", "reservedFor", "name"),
        }
    ),
    Kind.RESOURCE_CLAIM_TEMPLATE: frozenset(
        {
            ("spec",),
            ("spec", "spec"),
            ("spec", "spec", "devices"),
            ("spec", "spec", "devices", "requests"),
        }
    ),
    Kind.POD: frozenset(
        {
            ("spec",),
            ("spec", "nodeName"),
            ("spec", "resourceClaims"),
            ("spec", "resourceClaims", "name"),
            ("spec", "resourceClaims", "resourceClaimName"),
            ("spec", "resourceClaims", "resourceClaimTemplateName"),
            ("spec", "containers"),
            ("spec", "containers", "resources", "claims"),
            ("spec", "containers", "resources", "claims", "name"),
            ("status",),
            ("status", "phase"),
            # DRAExtendedResource: the pod's only link to its generated claim, and which
            # container gets which request (dropped, a wrong mapping would go unseen).
            ("status", "extendedResourceClaimStatus"),
            ("status", "extendedResourceClaimStatus", "resourceClaimName"),
            ("status", "extendedResourceClaimStatus", "requestMappings"),
            ("status", "extendedResourceClaimStatus", "requestMappings", "requestName"),
        }
    ),
    Kind.NODE: frozenset(),
    Kind.EVENT: frozenset(
        {("involvedObject",), ("regarding",), ("reason",), ("message",), ("note",)}
    ),
}
"""Per kind, the fields (paths without list indexes) whose removal an analysis would take
as evidence (no allocation, no devices, an unreserved claim, a container that does not
reference its claim): a wrong shape there skips the object instead, and its kind then
counts as not read in full."""

_MAX_FIXES = 64
"""An object needing more repairs than this is skipped: it is not what it claims to be."""


def schema_for(kind: Kind, api_version: Any) -> type:
    """The schema of ``kind`` as spelled by ``api_version``."""
    key = (kind, api_version if isinstance(api_version, str) else "")
    found = _SCHEMAS.get(key)
    if found is None:
        found = _SCHEMAS[key] = _schema_for(*key)
    return found


_SCHEMAS: dict[tuple[Kind, str], type] = {}


def _schema_for(kind: Kind, api_version: str) -> type:
    if kind in _LEGACY_OR_V1:
        v1, legacy = _LEGACY_OR_V1[kind]
        return v1 if api_version == "resource.k8s.io/v1" else legacy
    if kind is Kind.EVENT:
        if api_version.startswith("events.k8s.io/"):
            return shapes.EventEventsV1
        return shapes.EventCoreV1
    if kind is Kind.POD:
        return shapes.Pod
    return shapes.Node


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeProblem:
    """One field of the wrong shape: where, what was expected, and what was done."""

    kind: Kind
    namespace: str
    name: str
    field: str
    """The field path as read (``spec.devices[3].attributes['uuid'].string``)."""
    message: str
    """What msgspec expected and found (``expected str, got int``)."""
    skipped: bool
    """True: the object was skipped; False: the field was dropped and the object kept."""
    where: str | None = None
    """``file[:line]`` or the live read, when known."""
    dropped: str = "field dropped"
    """What was dropped when the object was kept: ``field dropped`` or ``element dropped``."""

    @property
    def object(self) -> str:
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind.value} {key or '(unnamed)'}"

    def describe(self) -> str:
        """The warning line: file and line, object, field path, what was done."""
        action = "object skipped" if self.skipped else self.dropped
        head = f"{self.where}: " if self.where else ""
        return f"{head}{self.object}: {self.field}: {self.message}; {action}"


class Checked(NamedTuple):
    """The outcome of one check: the object to keep (None: skip it) and the problems.

    A NamedTuple: every object of a load gets one, and a frozen dataclass costs more.
    """

    obj: Mapping[str, Any] | None
    problems: tuple[ShapeProblem, ...] = ()


_convert = msgspec.convert
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ERROR = re.compile(r"\A(?P<msg>.*?) - at `(?P<path>[^`]*)`(?: in `(?P<within>[^`]*)`)?\Z", re.S)
_GOT = re.compile(r"got `(?P<got>[a-z]+)`")
_UNKNOWN = re.compile(r"unknown field `(?P<field>[^`]*)`")
_STEP = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]|\[(\.\.\.)\]")


def check_object(kind: Kind, obj: Mapping[str, Any], where: str | None = None) -> Checked:
    """``obj`` checked against its schema: kept as is, trimmed of bad fields, or skipped."""
    schema = schema_for(kind, obj.get("apiVersion"))
    try:
        _convert(obj, schema, strict=True)
        return Checked(obj)  # the common case: one C pass, nothing copied
    except (msgspec.ValidationError, RecursionError):
        pass
    problems: list[ShapeProblem] = []
    current: Any = obj
    for _ in range(_MAX_FIXES):
        try:
            msgspec.convert(current, schema, strict=True)
            return Checked(current, tuple(problems))
        except msgspec.ValidationError as exc:
            error = str(exc)
            found = _locate(current, error)
        except RecursionError:
            problems.append(_problem(kind, obj, "(object)", "nested too deeply", True, where))
            return Checked(None, tuple(problems))
        if found is None:
            reason = error.split(" - at ")[0].replace("`", "")
            problems.append(_problem(kind, obj, "(object)", reason, True, where))
            return Checked(None, tuple(problems))
        path, message, is_key = found
        label = _label(path)
        if not is_key and "got " not in message:
            # msgspec names the value's problem, not the value (a junk time): show it.
            message = f"{message}: {_short(_get(current, path))}"
        if is_key:
            # Non-string keys of a map: drop those keys.
            current = _replace(current, path, _string_keys(_get(current, path)))
            problems.append(_problem(kind, obj, label, message, False, where))
            continue
        silent = message.endswith("got null") and bool(path) and isinstance(path[-1], str)
        if not silent and _essential(kind, path):
            problems.append(_problem(kind, obj, label, message, True, where))
            return Checked(None, tuple(problems))
        if not path:
            problems.append(_problem(kind, obj, "(object)", message, True, where))
            return Checked(None, tuple(problems))
        current = _without(current, path)
        if not silent:
            problem = _problem(kind, obj, label, message, False, where)
            if isinstance(path[-1], int):
                problem = dataclasses.replace(problem, dropped="element dropped")
            problems.append(problem)
    problems.append(_problem(kind, obj, "(object)", "too many malformed fields", True, where))
    return Checked(None, tuple(problems))


def _problem(
    kind: Kind, obj: Mapping[str, Any], path: str, message: str, skipped: bool, where: str | None
) -> ShapeProblem:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    ns, name = meta.get("namespace"), meta.get("name")
    return ShapeProblem(
        kind=kind,
        namespace=ns if isinstance(ns, str) else "",
        name=name if isinstance(name, str) else "",
        field=path,
        message=message,
        skipped=skipped,
        where=where,
    )


def _essential(kind: Kind, path: tuple[Any, ...]) -> bool:
    keys = tuple(step for step in path if isinstance(step, str))
    if path and isinstance(path[-1], int):
        # An element of a list that is not an object at all (a device, a result, a
        # selector): nothing in it can be read, so just that element is dropped.
        return False
    return keys in _COMMON_ESSENTIAL or keys in ESSENTIAL.get(kind, frozenset())


def _label(path: tuple[Any, ...]) -> str:
    """``spec.devices[3].attributes['gpu.nvidia.com/uuid'].string``: the path as read."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, str) and _IDENT.fullmatch(step):
            out += f".{step}" if out else step
        else:
            out += f"[{step!r}]"
    return out or "(object)"


def _locate(obj: Any, error: str) -> tuple[tuple[Any, ...], str, bool] | None:
    """(concrete path, message, whether a map key is wrong) of one msgspec error."""
    match = _ERROR.match(error)
    if match is None:
        return None
    message = match["msg"].replace("`", "")
    message = message[0].lower() + message[1:] if message else message
    if match["within"] is not None:
        steps = _steps(match["within"])
        if steps is None:
            return None
        paths = _expand(obj, steps, lambda v: isinstance(v, Mapping) and _has_bad_key(v))
        return (paths, "map key " + message, True) if paths is not None else None
    steps = _steps(match["path"])
    if steps is None:
        return None
    got = _GOT.search(match["msg"])
    want = got["got"] if got else None
    unknown = _UNKNOWN.search(match["msg"])
    if unknown is not None:
        steps.append(unknown["field"])
        message = "not a known field here"

    def fits(value: Any) -> bool:
        return want is None or _json_type(value) == want

    path = _expand(obj, steps, fits)
    return (path, message, False) if path is not None else None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_type(obj: Any) -> str:
    """msgspec's name for the type of a decoded JSON/YAML value."""
    if obj is None:
        return "null"
    if isinstance(obj, bool):
        return "bool"
    if isinstance(obj, Mapping):
        return "object"
    if isinstance(obj, list | tuple):
        return "array"
    return type(obj).__name__


def _has_bad_key(value: Mapping[Any, Any]) -> bool:
    return any(not isinstance(k, str) for k in value)


def _string_keys(value: Mapping[Any, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if isinstance(k, str)}


def _steps(text: str) -> list[Any] | None:
    if not text.startswith("$"):
        return None
    rest = text[1:]
    steps: list[Any] = []
    at = 0
    while at < len(rest):
        match = _STEP.match(rest, at)
        if match is None:
            return None
        name, index, wild = match.groups()
        steps.append(name if name is not None else int(index) if index is not None else ...)
        at = match.end()
    return steps


def _expand(obj: Any, steps: list[Any], fits: Any) -> tuple[Any, ...] | None:
    """The first concrete path matching ``steps`` (``...``: any map key) whose value fits.

    msgspec names a map entry ``[...]`` without its key; the entry at fault is the
    first whose value at the rest of the path has the type the error says it found
    (msgspec checks entries in order, and all share one schema).
    """
    if not steps:
        return () if fits(obj) else None
    step, rest = steps[0], steps[1:]
    if step is ...:
        if not isinstance(obj, Mapping):
            return None
        for key, value in obj.items():
            found = _expand(value, rest, fits)
            if found is not None:
                return (key, *found)
        return None
    if isinstance(step, int):
        if not isinstance(obj, list) or step >= len(obj):
            return None
        found = _expand(obj[step], rest, fits)
    else:
        if not isinstance(obj, Mapping) or step not in obj:
            return None
        found = _expand(obj[step], rest, fits)
    return (step, *found) if found is not None else None


def _get(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced; only the path is copied."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, list):
        out_list = list(obj)
        out_list[head] = _replace(obj[head], rest, value)
        return out_list
    out = dict(obj)
    out[head] = _replace(obj[head], rest, value)
    return out


def _without(obj: Any, path: tuple[Any, ...]) -> Any:
    """A copy of ``obj`` without the key or list element at ``path``."""
    parent_path, last = path[:-1], path[-1]
    parent = _get(obj, parent_path)
    if isinstance(parent, list):
        trimmed: Any = [v for i, v in enumerate(parent) if i != last]
    else:
        trimmed = {k: v for k, v in parent.items() if k != last}
    return _replace(obj, parent_path, trimmed)


def as_collection_error(problem: ShapeProblem) -> CollectionError:
    """The ``collection.errors[]`` entry saying what the shape check dropped."""
    where = f" ({problem.where})" if problem.where else ""
    action = "object skipped" if problem.skipped else problem.dropped
    return CollectionError(
        resource=RESOURCE_OF_KIND[problem.kind],
        verb="read",
        reason=f"malformed{where}: {problem.field}: {problem.message}; {action}",
        namespace=problem.namespace or None,
        name=problem.name or None,
    )


def skipped_reason(problem: ShapeProblem, count: int) -> str:
    """The coverage reason of a kind with ``count`` malformed objects skipped."""
    more = f" and {count - 1} more" if count > 1 else ""
    return f"malformed object skipped: {problem.describe()}{more}"
