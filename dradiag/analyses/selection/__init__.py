"""The selection analysis: which devices a claim's class and request selectors pick, and why not.

For every request of a claim spec (and every ``firstAvailable`` subrequest) this answers
what the scheduler's selection step would, on every device visible from the nodes in
scope, and whether the count, ``allocationMode: All`` and ``matchAttribute``
constraints can be met on a single node.

This analysis is pure: a Snapshot in, data out. ``selector-check`` and the diagnosis
engine's selection phase both call :func:`analyze_claim_selection` and turn the result
into findings with :func:`selection_findings` (rule ids ``DRA-SEL-*``).

The modules, in the order data flows through them:

- :mod:`.devices` — :class:`CandidateDevice`, one device in scope, and reading its
  attribute values (:func:`qualified_attribute`).
- :mod:`.build` — :func:`build_inventory`: a Snapshot's devices in scope (each pool's
  newest generation) and the DeviceClasses to use (:func:`builtin_device_classes` as
  the fallback).
- :mod:`.inventory` — :class:`DeviceInventory`: the devices as columns, their CEL form
  built on demand, grouped by what selectors read.
- :mod:`.grouping` — what a set of selectors reads, the groups of alike devices it
  makes, and the tokens of raw values those groups are keyed on.
- :mod:`.catalogue` — :class:`AttributeCatalogue`: the attribute and capacity names,
  types and values published in scope (for near misses).
- :mod:`.memoized` — one memoized evaluator per compiled selector, kept for the run.
- :mod:`.results` — the result dataclasses, :class:`ClaimSelection` down to
  :class:`Tally`, and :class:`RequestStatus`.
- :mod:`.evaluate` — compiling selectors and running the class and request stages
  (:func:`device_outcomes` for one selector on every device).
- :mod:`.constraints` — ``matchAttribute`` feasibility on a single node.
- :mod:`.claim` — :func:`analyze_claim_selection`: one claim spec, request by request.
- :mod:`.findings` — :data:`RULES` and the ``DRA-SEL-*`` findings of a selection.

Importing the package loads no module: each name is imported from its module on first
use (``__getattr__``), so ``selector-check --expr``, which needs the inventory and
``device_outcomes`` only, does not load the claim analysis, constraints and findings.
The modules need only the standard library and the Snapshot and Diagnosis models; the
CEL engine, YAML and the streaming loader are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.selection.build import (
        BUILTIN_CLASSES_RESOURCE,
        build_inventory,
        builtin_device_classes,
        inventory_kinds_read,
    )
    from dradiag.analyses.selection.catalogue import AttributeCatalogue
    from dradiag.analyses.selection.claim import (
        analyze_claim_selection,
        claim_selectors,
        with_free_now,
    )
    from dradiag.analyses.selection.constraints import (  # tests hold the two countings alike
        _constraint_counts as _constraint_counts,
    )
    from dradiag.analyses.selection.constraints import (
        _constraint_sets as _constraint_sets,
    )
    from dradiag.analyses.selection.devices import ANY_NODE, CandidateDevice, qualified_attribute
    from dradiag.analyses.selection.evaluate import device_outcomes
    from dradiag.analyses.selection.findings import (
        RULES,
        RuleInfo,
        SelectionProblem,
        selection_findings,
        selection_problems,
    )
    from dradiag.analyses.selection.grouping import LEAF_IDS_MAX
    from dradiag.analyses.selection.inventory import DeviceInventory
    from dradiag.analyses.selection.results import (
        CLAIM_DEVICE_LIMIT,
        MAX_ERRORS_KEPT,
        ClaimSelection,
        CompileProblem,
        ConstraintResult,
        DeviceError,
        RequestGroup,
        RequestSelection,
        RequestStatus,
        SelectorOrigin,
        SelectorResult,
        StageResult,
        Tally,
    )

_MODULES = {
    "BUILTIN_CLASSES_RESOURCE": "build",
    "build_inventory": "build",
    "builtin_device_classes": "build",
    "inventory_kinds_read": "build",
    "AttributeCatalogue": "catalogue",
    "analyze_claim_selection": "claim",
    "claim_selectors": "claim",
    "with_free_now": "claim",
    "_constraint_counts": "constraints",
    "_constraint_sets": "constraints",
    "ANY_NODE": "devices",
    "CandidateDevice": "devices",
    "qualified_attribute": "devices",
    "device_outcomes": "evaluate",
    "RULES": "findings",
    "RuleInfo": "findings",
    "SelectionProblem": "findings",
    "selection_findings": "findings",
    "selection_problems": "findings",
    "LEAF_IDS_MAX": "grouping",
    "DeviceInventory": "inventory",
    "CLAIM_DEVICE_LIMIT": "results",
    "MAX_ERRORS_KEPT": "results",
    "ClaimSelection": "results",
    "CompileProblem": "results",
    "ConstraintResult": "results",
    "DeviceError": "results",
    "RequestGroup": "results",
    "RequestSelection": "results",
    "RequestStatus": "results",
    "SelectorOrigin": "results",
    "SelectorResult": "results",
    "StageResult": "results",
    "Tally": "results",
}
"""Where each name of the package lives (imported when first asked for)."""


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ANY_NODE",
    "BUILTIN_CLASSES_RESOURCE",
    "CLAIM_DEVICE_LIMIT",
    "LEAF_IDS_MAX",
    "MAX_ERRORS_KEPT",
    "RULES",
    "AttributeCatalogue",
    "CandidateDevice",
    "ClaimSelection",
    "CompileProblem",
    "ConstraintResult",
    "DeviceError",
    "DeviceInventory",
    "RequestGroup",
    "RequestSelection",
    "RequestStatus",
    "RuleInfo",
    "SelectionProblem",
    "SelectorOrigin",
    "SelectorResult",
    "StageResult",
    "Tally",
    "analyze_claim_selection",
    "build_inventory",
    "builtin_device_classes",
    "claim_selectors",
    "device_outcomes",
    "inventory_kinds_read",
    "qualified_attribute",
    "selection_findings",
    "selection_problems",
    "with_free_now",
]
