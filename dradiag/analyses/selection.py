"""The selection analysis: which devices a claim's class and request selectors pick, and why not.

For every request of a claim spec (and every ``firstAvailable`` subrequest) this answers
what the scheduler's selection step would: the DeviceClass's selectors, then the
request's own, each list in order and stopping at the first false (k8s-dra-semantics
§1.7, §3.4 step 3), on every device visible from the nodes in scope. Devices are counted
matched / not matched / errored, by node, device type and MIG profile, for the class
selectors and the request selectors separately. Then count, ``allocationMode: All`` and
``matchAttribute`` constraints are checked for feasibility on a single node.

A runtime error is not a non-match: kube-scheduler aborts the scheduling attempt
(SchedulerError) on the first device a selector errors on (DESIGN §7), so errors are
their own verdict, naming the device. Compile errors are hard errors too.

This analysis is pure: a Snapshot in, data out. ``selector-check`` and the diagnosis
engine's selection phase both call :func:`analyze_claim_selection` and turn the result
into findings with :func:`selection_findings` (rule ids ``DRA-SEL-*``).

Performance: a fleet has 10⁵ devices but a few hundred distinct ones as far as any
selector can tell (it reads a handful of attributes, and the driver publishes the same
values on every GPU of a model). :class:`DeviceInventory` prepares each device for CEL
once and shares value conversions, and selectors run memoized on the values they read.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from dradiag.diagnosis.model import Evidence, EvidenceSource, Finding, Phase, Severity
from dradiag.snapshot.model import K8sObject, Kind, Snapshot, name_of

if TYPE_CHECKING:
    from dradiag.analyses.cel import CelDevice, CompiledSelector

ANY_NODE = "(any node)"
"""The node label of devices visible from every node (``allNodes``/``nodeSelector``)."""

MAX_ERRORS_KEPT = 20
"""Device errors kept per selector (the total is always counted)."""

CLAIM_DEVICE_LIMIT = 32
"""``AllocationResultsMaxSize``: devices per claim (k8s-dra-semantics §3.3)."""

BUILTIN_CLASSES_RESOURCE = "nvidia_device_classes.yaml"

SelectorOrigin = Literal["class", "request"]


class RequestStatus(StrEnum):
    """How one request (or subrequest) stands; the JSON document's spelling."""

    OK = "ok"
    NO_MATCH = "no-match"
    """No device in scope passes the class and request selectors."""
    ERROR = "error"
    """A selector errors at run time on some device: the scheduler would abort."""
    COMPILE_ERROR = "compile-error"
    CLASS_MISSING = "class-missing"
    COUNT_INFEASIBLE = "count-infeasible"
    """Devices match, but no single node has as many as the request needs."""
    INVALID = "invalid"
    """The request itself is malformed (no class, unknown allocation mode)."""


_BROKEN = frozenset(
    {
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COMPILE_ERROR,
        RequestStatus.CLASS_MISSING,
        RequestStatus.COUNT_INFEASIBLE,
        RequestStatus.INVALID,
    }
)


# -- the devices ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateDevice:
    """One published device in scope, labelled by the layers reports group by."""

    driver: str
    pool: str
    slice_device_name: str
    node: str | None
    """``spec.nodeName`` of its slice (or the device's own); None when visible from many."""
    device_type: str
    """The driver's ``type`` attribute (``gpu``, ``mig``, ``vfio``), or ``""``."""
    mig_profile: str | None
    raw: Mapping[str, Any]
    """The slice device, v1 shape."""

    @property
    def ref(self) -> str:
        """``<driver>/<pool>/<device>``, as the allocator's messages name a device."""
        return f"{self.driver}/{self.pool}/{self.slice_device_name}"

    @property
    def node_label(self) -> str:
        """The node for grouping; :data:`ANY_NODE` for node-less devices."""
        return self.node or ANY_NODE


def _attribute(device: Mapping[str, Any], driver: str, name: str) -> Any:
    """The raw value of attribute ``name`` (bare or ``<driver>/name``), or None."""
    attrs = device.get("attributes") or {}
    raw = attrs.get(name)
    if raw is None:
        raw = attrs.get(f"{driver}/{name}")
    if isinstance(raw, Mapping):
        for member in ("string", "int", "bool", "version"):
            if member in raw:
                return raw[member]
    return None


def qualified_attribute(device: Mapping[str, Any], driver: str, qualified: str) -> Any:
    """A ``domain/name`` attribute as ``matchAttribute`` looks it up.

    Fully qualified first, then the bare name when the domain is the driver's own
    (``lookupAttribute``, k8s-dra-semantics §3.5). Returns the raw member value; versions
    stay strings, because the constraint compares them as strings. None when absent.
    """
    attrs = device.get("attributes") or {}
    domain, _, ident = qualified.partition("/")
    raw = attrs.get(qualified)
    if raw is None and domain == driver:
        raw = attrs.get(ident)
    if isinstance(raw, Mapping):
        for member in ("string", "int", "bool", "version", "strings", "ints", "bools", "versions"):
            if member in raw:
                value = raw[member]
                return tuple(value) if isinstance(value, list) else value
    return None


def _latest_generation_slices(snapshot: Snapshot) -> list[K8sObject]:
    """Slices of each pool's highest generation (older ones are obsolete, §7.10)."""
    newest: dict[tuple[str, str], int] = {}
    for sl in snapshot.slices:
        spec = sl.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        generation = int(pool.get("generation") or 0)
        if generation > newest.get(key, -1):
            newest[key] = generation
    out = []
    for sl in snapshot.slices:
        spec = sl.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        if int(pool.get("generation") or 0) == newest[key]:
            out.append(sl)
    return out


def builtin_device_classes() -> tuple[K8sObject, ...]:
    """The NVIDIA driver's DeviceClasses (nvidia-driver-facts §2), as shipped in ``data/``."""
    return _builtin_classes()


@functools.cache
def _builtin_classes() -> tuple[K8sObject, ...]:
    import yaml

    data = resources.files("dradiag").joinpath("data", BUILTIN_CLASSES_RESOURCE)
    text = data.read_text("utf-8")
    doc = yaml.safe_load(text)
    return tuple(item for item in doc.get("items") or () if isinstance(item, Mapping))


class DeviceInventory:
    """Every device in scope, prepared once for any number of claims and selectors.

    Build it with :func:`build_inventory`. ``cel(i)`` gives device ``i`` as a CelDevice,
    built on first use; value conversions (semver, quantities) are shared between
    devices, which publish the same few values over and over.
    """

    __slots__ = (
        "devices",
        "classes",
        "classes_source",
        "nodes",
        "restricted_to",
        "_cel",
        "_converted",
        "_catalogue",
    )

    def __init__(
        self,
        devices: Sequence[CandidateDevice],
        *,
        classes: Mapping[str, K8sObject],
        classes_source: Literal["source", "builtin", "none"],
        nodes: Sequence[str],
        restricted_to: Sequence[str] | None = None,
    ) -> None:
        self.devices: tuple[CandidateDevice, ...] = tuple(devices)
        self.classes: Mapping[str, K8sObject] = dict(classes)
        self.classes_source = classes_source
        self.nodes: tuple[str, ...] = tuple(nodes)
        """Nodes in scope, sorted (every node a device or Node object names)."""
        self.restricted_to: tuple[str, ...] | None = (
            tuple(restricted_to) if restricted_to is not None else None
        )
        self._cel: list[CelDevice | None] = [None] * len(self.devices)
        self._converted: dict[tuple[str, str, str, Any], tuple[str | None, Any]] = {}
        self._catalogue: AttributeCatalogue | None = None

    def __len__(self) -> int:
        return len(self.devices)

    def cel(self, index: int) -> CelDevice:
        """Device ``index`` prepared for CEL (built once)."""
        found = self._cel[index]
        if found is None:
            found = self._build_cel(self.devices[index])
            self._cel[index] = found
        return found

    def _build_cel(self, device: CandidateDevice) -> CelDevice:
        """``cel_device``, with each distinct (name, value) converted only once.

        The CEL engine converts a device's attributes and capacities (semver and
        quantity parsing) every time; a fleet repeats the same values on every GPU, so
        each distinct one is converted through ``cel_device`` once and the CelDevice is
        assembled from the shared results.
        """
        from dradiag.analyses.cel import CelDevice
        from dradiag.analyses.cel.environment import DomainMap

        raw = device.raw
        driver = device.driver
        attributes = DomainMap()
        capacity = DomainMap()
        error: str | None = None
        cache = self._converted
        for holder, target in (("attributes", attributes), ("capacity", capacity)):
            entries = raw.get(holder)
            if not isinstance(entries, Mapping):
                continue
            for name, value in entries.items():
                try:
                    # {"string": "mig"} / {"value": "80Gi"}: one member with a scalar.
                    ((member, inner),) = value.items()
                    failure, parts = cache[(holder, name, member, inner)]
                except (KeyError, TypeError, ValueError, AttributeError):
                    failure, parts = self._convert(driver, holder, name, value)
                if failure is not None or parts is None:
                    error = error or failure
                    continue
                domain, ident, cel_value = parts
                target.setdefault(domain, {})[ident] = cel_value
        return CelDevice(
            driver,
            attributes,
            capacity,
            bool(raw.get("allowMultipleAllocations")),
            error=error,
            name=device.slice_device_name,
        )

    def _convert(self, driver: str, holder: str, name: str, value: Any) -> tuple[str | None, Any]:
        """Convert one attribute/capacity through ``cel_device``; cache scalar ones."""
        from dradiag.analyses.cel import cel_device

        single = cel_device(driver, {holder: {name: value}})
        converted: tuple[str | None, Any]
        if single.error is not None:
            converted = (single.error, None)
        else:
            maps = single.attributes if holder == "attributes" else single.capacity
            ((domain, values),) = maps.items()
            ((ident, cel_value),) = values.items()
            converted = (None, (domain, ident, cel_value))
        if isinstance(value, Mapping) and len(value) == 1:
            ((member, inner),) = value.items()
            if isinstance(inner, str | int | float | bool):
                self._converted[(holder, name, member, inner)] = converted
        return converted

    @property
    def catalogue(self) -> AttributeCatalogue:
        """What attributes and capacities the devices in scope publish (for near misses)."""
        if self._catalogue is None:
            self._catalogue = AttributeCatalogue.of(self.devices)
        return self._catalogue


@dataclass(frozen=True, slots=True, kw_only=True)
class AttributeCatalogue:
    """Attribute and capacity names published in scope, with their types and values.

    Keys are CEL's (domain, name): a bare ``productName`` of driver ``gpu.nvidia.com`` is
    ``("gpu.nvidia.com", "productName")``.
    """

    attribute_types: Mapping[tuple[str, str], frozenset[str]]
    """(domain, name) → the value members seen (``string``, ``version``, ``int`` ...)."""
    attribute_values: Mapping[tuple[str, str], frozenset[Any]]
    """(domain, name) → distinct values (capped per key)."""
    capacities: Mapping[tuple[str, str], frozenset[str]]
    """(domain, name) → distinct quantity strings (capped per key)."""
    mig_profile_memory: Mapping[str, frozenset[str]]
    """MIG profile → the ``memory`` capacities published for it."""

    VALUE_CAP = 64

    @staticmethod
    def of(devices: Iterable[CandidateDevice]) -> AttributeCatalogue:
        """Collect the catalogue of ``devices``."""
        types: dict[tuple[str, str], set[str]] = defaultdict(set)
        values: dict[tuple[str, str], set[Any]] = defaultdict(set)
        caps: dict[tuple[str, str], set[str]] = defaultdict(set)
        profile_memory: dict[str, set[str]] = defaultdict(set)
        cap = AttributeCatalogue.VALUE_CAP
        seen_attrs: set[int] = set()
        for device in devices:
            attrs = device.raw.get("attributes") or {}
            # Devices of one GPU model share their attribute dicts after interning;
            # skip repeats cheaply by identity.
            if id(attrs) in seen_attrs:
                continue
            for name, raw in attrs.items():
                domain, _, ident = name.partition("/") if "/" in name else ("", "", name)
                key = (domain or device.driver, ident)
                if isinstance(raw, Mapping):
                    for member, value in raw.items():
                        types[key].add(member)
                        bucket = values[key]
                        if len(bucket) < cap:
                            bucket.add(tuple(value) if isinstance(value, list) else value)
            for name, raw in (device.raw.get("capacity") or {}).items():
                domain, _, ident = name.partition("/") if "/" in name else ("", "", name)
                key = (domain or device.driver, ident)
                text = raw.get("value") if isinstance(raw, Mapping) else raw
                if text is not None and len(caps[key]) < cap:
                    caps[key].add(str(text))
                if device.mig_profile and ident == "memory" and text is not None:
                    profile_memory[device.mig_profile].add(str(text))
        return AttributeCatalogue(
            attribute_types={k: frozenset(v) for k, v in types.items()},
            attribute_values={k: frozenset(v) for k, v in values.items()},
            capacities={k: frozenset(v) for k, v in caps.items()},
            mig_profile_memory={k: frozenset(v) for k, v in profile_memory.items()},
        )

    def names(self) -> set[str]:
        """Every attribute and capacity name, whatever the domain."""
        return {n for _, n in self.attribute_types} | {n for _, n in self.capacities}

    def domains_of(self, name: str, kind: str = "attribute") -> list[str]:
        """Domains under which ``name`` is published, sorted."""
        table = self.attribute_types if kind == "attribute" else self.capacities
        return sorted({d for d, n in table if n == name})


def build_inventory(
    snapshot: Snapshot,
    *,
    nodes: Sequence[str] | None = None,
    builtin_classes_fallback: bool = True,
) -> DeviceInventory:
    """Every device visible from ``nodes`` (all when None), and the DeviceClasses to use.

    Only each pool's newest generation counts. When the source holds no DeviceClass at
    all and ``builtin_classes_fallback`` is set, the NVIDIA driver's built-in classes are
    used (the caller reports that as a note).
    """
    wanted = set(nodes) if nodes is not None else None
    devices: list[CandidateDevice] = []
    node_names: set[str] = set(snapshot.node_names())
    for sl in _latest_generation_slices(snapshot):
        spec = sl.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        slice_node = spec.get("nodeName")
        for raw in spec.get("devices") or ():
            if not isinstance(raw, Mapping):
                continue
            node = raw.get("nodeName") or slice_node
            node = str(node) if node else None
            if wanted is not None and node is not None and node not in wanted:
                continue
            profile = _attribute(raw, driver, "profile")
            devices.append(
                CandidateDevice(
                    driver=driver,
                    pool=pool,
                    slice_device_name=str(raw.get("name") or ""),
                    node=node,
                    device_type=str(_attribute(raw, driver, "type") or ""),
                    mig_profile=str(profile) if profile is not None else None,
                    raw=raw,
                )
            )
    classes = {name_of(c): c for c in snapshot.device_classes}
    source: Literal["source", "builtin", "none"] = "source"
    if not classes:
        if builtin_classes_fallback:
            classes = {name_of(c): c for c in builtin_device_classes()}
            source = "builtin"
        else:
            source = "none"
    scope = sorted(wanted) if wanted is not None else sorted(node_names)
    devices.sort(key=lambda d: (d.node_label, d.driver, d.pool, d.slice_device_name))
    return DeviceInventory(
        devices,
        classes=classes,
        classes_source=source,
        nodes=scope,
        restricted_to=sorted(wanted) if wanted is not None else None,
    )


# -- results --------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """Devices matched / not matched / errored."""

    matched: int = 0
    not_matched: int = 0
    errored: int = 0

    @property
    def total(self) -> int:
        """Devices counted."""
        return self.matched + self.not_matched + self.errored

    def as_dict(self) -> dict[str, int]:
        """The JSON spelling."""
        return {"matched": self.matched, "notMatched": self.not_matched, "errored": self.errored}


@dataclass(frozen=True, slots=True, kw_only=True)
class StageResult:
    """One stage (class selectors or request selectors) over the devices it saw."""

    evaluated: bool
    """False when the stage could not run (compile error, missing class, earlier stage)."""
    total: Tally
    by_node: Mapping[str, Tally]
    by_type: Mapping[str, Tally]
    by_profile: Mapping[str, Tally]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompileProblem:
    """A selector that does not compile: cel-go's position and reason."""

    reason: str
    position: int | None
    line: int | None
    column: int | None
    caret: str
    """The expression line, a caret under the position, and the reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceError:
    """A runtime error of one selector on one device."""

    device: str
    """``<driver>/<pool>/<device>``."""
    node: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectorResult:
    """One selector (class or request) and what it did on the devices it was run on."""

    origin: SelectorOrigin
    owner: str
    """The DeviceClass name (class selectors) or the request label (request selectors)."""
    index: int
    expression: str
    compile_error: CompileProblem | None = None
    evaluated: int = 0
    true: int = 0
    false: int = 0
    error_count: int = 0
    errors: tuple[DeviceError, ...] = ()
    """The first :data:`MAX_ERRORS_KEPT` errors, in device order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSelection:
    """One request (``exactly``) or one ``firstAvailable`` subrequest."""

    request: str
    subrequest: str | None
    device_class: str
    class_found: bool
    class_source: Literal["source", "builtin", "none"]
    allocation_mode: str
    count: int
    admin_access: bool
    class_selectors: tuple[SelectorResult, ...]
    request_selectors: tuple[SelectorResult, ...]
    class_stage: StageResult
    request_stage: StageResult
    matched_indices: tuple[int, ...]
    """Inventory indices of the devices that pass both stages."""
    best_node: str | None
    best_node_count: int
    status: RequestStatus
    problem: str = ""
    """Why the request is invalid, for :attr:`RequestStatus.INVALID`."""

    @property
    def label(self) -> str:
        """``request`` or ``request/subrequest`` (how results and constraints name it)."""
        return f"{self.request}/{self.subrequest}" if self.subrequest else self.request

    @property
    def matched(self) -> int:
        """Devices in scope that pass the class and request selectors."""
        return len(self.matched_indices)

    @property
    def broken(self) -> bool:
        """True when this alternative cannot be allocated (or would abort scheduling)."""
        return self.status in _BROKEN

    def selectors(self) -> tuple[SelectorResult, ...]:
        """Class selectors, then request selectors: the order the scheduler runs them."""
        return self.class_selectors + self.request_selectors


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestGroup:
    """A request of the claim: one alternative (``exactly``) or its subrequests in order."""

    name: str
    first_available: bool
    alternatives: tuple[RequestSelection, ...]

    @property
    def chosen(self) -> RequestSelection | None:
        """The first alternative that can be satisfied; None when none can.

        An alternative whose selector errors aborts scheduling before later ones are
        tried, so an error stops the search here (§1.7, §3.8).
        """
        for alt in self.alternatives:
            if alt.status is RequestStatus.ERROR:
                return None
            if not alt.broken:
                return alt
        return None

    @property
    def status(self) -> RequestStatus:
        """The request's status: that of its chosen alternative, else of the first broken."""
        chosen = self.chosen
        if chosen is not None:
            return chosen.status
        for alt in self.alternatives:
            if alt.status is RequestStatus.ERROR:
                return alt.status
        return self.alternatives[0].status if self.alternatives else RequestStatus.INVALID


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstraintResult:
    """Feasibility of one ``matchAttribute`` constraint on a single node."""

    index: int
    attribute: str
    requests: tuple[str, ...]
    feasible: bool
    feasible_nodes: int
    detail: str
    lacking_attribute: int
    """Matching devices that do not publish the attribute at all (never usable here)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimSelection:
    """The selection analysis of one claim spec."""

    namespace: str
    claim_name: str | None
    requests: tuple[RequestGroup, ...]
    constraints: tuple[ConstraintResult, ...]
    devices_in_scope: int
    nodes_in_scope: tuple[str, ...]
    classes_source: Literal["source", "builtin", "none"]
    device_limit_exceeded: int | None = None
    """The claim's minimum device count when above :data:`CLAIM_DEVICE_LIMIT`."""
    free_now: Mapping[str, int] | None = None
    """Request label → matching devices not allocated now (with ``--now``)."""
    inventory: DeviceInventory | None = field(default=None, compare=False, repr=False)
    """The devices analysed, for near-miss explanations of broken requests."""

    @property
    def broken(self) -> bool:
        """True when some request cannot be satisfied or would abort scheduling."""
        return (
            any(g.status in _BROKEN for g in self.requests)
            or any(not c.feasible for c in self.constraints)
            or self.device_limit_exceeded is not None
        )


# -- evaluation -----------------------------------------------------------------------


def _compile(expression: str) -> tuple[CompiledSelector | None, CompileProblem | None]:
    from dradiag.analyses.cel import CelCompileError, compile_selector

    try:
        return compile_selector(expression), None
    except CelCompileError as exc:
        return None, CompileProblem(
            reason=exc.reason,
            position=exc.position,
            line=exc.line,
            column=exc.column,
            caret=exc.render_caret(),
        )


def _selector_expressions(selectors: Any) -> list[str]:
    out = []
    for sel in selectors or ():
        cel = sel.get("cel") if isinstance(sel, Mapping) else None
        expr = cel.get("expression") if isinstance(cel, Mapping) else None
        out.append(str(expr) if expr is not None else "")
    return out


@dataclass(slots=True)
class _SelectorRun:
    origin: SelectorOrigin
    owner: str
    index: int
    expression: str
    compiled: CompiledSelector | None
    problem: CompileProblem | None
    fn: Callable[[CelDevice], bool] | None = None
    evaluated: int = 0
    true: int = 0
    false: int = 0
    error_count: int = 0
    errors: list[DeviceError] = field(default_factory=list)

    def result(self) -> SelectorResult:
        problem: CompileProblem | None
        if self.problem is None and not self.expression:
            problem = CompileProblem(
                reason="CEL expression empty (unsupported selector type?)",
                position=None,
                line=None,
                column=None,
                caret="CEL expression empty (unsupported selector type?)",
            )
        else:
            problem = self.problem
        return SelectorResult(
            origin=self.origin,
            owner=self.owner,
            index=self.index,
            expression=self.expression,
            compile_error=problem,
            evaluated=self.evaluated,
            true=self.true,
            false=self.false,
            error_count=self.error_count,
            errors=tuple(self.errors),
        )


def _prepare(origin: SelectorOrigin, owner: str, expressions: Sequence[str]) -> list[_SelectorRun]:
    runs = []
    for index, expression in enumerate(expressions):
        compiled, problem = _compile(expression) if expression else (None, None)
        runs.append(
            _SelectorRun(
                origin=origin,
                owner=owner,
                index=index,
                expression=expression,
                compiled=compiled,
                problem=problem,
                fn=_memoized(compiled) if compiled is not None else None,
            )
        )
    return runs


# One memoized evaluator per compiled selector and run: the class selectors of
# gpu.nvidia.com are shared by every request of every claim checked in one run.
_MEMO: dict[int, tuple[Any, Callable[[Any], bool]]] = {}


def _memoized(compiled: CompiledSelector) -> Callable[[CelDevice], bool]:
    found = _MEMO.get(id(compiled))
    if found is not None and found[0] is compiled:
        return found[1]
    fn = compiled.memoized()
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[id(compiled)] = (compiled, fn)
    return fn


class _Breakdown:
    __slots__ = ("total", "by_node", "by_type", "by_profile")

    def __init__(self) -> None:
        self.total = Tally()
        self.by_node: dict[str, Tally] = defaultdict(Tally)
        self.by_type: dict[str, Tally] = defaultdict(Tally)
        self.by_profile: dict[str, Tally] = defaultdict(Tally)

    def add(self, device: CandidateDevice, outcome: int) -> None:
        tallies = [self.total, self.by_node[device.node_label], self.by_type[device.device_type]]
        if device.mig_profile is not None:
            tallies.append(self.by_profile[device.mig_profile])
        for tally in tallies:
            if outcome == 1:
                tally.matched += 1
            elif outcome == 0:
                tally.not_matched += 1
            else:
                tally.errored += 1

    def freeze(self, evaluated: bool) -> StageResult:
        return StageResult(
            evaluated=evaluated,
            total=self.total,
            by_node=dict(sorted(self.by_node.items())),
            by_type=dict(sorted(self.by_type.items())),
            by_profile=dict(sorted(self.by_profile.items())),
        )


def _run_stage(
    inventory: DeviceInventory, indices: Iterable[int], runs: list[_SelectorRun]
) -> tuple[StageResult, list[int]]:
    """Run selectors in order on each device, as ``isSelectable`` does; return the matches.

    Outcome per device: matched (all true), not matched (a false came first) or errored
    (an error came first). The allocator stops at the first false, so a selector after
    a false never runs on that device, and cannot error there.
    """
    from dradiag.analyses.cel import CelRuntimeError

    breakdown = _Breakdown()
    matched: list[int] = []
    devices = inventory.devices
    cel = inventory.cel
    fns = [(run, run.fn) for run in runs]
    for index in indices:
        device = devices[index]
        outcome = 1
        cel_dev = cel(index)
        for run, fn in fns:
            assert fn is not None
            run.evaluated += 1
            try:
                ok = fn(cel_dev)
            except CelRuntimeError as exc:
                run.error_count += 1
                if len(run.errors) < MAX_ERRORS_KEPT:
                    run.errors.append(
                        DeviceError(device=device.ref, node=device.node_label, message=exc.message)
                    )
                outcome = -1
                break
            if ok:
                run.true += 1
            else:
                run.false += 1
                outcome = 0
                break
        breakdown.add(device, outcome)
        if outcome == 1:
            matched.append(index)
    return breakdown.freeze(True), matched


_EMPTY_STAGE = StageResult(evaluated=False, total=Tally(), by_node={}, by_type={}, by_profile={})


def _per_node(inventory: DeviceInventory, indices: Iterable[int]) -> Counter[str]:
    """Matching devices visible from each node in scope (node-less ones count for all)."""
    counts: Counter[str] = Counter()
    anywhere = 0
    for index in indices:
        node = inventory.devices[index].node
        if node is None:
            anywhere += 1
        else:
            counts[node] += 1
    if anywhere:
        for node in inventory.nodes or (ANY_NODE,):
            counts[node] += anywhere
    return counts


def _analyze_alternative(
    inventory: DeviceInventory,
    *,
    request: str,
    subrequest: str | None,
    spec: Mapping[str, Any],
) -> RequestSelection:
    label = f"{request}/{subrequest}" if subrequest else request
    class_name = str(spec.get("deviceClassName") or "")
    mode = str(spec.get("allocationMode") or "ExactCount")
    count_raw = spec.get("count")
    count = int(count_raw) if isinstance(count_raw, int) and count_raw > 0 else 1
    problem = ""
    if not class_name:
        problem = "missing device class name (unsupported request type?)"
    elif mode not in ("ExactCount", "All"):
        problem = f"unsupported count mode {mode}"
    device_class = inventory.classes.get(class_name) if class_name else None
    class_exprs = _selector_expressions(((device_class or {}).get("spec") or {}).get("selectors"))
    request_exprs = _selector_expressions(spec.get("selectors"))
    class_runs = _prepare("class", class_name, class_exprs)
    request_runs = _prepare("request", label, request_exprs)

    def unusable(runs: list[_SelectorRun]) -> bool:
        return any(r.compiled is None for r in runs)

    class_stage = request_stage = _EMPTY_STAGE
    matched: list[int] = []
    if device_class is not None and not problem and not unusable(class_runs):
        class_stage, class_matched = _run_stage(
            inventory, range(len(inventory.devices)), class_runs
        )
        if not unusable(request_runs):
            request_stage, matched = _run_stage(inventory, class_matched, request_runs)
    per_node = _per_node(inventory, matched)
    best_node, best_count = (None, 0)
    if per_node:
        best_node, best_count = max(per_node.items(), key=lambda kv: (kv[1], _neg_key(kv[0])))
    runs = class_runs + request_runs
    if problem:
        status = RequestStatus.INVALID
    elif device_class is None:
        status = RequestStatus.CLASS_MISSING
    elif any(r.compiled is None for r in runs):
        status = RequestStatus.COMPILE_ERROR
    elif any(r.error_count for r in runs):
        status = RequestStatus.ERROR
    elif not matched:
        status = RequestStatus.NO_MATCH
    elif mode == "ExactCount" and best_count < count:
        status = RequestStatus.COUNT_INFEASIBLE
    else:
        status = RequestStatus.OK
    return RequestSelection(
        request=request,
        subrequest=subrequest,
        device_class=class_name,
        class_found=device_class is not None,
        class_source=inventory.classes_source,
        allocation_mode=mode,
        count=count,
        admin_access=bool(spec.get("adminAccess")),
        class_selectors=tuple(r.result() for r in class_runs),
        request_selectors=tuple(r.result() for r in request_runs),
        class_stage=class_stage,
        request_stage=request_stage,
        matched_indices=tuple(matched),
        best_node=best_node,
        best_node_count=best_count,
        status=status,
        problem=problem,
    )


def _neg_key(name: str) -> tuple[int, ...]:
    # max() picks the highest count; among equals, the alphabetically first node.
    return tuple(-ord(c) for c in name)


def _constraint_results(
    inventory: DeviceInventory,
    constraints: Sequence[Any],
    groups: Sequence[RequestGroup],
) -> list[ConstraintResult]:
    out = []
    for c_index, constraint in enumerate(constraints):
        if not isinstance(constraint, Mapping):
            continue
        attribute = constraint.get("matchAttribute")
        if not attribute:
            continue
        attribute = str(attribute)
        named = [str(r) for r in constraint.get("requests") or ()]
        alternatives: list[RequestSelection] = []
        for group in groups:
            for alt in group.alternatives:
                if not named or group.name in named or alt.label in named:
                    chosen = group.chosen
                    if chosen is alt or (chosen is None and alt is group.alternatives[0]):
                        alternatives.append(alt)
        if not alternatives:
            continue
        out.append(_one_constraint(inventory, c_index, attribute, alternatives, named))
    return out


def _one_constraint(
    inventory: DeviceInventory,
    c_index: int,
    attribute: str,
    alternatives: Sequence[RequestSelection],
    named: Sequence[str],
) -> ConstraintResult:
    """Whether some node has devices for every constrained request sharing one value.

    Necessary conditions per node and value: each request's own matches with that value
    cover its count (All: every match on the node carries it), and together they
    cover the sum of the counts (devices are exclusive). The allocator's backtracking
    search can still fail where this passes when requests compete for the same few
    devices; it never succeeds where this fails.
    """
    devices = inventory.devices
    # node -> value -> per-request count; and the union of device indices
    per: dict[str, dict[Any, list[set[int]]]] = defaultdict(
        lambda: defaultdict(lambda: [set() for _ in alternatives])
    )
    totals: dict[str, list[int]] = defaultdict(lambda: [0] * len(alternatives))
    lacking = 0
    for a_index, alt in enumerate(alternatives):
        for index in alt.matched_indices:
            device = devices[index]
            nodes = [device.node] if device.node else list(inventory.nodes or (ANY_NODE,))
            value = qualified_attribute(device.raw, device.driver, attribute)
            for node in nodes:
                totals[node][a_index] += 1
            if value is None:
                lacking += 1
                continue
            values = value if isinstance(value, tuple) else (value,)
            for node in nodes:
                for v in values:
                    per[node][v][a_index].add(index)
    feasible_nodes = 0
    best: tuple[int, str, Any] | None = None
    for node, by_value in per.items():
        ok_here = False
        for value, sets in by_value.items():
            covered = 0
            ok = True
            for a_index, alt in enumerate(alternatives):
                have = len(sets[a_index])
                need = totals[node][a_index] if alt.allocation_mode == "All" else alt.count
                if alt.allocation_mode == "All" and have < totals[node][a_index]:
                    ok = False
                if have < need:
                    ok = False
                covered += min(have, need)
            union = len(set().union(*sets))
            need_total = sum(
                totals[node][i] if a.allocation_mode == "All" else a.count
                for i, a in enumerate(alternatives)
            )
            if union < need_total:
                ok = False
            if ok:
                ok_here = True
                break
            if best is None or covered > best[0]:
                best = (covered, node, value)
        if ok_here:
            feasible_nodes += 1
    labels = tuple(a.label for a in alternatives)
    need_desc = ", ".join(
        f"{a.label}: {'all' if a.allocation_mode == 'All' else a.count}" for a in alternatives
    )
    if feasible_nodes:
        detail = (
            f"{feasible_nodes} node(s) have devices for {need_desc} that share one value of "
            f"{attribute}"
        )
    else:
        detail = f"no node has devices for {need_desc} that share one value of {attribute}"
        if best is not None:
            detail += f"; closest: node {best[1]} with {attribute}={best[2]}"
        if lacking:
            detail += (
                f"; {lacking} matching device(s) do not publish {attribute} and can never be "
                "part of the constrained set"
            )
    return ConstraintResult(
        index=c_index,
        attribute=attribute,
        requests=tuple(named) or labels,
        feasible=feasible_nodes > 0,
        feasible_nodes=feasible_nodes,
        detail=detail,
        lacking_attribute=lacking,
    )


_INVENTORY_CACHE: list[tuple[Snapshot, tuple[str, ...] | None, bool, DeviceInventory]] = []


def _cached_inventory(
    snapshot: Snapshot, nodes: Sequence[str] | None, fallback: bool
) -> DeviceInventory:
    key_nodes = tuple(sorted(nodes)) if nodes is not None else None
    for snap, cached_nodes, cached_fallback, inventory in _INVENTORY_CACHE:
        if snap is snapshot and cached_nodes == key_nodes and cached_fallback == fallback:
            return inventory
    inventory = build_inventory(snapshot, nodes=nodes, builtin_classes_fallback=fallback)
    _INVENTORY_CACHE[:] = [(snapshot, key_nodes, fallback, inventory)]
    return inventory


def analyze_claim_selection(
    snapshot: Snapshot,
    claim_spec: Mapping[str, Any],
    *,
    namespace: str,
    claim_name: str | None,
    nodes: Sequence[str] | None = None,
    builtin_classes_fallback: bool = True,
    inventory: DeviceInventory | None = None,
) -> ClaimSelection:
    """Selection for one claim spec (v1 shape) against the devices of ``snapshot``.

    ``nodes`` restricts the devices to those visible from these nodes. ``inventory``
    may be passed to share device preparation between many claims; otherwise the last
    inventory built for this Snapshot is reused.
    """
    if inventory is None:
        inventory = _cached_inventory(snapshot, nodes, builtin_classes_fallback)
    devices_spec = claim_spec.get("devices") or {}
    groups: list[RequestGroup] = []
    for request in devices_spec.get("requests") or ():
        if not isinstance(request, Mapping):
            continue
        name = str(request.get("name") or "")
        subs = request.get("firstAvailable")
        if isinstance(subs, list) and subs:
            alternatives = tuple(
                _analyze_alternative(
                    inventory, request=name, subrequest=str(sub.get("name") or ""), spec=sub
                )
                for sub in subs
                if isinstance(sub, Mapping)
            )
            groups.append(RequestGroup(name=name, first_available=True, alternatives=alternatives))
        else:
            exactly = request.get("exactly")
            spec = exactly if isinstance(exactly, Mapping) else {}
            alternative = _analyze_alternative(inventory, request=name, subrequest=None, spec=spec)
            groups.append(
                RequestGroup(name=name, first_available=False, alternatives=(alternative,))
            )
    constraints = _constraint_results(inventory, devices_spec.get("constraints") or (), groups)
    minimum = sum(
        min((a.count if a.allocation_mode != "All" else 1) for a in g.alternatives)
        for g in groups
        if g.alternatives
    )
    return ClaimSelection(
        namespace=namespace,
        claim_name=claim_name,
        requests=tuple(groups),
        constraints=tuple(constraints),
        devices_in_scope=len(inventory),
        nodes_in_scope=inventory.nodes,
        classes_source=inventory.classes_source,
        device_limit_exceeded=minimum if minimum > CLAIM_DEVICE_LIMIT else None,
        inventory=inventory,
    )


def with_free_now(result: ClaimSelection, free_now: Mapping[str, int]) -> ClaimSelection:
    """``result`` with the ``--now`` counts attached."""
    from dataclasses import replace

    return replace(result, free_now=dict(free_now))


# -- findings -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleInfo:
    """The catalogue entry of a code-backed selection rule (mirrored in rules/selection.yaml)."""

    severity: Severity
    title: str
    next: tuple[str, ...]


RULES: Mapping[str, RuleInfo] = {
    "DRA-SEL-CLASS-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="the request's DeviceClass does not exist",
        next=("kubectl get deviceclasses", "check the driver's Helm values resources.gpus.enabled"),
    ),
    "DRA-SEL-BUILTIN-CLASSES": RuleInfo(
        severity=Severity.INFO,
        title="DeviceClasses were taken from the NVIDIA driver's built-in set",
        next=("kubectl get deviceclasses -o yaml, to check against the cluster's real classes",),
    ),
    "DRA-SEL-CEL-COMPILE-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector does not compile",
        next=("fix the expression at the caret; the apiserver rejects it on create",),
    ),
    "DRA-SEL-CEL-RUNTIME-ERROR": RuleInfo(
        severity=Severity.ERROR,
        title="a CEL selector errors on a device: kube-scheduler would abort scheduling",
        next=(
            "guard optional attributes: has(device.attributes['d'].x), "
            "device.attributes['d'].?x.orValue(default), or 'x' in device.attributes['d']",
        ),
    ),
    "DRA-SEL-NO-MATCH": RuleInfo(
        severity=Severity.ERROR,
        title="no device matches the request's selectors",
        next=("compare the failing clause with the values devices publish",),
    ),
    "DRA-SEL-COUNT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="no single node has as many matching devices as the request's count",
        next=("lower count, or split the request across pods",),
    ),
    "DRA-SEL-ALL-MODE": RuleInfo(
        severity=Severity.INFO,
        title="allocationMode All takes every matching device on the chosen node",
        next=("check that no matching device on that node is in use or tainted",),
    ),
    "DRA-SEL-CONSTRAINT-INFEASIBLE": RuleInfo(
        severity=Severity.ERROR,
        title="a matchAttribute constraint cannot be met on any single node",
        next=("compare the attribute's values across the matching devices per node",),
    ),
    "DRA-SEL-CLAIM-LIMIT": RuleInfo(
        severity=Severity.ERROR,
        title="the claim asks for more than 32 devices",
        next=("split the claim; AllocationResultsMaxSize is 32",),
    ),
    "DRA-SEL-REQUEST-INVALID": RuleInfo(
        severity=Severity.ERROR,
        title="a request is malformed (no device class, or an unknown allocation mode)",
        next=("set exactly.deviceClassName and allocationMode ExactCount or All",),
    ),
    "DRA-SEL-SUBREQUEST-FALLBACK": RuleInfo(
        severity=Severity.WARNING,
        title="a firstAvailable subrequest can never be satisfied; a later one is used",
        next=("drop or fix the subrequest that cannot match",),
    ),
    "DRA-SEL-UNKNOWN-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute or capacity no device publishes",
        next=("kubectl get resourceslices -o yaml: compare the key with what is published",),
    ),
    "DRA-SEL-WRONG-DOMAIN": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads a key under the wrong domain",
        next=("bare keys belong to the driver's domain; standard keys to resource.kubernetes.io",),
    ),
    "DRA-SEL-TYPE-MISMATCH": RuleInfo(
        severity=Severity.WARNING,
        title="a selector compares values of different types",
        next=("compare versions with semver(), quantities with quantity() and compareTo()",),
    ),
    "DRA-SEL-MIG-PROFILE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector names a MIG profile no device publishes",
        next=("use the profile attribute's spelling (1g.10gb), not the device name's (1g10gb)",),
    ),
    "DRA-SEL-PROFILE-CAPACITY": RuleInfo(
        severity=Severity.WARNING,
        title="a MIG profile's name is not its memory capacity",
        next=("select on the profile attribute, or compare memory with what is published",),
    ),
    "DRA-SEL-OPTIONAL-ATTRIBUTE": RuleInfo(
        severity=Severity.WARNING,
        title="a selector reads an attribute only some devices publish, without a guard",
        next=("guard with has(), .?key.orValue(default) or 'key' in device.attributes[domain]",),
    ),
    "DRA-SEL-CLAIM-NOT-FOUND": RuleInfo(
        severity=Severity.ERROR,
        title="a pod references a ResourceClaim or ResourceClaimTemplate that does not exist",
        next=("kubectl get resourceclaimtemplates,resourceclaims -n <namespace>",),
    ),
    "DRA-SEL-NONE-FREE": RuleInfo(
        severity=Severity.WARNING,
        title="devices match, but none of them is free now",
        next=("dradiag inventory, to see who holds the matching devices",),
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionProblem:
    """A finding and the selector (or request) it is about, so callers can locate it."""

    finding: Finding
    request: str | None = None
    subrequest: str | None = None
    origin: SelectorOrigin | None = None
    selector_index: int | None = None
    offset: int | None = None
    """Character offset in the expression (compile errors)."""


def _finding(rule: str, detail: str, *, title: str | None = None, **kw: Any) -> Finding:
    info = RULES[rule]
    return Finding(
        rule=rule,
        phase=Phase.SELECTION,
        severity=kw.pop("severity", info.severity),
        title=title or info.title,
        detail=detail,
        next=tuple(kw.pop("next", info.next)),
        evidence=tuple(kw.pop("evidence", ())),
        identifiers=tuple(kw.pop("identifiers", ())),
    )


def _tally_text(stage: StageResult, what: str) -> str:
    t = stage.total
    return (
        f"{what}: {t.matched} matched, {t.not_matched} not matched, {t.errored} errored "
        f"of {t.total}"
    )


def _claim_label(result: ClaimSelection) -> str:
    return f"{result.namespace}/{result.claim_name}" if result.claim_name else result.namespace


def selection_problems(result: ClaimSelection) -> list[SelectionProblem]:
    """Every problem of a claim's selection, with what it is about."""
    problems: list[SelectionProblem] = []
    claim = _claim_label(result)
    for group in result.requests:
        chosen = group.chosen
        for alt in group.alternatives:
            if group.first_available and chosen is not None and alt is not chosen:
                if alt.broken and group.alternatives.index(alt) < group.alternatives.index(chosen):
                    problems.append(
                        SelectionProblem(
                            finding=_finding(
                                "DRA-SEL-SUBREQUEST-FALLBACK",
                                f"claim {claim}, request {alt.label}: {alt.status.value}; "
                                f"subrequest {chosen.label} is used instead",
                            ),
                            request=alt.request,
                            subrequest=alt.subrequest,
                        )
                    )
                continue
            problems.extend(_alternative_problems(claim, alt, result))
    for c in result.constraints:
        if not c.feasible:
            problems.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CONSTRAINT-INFEASIBLE",
                        f"claim {claim}, constraint #{c.index} (matchAttribute {c.attribute}): "
                        + c.detail,
                    ),
                    request=c.requests[0] if c.requests else None,
                )
            )
    if result.device_limit_exceeded is not None:
        problems.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLAIM-LIMIT",
                    f"claim {claim}: number of requested devices {result.device_limit_exceeded} "
                    f"exceeds the claim limit of {CLAIM_DEVICE_LIMIT}",
                )
            )
        )
    return problems


def _near_miss_problems(
    alt: RequestSelection, result: ClaimSelection
) -> tuple[list[SelectionProblem], list[Evidence]]:
    """Hints as problems of their own, and the closest devices as evidence for NO-MATCH."""
    if result.inventory is None or alt.status not in (
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COUNT_INFEASIBLE,
    ):
        return [], []
    from dradiag.analyses.near_miss import explain_request

    report = explain_request(result.inventory, alt)
    problems = [
        SelectionProblem(
            finding=_finding(hint.rule, f"request {alt.label}: {hint.message}"),
            request=alt.request,
            subrequest=alt.subrequest,
            origin=hint.origin,
            selector_index=hint.selector_index,
            offset=hint.offset,
        )
        for hint in report.hints
    ]
    evidence = []
    for near in report.closest:
        parts = []
        for failure in near.failed:
            has = ", ".join(f"{k} = {v}" for k, v in failure.actual) or "no attribute read"
            what = f"error: {failure.message}" if failure.outcome == "error" else "false"
            parts.append(f"{failure.clause} -> {what} (device has {has})")
        evidence.append(
            Evidence(
                source=EvidenceSource.CEL,
                ref=f"{near.device} ({near.selector_origin} selector #{near.selector_index}, "
                f"{len(near.failed)} of {near.clauses} clause(s) fail)",
                excerpt="; ".join(parts),
            )
        )
    return problems, evidence


def _alternative_problems(
    claim: str, alt: RequestSelection, result: ClaimSelection
) -> list[SelectionProblem]:
    out: list[SelectionProblem] = []
    where: dict[str, Any] = {"request": alt.request, "subrequest": alt.subrequest}
    hint_problems, near_evidence = _near_miss_problems(alt, result)
    if alt.status is RequestStatus.INVALID:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-REQUEST-INVALID", f"claim {claim}, request {alt.label}: {alt.problem}"
                ),
                **where,
            )
        )
        return out
    if alt.status is RequestStatus.CLASS_MISSING:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-CLASS-NOT-FOUND",
                    f"request {alt.label}: device class {alt.device_class} does not exist",
                    identifiers=(("DeviceClass", alt.device_class),),
                ),
                **where,
            )
        )
        return out
    for sel in alt.selectors():
        owner = f"class {sel.owner}" if sel.origin == "class" else f"claim {claim}"
        if sel.compile_error is not None:
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-COMPILE-ERROR",
                        f"{owner}: selector #{sel.index}: CEL compile error: "
                        f"{sel.compile_error.reason}",
                        evidence=(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{sel.origin} selector #{sel.index}",
                                excerpt=sel.compile_error.caret,
                            ),
                        ),
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    offset=sel.compile_error.position,
                    **where,
                )
            )
        if sel.error_count:
            first = sel.errors[0]
            detail = (
                f"kube-scheduler would abort scheduling: {owner}: selector #{sel.index} on "
                f"device {first.device}: CEL runtime error: {first.message}"
            )
            if sel.error_count > 1:
                detail += f" (and {sel.error_count - 1} more device(s))"
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-CEL-RUNTIME-ERROR",
                        detail,
                        evidence=tuple(
                            Evidence(
                                source=EvidenceSource.CEL,
                                ref=f"{e.device} (node {e.node})",
                                excerpt=e.message,
                            )
                            for e in sel.errors[:5]
                        ),
                        identifiers=(("slice device", first.device),),
                    ),
                    origin=sel.origin,
                    selector_index=sel.index,
                    **where,
                )
            )
    if alt.status is RequestStatus.NO_MATCH:
        stage = "request" if alt.class_stage.total.matched else "class"
        failing = next(
            (
                s
                for s in (alt.request_selectors if stage == "request" else alt.class_selectors)
                if s.false
            ),
            None,
        )
        scope = f"{result.devices_in_scope} device(s)"
        if result.nodes_in_scope and len(result.nodes_in_scope) <= 3:
            scope += " on " + ", ".join(result.nodes_in_scope)
        detail = (
            f"claim {claim}, request {alt.label}: no device of {scope} matches; "
            + _tally_text(alt.class_stage, f"class {alt.device_class} selectors")
        )
        if alt.class_stage.total.matched:
            detail += "; " + _tally_text(alt.request_stage, "request selectors")
        out.append(
            SelectionProblem(
                finding=_finding("DRA-SEL-NO-MATCH", detail, evidence=near_evidence),
                origin=failing.origin if failing else None,
                selector_index=failing.index if failing else None,
                **where,
            )
        )
    elif alt.status is RequestStatus.COUNT_INFEASIBLE:
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-COUNT-INFEASIBLE",
                    f"claim {claim}, request {alt.label}: count {alt.count}, but at most "
                    f"{alt.best_node_count} matching device(s) on one node "
                    f"({alt.best_node}); {alt.matched} match in all",
                ),
                **where,
            )
        )
    elif alt.status is RequestStatus.OK and alt.allocation_mode == "All":
        out.append(
            SelectionProblem(
                finding=_finding(
                    "DRA-SEL-ALL-MODE",
                    f"claim {claim}, request {alt.label}: allocationMode All would take "
                    f"{alt.best_node_count} device(s) on node {alt.best_node} (the most on one node)",
                ),
                **where,
            )
        )
    if result.free_now is not None and alt.status is RequestStatus.OK:
        free = result.free_now.get(alt.label)
        if free is not None and free < (1 if alt.allocation_mode == "All" else alt.count):
            out.append(
                SelectionProblem(
                    finding=_finding(
                        "DRA-SEL-NONE-FREE",
                        f"claim {claim}, request {alt.label}: matches {alt.matched} device(s), "
                        f"{free} free now",
                    ),
                    **where,
                )
            )
    return out + hint_problems


def selection_findings(result: ClaimSelection) -> list[Finding]:
    """The findings (``DRA-SEL-*``) of a claim's selection, most decisive first."""
    problems = selection_problems(result)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return [p.finding for p in sorted(problems, key=lambda p: order[p.finding.severity])]


def inventory_kinds_read(snapshot: Snapshot) -> dict[str, bool]:
    """Whether slices and classes were collected (an empty source proves nothing otherwise)."""
    return {
        "ResourceSlice": snapshot.is_collected(Kind.RESOURCE_SLICE),
        "DeviceClass": snapshot.is_collected(Kind.DEVICE_CLASS),
    }
