"""The stage behind ``dradiag selector-check``: the ``--expr`` sweep and the manifests check.

Both forms judge selectors against one :class:`~dradiag.analyses.selection.DeviceInventory`;
this module runs the selection analysis over what the command was given and returns
results for ``render.selector_report`` to draw. Nothing here reads files or the cluster.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.selection import ClaimSelection, DeviceInventory, SelectionProblem
    from dradiag.snapshot.model import Snapshot
    from dradiag.sources.workloads import ClaimManifest, ManifestSet, PodClaimUse
    from dradiag.vocabulary import Finding, Severity


def inventory_notes(snapshot: Snapshot, inventory: DeviceInventory) -> list[str]:
    """What a reader should know about the device source: built-in classes, no devices."""
    from dradiag.snapshot.model import Kind

    notes = []
    if inventory.classes_source == "builtin":
        notes.append(
            "the device source holds no DeviceClass objects: the NVIDIA driver's built-in "
            "classes gpu.nvidia.com, mig.nvidia.com and vfio.gpu.nvidia.com are used "
            "(nvidia-driver-facts §2)"
        )
    if not len(inventory):
        if snapshot.is_collected(Kind.RESOURCE_SLICE):
            notes.append("the device source holds no devices in scope")
        else:
            notes.append("ResourceSlices were not read from the device source")
    return notes


# -- the --expr sweep -----------------------------------------------------------------


def expression_error(expr: str) -> str | None:
    """Why ``--expr`` cannot run (too long, or the compile error with its caret), or None.

    The message is what the API server or cel-go says (``Too long: may not be more than
    10240 bytes``, ``expression recursion limit exceeded: 250``, ...); an error about the
    whole expression has no caret line, so a huge expression is not echoed back.
    """
    from dradiag.analyses.cel import CelCompileError, compile_selector

    try:
        compile_selector(expr)
    except CelCompileError as exc:
        if exc.line is None:
            return f"dradiag: error: --expr: CEL compile error: {exc.reason}\n"
        caret = exc.render_caret().split("\n")
        return (
            f"dradiag: error: --expr:{exc.line}:{exc.column}: CEL compile error: {exc.reason}\n"
            + "\n".join(caret[:-1])
            + "\n"
        )
    return None


@dataclass(frozen=True, slots=True)
class ExpressionSweep:
    """One expression's result on every device in scope."""

    inventory: DeviceInventory
    outcomes: list[bool | str]
    """Per device index: True, False, or the runtime error's message."""
    matched: int
    nomatch: int
    errors: int


def sweep_expression(
    snapshot: Snapshot, expression: str, *, nodes: list[str] | None
) -> ExpressionSweep:
    """Evaluate ``expression`` (known to compile) on every device of ``snapshot``.

    The cyclic GC is paused meanwhile and what is left is frozen (``paused_gc``, as for
    loading): the inventory's columns and the sweep's rows are 10⁵-element lists and
    tuples, acyclic, and the collections they set off (each walking every element) cost
    more than the sweep did (the distinct bench fleet: ~0.15 s of ~0.5 s).
    """
    from dradiag.analyses.cel import compile_selector
    from dradiag.analyses.selection import build_inventory, device_outcomes
    from dradiag.snapshot.model import paused_gc

    with paused_gc():
        inventory = build_inventory(snapshot, nodes=nodes)
        outcomes = device_outcomes(inventory, compile_selector(expression))
    tally = Counter(outcomes)
    matched, nomatch = tally.pop(True, 0), tally.pop(False, 0)
    return ExpressionSweep(inventory, outcomes, matched, nomatch, sum(tally.values()))


# -- the manifests check --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClaimCheck:
    """One claim (or template) of the manifests, or one resolved from the device source."""

    claim: ClaimManifest
    selection: ClaimSelection
    problems: list[SelectionProblem]


@dataclass(frozen=True, slots=True)
class ManifestCheck:
    """Every claim of the manifests judged against the devices, and the workloads' gaps."""

    manifests: ManifestSet
    inventory: DeviceInventory
    claims: list[ClaimCheck]
    missing_claims: list[tuple[PodClaimUse, Finding]]
    """DRA-SEL-CLAIM-NOT-FOUND for each workload claim use that resolves to nothing."""
    notes: list[str]
    builtin_classes: Finding | None
    """DRA-SEL-BUILTIN-CLASSES when the device source holds no DeviceClass."""


def check_manifests(
    snapshot: Snapshot, manifests: ManifestSet, *, nodes: list[str] | None, now: bool = False
) -> ManifestCheck:
    """Judge every claim of ``manifests`` (and those they resolve from the cluster).

    With the cyclic GC paused, as :func:`sweep_expression` (the bench fleet: two full
    collections over the inventory's columns, ~0.1 s).
    """
    from dradiag.snapshot.model import paused_gc

    with paused_gc():
        return _check_manifests(snapshot, manifests, nodes=nodes, now=now)


def _check_manifests(
    snapshot: Snapshot, manifests: ManifestSet, *, nodes: list[str] | None, now: bool
) -> ManifestCheck:
    from dradiag.analyses.selection import (
        analyze_claim_selection,
        build_inventory,
        claim_selectors,
        selection_problems,
        with_free_now,
    )

    inventory = build_inventory(snapshot, nodes=nodes)
    checked = list(manifests.claims) + list(manifests.cluster_claims)
    # One grouping of the devices by everything any selector reads, for all requests.
    inventory.prepare(
        selector for claim in checked for selector in claim_selectors(inventory, claim.spec)
    )
    claims = []
    for claim in checked:
        result = analyze_claim_selection(
            snapshot,
            claim.spec,
            namespace=claim.namespace,
            claim_name=claim.name,
            nodes=nodes,
            inventory=inventory,
        )
        if now:
            result = with_free_now(result, free_now(snapshot, claim, nodes))
        claims.append(ClaimCheck(claim, result, selection_problems(result)))
    missing = [
        (use, _claim_not_found(snapshot, workload.ref, use, workload.namespace))
        for workload in manifests.workloads
        for use in workload.claim_uses
        if use.problem is not None
    ]
    notes = inventory_notes(snapshot, inventory)
    builtin = None
    if inventory.classes_source == "builtin":
        from dradiag.vocabulary import Severity

        builtin = _rule_finding("DRA-SEL-BUILTIN-CLASSES", notes[0], severity=Severity.INFO)
    return ManifestCheck(manifests, inventory, claims, missing, notes, builtin)


def _claim_not_found(
    snapshot: Snapshot, workload_ref: str, use: PodClaimUse, namespace: str
) -> Finding:
    """Definite (an error) when the source was read for that kind, else a warning; the
    next step lists the workload's namespace, not a placeholder for it."""
    from dataclasses import replace

    from dradiag.snapshot.model import Kind
    from dradiag.vocabulary import Severity

    kind = Kind.RESOURCE_CLAIM if use.resource_claim_name else Kind.RESOURCE_CLAIM_TEMPLATE
    definite = snapshot.is_collected(kind)
    finding = _rule_finding(
        "DRA-SEL-CLAIM-NOT-FOUND",
        f"{workload_ref}, pod claim {use.pod_claim_name}: {use.problem}",
        severity=Severity.ERROR if definite else Severity.WARNING,
    )
    if not namespace:
        return finding
    return replace(finding, next=tuple(n.replace("<namespace>", namespace) for n in finding.next))


def _rule_finding(rule: str, detail: str, *, severity: Severity) -> Finding:
    from dradiag.analyses.selection import RULES
    from dradiag.vocabulary import Finding, Phase

    info = RULES[rule]
    return Finding(
        rule=rule,
        phase=Phase.SELECTION,
        severity=severity,
        title=info.title,
        detail=detail,
        next=info.next,
    )


def free_now(snapshot: Snapshot, claim: ClaimManifest, nodes: list[str] | None) -> dict[str, int]:
    """Matching devices free now per request label, from the allocation simulator.

    The simulator's funnel counts devices per node through selectors, "free" (not held by
    another claim) and counters; the last of those stages is what could be allocated now.
    """
    from dradiag.analyses.allocation import explain_across_nodes
    from dradiag.analyses.selection import builtin_device_classes
    from dradiag.snapshot.model import Kind
    from dradiag.snapshot.model import Snapshot as SnapshotType

    if not snapshot.device_classes:
        # The simulator reads classes from the Snapshot: give it the built-in ones the
        # selection analysis used (the document's notes say so).
        objects: dict[Kind, Any] = {kind: [] for kind in Kind if kind is not Kind.LOG}
        for kind, obj in snapshot.objects():
            objects[kind].append(obj)
        objects[Kind.DEVICE_CLASS] = list(builtin_device_classes())
        snapshot = SnapshotType(
            objects=objects,
            logs=snapshot.logs,
            coverage=snapshot.coverage,
            errors=snapshot.errors,
            source=snapshot.source,
        )
    synthetic = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": claim.namespace, "name": f"{claim.name}-selector-check"},
        "spec": dict(claim.spec),
    }
    explanation = explain_across_nodes(snapshot, [synthetic], nodes=nodes)
    free: dict[str, int] = {}
    for outcome in explanation.nodes:
        for funnel in outcome.simulation.explanation:
            usable = [s for s in funnel.stages if s.stage in ("free", "counters", "tolerated")]
            if usable:
                free[funnel.request] = free.get(funnel.request, 0) + usable[-1].count
    return free
