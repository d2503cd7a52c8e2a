"""Node state as evidence in a claim's walk: prepare, injection and unprepare (DESIGN §2).

When the Snapshot carries the state of the claim's node (``dradiag node --save``, read
back from ``node/<node>/`` under ``--from``), the node cross-checks
(``analyses.node_checks``) become findings of this claim's phases, basis ``checked``:

- about this claim (its UID): a ``PrepareStarted`` entry (prepare), a missing CDI spec or
  device node (injection), its own checkpoint/CDI state left after deallocation (unprepare);
- about another claim's leaked state on the devices this claim was allocated (a gone
  claim's checkpoint entry or MIG instance on the same GPU), while this claim is not
  prepared there: the cause of this claim's failed Prepare lies in that claim's
  unprepare, so it is this claim's ``unprepare`` finding (DESIGN §2, the boundary where
  the cause lies).

One self-contained function, called once by the walk, so the phase logic stays apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from dradiag.analyses import node_checks as nc
from dradiag.diagnosis.context import ClaimWalk
from dradiag.diagnosis.findings import phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import PREP_STUCK, UNPREPARE_CAUSE_RULE
from dradiag.snapshot.node_state import NodeState, node_states
from dradiag.vocabulary import Basis, Finding, Phase, PhaseStatus

_GPU = re.compile(r"^gpu-(?P<minor>\d+)$")
_MIG = re.compile(r"^gpu-(?P<minor>\d+)-mig-(?P<g>\d+)g[^-]*(?:-[a-z-]*)?-\d+-(?P<start>\d+)$")
_MEMORY_SLICES = {1: 1, 2: 2, 3: 4, 4: 4, 7: 8}
"""Memory slices a ``<n>g`` MIG profile spans on A100/H100/B200-class GPUs (8 slices)."""
_LEAKS = frozenset({nc.UNPREP_CHECKPOINT_LEAK, nc.UNPREP_MIG_LEAK})


def _ids(finding: Finding, layer: str) -> set[str]:
    return {v for k, v in finding.identifiers if k == layer}


def _footprint(name: str) -> tuple[str, range] | None:
    """(GPU minor, memory slices) a slice device occupies; a full GPU occupies all."""
    if m := _GPU.match(name):
        return m.group("minor"), range(8)
    if m := _MIG.match(name):
        start = int(m.group("start"))
        return m.group("minor"), range(start, start + _MEMORY_SLICES.get(int(m.group("g")), 1))
    return None


def _overlap(mine: Iterable[str], theirs: Iterable[str]) -> bool:
    """Whether two sets of slice device names share a GPU's memory slices."""
    a = [f for n in mine if (f := _footprint(n))]
    b = [f for n in theirs if (f := _footprint(n))]
    return any(ma == mb and set(ra) & set(rb) for ma, ra in a for mb, rb in b)


def _prepared_here(state: NodeState, uid: str) -> bool:
    cp = state.checkpoint
    return cp is not None and any(
        c.claim_uid == uid and c.state != "PrepareStarted" for c in cp.claims
    )


def _as_cause(leak: Finding, node: str) -> Finding:
    """Another claim's leak on this claim's GPU as the cause of this claim's trouble: the
    cross-claim cause rule (the verdict names the other claim, diagnosis.verdict)."""
    other = sorted(_ids(leak, "claim UID"))
    culprit = f"claim UID {other[0]}" if other else "state no claim holds"
    return replace(
        leak,
        rule=UNPREPARE_CAUSE_RULE,
        phase=Phase.UNPREPARE,
        detail=f"{leak.detail} It occupies the GPU this claim was allocated on {node} "
        f"(node check {leak.rule}).",
        identifiers=(("claim", culprit), *leak.identifiers),
    )


_CHECKED: dict[int, tuple[object, NodeState, list[Finding]]] = {}
"""The node checks of the last few (snapshot, node state) pairs: ``scan`` walks every claim
of a node, and each would otherwise rerun the same checks."""


def _checked(walk: ClaimWalk, state: NodeState) -> list[Finding]:
    hit = _CHECKED.get(id(state))
    if hit is not None and hit[0] is walk.snapshot and hit[1] is state:
        return hit[2]
    findings = nc.check_node(state, walk.snapshot)
    if len(_CHECKED) >= 4:
        _CHECKED.clear()
    _CHECKED[id(state)] = (walk.snapshot, state, findings)
    return findings


def node_findings(walk: ClaimWalk) -> dict[Phase, tuple[list[Finding], str]]:
    """Per phase, the node findings about this claim and the node state they came from."""
    states = node_states(walk.snapshot.extras)
    if not states:
        return {}
    uid = walk.claim_uid
    nodes = nc.claim_nodes(walk.claim)
    nodes |= {str((p.get("spec") or {}).get("nodeName")) for p in walk.bound_pods()}
    out: dict[Phase, tuple[list[Finding], str]] = {}
    for node in sorted(nodes):
        state = states.get(node)
        if state is None:
            continue
        mine = nc.allocated_device_names(walk.claim, node)
        for f in _checked(walk, state):
            if f.phase not in (Phase.PREPARE, Phase.INJECTION, Phase.UNPREPARE):
                continue
            about_me = uid in _ids(f, "claim UID")
            blocks_me = (
                f.rule in _LEAKS
                and not about_me
                and not _prepared_here(state, uid)
                and _overlap(mine, _ids(f, "slice device name"))
            )
            if blocks_me:
                f = _as_cause(f, node)
            if about_me or blocks_me:
                found, _ = out.setdefault(f.phase, ([], f"node state of {node} ({state.source})"))
                found.append(f)
    return out


def _prepare_proof(walk: ClaimWalk) -> str | None:
    """The checkpoint entry proving this claim's Prepare completed on its node, if any."""
    states = node_states(walk.snapshot.extras)
    for node in sorted(nc.claim_nodes(walk.claim)):
        state = states.get(node)
        if state is not None and _prepared_here(state, walk.claim_uid):
            return f"{state.checkpoint_path} on {node}: {walk.claim_uid} PrepareCompleted"
    return None


def _proven_prepared(walk: ClaimWalk, result: PhaseResult, proof: str) -> PhaseResult:
    """Prepare completed per the node's checkpoint: "no visible progress" (an inference
    from missing events) is disproven; any other finding stands."""
    kept = [f for f in result.findings if f.rule != PREP_STUCK]
    if len(kept) == len(result.findings) and result.status is not PhaseStatus.UNKNOWN:
        return result
    merged = phase_result(walk.rulebook, result.phase, kept, PhaseStatus.OK, result.summary)
    return replace(merged, basis=Basis.CHECKED, basis_detail=f"node state: {proof}")


def with_node_evidence(walk: ClaimWalk, *phases: PhaseResult) -> tuple[PhaseResult, ...]:
    """``phases`` with the node findings added where they belong (unchanged without node state)."""
    found = node_findings(walk)
    proof = _prepare_proof(walk)
    if not found and proof is None:
        return phases
    out = []
    for result in phases:
        if result.phase is Phase.PREPARE and proof is not None:
            result = _proven_prepared(walk, result, proof)
        extra, where = found.get(result.phase, ([], ""))
        if not extra:
            out.append(result)
            continue
        merged = phase_result(
            walk.rulebook, result.phase, [*result.findings, *extra], result.status, result.summary
        )
        out.append(
            PhaseResult(
                phase=merged.phase,
                status=merged.status,
                findings=merged.findings,
                summary=merged.summary,
                basis=Basis.CHECKED,
                basis_detail=where,
            )
        )
    return tuple(out)
