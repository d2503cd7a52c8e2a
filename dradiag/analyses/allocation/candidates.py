"""Candidate devices: one pre-digested record per slice device, and selector matching.

The allocator looks at each device many times (per request, per search branch, per node
in a fleet sweep), so everything that does not change during a simulation is read once
here: counters consumed (as exact nano-unit integers), merged taints, binding
conditions, capacity, and the CEL view of the device (built once, cached on the record).

Selector matching follows ``selectorsMatch`` (k8s-dra-semantics §1.7): class selectors,
then request selectors, stopping at the first false; a compile or runtime error is not a
non-match but aborts the whole attempt, worded as the scheduler words it.

What is cached, and why it changes no answer: a selector's result per distinct raw
values of what it reads (equal values, equal result); a selector list's result on each
record (``DeviceEntry.selected``, by a token unique to the engine and list; errors are
never stored, so they are raised again); whether a device converts for CEL, per engine,
plus once for all engines when only scalar, valid attributes make the question moot.
Records are shared by every analysis of a snapshot (``search.SnapshotStore``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dradiag.analyses.pools import NANOS_OR_ZERO, Pool, nanos_or_zero, quantity_nanos
from dradiag.snapshot.model import K8sObject, name_of

if TYPE_CHECKING:
    from dradiag.analyses.cel import CompiledSelector

__all__ = [
    "AllocatorError",
    "DeviceEntry",
    "PreparedSelectors",
    "SelectorEngine",
    "device_entries",
    "device_taints",
]

DeviceRef = tuple[str, str, str]

_SCALAR_KEYS = ("int", "bool", "string", "version")
_EMPTY: Mapping[str, Any] = {}
_VALUE = operator.itemgetter("value")
_FIRST = operator.itemgetter(0)
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
    """The CEL view of the device, as engine ``cel_for`` builds it."""
    cel_error: str | None = field(default=None, repr=False)
    """Why converting the device for CEL fails (None: it converts), for engine ``cel_ready``."""
    cel_ready: int = field(default=0, repr=False)
    """The engine (:attr:`SelectorEngine.ident`) ``cel_error`` was worked out for; 0: none."""
    cel_for: int = field(default=0, repr=False)
    convertible: bool | None = field(default=None, repr=False)
    """Converts for every engine (only scalar attributes and valid values); None: not known."""
    _consumes: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] | None = field(
        default=None, repr=False
    )
    _plain_capacity: bool | None = field(default=None, repr=False)
    selected: dict[int, bool] | None = field(default=None, repr=False)
    """Results of prepared selector lists on this device, by their token (see
    :meth:`SelectorEngine.prepare`); errors are never stored, so they are raised again."""

    @property
    def consumes(self) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
        """(counter set, ((counter, nano-units), ...)) per ``consumesCounters`` entry.

        Parsed on first use: most devices of a fleet are never asked.
        """
        found = self._consumes
        if found is None:
            found = self._consumes = _parse_consumes(self.device.get("consumesCounters"))
        return found

    @property
    def plain_capacity(self) -> bool:
        """No request policy on any capacity: a dedicated device always fits (§3.10)."""
        found = self._plain_capacity
        if found is None:
            found = True
            for c in self.capacity.values():
                if (c.__class__ is dict or isinstance(c, Mapping)) and c.get("requestPolicy"):
                    found = False
                    break
            self._plain_capacity = found
        return found

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
        if "/" in name:
            attr = self.attribute(name)
        else:
            # attribute(f"{driver}/{name}"), spelled out: summaries ask this per device.
            attrs = self.device.get("attributes") or _EMPTY
            attr = attrs.get(f"{self.driver}/{name}")
            if attr is None or (attr.__class__ is not dict and not isinstance(attr, Mapping)):
                attr = attrs.get(name) if "/" not in self.driver else None
                if (
                    attr is not None
                    and attr.__class__ is not dict
                    and not isinstance(attr, Mapping)
                ):
                    attr = None
        if attr is None:
            return None
        for key in _SCALAR_KEYS:
            if key in attr:
                return attr[key]
        return None


def device_taints(
    slc: K8sObject, dev: Mapping[str, Any], taint_rules: Sequence[K8sObject]
) -> tuple[Mapping[str, Any], ...]:
    """The taints of device ``dev`` of slice ``slc``: its own and the DeviceTaintRules' that
    select it by driver, pool and device name (a rule's taint carries ``_rule``, its name)."""
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
    append = out.append
    driver, pool_name = pool.driver, pool.name
    for slc in pool.slices if slices is None else slices:
        spec = slc.get("spec") or {}
        per_device = bool(spec.get("perDeviceNodeSelection"))
        for dev in spec.get("devices") or []:
            name = dev.get("name")
            if name.__class__ is not str:
                name = str(name or "")
            get = dev.get
            binding = get("bindingConditions")
            failure = get("bindingFailureConditions")
            # Positional: the field order of DeviceEntry (this is the fleet-sized loop).
            append(
                DeviceEntry(
                    driver,
                    pool_name,
                    name,
                    dev,
                    slc,
                    pool,
                    (driver, pool_name, name),
                    device_taints(slc, dev, taint_rules) if taint_rules or get("taints") else (),
                    bool(get("consumesCounters")),
                    per_device,
                    bool(get("allowMultipleAllocations")),
                    tuple(binding) if binding else (),
                    tuple(failure) if failure else (),
                    len(out),
                )
            )
    return out


def _parse_consumes(uses: Any) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """``consumesCounters`` → ((counter set, ((counter, nano-units), ...)), ...)."""
    if not uses:
        return ()
    cache = NANOS_OR_ZERO
    out = []
    for use in uses:
        counters = use.get("counters") or _EMPTY
        if counters.__class__ is dict:
            # Every value a {value: <cached quantity text>} and every name a string (the
            # join fails otherwise): read in C, the same pairs as the loop below.
            try:
                values = tuple(map(cache.__getitem__, map(_VALUE, counters.values())))
                "".join(counters)
            except (KeyError, TypeError):
                pass
            else:
                out.append(
                    (str(use.get("counterSet") or ""), tuple(zip(counters, values, strict=True)))
                )
                continue
        parsed = []
        for k, v in (use.get("counters") or {}).items():
            raw = v.get("value") if v.__class__ is dict or isinstance(v, Mapping) else v
            nanos = cache.get(raw) if raw.__class__ is str else None
            if nanos is None:
                nanos = nanos_or_zero(raw)
            parsed.append((k if k.__class__ is str else str(k), nanos))
        out.append((str(use.get("counterSet") or ""), tuple(parsed)))
    return tuple(out)


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


def _typed(value: Any) -> Any:
    """A hashable copy of a raw JSON value that keeps every type apart.

    Python's ``1 == True == 1.0`` would let ``{"int": 1}``, ``{"int": true}`` and
    ``{"int": 1.0}`` (or ``{"bool": true}`` and ``{"bool": 1}``) share a memo entry, so
    numbers and booleans are tagged with their class; strings and None stand for
    themselves (no other key part equals them), lists and mappings are tagged too.
    """
    cls = value.__class__
    if cls is str or value is None:
        return value
    if cls is list or cls is tuple:
        return (list, *map(_typed, value))
    if cls is dict or isinstance(value, Mapping):
        return (dict, *sorted(((str(k), _typed(v)) for k, v in value.items()), key=_FIRST))
    return (cls, value)


def _raw_key(value: Any) -> Any:
    if value.__class__ is dict and len(value) == 1:
        for k, v in value.items():
            return (k, v if v.__class__ is str else _typed(v))
    return _typed(value)


def _key_function(
    compiled: CompiledSelector, allow_multiple: bool
) -> Callable[[DeviceEntry], Any] | None:
    """A memo key read straight from the raw device: the values the expression reads.

    Raw values are at least as specific as the CEL values they convert to, so equal
    keys mean equal results, provided the key keeps their types (:func:`_typed`); it
    saves building the CEL view of devices whose answer is already known. None when the
    expression's reads are not static.
    """
    if getattr(compiled, "_reads_whole_device", True):
        return None
    keys = sorted(compiled.read_keys, key=lambda k: (k[0], k[1] or "", k[2] or ""))
    if any(d is None or n is None for _kind, d, n in keys):
        return None
    reads_driver = compiled.reads_driver
    reads_amc = compiled.reads_allow_multiple_allocations
    lookups = [(kind == "attribute", f"{d}/{n}", str(d), str(n)) for kind, d, n in keys]

    if not reads_amc and len(lookups) == 1:
        # The common shape (``device.attributes['d'].type == 'mig'``): one read, no list.
        is_attr, qualified, domain, name = lookups[0]
        holder = "attributes" if is_attr else "capacity"

        def key_one(entry: DeviceEntry) -> Any:
            source = entry.device.get(holder) or _EMPTY
            raw = source.get(qualified)
            if raw is None and domain == entry.driver:
                raw = source.get(name)
            if raw.__class__ is dict and len(raw) == 1:
                for k, v in raw.items():
                    raw = (k, v if v.__class__ is str else _typed(v))
            elif raw is not None:
                raw = _typed(raw)
            return (entry.driver if reads_driver else None, raw)

        return key_one

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


_TOKENS = itertools.count(1)
_ENGINES = itertools.count(1)


@dataclass(frozen=True, slots=True, eq=False)
class PreparedSelectors:
    """A selector list read once: its expressions in order, and a token that keys the
    list's result on each device (:attr:`DeviceEntry.selected`).

    Tokens are unique per engine and distinct expression list, so two requests (or a
    class on every node) with the same selectors share results per device.
    """

    token: int
    expressions: tuple[str, ...]


_ALWAYS = PreparedSelectors(token=0, expressions=())


class SelectorEngine:
    """Compiles selectors once and evaluates them on devices, caching per (expression, device).

    ``allow_multiple`` is False for the stable allocator, which never passes
    ``allowMultipleAllocations`` into CEL (k8s-dra-semantics §3.1).
    """

    def __init__(self, *, list_types: bool, allow_multiple: bool) -> None:
        self.list_types = list_types
        self.allow_multiple = allow_multiple
        self.ident = next(_ENGINES)
        """Tags what this engine caches on device records shared with other engines."""
        self._compiled: dict[str, Any] = {}
        self._keys: dict[str, Callable[[DeviceEntry], Any] | None] = {}
        self._results: dict[str, dict[Any, bool | str]] = {}
        self._prepared: dict[tuple[str, ...], PreparedSelectors] = {}
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

    def prepare(self, selectors: Sequence[Mapping[str, Any]]) -> PreparedSelectors:
        """The prepared form of a selector list (nothing is compiled yet: compile errors
        surface in order, when a device reaches the selector, as the scheduler's do)."""
        if not selectors:
            return _ALWAYS
        expressions = tuple(
            str((selector.get("cel") or {}).get("expression") or "") for selector in selectors
        )
        found = self._prepared.get(expressions)
        if found is None:
            found = self._prepared[expressions] = PreparedSelectors(
                token=next(_TOKENS), expressions=expressions
            )
        return found

    def _device_error(self, entry: DeviceEntry) -> str | None:
        if entry.cel_ready != self.ident:
            error: str | None = None
            convertible = entry.convertible
            if convertible is None:
                # Without list support is the stricter check: passing it, a device
                # converts for every engine.
                problem = _conversion_error(entry.device, False)
                convertible = entry.convertible = problem is None
                if self.list_types and not convertible:
                    problem = _conversion_error(entry.device, True)
            elif not convertible:
                problem = _conversion_error(entry.device, self.list_types)
            else:
                problem = None
            if problem is True:
                error = getattr(self._cel_device(entry), "error", None) or "unsupported device"
            elif isinstance(problem, str):
                error = problem
            entry.cel_error = error
            entry.cel_ready = self.ident
        return entry.cel_error

    def _cel_device(self, entry: DeviceEntry) -> Any:
        if entry.cel is None or entry.cel_for != self.ident:
            from dradiag.analyses.cel import cel_device

            dev = entry.device
            if not self.allow_multiple and dev.get("allowMultipleAllocations"):
                dev = {k: v for k, v in dev.items() if k != "allowMultipleAllocations"}
            entry.cel = cel_device(entry.driver, dev)
            entry.cel_for = self.ident
        return entry.cel

    def _evaluate(
        self, expression: str, compiled: CompiledSelector, entry: DeviceEntry
    ) -> bool | str:
        key_fn = self._keys.get(expression)
        results: dict[Any, bool | str] | None = None
        key: Any = None
        if key_fn is not None:
            key = key_fn(entry)
            results = self._results.get(expression)
            if results is None:
                results = self._results[expression] = {}
            found = results.get(key)
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
        if results is not None:
            results[key] = result
        return result

    def matches(
        self, selectors: Sequence[Mapping[str, Any]], entry: DeviceEntry, *, owner: str
    ) -> bool:
        """All selectors true on ``entry``; AllocatorError on compile or runtime errors.

        ``owner`` prefixes errors: ``class <name>`` or ``claim <ns>/<name>``.
        """
        return self.matches_prepared(self.prepare(selectors), entry, owner=owner)

    def matches_prepared(
        self, prepared: PreparedSelectors, entry: DeviceEntry, *, owner: str
    ) -> bool:
        """:meth:`matches` for a list from :meth:`prepare`; the result is kept on the device."""
        memo = entry.selected
        if memo is not None:
            found = memo.get(prepared.token)
            if found is not None:
                return found
        if not prepared.expressions:
            return True
        result = self._match(prepared.expressions, entry, owner)
        if memo is None:
            entry.selected = {prepared.token: result}
        else:
            memo[prepared.token] = result
        return result

    def match_many(
        self, prepared: PreparedSelectors, entries: Sequence[DeviceEntry], *, owner: str
    ) -> list[bool | AllocatorError]:
        """:meth:`matches_prepared` on each entry, in order, with errors returned (not raised).

        The same results, errors and caching as one call per entry; the loop only skips
        the per-call overhead for a single selector whose result is already known for
        the values the device has (the common class selector on a fleet).
        """
        if not prepared.expressions:
            return [True] * len(entries)
        token = prepared.token
        key_fn: Callable[[DeviceEntry], Any] | None = None
        results: dict[Any, bool | str] = {}
        if len(prepared.expressions) == 1 and entries:
            expression = prepared.expressions[0]
            if not isinstance(self.compile(expression), Exception):
                key_fn = self._keys.get(expression)
                results = self._results.setdefault(expression, {})
        out: list[bool | AllocatorError] = []
        append = out.append
        ident = self.ident
        for entry in entries:
            memo = entry.selected
            if memo is not None:
                found = memo.get(token)
                if found is not None:
                    append(found)
                    continue
            if key_fn is not None:
                error = entry.cel_error if entry.cel_ready == ident else self._device_error(entry)
                if error is None:
                    known = results.get(key_fn(entry))
                    if known is True or known is False:
                        if memo is None:
                            entry.selected = {token: known}
                        else:
                            memo[token] = known
                        append(known)
                        continue
            try:
                append(self.matches_prepared(prepared, entry, owner=owner))
            except AllocatorError as exc:
                append(exc)
        return out

    def _match(self, expressions: tuple[str, ...], entry: DeviceEntry, owner: str) -> bool:
        ident = self.ident
        for i, expression in enumerate(expressions):
            compiled = self._compiled.get(expression)
            if compiled is None:
                compiled = self.compile(expression)
            if isinstance(compiled, Exception):
                raise AllocatorError(
                    f"{owner}: selector #{i}: CEL compile error: compilation failed: {compiled}",
                    kind="cel-compile",
                    selector=str(i),
                    expression=expression,
                )
            error = entry.cel_error if entry.cel_ready == ident else self._device_error(entry)
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
