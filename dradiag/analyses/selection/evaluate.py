"""Compiling selectors and running them on the inventory, as the scheduler's selection does.

The DeviceClass's selectors, then the request's own, each list in order and stopping at
the first false (k8s-dra-semantics §1.7, §3.4 step 3), on every device visible from the
nodes in scope. Devices are counted matched / not matched / errored, by node, device
type and MIG profile, for the class selectors and the request selectors separately.

A runtime error is not a non-match: kube-scheduler aborts the scheduling attempt
(SchedulerError) on the first device a selector errors on (DESIGN §7), so errors are
their own verdict, naming the device. Compile errors are hard errors too.

On a grouped inventory a stage runs on one representative device per group
(:class:`~dradiag.analyses.selection.grouping._Projection`) and counts the group's size;
``_run_stage``, device by device, is the reference it is tested against.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dradiag.analyses.selection.devices import CandidateDevice
from dradiag.analyses.selection.grouping import _Projection, _ReadSpec
from dradiag.analyses.selection.inventory import DeviceInventory
from dradiag.analyses.selection.memoized import _memoized
from dradiag.analyses.selection.results import (
    MAX_ERRORS_KEPT,
    CompileProblem,
    DeviceError,
    SelectorOrigin,
    SelectorResult,
    StageResult,
    Tally,
)

if TYPE_CHECKING:
    from dradiag.analyses.cel import CelDevice, CompiledSelector


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


class _Breakdown:
    __slots__ = ("total", "by_node", "by_type", "by_profile")

    def __init__(self) -> None:
        self.total = Tally()
        self.by_node: dict[str, Tally] = defaultdict(Tally)
        self.by_type: dict[str, Tally] = defaultdict(Tally)
        self.by_profile: dict[str, Tally] = defaultdict(Tally)

    def add(self, device: CandidateDevice, outcome: int) -> None:
        self.add_many(device.node_label, device.device_type, device.mig_profile, outcome, 1)

    def add_many(
        self, node: str, device_type: str, profile: str | None, outcome: int, count: int
    ) -> None:
        tallies = [self.total, self.by_node[node], self.by_type[device_type]]
        if profile is not None:
            tallies.append(self.by_profile[profile])
        for tally in tallies:
            if outcome == 1:
                tally.matched += count
            elif outcome == 0:
                tally.not_matched += count
            else:
                tally.errored += count

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
    cel = inventory.cel
    fns = [(run, run.fn) for run in runs]
    for index in indices:
        device = inventory.device(index)
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


def _outcomes(
    inventory: DeviceInventory, groups: Iterable[int], runs: list[_SelectorRun]
) -> dict[int, tuple[int, int, str]]:
    """group → (outcome, position, error): how ``runs`` end on each group's device.

    Outcome 1 (all true; position is ``len(runs)``), 0 (false at ``position``) or -1
    (``CelRuntimeError`` at ``position``, with its message), as ``_run_stage`` counts a
    device. Each selector runs once over the devices still in the race, with the CEL
    engine's batch ``sweep`` (the same result per device as ``matches``).
    """
    alive = list(groups)
    out: dict[int, tuple[int, int, str]] = {}
    spec = _ReadSpec.of([run.compiled for run in runs if run.compiled is not None])
    for position, run in enumerate(runs):
        if not alive:
            break
        assert run.compiled is not None
        results = run.compiled.sweep(inventory.cel_readings(alive, spec))
        still = []
        for group, result in zip(alive, results, strict=True):
            if result is True:
                still.append(group)
            elif result is False:
                out[group] = (0, position, "")
            else:
                out[group] = (-1, position, result.message)
        alive = still
    for group in alive:
        out[group] = (1, len(runs), "")
    return out


def _run_stage_grouped(
    inventory: DeviceInventory,
    projection: _Projection,
    among: set[int] | None,
    runs: list[_SelectorRun],
) -> tuple[StageResult, set[int]]:
    """``_run_stage`` on the devices of the groups ``among`` (all when None), group by group.

    Every device of a group has the values the selectors read in common, so the
    representative's outcome is each device's: tallies and selector counts are the
    group's size times it, and only the errors' samples name devices (the first
    :data:`MAX_ERRORS_KEPT` per selector, in device order). Returns the stage and the
    groups whose devices match.
    """
    cells, cell_keys = inventory.cells()
    counts = projection.cell_counts(cells)
    present = dict.fromkeys(group for _, group in counts)
    outcomes = _outcomes(
        inventory, present if among is None else (g for g in present if g in among), runs
    )
    sizes: Counter[int] = Counter()
    breakdown = _Breakdown()
    for (cell, group), count in counts.items():
        if among is not None and group not in among:
            continue
        outcome = outcomes[group]
        node, device_type, profile = cell_keys[cell]
        breakdown.add_many(node, device_type, profile, outcome[0], count)
        sizes[group] += count
    failing: dict[int, set[int]] = defaultdict(set)
    for group, size in sizes.items():
        result, position, _ = outcomes[group]
        for run in runs[:position]:
            run.evaluated += size
            run.true += size
        if result == 1:
            continue
        run = runs[position]
        run.evaluated += size
        if result == 0:
            run.false += size
        else:
            run.error_count += size
            failing[position].add(group)
    order = range(len(inventory))
    for position, groups in sorted(failing.items()):
        run = runs[position]
        first = itertools.islice(
            itertools.compress(order, map(groups.__contains__, projection.groups)),
            MAX_ERRORS_KEPT,
        )
        run.errors.extend(
            DeviceError(
                device=inventory.ref(index),
                node=inventory.node_label(index),
                message=outcomes[projection.groups[index]][2],
            )
            for index in first
        )
    matched = {group for group, outcome in outcomes.items() if outcome[0] == 1}
    return breakdown.freeze(True), matched


_EMPTY_STAGE = StageResult(evaluated=False, total=Tally(), by_node={}, by_type={}, by_profile={})


def device_outcomes(inventory: DeviceInventory, selector: CompiledSelector) -> list[bool | str]:
    """One selector on every device of ``inventory``, in order: True, False, or the error.

    An error is the ``CelRuntimeError`` message. Grouped inventories read the devices as
    columns (``columns.row_outcomes``) when the selector reads values at literal keys
    only, else evaluate it once per distinct tuple of the values it reads
    (:class:`_Projection`).
    """
    from dradiag.analyses.cel import CelRuntimeError

    fn = _memoized(selector)

    def one(index: int) -> bool | str:
        try:
            return bool(fn(inventory.cel(index)))
        except CelRuntimeError as exc:
            return exc.message

    if not inventory.grouped:
        return [one(index) for index in range(len(inventory))]
    from dradiag.analyses.selection.columns import row_outcomes

    by_rows = row_outcomes(inventory, selector)
    if by_rows is not None:
        return by_rows
    spec = _ReadSpec.of([selector])
    groups = inventory.projection(spec).groups
    representatives = list(dict.fromkeys(groups))
    swept = selector.sweep(inventory.cel_readings(representatives, spec))
    results: dict[int, bool | str] = {
        group: result if result is True or result is False else result.message
        for group, result in zip(representatives, swept, strict=True)
    }
    return list(map(results.__getitem__, groups))
