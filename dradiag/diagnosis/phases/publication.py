"""Phase 1, publication: slices for the driver on the claim's nodes, valid pools, a healthy plugin."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from dradiag.analyses import plugin_health as ph
from dradiag.analyses.error_chain import clip_middle
from dradiag.diagnosis.context import ClaimWalk, claim_devices
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import (
    PUB_DRIVER_NO_SLICES,
    PUB_GPU_AND_MIG,
    PUB_NODE_NO_SLICES,
    PUB_POOL_INCOMPLETE,
    PUB_POOL_INVALID,
    PUB_POOL_STALE,
)
from dradiag.snapshot.model import (
    Kind,
    Snapshot,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity


def pool_finding(problem: Any, blocking: bool) -> Finding:
    kind = str(problem.kind)
    rule = {"incomplete": PUB_POOL_INCOMPLETE, "invalid": PUB_POOL_INVALID}.get(
        kind, PUB_POOL_STALE
    )
    if kind == "stale":
        severity = Severity.INFO
    else:
        severity = Severity.ERROR if blocking else Severity.WARNING
    why = {
        "incomplete": "the scheduler (≥1.35) allocates from no incomplete pool",
        "invalid": "the allocator refuses an invalid pool",
        "stale": "older-generation slices are ignored once the new generation is complete",
    }.get(kind, "")
    return Finding(
        rule=rule,
        phase=Phase.PUBLICATION,
        severity=severity,
        title=f"pool {problem.pool_id} is {kind}",
        detail=f"Pool {problem.pool_id} (generation {problem.generation}): {problem.reason}; "
        f"{why}.",
        evidence=(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"ResourceSlices of pool {problem.pool_id}",
                excerpt=", ".join(problem.slices[:8])
                + (f" (+{len(problem.slices) - 8} more)" if len(problem.slices) > 8 else ""),
            ),
        ),
        next=(
            # ResourceSlices are selectable by spec.driver and spec.nodeName only.
            f"kubectl get resourceslices --field-selector spec.driver={problem.driver} "
            "-o custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,POOL:.spec.pool.name,"
            f"GEN:.spec.pool.generation,COUNT:.spec.pool.resourceSliceCount | grep -w -e NAME "
            f"-e {problem.pool}",
        ),
        identifiers=(("pool", problem.pool), *(("node", n) for n in problem.nodes[:3])),
    )


def pool_findings(
    snapshot: Snapshot, pools: Iterable[tuple[str, str]], *, blocking: bool
) -> list[Finding]:
    """Problems of just these pools, via ``analyses.pools`` on a sub-snapshot of their slices.

    A sub-snapshot keeps a claim's walk from sweeping every pool of a 5,000-node cluster.
    """
    try:
        from dradiag.analyses.pools import pool_problems
    except ImportError:
        return []
    slices = [s for driver, pool in pools for s in snapshot.pool_slices(driver, pool)]
    if not slices:
        return []
    sub = Snapshot(objects={Kind.RESOURCE_SLICE: slices})
    rules = pool_rules(snapshot)
    found = pool_problems(sub, partitionable=rules.partitionable, legacy=rules.legacy)
    return [pool_finding(p, blocking) for p in found]


class PoolRules(NamedTuple):
    """``pool_problems`` keywords for the cluster's allocator."""

    partitionable: bool = True
    legacy: bool = False


def pool_rules(snapshot: Snapshot) -> PoolRules:
    """How the cluster's allocator judges pools (``pool_problems`` keywords).

    Before 1.35 counters lived in each slice and are checked per slice; without
    DRAPartitionableDevices no counter is consumed at all (k8s-dra-semantics §3.2, §3.9).
    The gates follow the server version, corrected by what stored slices prove.
    """
    global _POOL_RULES
    if _POOL_RULES is not None and _POOL_RULES[0] is snapshot:
        return _POOL_RULES[1]
    try:
        from dradiag.analyses.allocation import FeatureGates
    except ImportError:
        return PoolRules()
    gates = FeatureGates.for_snapshot(snapshot)
    rules = PoolRules(partitionable=gates.partitionable_devices, legacy=gates.legacy_pools)
    _POOL_RULES = (snapshot, rules)
    return rules


_POOL_RULES: tuple[Snapshot, PoolRules] | None = None
"""The last snapshot's pool rules: a scan asks once per unplaced claim."""


MAX_POOL_FINDINGS = 5
"""Pool problems listed for an unplaced claim before the rest are only counted."""


_CANDIDATE_POOL_CACHE: dict[tuple[int, tuple[str, ...]], tuple[Snapshot, list[Finding]]] = {}
"""Per (snapshot, drivers): the cluster-wide pool findings every unplaced claim shares.
Holds the snapshot itself so its id cannot be reused while cached; at most a few entries."""


def candidate_pool_findings(snap: Snapshot, drivers: Sequence[str]) -> list[Finding]:
    """Pool problems of every pool of the claim's drivers, for a claim not yet placed.

    An incomplete or invalid pool blocks this claim only when it leaves the driver no
    usable pool at all; otherwise the claim may fit elsewhere and it is a warning. The
    answer is the same for every unplaced claim of a snapshot, so it is computed once.
    """
    key = (id(snap), tuple(drivers))
    cached = _CANDIDATE_POOL_CACHE.get(key)
    if cached is not None and cached[0] is snap:
        return list(cached[1])
    found = _compute_candidate_pool_findings(snap, drivers)
    if len(_CANDIDATE_POOL_CACHE) >= 4:
        _CANDIDATE_POOL_CACHE.pop(next(iter(_CANDIDATE_POOL_CACHE)))
    _CANDIDATE_POOL_CACHE[key] = (snap, found)
    return list(found)


def _compute_candidate_pool_findings(snap: Snapshot, drivers: Sequence[str]) -> list[Finding]:
    pools = sorted({p for p in snap.pools() if p[0] in drivers})
    if not pools:
        return []
    problems = pool_findings(snap, pools, blocking=False)
    bad = {f.identifiers[0][1] for f in problems if f.rule == PUB_POOL_INCOMPLETE and f.identifiers}
    blocking = len(bad) >= len(pools)
    out = [
        replace(f, severity=Severity.ERROR) if blocking and f.rule == PUB_POOL_INCOMPLETE else f
        for f in problems
    ]
    if len(out) > MAX_POOL_FINDINGS:
        rest = len(out) - MAX_POOL_FINDINGS
        out = out[:MAX_POOL_FINDINGS]
        out.append(
            replace(
                out[-1],
                severity=Severity.INFO,
                title=f"{rest} more pool problem(s)",
                detail=f"{rest} more pools of {', '.join(drivers)} have problems; "
                "run dradiag scan for the list.",
                evidence=(),
            )
        )
    return out


def double_published_findings(walk: ClaimWalk, pools: Sequence[tuple[str, str]]) -> list[Finding]:
    """GPUs of the claim's pools published whole and as MIG devices (``analyses``).

    Error when this claim holds one of the pair (its hardware is offered twice), else a
    warning.
    """
    from dradiag.analyses.double_publication import double_published

    held = {(d, p, dev) for _r, d, p, dev in claim_devices(walk.claim)}
    slices = [s for driver, pool in pools for s in walk.snapshot.pool_slices(driver, pool)]
    out: list[Finding] = []
    for pair in double_published(slices):
        names = pair.devices()
        mine = [n for n in names if (pair.driver, pair.pool, n) in held]
        shown = ", ".join(pair.migs[:3]) + (" …" if len(pair.migs) > 3 else "")
        out.append(
            Finding(
                rule=PUB_GPU_AND_MIG,
                phase=Phase.PUBLICATION,
                severity=Severity.ERROR if mine else Severity.WARNING,
                title="a GPU is published both whole and as its MIG devices",
                detail=f"Pool {pair.pool} of {pair.driver} offers GPU {pair.gpu} "
                f"(uuid {pair.gpu_uuid}) as a whole device and also its {len(pair.migs)} MIG "
                f"device(s) {shown}, with no shared counters between them: the scheduler can "
                "allocate the same hardware to two claims"
                + (f"; this claim holds {', '.join(mine)}." if mine else "."),
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"ResourceSlices of pool {pair.pool}",
                        excerpt=f"{pair.gpu}: type gpu, uuid {pair.gpu_uuid}; "
                        + "; ".join(
                            f"{m}: type mig, parentUUID {pair.gpu_uuid}" for m in pair.migs[:2]
                        ),
                    ),
                ),
                identifiers=(("slice device name", pair.gpu), ("GPU UUID", pair.gpu_uuid)),
                cause=f"GPU {pair.gpu} is published whole and as MIG device(s) "
                f"{', '.join(pair.migs[:2])}",
            )
        )
    return out


def _with_log_cause(walk: ClaimWalk, health: ph.PluginHealth, finding: Finding) -> Finding:
    """A crash-looping or stuck plugin container's finding, with its last error as cause."""
    if finding.cause or finding.rule not in (ph.PLUGIN_CRASHLOOP, ph.PLUGIN_INIT_WAITING):
        return finding
    line = ph.last_error_line(walk.snapshot, health, init=finding.rule == ph.PLUGIN_INIT_WAITING)
    return replace(finding, cause=clip_middle(line, 200)) if line else finding


def phase_publication(walk: ClaimWalk) -> PhaseResult:
    """Slices exist for the driver on the claim's nodes; pools valid; plugin healthy."""
    phase = Phase.PUBLICATION
    snap = walk.snapshot
    slices_collected = walk.collected(Kind.RESOURCE_SLICE)
    findings: list[Finding] = []
    drivers = walk.drivers()
    nodes = walk.publication_nodes()
    claim_nodes = walk.nodes()
    # An allocation (or later evidence of one) proves the claim's devices were published
    # when it was allocated: slices missing *now* are a finding about the driver for the
    # later phases, never a publication break of this claim (DESIGN §2).
    proven = walk.allocated
    claim_pending = not proven
    # Whether a driver publishes anywhere: its slices on the claim's nodes answer that
    # without reading the driver's slices cluster-wide (5,000 nodes' worth).
    on_nodes = {
        str((s.get("spec") or {}).get("driver") or "")
        for node in nodes
        for s in snap.slices_for(node=node)
    }
    publishing: dict[str, bool] = {}

    def publishes(driver: str) -> bool:
        if driver not in publishing:
            publishing[driver] = driver in on_nodes or bool(snap.slices_for(driver=driver))
        return publishing[driver]

    for driver in drivers if slices_collected else ():
        if not publishes(driver):
            plugin_note = ""
            if snap.is_collected(Kind.POD) and not walk.any_plugin_pod():
                plugin_note = " No kubelet-plugin pod of the DRA driver is in the snapshot either."
            findings.append(
                Finding(
                    rule=PUB_DRIVER_NO_SLICES,
                    phase=phase,
                    severity=Severity.WARNING if proven else Severity.ERROR,
                    title=f"driver {driver} publishes no ResourceSlices"
                    + (" now" if proven else ""),
                    detail=f"No ResourceSlice in the cluster has spec.driver={driver}: no node "
                    + (
                        "offers a device of this driver now. The claim was allocated, so its "
                        "devices were published then; the driver has since stopped publishing, "
                        "which breaks Prepare of claims not yet prepared on its nodes."
                        if proven
                        else "offers a device of this driver, so no claim for it can be allocated."
                    )
                    + plugin_note,
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref="ResourceSlices",
                            excerpt=f"drivers publishing: {', '.join(snap.drivers()) or 'none'}",
                        ),
                    ),
                    next=(
                        f"kubectl get resourceslices --field-selector spec.driver={driver}",
                        "kubectl get pods -A -l 'app.kubernetes.io/name in "
                        "(dra-driver-nvidia-gpu,nvidia-dra-driver-gpu)' -o wide",
                    ),
                    identifiers=(("driver", driver),),
                )
            )
    pools: set[tuple[str, str]] = set()
    for node in nodes:
        node_slices = [
            s for s in snap.slices_for(node=node) if (s.get("spec") or {}).get("driver") in drivers
        ]
        for s in node_slices:
            spec = s.get("spec") or {}
            pools.add(
                (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
            )
        health = walk.plugin(node)
        blocking = not walk.prepared_on(node)
        if slices_collected and not node_slices and all(publishes(d) for d in drivers):
            findings.append(
                Finding(
                    rule=PUB_NODE_NO_SLICES,
                    phase=phase,
                    severity=Severity.ERROR if blocking and not proven else Severity.WARNING,
                    title="the claim's node has no slices of the driver",
                    detail=f"Node {node} publishes no ResourceSlice of {', '.join(drivers)}: the "
                    "driver is not running or not registered there (the kubelet wipes a "
                    "driver's slices 30 s after it unregisters)."
                    + (f" Plugin state: {health.state.value}." if health.pod is not None else ""),
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceSlices with spec.nodeName={node}",
                            excerpt="none for " + ", ".join(drivers),
                        ),
                    ),
                    next=(
                        f"kubectl get resourceslices --field-selector spec.nodeName={node}",
                        f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} "
                        "| grep kubelet-plugin",
                    ),
                    identifiers=(("node", node),),
                )
            )
        plugin_hits = [
            h for h in walk.hits_for(phase) if health.pod is not None and h.pod is health.pod
        ]
        matched = {h.finding.rule for h in plugin_hits}
        findings += [
            _with_log_cause(walk, health, f)
            for f in ph.plugin_findings(
                health, blocking=blocking, has_slices=bool(node_slices) or not slices_collected
            )
            if f.rule not in matched
        ]
        for hit in plugin_hits:
            found = _with_log_cause(walk, health, hit.finding)
            # Plugin signatures (state, startup errors, dropped fields): current logs and
            # state always count; a previous instance's log only while the plugin is still
            # unhealthy. Once the claim is prepared there, a dead plugin no longer blocks it.
            if hit.log_previous and health.healthy:
                findings.append(as_historical(found, "the plugin has since restarted and runs"))
            elif not blocking and found.severity is Severity.ERROR:
                findings.append(replace(found, severity=Severity.WARNING))
            else:
                findings.append(found)
    if claim_nodes and slices_collected:
        findings += pool_findings(snap, sorted(pools), blocking=claim_pending)
        findings += double_published_findings(walk, sorted(pools))
    elif claim_pending and slices_collected:
        findings += candidate_pool_findings(snap, drivers)
    plugin_pods = {id(walk.plugin(n).pod) for n in nodes if walk.plugin(n).pod is not None}
    findings += [
        h.finding for h in walk.hits_for(phase) if h.pod is None or id(h.pod) not in plugin_pods
    ]
    summary = f"{', '.join(drivers)} on {', '.join(nodes)}" if nodes else f"{', '.join(drivers)}"
    if not slices_collected and not any(f.severity is Severity.ERROR for f in findings):
        findings.append(
            walk.not_collected(phase, [Kind.RESOURCE_SLICE], "Publication is read from slices")
        )
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN, summary)
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)
