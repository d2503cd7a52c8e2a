"""Phase 4, prepare: the kubelet calls the plugin's NodePrepareResources."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from dradiag.analyses import mps_daemon
from dradiag.analyses.error_chain import clip_middle
from dradiag.analyses.timeline import (
    age,
    event_last_time,
    format_age,
    parse_time,
)
from dradiag.diagnosis.context import (
    ClaimWalk,
    RuleHit,
    container_statuses,
    node_ready_since,
    pod_done,
    pod_key,
    pod_started,
    pod_status_of,
    pod_terminating,
    scheduled_at,
)
from dradiag.diagnosis.findings import as_historical, event_evidence, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import PREP_FAILED, PREP_MPS_DAEMON_DOWN, PREP_STUCK
from dradiag.snapshot.model import (
    K8sObject,
    Kind,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity


def _prepare_events(walk: ClaimWalk, pod: K8sObject) -> list[K8sObject]:
    return [e for e in walk.pod_events(pod) if e.get("reason") == "FailedPrepareDynamicResources"]


def phase_prepare(walk: ClaimWalk) -> PhaseResult:
    """The kubelet prepared the claim on each pod's node, or why it did not."""
    phase = Phase.PREPARE
    # A pod being deleted before its containers ever started still carries its Prepare
    # failure: the deletion is a later event and never outranks that earlier broken
    # boundary (DESIGN §2). Only its failure evidence counts (no "stuck" inference: a
    # deleted pod waits on Unprepare, not Prepare).
    bound = [p for p in walk.bound_pods() if not pod_terminating(p) or not pod_started(p)]
    allocated = walk.allocated
    # Evidence naming the claim about a pod the input does not hold (one kubelet event
    # pasted with the claim): the kubelet's word on Prepare still decides this phase.
    podless = [h for h in walk.hits_for(phase) if h.pod is None]
    if not bound and podless and (allocated or not walk.status_known):
        return phase_result(walk.rulebook, phase, [h.finding for h in podless], PhaseStatus.OK)
    if not allocated or not bound:
        if allocated and not walk.collected(Kind.POD):
            return phase_result(
                walk.rulebook,
                phase,
                [walk.not_collected(phase, [Kind.POD], "Prepare is observed on the claim's pods")],
                PhaseStatus.UNKNOWN,
            )
        return phase_result(walk.rulebook, phase, [], PhaseStatus.NOT_REACHED)
    findings: list[Finding] = []
    waiting: list[K8sObject] = []
    hits_by_pod: dict[int, list[RuleHit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    for pod in bound:
        # Evidence about no particular pod (a component log line naming the claim) is
        # this claim's Prepare outcome for each of its waiting pods, next to the pod's own
        # (the plugin log names the cause a kubelet event only wraps, e.g. a deadline).
        pod_hits = hits_by_pod.get(id(pod), []) + podless
        if pod_started(pod) or pod_done(pod):
            for h in pod_hits:
                stale = _skipped_after_restart(walk, pod, h.finding)
                findings.append(stale or as_historical(h.finding, "the pod's containers started"))
            continue
        if not pod_terminating(pod):
            waiting.append(pod)
        findings += _current_first(walk, pod_hits)
        if pod_hits:
            continue
        failed = _prepare_events(walk, pod)
        if failed:
            last = failed[-1]
            findings.append(
                Finding(
                    rule=PREP_FAILED,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the kubelet could not prepare the claim's devices",
                    detail=f"Pod {pod_key(pod)} waits in ContainerCreating: NodePrepareResources "
                    f"failed on node {(pod.get('spec') or {}).get('nodeName')}: "
                    f"{clip_middle(str(last.get('message') or ''), 500)}",
                    evidence=tuple(event_evidence(e) for e in failed[-2:]),
                    next=(
                        f"kubectl get events -n {namespace_of(pod)} --field-selector "
                        f"involvedObject.name={name_of(pod)}",
                        "kubectl logs -n <driver namespace> <kubelet-plugin pod on the node> -c gpus",
                    ),
                    identifiers=(("claim UID", walk.claim_uid),),
                )
            )
    # MPS: Prepare waits on the claim's control-daemon Deployment; when that pod cannot be
    # created, the Deployment's status is the one object that says why.
    mps_waiting = (
        [p for p in waiting if _creating(p)] if mps_daemon.mps_requests(walk.claim) else []
    )
    daemons_unread = bool(mps_waiting) and not walk.collected(Kind.DEPLOYMENT)
    if mps_waiting and not daemons_unread and not _has_error(findings):
        findings += _mps_daemon_down(walk, mps_waiting[0])
    for pod in waiting:
        if _has_error(findings):
            break
        if not walk.collected(Kind.EVENT):
            kinds = [Kind.EVENT, Kind.DEPLOYMENT] if daemons_unread else [Kind.EVENT]
            findings.append(
                walk.not_collected(
                    phase,
                    kinds,
                    f"Pod {pod_key(pod)} is not running yet and Prepare failures are reported "
                    "only in pod events (the plugin logs them only at verbosity 6)"
                    + (
                        "; an MPS claim's Prepare also waits on its MPS control daemon, whose "
                        "Deployment status says why it is not running"
                        if daemons_unread
                        else ""
                    ),
                )
            )
            return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
        events = walk.pod_events(pod)
        last_event = max((t for e in events if (t := event_last_time(e))), default=None)
        since = max((t for t in (scheduled_at(pod), last_event) if t), default=None)
        if walk.older_than_threshold(since):
            node = (pod.get("spec") or {}).get("nodeName")
            findings.append(
                Finding(
                    rule=PREP_STUCK,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="Prepare never completed: the pod is stuck without any event",
                    detail=f"ResourceClaim {walk.claim_key} is allocated and reserved and pod "
                    f"{pod_key(pod)} is bound to node {node}, but no container has started and "
                    f"nothing was reported for {format_age(age(since, walk.now) or timedelta())} "
                    f"(threshold {format_age(walk.options.stuck_after)}): NodePrepareResources "
                    "is hanging or the kubelet never called it.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pod)} .status",
                            excerpt=waiting_summary(pod) or "no container status",
                        ),
                    ),
                    next=(
                        f"journalctl -u kubelet on {node} | grep -i 'dynamic resources\\|{walk.claim_uid}'",
                        "kubectl get --raw /api/v1/nodes/"
                        f"{node}/proxy/metrics | grep nvidia_dra_requests_inflight",
                    ),
                    identifiers=(("claim UID", walk.claim_uid), ("node", str(node))),
                )
            )
    deleted_unstarted = [
        p for p in bound if pod_terminating(p) and not (pod_started(p) or pod_done(p))
    ]
    if not findings and len(deleted_unstarted) == len(bound):
        # Deleted before any container started, with no Prepare failure on record.
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED)
    if daemons_unread and all(f.rule == PREP_STUCK for f in findings):
        # Prepare may be waiting on the MPS daemon: unread, that is neither "in progress"
        # nor a stall without a cause; say what would tell.
        findings.append(
            walk.not_collected(
                phase,
                [Kind.DEPLOYMENT],
                f"Pod {pod_key(mps_waiting[0])} waits in ContainerCreating and the claim's "
                "MPS control daemon Deployment (in the driver's namespace) says whether "
                "Prepare is blocked on it",
            )
        )
        if len(findings) == 1:
            return phase_result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
    if waiting and not findings:
        return phase_result(
            walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "Prepare in progress"
        )
    prepared = sorted({str((p.get("spec") or {}).get("nodeName")) for p in bound if pod_started(p)})
    summary = f"prepared on {', '.join(prepared)}" if prepared else ""
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)


def _has_error(findings: list[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)


def _creating(pod: K8sObject) -> bool:
    """The pod waits for its sandbox: no container status yet, or ContainerCreating."""
    statuses = container_statuses(pod)
    return not statuses or any(
        ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "ContainerCreating"
        for cs in statuses
    )


def _mps_daemon_down(walk: ClaimWalk, pod: K8sObject) -> list[Finding]:
    """The claim's MPS control daemon, when its Deployment reports it cannot run."""
    found = mps_daemon.first_down(mps_daemon.claim_daemons(walk.snapshot, walk.claim_uid))
    if found is None:
        return []
    deployment, down = found
    where = f"{namespace_of(deployment)}/{name_of(deployment)}"
    node = (pod.get("spec") or {}).get("nodeName")
    if down.condition == "ReplicaFailure":
        cause = f"its pod cannot be created ({down.reason or 'ReplicaFailure'}): {down.message}"
    else:
        cause = f"it has no available replica ({down.reason or 'Available=False'}): {down.message}"
    return [
        Finding(
            rule=PREP_MPS_DAEMON_DOWN,
            phase=Phase.PREPARE,
            severity=Severity.ERROR,
            title="the claim's MPS control daemon is not running, so Prepare cannot complete",
            detail=f"Pod {pod_key(pod)} waits in ContainerCreating on node {node}: ResourceClaim "
            f"{walk.claim_key} asks for MPS sharing, and Prepare waits for the claim's MPS "
            f"control daemon (Deployment {where}), which is not running: "
            f"{clip_middle(cause, 700)}",
            evidence=(
                Evidence(
                    source=EvidenceSource.OBJECT,
                    ref=f"Deployment {where} .status.conditions[{down.condition}]",
                    excerpt=clip_middle(f"{down.reason}: {down.message}", 500),
                ),
            ),
            next=(
                f"kubectl describe deployment -n {namespace_of(deployment)} {name_of(deployment)}",
                f"kubectl get events -n {namespace_of(deployment)} --field-selector "
                "reason=FailedCreate",
            ),
            identifiers=(("claim UID", walk.claim_uid), ("node", str(node))),
        )
    ]


def _current_first(walk: ClaimWalk, hits: list[RuleHit]) -> list[Finding]:
    """The pod's Prepare findings, where an older failure gives way to the current one.

    kubelet retries Prepare on every sync and each attempt can fail differently (a CDI spec
    error once, then ``Insufficient Resources`` eight times since); the event repeated up to
    now is what blocks the pod today, an earlier one with another cause is history. Only a
    specific current failure displaces an older one: a catch-all that happens to be newer
    (an umbrella "Prepare failed") does not erase a cause named earlier.
    """
    timed = [
        (t, h)
        for h in hits
        if h.finding.severity is Severity.ERROR and (t := parse_time(h.last_seen)) is not None
    ]
    if len(timed) < 2:
        return [h.finding for h in hits]
    newest_time, newest = max(timed, key=lambda th: th[0])
    rule = walk.rulebook.get(newest.finding.rule) if walk.rulebook is not None else None
    if rule is None or getattr(rule, "fallback", False):
        return [h.finding for h in hits]
    out = []
    for h in hits:
        t = parse_time(h.last_seen)
        older = (
            t is not None
            and t < newest_time
            and h.finding.severity is Severity.ERROR
            and h.finding.rule != newest.finding.rule
        )
        out.append(
            replace(
                h.finding,
                severity=Severity.INFO,
                detail=f"An earlier Prepare attempt (last {h.last_seen}); the current one fails "
                f"with {newest.finding.rule} (last {newest.last_seen}): {h.finding.detail}",
            )
            if older
            else h.finding
        )
    return out


_SKIPPED_PREPARE = "DRA-PREP-SKIPPED-COMPLETED"
_FAILING_WAITING = frozenset({"CrashLoopBackOff", "RunContainerError", "Error"})


def _skipped_after_restart(walk: ClaimWalk, pod: K8sObject, finding: Finding) -> Finding | None:
    """The plugin's skipped Prepare, raised to the cause when the node came back since.

    "Skip prepare: claim already in PrepareCompleted state" is right after a plugin
    restart, and wrong after a node reboot: the checkpoint survived, what Prepare set up
    (MPS daemon, MIG devices, tmpfs CDI spec) did not. The reasoning an expert applies:
    the node became Ready again after the pod had started (the claim was prepared before),
    and the consumer's containers keep failing since then, so the skipped Prepare left
    the claim without its node-side setup. A runtime that cannot create the container is
    injection's to explain (a lost CDI spec), so a container waiting there is left out.
    """
    if finding.rule != _SKIPPED_PREPARE:
        return None
    ready = node_ready_since(walk.snapshot.node(str((pod.get("spec") or {}).get("nodeName") or "")))
    started = parse_time(pod_status_of(pod).get("startTime"))
    if ready is None or started is None or ready <= started:
        return None
    failing = []
    for cs in container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        last = (cs.get("lastState") or {}).get("terminated") or {}
        ran = parse_time(last.get("startedAt"))
        if (
            waiting.get("reason") in _FAILING_WAITING
            and ran is not None
            and ran >= ready
            and last.get("exitCode") not in (None, 0)
        ):
            failing.append(
                f"{cs.get('name')} ({waiting.get('reason')}, exit {last.get('exitCode')})"
            )
    if not failing:
        return None
    node = (pod.get("spec") or {}).get("nodeName")
    return replace(
        finding,
        severity=Severity.ERROR,
        title="Prepare was skipped after the node restarted: the checkpoint still said "
        "PrepareCompleted",
        detail=f"Node {node} became Ready again at {ready:%Y-%m-%dT%H:%M:%SZ}, after pod "
        f"{pod_key(pod)} had started with the claim prepared; the plugin then answered "
        "Prepare from its checkpoint (PrepareCompleted) without setting the devices up "
        "again, and the pod's containers keep failing since: "
        f"{', '.join(failing)}. {finding.detail}",
        evidence=(
            *finding.evidence,
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Node {node} .status.conditions[Ready]",
                excerpt=f"lastTransitionTime {ready:%Y-%m-%dT%H:%M:%SZ}",
            ),
        ),
    )


def waiting_summary(pod: K8sObject) -> str:
    parts = []
    for cs in container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting:
            parts.append(f"{cs.get('name')}: waiting {waiting.get('reason') or ''}".strip())
    return "; ".join(parts) or f"phase {pod_status_of(pod).get('phase') or 'Pending'}"
