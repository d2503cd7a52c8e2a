"""The rule ids the walk emits from code (no ``match`` in rules/*.yaml), one home for all.

Each phase module emits its own; ``CODE_RULE_IDS`` lists them all for the catalogue test.
"""

from __future__ import annotations

from collections.abc import Mapping

from dradiag.analyses import plugin_health as ph
from dradiag.analyses import wiring
from dradiag.vocabulary import Phase

PHASE_CODE: Mapping[Phase, str] = {
    Phase.PUBLICATION: "PUB",
    Phase.SELECTION: "SEL",
    Phase.ALLOCATION: "ALLOC",
    Phase.PREPARE: "PREP",
    Phase.INJECTION: "INJ",
    Phase.WORKLOAD: "WORK",
    Phase.UNPREPARE: "UNPREP",
}


# Code-backed rule ids this module emits (each has an entry in rules/<phase>.yaml).
PUB_DRIVER_NO_SLICES = "DRA-PUB-NO-SLICES"  # cluster-wide: the same rule


PUB_NODE_NO_SLICES = "DRA-PUB-NO-SLICES"


PUB_POOL_INCOMPLETE = "DRA-PUB-POOL-INCOMPLETE"


PUB_POOL_INVALID = "DRA-PUB-POOL-INCOMPLETE"  # one rule: incomplete or invalid


PUB_POOL_STALE = "DRA-PUB-POOL-STALE"


PUB_GPU_AND_MIG = "DRA-PUB-GPU-AND-MIG-PUBLISHED"
SEL_CLASS_MISSING = "DRA-SEL-CLASS-NOT-FOUND"


ALLOC_UNSCHEDULABLE = "DRA-ALLOC-NOT-ALLOCATED"


ALLOC_NO_CONSUMER = "DRA-ALLOC-NO-CONSUMER"


ALLOC_PENDING_SILENT = "DRA-ALLOC-PENDING-SILENT"


ALLOC_CLAIM_NOT_CREATED = "DRA-ALLOC-CLAIM-NOT-FOUND"


ALLOC_BOUND_UNALLOCATED = "DRA-ALLOC-BOUND-UNALLOCATED"


ALLOC_NODE_AFFINITY = "DRA-ALLOC-NODE-AFFINITY"


PREP_FAILED = "DRA-PREP-FAILED"


PREP_STUCK = "DRA-PREP-STALLED"


PREP_MPS_DAEMON_DOWN = "DRA-PREP-MPS-DAEMON-NOT-RUNNING"


INJ_CREATE_FAILED = "DRA-INJ-CREATE-CONTAINER-ERROR"


INJ_CDI_NOT_APPLIED = "DRA-INJ-CDI-NOT-APPLIED"


INJ_CDI_EDITS_NOT_APPLIED = "DRA-INJ-CDI-EDITS-NOT-APPLIED"
"""A container's log shows a variable or mount its claim's CDI spec always adds is absent."""


INJ_CDI_SPEC_MISSING = "DRA-INJ-CDI-SPEC-MISSING"


WORK_CONTAINER_CRASHING = "DRA-WORK-CONTAINER-CRASHLOOP"


UNPREP_STALE_RESERVATION = "DRA-UNPREP-RESERVED-FOR-GONE-POD"


UNPREP_POD_STUCK_TERMINATING = "DRA-UNPREP-POD-STUCK-TERMINATING"


UNPREP_DELETION_STUCK = "DRA-UNPREP-DELETION-STUCK"


UNPREP_LEAKED_BY_OTHER_CLAIM = "DRA-UNPREP-LEAKED-STATE"


# Data rules (a ``match`` in rules/*.yaml) that code reads hits of by id.
SEL_CLAIM_CREATION_FAILED = "DRA-SEL-CLAIM-CREATION-FAILED"
"""The resourceclaim controller's ``FailedResourceClaimCreation`` on a pod: a pod whose
claim is missing reads it to say why (``unresolved``)."""
ALLOC_ALLOCATION_IN_FLIGHT = "DRA-ALLOC-ALLOCATION-IN-FLIGHT"
"""The scheduler's "is in the process of being allocated": the allocation phase makes it an
error once it has lasted (``phases/allocation._persisting_in_flight``)."""


ALLOC_TAINT_EVICTED = "DRA-ALLOC-TAINT-EVICTED"
"""The device taint eviction controller deletes a pod of the claim
(``phases/taint_eviction``)."""


NOT_COLLECTED: Mapping[Phase, str] = {p: f"DRA-{c}-NOT-COLLECTED" for p, c in PHASE_CODE.items()}
"""Per phase, the rule of "the evidence this phase needs was not collected"."""


CODE_RULE_IDS: tuple[str, ...] = (
    PUB_NODE_NO_SLICES,
    PUB_POOL_INCOMPLETE,
    PUB_POOL_STALE,
    PUB_GPU_AND_MIG,
    SEL_CLASS_MISSING,
    ALLOC_UNSCHEDULABLE,
    ALLOC_NO_CONSUMER,
    ALLOC_PENDING_SILENT,
    ALLOC_CLAIM_NOT_CREATED,
    ALLOC_BOUND_UNALLOCATED,
    ALLOC_NODE_AFFINITY,
    ALLOC_TAINT_EVICTED,
    PREP_FAILED,
    PREP_STUCK,
    PREP_MPS_DAEMON_DOWN,
    INJ_CREATE_FAILED,
    INJ_CDI_NOT_APPLIED,
    INJ_CDI_EDITS_NOT_APPLIED,
    INJ_CDI_SPEC_MISSING,
    WORK_CONTAINER_CRASHING,
    UNPREP_STALE_RESERVATION,
    UNPREP_POD_STUCK_TERMINATING,
    UNPREP_DELETION_STUCK,
    UNPREP_LEAKED_BY_OTHER_CLAIM,
    *NOT_COLLECTED.values(),
    *ph.RULE_IDS,
    *wiring.RULE_IDS,
)
"""Every rule id the walk and its own analyses can emit without the rule matcher."""


UNPREPARE_CAUSE_RULE = UNPREP_LEAKED_BY_OTHER_CLAIM
