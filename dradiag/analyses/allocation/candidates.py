"""Candidate devices: one pre-digested record per slice device, and selector matching.

The allocator looks at each device many times (per request, per search branch, per node
in a fleet sweep), so everything that does not change during a simulation is read once
here: counters consumed (as exact nano-unit integers), merged taints, binding
conditions, capacity, and the CEL view of the device (built once, cached on the record).

Selector matching follows ``selectorsMatch`` (k8s-dra-semantics §1.7): class selectors,
then request selectors, stopping at the first false; a compile or runtime error is not a
non-match but aborts the whole attempt, worded as the scheduler words it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dradiag.analyses.pools import Pool, quantity_nanos
from dradiag.snapshot.model import K8sObject, name_of

if TYPE_CHECKING:
    from dradiag.analyses.cel import CompiledSelector

__all__ = ["AllocatorError", "DeviceEntry", "SelectorEngine", "device_entries"]

DeviceRef = tuple[str, str, str]

_SCALAR_KEYS = ("int", "bool", "string", "version")
_LIST_KEYS = ("ints", "bools", "strings", "versions")


class AllocatorError(Exception):
    """An error that makes the scheduler abort the attempt (a SchedulerError, not
    Unschedulable); the message is worded like the Go allocator's."""

    def __init__(self, message: str, *, kind: str = "error", **context: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        """``validation``, ``cel-compile``, ``cel-runtime``, ``constraint``, ``pool`` …"""
        self.context = context

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True, eq=False)
class DeviceEntry:
    """One device of one slice, with what the allocator reads from it pre-computed."""

    driver: str
    pool_name: str
    name: str
    device: Mapping[str, Any]
    slice: K8sObject
    pool: Pool
    ref: DeviceRef
    taints: tuple[Mapping[str, Any], ...] = ()
    has_counters: bool = False
    per_device_node: bool = False
    allow_multiple: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    index: int = 0
    """Position in the pool's visiting order (ties in the search are broken by it)."""
    cel: Any = field(default=None, repr=False)
    cel_error: str | None = field(default=None, repr=False)
    cel_ready: bool = field(default=False, repr=False)
    _consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] | None = field(
        default=None, repr=False
    )

    @property
    def consumes(self) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
        """(counter set, ((counter, nano-units), ...)) per ``consumesCounters`` entry.

        Parsed on first use: most devices of a fleet are never asked.
        """
        found = self._consumes
        if found is None:
            found = self._consumes = tuple(
                (
                    str(use.get("counterSet") or ""),
                    tuple((str(k), _nanos(v)) for k, v in (use.get("counters") or {}).items()),
                )
                for use in self.device.get("consumesCounters") or []
            )
        return found

    @property
    def plain_capacity(self) -> bool:
        """No request policy on any capacity: a dedicated device always fits (§3.10)."""
        return not any(
            isinstance(c, Mapping) and c.get("requestPolicy") for c in self.capacity.values()
        )

    @property
    def device_id(self) -> str:
        """``driver/pool/device``, as the allocator prints a DeviceID."""
        return f"{self.driver}/{self.pool_name}/{self.name}"

    @property
    def attributes(self) -> Mapping[str, Any]:
        return self.device.get("attributes") or {}

    @property
    def capacity(self) -> Mapping[str, Any]:
        return self.device.get("capacity") or {}

    def attribute(self, qualified: str) -> Mapping[str, Any] | None:
        """``lookupAttribute``: fully qualified first, then the bare ID in the driver's domain."""
        attrs = self.attributes
        found = attrs.get(qualified)
        if isinstance(found, Mapping):
            return found
        domain, sep, ident = qualified.partition("/")
        if sep and domain == self.driver:
            found = attrs.get(ident)
            if isinstance(found, Mapping):
                return found
        return None

    def plain_attribute(self, name: str) -> Any:
        """An attribute's scalar value by bare or qualified name (for summaries), or None."""
        attr = self.attribute(name if "/" in name else f"{self.driver}/{name}")
        if attr is None:
            return None
        for key in _SCALAR_KEYS:
            if key in attr:
                return attr[key]
        return None


def _taints_for(
    slc: K8sObject, dev: Mapping[str, Any], taint_rules: Sequence[K8sObject]
) -> tuple[Mapping[str, Any], ...]:
    taints = [t for t in dev.get("taints") or [] if isinstance(t, Mapping)]
    if taint_rules:
        spec = slc.get("spec") or {}
        driver = spec.get("driver")
        pool = (spec.get("pool") or {}).get("name")
        for rule in taint_rules:
            rspec = rule.get("spec") or {}
            sel = rspec.get("deviceSelector") or {}
            if sel.get("driver") is not None and sel.get("driver") != driver:
                continue
            if sel.get("pool") is not None and sel.get("pool") != pool:
                continue
            if sel.get("device") is not None and sel.get("device") != dev.get("name"):
                continue
            taint = rspec.get("taint")
            if isinstance(taint, Mapping):
                taints.append({**taint, "_rule": name_of(rule)})
    return tuple(taints)


def device_entries(
    pool: Pool,
    *,
    taint_rules: Sequence[K8sObject] = (),
    slices: Sequence[K8sObject] | None = None,
) -> list[DeviceEntry]:
    """Records for every device of ``pool``'s node-targeting slices, in visiting order."""
    out: list[DeviceEntry] = []
    for slc in pool.slices if slices is None else slices:
        spec = slc.get("spec") or {}
        per_device = bool(spec.get("perDeviceNodeSelection"))
        driver, pool_name = pool.driver, pool.name
        for dev in spec.get("devices") or []:
            name = str(dev.get("name") or "")
            out.append(
                DeviceEntry(
                    driver=driver,
                    pool_name=pool_name,
                    name=name,
                    device=dev,
                    slice=slc,
                    pool=pool,
                    ref=(driver, pool_name, name),
                    taints=_taints_for(slc, dev, taint_rules)
                    if taint_rules or dev.get("taints")
                    else (),
                    has_counters=bool(dev.get("consumesCounters")),
                    per_device_node=per_device,
                    allow_multiple=bool(dev.get("allowMultipleAllocations")),
                    binding_conditions=tuple(dev.get("bindingConditions") or ()),
                    binding_failure_conditions=tuple(dev.get("bindingFailureConditions") or ()),
                    index=len(out),
                )
            )
    return out


def _nanos(entry: Any) -> int:
    raw = entry.get("value") if entry.__class__ is dict or isinstance(entry, Mapping) else entry
    if raw.__class__ is str:
        try:
            return quantity_nanos(raw)
        except ValueError:
            return 0
    try:
        return quantity_nanos(str(raw if raw is not None else "0"))
    except ValueError:
        return 0


@lru_cache(maxsize=65536)
def _bad_version(text: str) -> bool:
    from dradiag.analyses.cel.semver import parse_semver

    try:
        parse_semver(text)
    except Exception:  # noqa: BLE001 - any parse failure is a conversion error
        return True
    return False


@lru_cache(maxsize=65536)
def _bad_quantity(text: str) -> bool:
    try:
        quantity_nanos(text)
    except ValueError:
        return True
    return False


def _conversion_error(dev: Mapping[str, Any], list_types: bool) -> str | bool | None:
    """Whether converting the device for CEL fails (as the scheduler's does, on every
    evaluation): a message, True (ask the CEL engine for its wording) or None.

    An attribute with no value field set, or (without list support) a list value, makes
    every selector on the device fail (k8s-dra-semantics §1.3); so do unparsable
    versions and quantities.
    """
    for name, value in (dev.get("attributes") or {}).items():
        if value.__class__ is not dict and not isinstance(value, Mapping):
            return f"attribute {name}: unsupported attribute value"
        if "string" in value or "int" in value or "bool" in value:
            continue
        if "version" in value:
            if _bad_version(str(value["version"])):
                return True
            continue
        if list_types and ("strings" in value or "ints" in value or "bools" in value):
            continue
        if list_types and "versions" in value:
            if any(_bad_version(str(v)) for v in value["versions"] or ()):
                return True
            continue
        return f"attribute {name}: unsupported attribute value"
    for raw in (dev.get("capacity") or {}).values():
        text = raw.get("value") if raw.__class__ is dict or isinstance(raw, Mapping) else raw
        if _bad_quantity(str(text)):
            return True
    return None


def _raw_key(value: Any) -> Any:
    if value.__class__ is dict and len(value) == 1:
        for k, v in value.items():
            return (k, tuple(v) if v.__class__ is list else v)
    if isinstance(value, Mapping):
        return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(value.items()))
    return value


def _key_function(
    compiled: CompiledSelector, allow_multiple: bool
) -> Callable[[DeviceEntry], Any] | None:
    """A memo key read straight from the raw device: the values the expression reads.

    Raw values are at least as specific as the CEL values they convert to, so equal
    keys mean equal results; it saves building the CEL view of devices whose answer is
    already known. None when the expression's reads are not static.
    """
    if getattr(compiled, "_reads_whole_device", True):
        return None
    keys = sorted(compiled.read_keys, key=lambda k: (k[0], k[1] or "", k[2] or ""))
    if any(d is None or n is None for _kind, d, n in keys):
        return None
    reads_driver = compiled.reads_driver
    reads_amc = compiled.reads_allow_multiple_allocations
    lookups = [(kind == "attribute", f"{d}/{n}", d, n) for kind, d, n in keys]

    def key(entry: DeviceEntry) -> Any:
        dev = entry.device
        attrs = dev.get("attributes") or {}
        caps = dev.get("capacity") or {}
        parts: list[Any] = [entry.driver if reads_driver else None]
        if reads_amc:
            parts.append(bool(dev.get("allowMultipleAllocations")) and allow_multiple)
        for is_attr, qualified, domain, name in lookups:
            source = attrs if is_attr else caps
            raw = source.get(qualified)
            if raw is None and domain == entry.driver:
                raw = source.get(name)
            parts.append(_raw_key(raw))
        return tuple(parts)

    return key


class SelectorEngine:
    """Compiles selectors once and evaluates them on devices, caching per (expression, device).

    ``allow_multiple`` is False for the stable allocator, which never passes
    ``allowMultipleAllocations`` into CEL (k8s-dra-semantics §3.1).
    """

    def __init__(self, *, list_types: bool, allow_multiple: bool) -> None:
        self.list_types = list_types
        self.allow_multiple = allow_multiple
        self._compiled: dict[str, Any] = {}
        self._keys: dict[str, Callable[[DeviceEntry], Any] | None] = {}
        self._results: dict[tuple[str, Any], bool | str] = {}
        self.selectors: dict[str, CompiledSelector] = {}

    def compile(self, expression: str) -> Any:
        """The compiled selector, or the compile error (kept, so it is raised each time)."""
        found = self._compiled.get(expression)
        if found is None:
            from dradiag.analyses.cel import CelCompileError, compile_selector

            try:
                compiled = compile_selector(expression)
                self.selectors[expression] = compiled
                self._keys[expression] = _key_function(compiled, self.allow_multiple)
                found = compiled
            except CelCompileError as exc:
                found = exc
            self._compiled[expression] = found
        return found

    def _device_error(self, entry: DeviceEntry) -> str | None:
        if not entry.cel_ready:
            entry.cel_ready = True
            problem = _conversion_error(entry.device, self.list_types)
            if problem is True:
                self._cel_device(entry)
                entry.cel_error = getattr(entry.cel, "error", None) or "unsupported device"
            elif isinstance(problem, str):
                entry.cel_error = problem
        return entry.cel_error

    def _cel_device(self, entry: DeviceEntry) -> Any:
        if entry.cel is None:
            from dradiag.analyses.cel import cel_device

            dev = entry.device
            if not self.allow_multiple and dev.get("allowMultipleAllocations"):
                dev = {k: v for k, v in dev.items() if k != "allowMultipleAllocations"}
            entry.cel = cel_device(entry.driver, dev)
        return entry.cel

    def _evaluate(
        self, expression: str, compiled: CompiledSelector, entry: DeviceEntry
    ) -> bool | str:
        key_fn = self._keys.get(expression)
        key = (expression, key_fn(entry)) if key_fn is not None else None
        if key is not None:
            found = self._results.get(key)
            if found is not None:
                return found
        result: bool | str
        try:
            value = compiled.matches(self._cel_device(entry))
            result = (
                value
                if value is True or value is False
                else f"CEL result of type {type(value).__name__} could not be converted to bool"
            )
        except Exception as exc:  # CelRuntimeError, or anything the engine raises
            result = str(getattr(exc, "message", None) or exc)
        if key is not None:
            self._results[key] = result
        return result

    def matches(
        self, selectors: Sequence[Mapping[str, Any]], entry: DeviceEntry, *, owner: str
    ) -> bool:
        """All selectors true on ``entry``; AllocatorError on compile or runtime errors.

        ``owner`` prefixes errors: ``class <name>`` or ``claim <ns>/<name>``.
        """
        for i, selector in enumerate(selectors):
            expression = str((selector.get("cel") or {}).get("expression") or "")
            compiled = self.compile(expression)
            if isinstance(compiled, Exception):
                raise AllocatorError(
                    f"{owner}: selector #{i}: CEL compile error: compilation failed: {compiled}",
                    kind="cel-compile",
                    selector=str(i),
                    expression=expression,
                )
            error = self._device_error(entry)
            if error is None:
                outcome = self._evaluate(expression, compiled, entry)
                if outcome is True:
                    continue
                if outcome is False:
                    return False
                error = outcome
            if "no such key:" in error:
                error += (
                    ". consider using CEL optional chaining (.? followed by orValue()) "
                    "or guarding the check with has() for optional fields"
                )
            raise AllocatorError(
                f"{owner}: selector #{i} on device {entry.device_id}: CEL runtime error: {error}",
                kind="cel-runtime",
                selector=str(i),
                expression=expression,
                device=entry.device_id,
            )
        return True
