"""What the selection analysis finds, as data: per claim, request, selector and stage.

A :class:`ClaimSelection` holds one :class:`RequestGroup` per request (its
alternatives: the request itself, or its ``firstAvailable`` subrequests in order), each
a :class:`RequestSelection` with its selectors' :class:`SelectorResult` and the two
stages' :class:`StageResult` tallies, plus a :class:`ConstraintResult` per
``matchAttribute``. :class:`RequestStatus` values are the JSON document's spellings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from dradiag.analyses.selection.inventory import DeviceInventory

MAX_ERRORS_KEPT = 20
"""Device errors kept per selector (the total is always counted)."""

CLAIM_DEVICE_LIMIT = 32
"""``AllocationResultsMaxSize``: devices per claim (k8s-dra-semantics §3.3)."""


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
    """Request label → matching devices not allocated now (``selector-check --free``)."""
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
