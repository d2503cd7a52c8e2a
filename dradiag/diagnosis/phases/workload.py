"""Phase 6, workload: the container sees and uses the device."""

from __future__ import annotations

from dradiag.analyses import wiring
from dradiag.analyses.error_chain import clip_middle
from dradiag.diagnosis.context import (
    ClaimWalk,
    RuleHit,
    container_statuses,
    pod_all_running,
    pod_claim_names,
    pod_done,
    pod_key,
    pod_started,
)
from dradiag.diagnosis.findings import phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import WORK_CONTAINER_CRASHING
from dradiag.snapshot.model import (
    Kind,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity


def phase_workload(walk: ClaimWalk, injection: PhaseResult) -> PhaseResult:
    """The containers that need the device list the claim, run, and see a GPU."""
    phase = Phase.WORKLOAD
    findings: list[Finding] = []
    for pod in walk.pods:
        findings += wiring.extended_resource_findings(pod, walk.claim)
        names = pod_claim_names(walk, pod)
        if not names:
            continue
        findings += wiring.wiring_findings(
            wiring.analyze_pod_wiring(pod, walk.claim, names), walk.claim
        )
    reached = injection.status in (PhaseStatus.OK, PhaseStatus.WARN)
    if not reached:
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED)
    hits_by_pod: dict[int, list[RuleHit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    base = PhaseStatus.OK
    for pod in walk.bound_pods():
        if not pod_started(pod):
            continue
        pod_hits = hits_by_pod.get(id(pod), [])
        findings += [h.finding for h in pod_hits]
        crashing = [
            cs
            for cs in container_statuses(pod)
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
            or (((cs.get("state") or {}).get("terminated") or {}).get("exitCode") not in (None, 0))
        ]
        if not crashing or any(h.finding.severity is Severity.ERROR for h in pod_hits):
            continue
        if not walk.collected(Kind.LOG):
            findings.append(
                walk.not_collected(
                    phase,
                    [Kind.LOG],
                    f"Container(s) {', '.join(str(c.get('name')) for c in crashing)} of pod "
                    f"{pod_key(pod)} exit with errors; whether they saw a GPU is in their logs",
                )
            )
            base = PhaseStatus.UNKNOWN
            continue
        if pod_hits:
            continue
        for cs in crashing:
            term = (
                (cs.get("lastState") or {}).get("terminated")
                or (cs.get("state") or {}).get("terminated")
                or {}
            )
            findings.append(
                Finding(
                    rule=WORK_CONTAINER_CRASHING,
                    phase=phase,
                    severity=Severity.WARNING,
                    title="a container that uses the claim keeps failing",
                    detail=f"Container {cs.get('name')!r} of pod {pod_key(pod)} exits "
                    f"(exit code {term.get('exitCode')}, {cs.get('restartCount') or 0} restarts); "
                    "its log shows no known GPU-visibility signature, so the failure may be the "
                    "application's own.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pod)} .status.containerStatuses[{cs.get('name')}]",
                            excerpt=f"{term.get('reason') or ''} exit {term.get('exitCode')}: "
                            f"{clip_middle(str(term.get('message') or ''), 300)}",
                        ),
                    ),
                    next=(
                        f"kubectl logs -n {namespace_of(pod)} {name_of(pod)} -c {cs.get('name')} "
                        "--previous",
                        f"kubectl exec -n {namespace_of(pod)} {name_of(pod)} -c {cs.get('name')} "
                        "-- nvidia-smi -L",
                    ),
                )
            )
    running = [f"{pod_key(p)}" for p in walk.bound_pods() if pod_all_running(p) and not pod_done(p)]
    summary = f"running: {', '.join(running[:3])}" + (" …" if len(running) > 3 else "")
    return phase_result(walk.rulebook, phase, findings, base, summary if running else "")
