"""Phase 7, unprepare: release (Unprepare, deallocation, cleanup), and state leaked by gone claims."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from dradiag.analyses import plugin_health as ph
from dradiag.analyses import wiring
from dradiag.analyses.error_chain import clip_middle
from dradiag.analyses.timeline import (
    age,
    format_age,
    parse_time,
)
from dradiag.diagnosis.context import (
    ClaimWalk,
    claim_devices,
    container_statuses,
    pod_done,
    pod_key,
    pod_status_of,
    pod_terminating,
)
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.rule_ids import (
    UNPREP_DELETION_STUCK,
    UNPREP_POD_STUCK_TERMINATING,
    UNPREP_STALE_RESERVATION,
    UNPREPARE_CAUSE_RULE,
)
from dradiag.snapshot.model import (
    ContainerLog,
    K8sObject,
    Kind,
    Snapshot,
    key_of,
    name_of,
    namespace_of,
    uid_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

_OTHER_CLAIM_UID = re.compile(
    r"already allocated to different claim (?P<uid>[0-9a-fA-F-]{8,})", re.I
)


_MIG_CREATE_PARENT = re.compile(
    r"error creating GPU instance for '(?P<dev>gpu-(?P<minor>\d+)-[^']*)'(?:: (?P<cause>[A-Za-z ]+))?"
)


_OLD_CLAIM_SAME_NAME = re.compile(
    r"old ResourceClaim with same name (?P<name>\S+) and different UID (?P<uid>\S+) still exists"
)


def _leaked_by_other_claim(walk: ClaimWalk, prepare: PhaseResult) -> list[Finding]:
    """This claim's Prepare fails because another claim's state was never released.

    The signatures (nvidia-driver-facts §5.4 C, §8.3, §12 #12): the double-allocation
    guard names the other claim's UID; a DynamicMIG ``Insufficient Resources`` on GPU
    ``<minor>`` while a claim with a MIG device on the same GPU is gone or terminating on
    that node; the kubelet's "old ResourceClaim with same name" after a force-delete.
    """
    messages = " ".join(
        e.excerpt for f in prepare.findings if f.severity is Severity.ERROR for e in f.evidence
    ) + " ".join(f.detail for f in prepare.findings if f.severity is Severity.ERROR)
    if not messages:
        return []
    snap = walk.snapshot
    out: list[Finding] = []
    culprits: list[tuple[K8sObject | None, str, str]] = []  # (claim, uid, why)
    other_names: dict[str, str] = {}
    extra_evidence: list[Evidence] = []
    for m in _OTHER_CLAIM_UID.finditer(messages):
        other = snap.claim_by_uid(m.group("uid"))
        if other is walk.claim:
            continue
        why = "" if other is None else _release_pending(walk, other)
        if other is None or why:
            culprits.append(
                (
                    other,
                    m.group("uid"),
                    why or "it is gone, yet the driver's checkpoint still holds the device for it",
                )
            )
    for m in _OLD_CLAIM_SAME_NAME.finditer(messages):
        culprits.append(
            (None, m.group("uid"), "the kubelet still holds the claim of a force-deleted pod")
        )
    mig = _MIG_CREATE_PARENT.search(messages)
    if mig and not culprits:
        minor = mig.group("minor")
        for partial in _partial_prepares(walk):
            same_gpu = any(
                d == mig.group("dev") or d.startswith(f"gpu-{minor}-") for d in partial.devices
            )
            if not same_gpu or partial.uid == walk.claim_uid:
                continue
            other = snap.claim_by_uid(partial.uid)
            why = "" if other is None else _release_pending(walk, other)
            if other is not None and not why:
                continue
            culprits.append(
                (
                    other,
                    partial.uid,
                    f"its Prepare of {', '.join(partial.devices)} started but never completed, "
                    "and the plugin's clean-up dropped it without tearing those devices down"
                    + (f" ({why})" if why else " (the claim is gone from the API server)"),
                )
            )
            extra_evidence.append(partial.evidence)
            if other is None:
                other_names[partial.uid] = partial.claim
    if mig and not culprits:
        # The same leak on another GPU of the node: the plugin is seen dropping partially
        # prepared claims without tearing their MIG devices down, which is what occupies a
        # placement; the occupant of this GPU is then most likely another such leftover.
        minor = mig.group("minor")
        stale = _stale_claim_uids(walk)
        for partial in _partial_prepares(walk):
            if partial.uid == walk.claim_uid or partial.uid not in stale:
                continue
            if snap.claim_by_uid(partial.uid) is not None:
                continue
            culprits.append(
                (
                    None,
                    partial.uid,
                    f"it was partially prepared ({', '.join(partial.devices)}) and is gone from "
                    "the API server, and the plugin's clean-up dropped it as an 'unprepare noop' "
                    "without tearing its MIG devices down; that is on another GPU than "
                    f"gpu-{minor}, so it shows the leak, and a leftover GPU instance of such a "
                    f"partially prepared claim is the likely occupant of gpu-{minor}'s placement",
                )
            )
            extra_evidence.append(partial.evidence)
            other_names[partial.uid] = partial.claim
            break
    if mig and not culprits:
        for node in walk.nodes():
            for other in _claims_on_node(snap, node):
                if other is walk.claim:
                    continue
                if not any(
                    d.startswith(f"gpu-{minor}-") or d == f"gpu-{minor}"
                    for _r, _drv, _p, d in claim_devices(other)
                ):
                    continue
                why = _release_pending(walk, other)
                if why:
                    culprits.append((other, uid_of(other), why))
    surfaced = (
        f" ({mig.group('dev')}: {mig.group('cause').strip()})" if mig and mig.group("cause") else ""
    )
    for other, other_uid, why in culprits:
        other_key = (
            key_of(other)
            if other is not None
            else other_names.get(other_uid, "(no longer in the cluster)")
        )
        out.append(
            Finding(
                rule=UNPREPARE_CAUSE_RULE,
                phase=Phase.UNPREPARE,
                severity=Severity.ERROR,
                title="another claim's devices were never released on the node",
                detail=f"Prepare of {walk.claim_key} fails{surfaced} because ResourceClaim "
                f"{other_key} (UID {other_uid}) was not fully unprepared: {why}. The broken "
                "boundary is that claim's Unprepare, not this claim's Prepare.",
                evidence=(
                    *tuple(
                        e
                        for f in prepare.findings
                        if f.severity is Severity.ERROR
                        for e in f.evidence
                    )[:2],
                    *extra_evidence[:2],
                ),
                next=(
                    *((f"dradiag claim {other_key}",) if other is not None else ()),
                    "kubectl exec -n <driver namespace> <kubelet-plugin pod on the node> -c gpus "
                    "-- cat /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json  "
                    f"(entries for claim UID {other_uid})",
                    "nvidia-smi mig -lgi on the node  (a GPU instance no prepared claim owns)",
                ),
                identifiers=(("claim UID", other_uid), ("claim", other_key)),
            )
        )
    return out


_PARTIAL_PREPARE = re.compile(
    r"(?:preparation started but not completed for claim|no MIG rollback \(DynamicMIG "
    r"disabled\) for partially prepared claim) '?(?P<ns>[^/\s']+)/(?P<name>[^:\s']+):"
    r"(?P<uid>[0-9a-fA-F-]{8,})'? \(devices: \[(?P<devices>.*)\]\)"
)
"""The plugin's no-op unprepare of a partially prepared claim; ``devices`` is a plain list
(``[gpu-2-mig-4g95gb-5-0]``) or Go's dump of the allocation results (``[{req driver pool
gpu-1-mig-2g47gb-14-0 <nil> …}]``)."""

_DEVICE_NAME = re.compile(r"\bgpu-\d+(?:-mig-[0-9a-z]+(?:-\d+)*)?\b")


@dataclass(frozen=True, slots=True)
class _PartialPrepare:
    """A claim the plugin dropped from its checkpoint without tearing its devices down."""

    claim: str
    uid: str
    devices: tuple[str, ...]
    evidence: Evidence


def _node_plugin_logs(walk: ClaimWalk) -> list[ContainerLog]:
    """The kubelet-plugin logs of the claim's nodes; a plugin log pasted without its pod
    (``kubelet-plugin.log``) counts as the node's when the claim has one node."""
    logs = [
        log for node in walk.nodes() for log in ph.plugin_logs(walk.snapshot, walk.plugin(node))
    ]
    logs += [
        log
        for log in walk.snapshot.component_logs()
        if log.component == "kubelet-plugin" and len(walk.nodes()) <= 1
    ]
    return logs


_STALE_CLAIM = re.compile(
    r"partially prepared claim '[^':\s]+/[^':\s]+:(?P<uid>[0-9a-fA-F-]{8,})' is stale: "
    r"not found in API server"
)


def _stale_claim_uids(walk: ClaimWalk) -> set[str]:
    """UIDs the plugin's clean-up found gone from the API server (its own word)."""
    return {
        m.group("uid") for log in _node_plugin_logs(walk) for m in _STALE_CLAIM.finditer(log.text)
    }


def _partial_prepares(walk: ClaimWalk) -> list[_PartialPrepare]:
    """No-op unprepares of partially prepared claims in the plugin logs of the claim's nodes
    (nvidia-driver-facts §5.4 D/E, §8.3: the orphaned GI/CI behind ``Insufficient Resources``)."""
    out: list[_PartialPrepare] = []
    for log in _node_plugin_logs(walk):
        if "partially prepared" not in log.text and "not completed for claim" not in log.text:
            continue
        for number, line in enumerate(log.text.splitlines(), 1):
            m = _PARTIAL_PREPARE.search(line)
            if not m:
                continue
            devices = tuple(dict.fromkeys(_DEVICE_NAME.findall(m.group("devices")))) or tuple(
                d for d in re.split(r"[\s,]+", m.group("devices")) if d
            )
            where = (
                f"{log.namespace or ''}/{log.pod}/{log.container}"
                if log.pod
                else str(log.source or log.component)
            )
            out.append(
                _PartialPrepare(
                    claim=f"{m.group('ns')}/{m.group('name')}",
                    uid=m.group("uid"),
                    devices=devices,
                    evidence=Evidence(
                        source=EvidenceSource.LOG,
                        ref=f"log {where}{' (previous)' if log.previous else ''}:{number}",
                        excerpt=clip_middle(line.strip(), 600),
                    ),
                )
            )
    return out


def _claims_on_node(snap: Snapshot, node: str) -> list[K8sObject]:
    """Claims allocated from the node's pools (targeted: the node's slices name its pools)."""
    seen: dict[int, K8sObject] = {}
    for slc in snap.slices_for(node=node):
        spec = slc.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        for dev in spec.get("devices") or ():
            for claim in snap.claims_reserving_device(
                driver, pool, str((dev or {}).get("name") or "")
            ):
                seen[id(claim)] = claim
    for pod in snap.pods_on_node(node):
        for pc in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            if isinstance(pc, Mapping) and pc.get("resourceClaimName"):
                c = snap.claim(namespace_of(pod), str(pc["resourceClaimName"]))
                if c is not None:
                    seen[id(c)] = c
    return sorted(seen.values(), key=key_of)


def _release_pending(walk: ClaimWalk, claim: K8sObject) -> str:
    """Why ``claim`` still holds its devices although its consumers are gone, or ``""``."""
    snap = walk.snapshot
    meta = claim.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return f"it is being deleted since {meta['deletionTimestamp']}"
    reserved = wiring.reserved_pod_uids(claim)
    pods = [snap.pod_by_uid(u) for u in reserved]
    if reserved and snap.is_collected(Kind.POD) and all(p is None for p in pods):
        return "every pod it is reserved for is gone"
    for pod in pods:
        if pod is not None and pod_terminating(pod):
            return f"its pod {pod_key(pod)} is stuck terminating"
        if pod is not None and pod_done(pod):
            return f"its pod {pod_key(pod)} has finished"
    return ""


def phase_unprepare(walk: ClaimWalk, prepare: PhaseResult) -> PhaseResult:
    """Release: reservations of gone pods, stuck termination or deletion, leaked state."""
    phase = Phase.UNPREPARE
    snap = walk.snapshot
    findings: list[Finding] = list(_leaked_by_other_claim(walk, prepare))
    hits = walk.hits_for(phase)
    meta = walk.claim.get("metadata") or {}
    releasing = False
    if not walk.synthesized and walk.allocation is not None:
        for uid, pod in wiring.pods_of_reservations(snap, walk.claim):
            if pod is None and snap.is_collected(Kind.POD):
                releasing = True
                findings.append(_stale_reservation(walk, uid, None, "is gone"))
            elif pod is not None and pod_done(pod):
                releasing = True
                finished = max(
                    (
                        parse_time(
                            ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
                        )
                        for cs in container_statuses(pod)
                    ),
                    key=lambda t: t.timestamp() if t else 0.0,
                    default=None,
                )
                if walk.older_than_threshold(finished) is not False:
                    findings.append(
                        _stale_reservation(walk, uid, pod, f"has {pod_status_of(pod).get('phase')}")
                    )
    for pod in walk.pods:
        if not pod_terminating(pod):
            continue
        releasing = True
        since = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
        # deletionTimestamp is already the end of the grace period: past it, the pod
        # should be gone.
        if walk.older_than_threshold(since):
            findings.append(
                Finding(
                    rule=UNPREP_POD_STUCK_TERMINATING,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the pod is stuck terminating with the claim prepared",
                    detail=f"Pod {pod_key(pod)} was due to be gone at {since:%Y-%m-%dT%H:%M:%SZ} "
                    f"and still exists after {format_age(age(since, walk.now) or timedelta())}: "
                    "the kubelet runs NodeUnprepareResources after the containers stop and keeps "
                    "the pod until it succeeds.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pod)} .metadata.deletionTimestamp",
                            excerpt=str((pod.get("metadata") or {}).get("deletionTimestamp")),
                        ),
                    ),
                    next=(
                        f"journalctl -u kubelet on {(pod.get('spec') or {}).get('nodeName')} | grep "
                        "NodeUnprepareResources",
                        "kubectl logs -n <driver namespace> <kubelet-plugin pod> -c gpus | grep -i "
                        "unprepar",
                    ),
                    identifiers=(("pod UID", uid_of(pod)), ("claim UID", walk.claim_uid)),
                )
            )
    if meta.get("deletionTimestamp") and not walk.synthesized:
        releasing = True
        since = parse_time(meta.get("deletionTimestamp"))
        if walk.older_than_threshold(since) and meta.get("finalizers"):
            findings.append(
                Finding(
                    rule=UNPREP_DELETION_STUCK,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the claim's deletion is stuck on its finalizer",
                    detail=f"ResourceClaim {walk.claim_key} was deleted "
                    f"{format_age(age(since, walk.now) or timedelta())} ago but keeps finalizers "
                    f"{list(meta.get('finalizers') or [])}: the resourceclaim controller removes "
                    "resource.kubernetes.io/delete-protection only after deallocating, which "
                    "waits for every reserved pod to be gone.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceClaim {walk.claim_key} .metadata",
                            excerpt=f"deletionTimestamp {meta.get('deletionTimestamp')}; "
                            f"finalizers {list(meta.get('finalizers') or [])}; reservedFor "
                            f"{wiring.reserved_pod_uids(walk.claim)}",
                        ),
                    ),
                    next=(
                        f"kubectl get resourceclaim -n {namespace_of(walk.claim)} "
                        f"{name_of(walk.claim)} -o jsonpath='{{.status.reservedFor}}'",
                    ),
                    identifiers=(("claim UID", walk.claim_uid),),
                )
            )
    for h in hits:
        if releasing or h.finding.severity is not Severity.ERROR:
            findings.append(h.finding)
        else:
            findings.append(as_historical(h.finding, "no release of this claim is pending"))
    if findings:
        return phase_result(
            walk.rulebook, phase, findings, PhaseStatus.OK if releasing else PhaseStatus.NOT_REACHED
        )
    active = [p for p in walk.pods if not pod_done(p) and not pod_terminating(p)]
    if active or (walk.allocation is None and not walk.pods):
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED)
    if releasing:
        return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, "release in progress")
    if not walk.collected(Kind.POD):
        return phase_result(
            walk.rulebook,
            phase,
            [walk.not_collected(phase, [Kind.POD], "Release is judged from the claim's pods")],
            PhaseStatus.UNKNOWN,
        )
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK)


def _reserved_name(claim: K8sObject, pod_uid: str) -> str:
    """The pod name a ``reservedFor`` entry records for ``pod_uid`` (the pod may be gone)."""
    for entry in (claim.get("status") or {}).get("reservedFor") or ():
        if isinstance(entry, Mapping) and entry.get("uid") == pod_uid and entry.get("name"):
            return str(entry["name"])
    return ""


def _stale_reservation(walk: ClaimWalk, pod_uid: str, pod: K8sObject | None, what: str) -> Finding:
    name = _reserved_name(walk.claim, pod_uid)
    if pod is not None:
        label = pod_key(pod)
    else:
        label = f"{name} (UID {pod_uid})" if name else f"with UID {pod_uid}"
    meta = walk.claim.get("metadata") or {}
    deleting = ""
    if meta.get("deletionTimestamp") and meta.get("finalizers"):
        # The reservation is also what keeps a deleted claim: its finalizer is removed only
        # after the reservation and the allocation are.
        deleting = (
            f" The claim itself was deleted at {meta['deletionTimestamp']} and is kept by its "
            f"finalizer {', '.join(str(f) for f in meta.get('finalizers') or [])} until then."
        )
    return Finding(
        rule=UNPREP_STALE_RESERVATION,
        phase=Phase.UNPREPARE,
        severity=Severity.ERROR,
        title="the claim is still reserved for a pod that no longer needs it",
        detail=f"ResourceClaim {walk.claim_key} is allocated and reserved for pod {label}, which "
        f"{what}: the resourceclaim controller should have removed the reservation and "
        "deallocated the devices, so they stay unavailable to every other claim." + deleting,
        cause=f"pod {label} {what}"
        + ("; the claim's deletion waits on its finalizer" if deleting else ""),
        evidence=(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"ResourceClaim {walk.claim_key} .status.reservedFor",
                excerpt=str(wiring.reserved_pod_uids(walk.claim)),
            ),
        ),
        next=(
            "kubectl logs -n kube-system -l component=kube-controller-manager | grep -i "
            f"resourceclaim.*{name_of(walk.claim)}",
            f"kubectl get resourceclaim -n {namespace_of(walk.claim)} {name_of(walk.claim)} -o yaml",
        ),
        identifiers=(("pod UID", pod_uid), ("claim UID", walk.claim_uid)),
    )
