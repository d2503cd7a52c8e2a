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
    taints: tuple[Mapping[str, Any], ...] = ()
    consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()
    per_device_node: bool = False
    allow_multiple: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    index: int = 0
    """Position in the pool's visiting order (ties in the search are broken by it)."""
    cel: Any = field(default=None, repr=False)
    cel_error: str | None = field(default=None, repr=False)
    cel_ready: bool = field(default=False, repr=False)

    @property
    def ref(self) -> DeviceRef:
        return (self.driver, self.pool_name, self.name)

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
        for dev in spec.get("devices") or []:
            consumes = tuple(
                (
                    str(use.get("counterSet") or ""),
                    tuple((str(k), _nanos(v)) for k, v in (use.get("counters") or {}).items()),
                )
                for use in dev.get("consumesCounters") or []
            )
            out.append(
                DeviceEntry(
                    driver=pool.driver,
                    pool_name=pool.name,
                    name=str(dev.get("name") or ""),
                    device=dev,
                    slice=slc,
                    pool=pool,
                    taints=_taints_for(slc, dev, taint_rules),
                    consumes=consumes,
                    per_device_node=per_device,
                    allow_multiple=bool(dev.get("allowMultipleAllocations")),
                    binding_conditions=tuple(dev.get("bindingConditions") or ()),
                    binding_failure_conditions=tuple(dev.get("bindingFailureConditions") or ()),
                    index=len(out),
                )
            )
    return out


def _nanos(entry: Any) -> int:
    raw = entry.get("value") if isinstance(entry, Mapping) else entry
    try:
        return quantity_nanos(str(raw if raw is not None else "0"))
    except ValueError:
        return 0


def _conversion_error(dev: Mapping[str, Any], list_types: bool) -> str | None:
    """The error the scheduler's CEL device conversion gives, or None.

    An attribute with no value field set, or (without DRAListTypeAttributes) a list
    value, makes every selector on the device fail (k8s-dra-semantics §1.3).
    """
    for name, value in (dev.get("attributes") or {}).items():
        if not isinstance(value, Mapping):
            return f"attribute {name}: unsupported attribute value"
        if any(k in value for k in _SCALAR_KEYS):
            continue
        if list_types and any(k in value for k in _LIST_KEYS):
            continue
        return f"attribute {name}: unsupported attribute value"
    return None


class SelectorEngine:
    """Compiles selectors once and evaluates them on devices, caching per (expression, device).

    ``allow_multiple`` is False for the stable allocator, which never passes
    ``allowMultipleAllocations`` into CEL (k8s-dra-semantics §3.1).
    """

    def __init__(self, *, list_types: bool, allow_multiple: bool) -> None:
        self.list_types = list_types
        self.allow_multiple = allow_multiple
        self._compiled: dict[str, Callable[[Any], bool] | Exception] = {}
        self.selectors: dict[str, CompiledSelector] = {}

    def compile(self, expression: str) -> Callable[[Any], bool] | Exception:
        """The memoized matcher, or the compile error (kept, so it is raised each time).

        Memoized on the values the expression reads, so a fleet of identical devices
        costs one evaluation (DESIGN §7).
        """
        found = self._compiled.get(expression)
        if found is None:
            from dradiag.analyses.cel import CelCompileError, compile_selector

            try:
                compiled = compile_selector(expression)
                self.selectors[expression] = compiled
                found = compiled.memoized()
            except CelCompileError as exc:
                found = exc
            self._compiled[expression] = found
        return found

    def _cel_device(self, entry: DeviceEntry) -> Any:
        if not entry.cel_ready:
            entry.cel_ready = True
            entry.cel_error = _conversion_error(entry.device, self.list_types)
            if entry.cel_error is None:
                from dradiag.analyses.cel import cel_device

                dev = entry.device
                if not self.allow_multiple and dev.get("allowMultipleAllocations"):
                    dev = {k: v for k, v in dev.items() if k != "allowMultipleAllocations"}
                try:
                    entry.cel = cel_device(entry.driver, dev)
                except Exception as exc:  # noqa: BLE001 - a conversion error aborts like CEL's
                    entry.cel_error = str(exc)
        return entry.cel

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
            cel_dev = self._cel_device(entry)
            if entry.cel_error is not None:
                raise AllocatorError(
                    f"{owner}: selector #{i} on device {entry.device_id}: CEL runtime error: "
                    f"{entry.cel_error}",
                    kind="cel-runtime",
                    selector=str(i),
                    expression=expression,
                    device=entry.device_id,
                )
            try:
                ok = compiled(cel_dev)
            except Exception as exc:  # CelRuntimeError, or anything the engine raises
                message = getattr(exc, "message", None) or str(exc)
                if "no such key:" in message:
                    message += (
                        ". consider using CEL optional chaining (.? followed by orValue()) "
                        "or guarding the check with has() for optional fields"
                    )
                raise AllocatorError(
                    f"{owner}: selector #{i} on device {entry.device_id}: CEL runtime error: "
                    f"{message}",
                    kind="cel-runtime",
                    selector=str(i),
                    expression=expression,
                    device=entry.device_id,
                ) from None
            if not ok:
                return False
        return True
