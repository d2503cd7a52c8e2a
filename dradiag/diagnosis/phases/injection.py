"""Phase 5, injection: CDI spec to runtime to container creation."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.analyses.error_chain import clip_middle
from dradiag.analyses.timeline import (
    parse_time,
)
from dradiag.analyses.visible_gpus import visible_gpus
from dradiag.diagnosis.context import (
    NVIDIA_DRIVER,
    ClaimWalk,
    RuleHit,
    claim_devices,
    container_statuses,
    containers_given_devices,
    node_ready_since,
    pod_all_running,
    pod_done,
    pod_key,
    pod_started,
    pod_status_of,
)
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import PhaseResult
from dradiag.diagnosis.next_context import cdi_spec_files
from dradiag.diagnosis.rule_ids import (
    INJ_CDI_EDITS_NOT_APPLIED,
    INJ_CDI_NOT_APPLIED,
    INJ_CDI_SPEC_MISSING,
    INJ_CREATE_FAILED,
)
from dradiag.snapshot.model import (
    K8sObject,
    Kind,
    name_of,
    namespace_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

_INJECTION_WAITING = frozenset({"CreateContainerError", "RunContainerError"})


def _cdi_ids(walk: ClaimWalk) -> list[str]:
    return [
        f"k8s.{driver}/claim={walk.claim_uid}-{dev}"
        for _r, driver, _p, dev in claim_devices(walk.claim)
        if driver == NVIDIA_DRIVER and walk.claim_uid
    ]


def phase_injection(walk: ClaimWalk, prepare: PhaseResult) -> PhaseResult:
    """The runtime created the containers with the claim's CDI devices."""
    phase = Phase.INJECTION
    if prepare.status is PhaseStatus.BROKEN:
        return phase_result(walk.rulebook, phase, [], PhaseStatus.NOT_REACHED)
    if walk.allocated and not walk.collected(Kind.POD):
        return phase_result(
            walk.rulebook,
            phase,
            [
                walk.not_collected(
                    phase,
                    [Kind.POD],
                    "Injection is read from the container states of the claim's pods",
                )
            ],
            PhaseStatus.UNKNOWN,
        )
    started = [p for p in walk.bound_pods() if pod_started(p)]
    if (
        prepare.status is not PhaseStatus.OK
        and prepare.status is not PhaseStatus.WARN
        or not started
    ):
        return phase_result(walk.rulebook, phase, [], PhaseStatus.NOT_REACHED)
    findings: list[Finding] = []
    hits_by_pod: dict[int, list[RuleHit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    cdi = _cdi_ids(walk)
    for pod in started:
        pod_hits = hits_by_pod.get(id(pod), [])
        failing = [
            cs
            for cs in container_statuses(pod)
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") in _INJECTION_WAITING
        ]
        if pod_all_running(pod) or (pod_done(pod) and not failing):
            findings += [as_historical(h.finding, "the containers run") for h in pod_hits]
            continue
        findings += [h.finding for h in pod_hits]
        if pod_hits or not failing:
            continue
        for cs in failing:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            findings.append(
                Finding(
                    rule=INJ_CREATE_FAILED,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the runtime could not create the container",
                    detail=f"Container {cs.get('name')!r} of pod {pod_key(pod)} is waiting with "
                    f"{waiting.get('reason')}: {clip_middle(str(waiting.get('message') or ''), 500)}",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pod)} .status.containerStatuses[{cs.get('name')}]",
                            excerpt=f"{waiting.get('reason')}: {clip_middle(str(waiting.get('message') or ''), 400)}",
                        ),
                    ),
                    next=(
                        f"kubectl describe pod -n {namespace_of(pod)} {name_of(pod)}",
                        "ls -l /var/run/cdi/<CDI spec file> on the node",
                    ),
                    identifiers=tuple(("CDI device ID", c) for c in cdi[:4]),
                )
            )
    findings += _cdi_spec_missing(walk, started)
    findings += _cdi_not_applied(walk, started)
    findings += _more_gpus_than_allocated(walk, started)
    summary = f"CDI {', '.join(cdi[:2])}" + (" …" if len(cdi) > 2 else "") if cdi else ""
    return phase_result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)


def _container_spec(pod: K8sObject, name: str) -> Mapping[str, Any]:
    spec = pod.get("spec") or {}
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        if isinstance(c, Mapping) and c.get("name") == name:
            return c
    return {}


def _container_status(pod: K8sObject, name: str) -> Mapping[str, Any]:
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in pod_status_of(pod).get(key) or ():
            if isinstance(cs, Mapping) and cs.get("name") == name:
                return cs
    return {}


_HIDING_ENV = {
    "NVIDIA_VISIBLE_DEVICES": ("void", "none", ""),
    "CUDA_VISIBLE_DEVICES": ("", "-1", "none"),
}
"""Container env values that hide the GPU from the workload whatever the runtime injects."""


def _hides_gpu(container: Mapping[str, Any]) -> str:
    for env in container.get("env") or ():
        if not isinstance(env, Mapping) or "valueFrom" in env:
            continue
        hidden = _HIDING_ENV.get(str(env.get("name") or ""))
        if hidden is not None and str(env.get("value") or "").strip().lower() in hidden:
            return f"{env.get('name')}={env.get('value') or ''}"
    return ""


_NO_DEVICE_RULES = frozenset({"DRA-WORK-NO-CUDA-DEVICE", "DRA-WORK-NVIDIA-SMI-FAILED"})
"""Workload signatures that mean no GPU reached the container at all."""

_NO_EDITS_RULES = frozenset({"DRA-WORK-CDI-EDITS-MISSING"})
"""Workload signatures that mean none of the claim's CDI edits reached the container: an
environment variable or mount its spec always adds is absent, so the runtime did not apply
the spec at all (a spec without device nodes would still carry them)."""


def _cdi_not_applied(walk: ClaimWalk, started: Sequence[K8sObject]) -> list[Finding]:
    """A container that lists the claim, started after Prepare succeeded, and sees no GPU.

    The kubelet passed the claim's CDI device IDs with the container (it lists the claim).
    Two mechanisms end there, and the container's symptom is the same for both: a runtime
    without CDI enabled (containerd before 1.7 or ``enable_cdi = false``, cri-dockerd)
    drops the IDs silently and starts the container anyway (peers §6 P4); or the runtime
    applied a claim spec that holds no device nodes, which the NVIDIA kubelet plugin
    writes when ``/dev/nvidia*`` did not exist on the host at Prepare (a fresh node;
    missing nodes are only warnings to the CDI library, so Prepare succeeds:
    dra-driver-nvidia-gpu#1380). The claim's spec on the node tells them apart, so the
    finding names both and that check first. A container whose own env hides the GPU
    (``NVIDIA_VISIBLE_DEVICES=void``) is left out.
    """
    hits = [
        h
        for h in walk.hits_for(Phase.WORKLOAD)
        if h.finding.rule in _NO_DEVICE_RULES | _NO_EDITS_RULES
        and h.pod is not None
        and h.log_container
    ]
    out: list[Finding] = []
    for pod in started:
        pod_hits = [h for h in hits if h.pod is pod]
        if not pod_hits:
            continue
        given = containers_given_devices(walk, pod)
        reported: set[str] = set()
        for hit in pod_hits:
            name = hit.log_container
            if name not in given or name in reported:
                continue
            running = "running" in (_container_status(pod, name).get("state") or {})
            if hit.log_previous and running:
                continue  # an earlier instance's complaint; the current one may see the GPU
            hiding = _hides_gpu(_container_spec(pod, name))
            if hiding:
                continue
            reported.add(name)
            node = (pod.get("spec") or {}).get("nodeName")
            if hit.finding.rule in _NO_EDITS_RULES:
                out.append(_cdi_edits_absent(walk, pod, name, hit.finding, node))
                continue
            out.append(
                Finding(
                    rule=INJ_CDI_NOT_APPLIED,
                    phase=Phase.INJECTION,
                    severity=Severity.ERROR,
                    title="the container does not see the claim's GPUs as CDI should give them",
                    detail=f"Container {name!r} of pod {pod_key(pod)} lists ResourceClaim "
                    f"{walk.claim_key} in resources.claims and the claim was prepared on node "
                    f"{node} (the container started), yet the container sees no GPU "
                    f"({hit.finding.title}). The kubelet passed the claim's CDI device IDs, so "
                    "either the runtime did not apply them (CDI disabled or unsupported: it "
                    "drops them silently and starts the container without the device nodes "
                    "and driver libraries), or it applied a claim CDI spec that lists no "
                    "device nodes: the NVIDIA kubelet plugin writes one when /dev/nvidia* did "
                    "not exist on the host at Prepare (a fresh node where nothing had "
                    "initialised the driver yet), and Prepare still succeeds "
                    "(kubernetes-sigs/dra-driver-nvidia-gpu#1380). The claim's CDI spec on "
                    "the node tells them apart.",
                    evidence=(
                        *hit.finding.evidence[:1],
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {pod_key(pod)} .spec.containers[{name}].resources.claims",
                            excerpt=str(
                                list(
                                    (_container_spec(pod, name).get("resources") or {}).get(
                                        "claims"
                                    )
                                    or []
                                )
                            ),
                        ),
                    ),
                    next=(
                        *(
                            f"grep -n -A2 deviceNodes /var/run/cdi/{spec} on {node}  (no "
                            "/dev/nvidia<N>, /dev/nvidiactl: the spec is incomplete; run "
                            "nvidia-modprobe or nvidia-smi on the host, then recreate the pod)"
                            for spec in cdi_spec_files(_cdi_ids(walk), walk.claim_uid)[:1]
                        ),
                        f"grep -n -A3 enable_cdi /etc/containerd/config.toml on {node}  "
                        "(containerd >= 1.7 with enable_cdi = true, or CRI-O)",
                        f"kubectl exec -n {namespace_of(pod)} {name_of(pod)} -c {name} -- "
                        "ls -l /dev/nvidia*",
                        f"kubectl get node {node} "
                        "-o jsonpath='{.status.nodeInfo.containerRuntimeVersion}'",
                    ),
                    identifiers=(
                        ("pod", pod_key(pod)),
                        ("container", name),
                        *(("CDI device ID", c) for c in _cdi_ids(walk)[:2]),
                    ),
                )
            )
    return out


def _cdi_edits_absent(
    walk: ClaimWalk, pod: K8sObject, name: str, signature: Finding, node: object
) -> Finding:
    """The container's log proves the claim's CDI spec was not applied at all.

    Unlike a missing GPU, which a claim spec without device nodes also explains, an absent
    variable or mount that the spec always adds (the ComputeDomain daemon's
    ``COMPUTE_DOMAIN_UUID`` and ``/imexd``) leaves one cause: the runtime dropped the CDI
    device IDs the kubelet passed (CDI disabled or unsupported;
    dra-driver-nvidia-gpu#720, PR #965).
    """
    return Finding(
        rule=INJ_CDI_EDITS_NOT_APPLIED,
        phase=Phase.INJECTION,
        severity=Severity.ERROR,
        title="the runtime did not apply the claim's CDI edits (CDI disabled or unsupported)",
        detail=f"Container {name!r} of pod {pod_key(pod)} lists ResourceClaim {walk.claim_key} "
        f"in resources.claims and the claim was prepared on node {node} (the container "
        f"started), yet its log shows that an environment variable or mount the claim's CDI "
        f"spec always adds is missing ({signature.title}). The kubelet passed the claim's "
        "CDI device IDs; a runtime with CDI disabled or unsupported drops them silently and "
        "starts the container without the spec's edits.",
        evidence=tuple(signature.evidence[:1]),
        next=(
            f"grep -n -A3 enable_cdi /etc/containerd/config.toml on {node}  "
            "(containerd >= 1.7 with enable_cdi = true, or CRI-O)",
            f"kubectl get node {node} -o jsonpath='{{.status.nodeInfo.containerRuntimeVersion}}'",
            f"ls -l /var/run/cdi/ on {node}  (the claim's spec is there: the runtime did not "
            "read it)",
        ),
        identifiers=(
            ("pod", pod_key(pod)),
            ("container", name),
            *(("CDI device ID", c) for c in _cdi_ids(walk)[:2]),
        ),
    )


def _full_gpus_of_container(walk: ClaimWalk, pod: K8sObject, name: str) -> int | None:
    """Full GPUs the container's claims allocated, or None when that cannot be told (a claim
    not in the snapshot, a MIG or non-NVIDIA device whose visibility reads differently)."""
    spec = pod.get("spec") or {}
    status_names = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in pod_status_of(pod).get("resourceClaimStatuses") or ()
        if isinstance(s, Mapping)
    }
    direct = {
        str(c.get("name")): c.get("resourceClaimName")
        for c in spec.get("resourceClaims") or ()
        if isinstance(c, Mapping)
    }
    container = _container_spec(pod, name)
    total = 0
    for ref in (container.get("resources") or {}).get("claims") or ():
        entry = str((ref or {}).get("name") or "")
        claim_name = direct.get(entry) or status_names.get(entry)
        claim = (
            walk.claim
            if claim_name == name_of(walk.claim)
            else walk.snapshot.claim(namespace_of(pod), str(claim_name))
            if claim_name
            else None
        )
        if claim is None:
            return None
        wanted = (ref or {}).get("request")
        for request, driver, _pool, device in claim_devices(claim):
            if wanted and request != wanted and not request.startswith(f"{wanted}/"):
                continue
            if driver != NVIDIA_DRIVER or "mig" in device.lower():
                return None
            total += 1
    return total or None


def _more_gpus_than_allocated(walk: ClaimWalk, started: Sequence[K8sObject]) -> list[Finding]:
    """A container that lists the claim and prints more GPUs than its claims allocated.

    With the claim's CDI devices applied, a container sees exactly the allocated GPUs; a
    runtime that ignores them (CDI disabled, the nvidia runtime as default handing out
    every GPU of the node) starts it with all of them. The workload's own ``nvidia-smi -L``
    or ``CUDA_VISIBLE_DEVICES`` line is the proof (nvidia-driver-facts §6; peers §6 P4).
    """
    out: list[Finding] = []
    for pod in started:
        given = containers_given_devices(walk, pod)
        node = (pod.get("spec") or {}).get("nodeName")
        for name in sorted(given):
            if _hides_gpu(_container_spec(pod, name)):
                continue
            allocated = _full_gpus_of_container(walk, pod, name)
            if allocated is None:
                continue
            for log in walk.snapshot.logs_for(namespace_of(pod), name_of(pod), name):
                seen = visible_gpus(log.text)
                if seen is None or seen.count <= allocated:
                    continue
                out.append(
                    Finding(
                        rule=INJ_CDI_NOT_APPLIED,
                        phase=Phase.INJECTION,
                        severity=Severity.ERROR,
                        title="the container does not see the claim's GPUs as CDI should give them",
                        detail=f"Container {name!r} of pod {pod_key(pod)} sees {seen.count} GPUs "
                        f"but its claims allocated {allocated} (ResourceClaim {walk.claim_key}): "
                        "the runtime did not apply the claim's CDI devices (CDI disabled or "
                        "unsupported in the runtime) and exposed every GPU of node "
                        f"{node} instead.",
                        evidence=(
                            Evidence(
                                source=EvidenceSource.LOG,
                                ref=f"log {namespace_of(pod)}/{name_of(pod)}/{name}"
                                + (" (previous)" if log.previous else ""),
                                excerpt=seen.line or f"{seen.count} GPUs listed",
                            ),
                        ),
                        next=(
                            f"grep -n -A3 enable_cdi /etc/containerd/config.toml on {node}",
                            f"kubectl exec -n {namespace_of(pod)} {name_of(pod)} -c {name} -- "
                            "nvidia-smi -L",
                        ),
                        identifiers=(("pod", pod_key(pod)), ("container", name)),
                    )
                )
                break
    return out


_UNRESOLVABLE_CDI = re.compile(r"unresolvable CDI devices (?P<ids>.+)$")


_PREPARE_SKIPPED = "Skip prepare: claim already in PrepareCompleted state"


def _unresolved_ids(message: str) -> list[str]:
    m = _UNRESOLVABLE_CDI.search(message.strip())
    if not m:
        return []
    return [i.strip() for i in m.group("ids").split(",") if i.strip()]


def _cdi_spec_missing(walk: ClaimWalk, started: Sequence[K8sObject]) -> list[Finding]:
    """The runtime cannot resolve CDI devices of the claim that the same container was
    created with before, on the same node: the spec file is gone, not CDI support.

    ``/var/run/cdi`` is a tmpfs: a reboot empties it, and the plugin, whose checkpoint
    still holds the claim as PrepareCompleted, does not write the spec again (Prepare is
    idempotent; nvidia-driver-facts §6, §7, §12 #14). An earlier successful start of this
    container rules out the other causes of ``unresolvable CDI devices`` (CDI disabled in
    the runtime, another spec directory). Without the node probe the file itself cannot be
    listed, so the evidence is the container's history, the node's restart and the plugin's
    skipped Prepare.
    """
    out: list[Finding] = []
    for pod in started:
        given = containers_given_devices(walk, pod)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        for cs in container_statuses(pod):
            name = str(cs.get("name") or "")
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if name not in given or waiting.get("reason") not in _INJECTION_WAITING:
                continue
            ids = _unresolved_ids(str(waiting.get("message") or ""))
            mine = [i for i in ids if "/claim=" not in i or f"/claim={walk.claim_uid}-" in i]
            before = (cs.get("lastState") or {}).get("terminated") or {}
            if not mine or not before.get("startedAt"):
                continue
            ran_from = parse_time(before.get("startedAt"))
            message = clip_middle(str(waiting.get("message") or ""), 300)
            evidence = [
                Evidence(
                    source=EvidenceSource.OBJECT,
                    ref=f"Pod {pod_key(pod)} .status.containerStatuses[{name}]",
                    excerpt=f"waiting {waiting.get('reason')}: {message}; lastState.terminated: "
                    f"started {before.get('startedAt')}, finished {before.get('finishedAt')} "
                    f"({before.get('reason') or 'exit'} {before.get('exitCode')})",
                )
            ]
            rebooted = ""
            node_obj = walk.snapshot.node(node) if node else None
            ready = node_ready_since(node_obj)
            if ready is not None and ran_from is not None and ready > ran_from:
                rebooted = (
                    f" Node {node} became Ready again at {ready:%Y-%m-%dT%H:%M:%SZ}, after the "
                    "container had started: a node restart empties /var/run/cdi."
                )
                evidence.append(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Node {node} .status.conditions[Ready]",
                        excerpt=f"lastTransitionTime {ready:%Y-%m-%dT%H:%M:%SZ}",
                    )
                )
            skipped = _skipped_prepare_line(walk, node)
            if skipped is not None:
                evidence.append(skipped)
            specs = cdi_spec_files(mine, walk.claim_uid, nvidia=False)
            spec_file = (
                f"/var/run/cdi/{specs[0]}" if specs else "the driver's spec file under /var/run/cdi"
            )
            out.append(
                Finding(
                    rule=INJ_CDI_SPEC_MISSING,
                    phase=Phase.INJECTION,
                    severity=Severity.ERROR,
                    title="the node has no CDI spec for a claim the plugin considers prepared",
                    detail=f"Container {name!r} of pod {pod_key(pod)} was created with the "
                    f"claim's CDI devices on node {node} before (it ran from "
                    f"{before.get('startedAt')}), and now the runtime cannot resolve "
                    f"{', '.join(mine[:2])}. CDI worked for this container, which rules out a "
                    "runtime without CDI or one reading another spec directory: "
                    f"{spec_file} is gone (/var/run is a tmpfs), and the plugin does not write "
                    "it again for a claim its checkpoint holds as PrepareCompleted." + rebooted,
                    evidence=tuple(evidence),
                    next=(
                        f"ls -l /var/run/cdi/{specs[0]} on {node}  (the claim's spec)"
                        if specs
                        else f"ls -l /var/run/cdi/ on {node}",
                        "kubectl exec -n <driver namespace> <kubelet-plugin pod on the node> -c gpus "
                        "-- cat /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json  "
                        f"(claim UID {walk.claim_uid}: PrepareCompleted, and its boot ID)",
                        "dradiag node  (checkpoint vs CDI specs, on the node)",
                    ),
                    identifiers=(
                        ("pod", pod_key(pod)),
                        ("claim UID", walk.claim_uid),
                        *(("CDI device ID", i) for i in mine[:2]),
                    ),
                )
            )
    return out


def _skipped_prepare_line(walk: ClaimWalk, node: str) -> Evidence | None:
    """The plugin's "Skip prepare: claim already in PrepareCompleted state" for this claim."""
    if not node:
        return None
    health = walk.plugin(node)
    for log in ph.plugin_logs(walk.snapshot, health):
        if _PREPARE_SKIPPED not in log.text:
            continue
        for number, line in enumerate(log.text.splitlines(), 1):
            if _PREPARE_SKIPPED in line and walk.claim_uid and walk.claim_uid in line:
                where = f"{log.namespace or ''}/{log.pod}/{log.container}"
                return Evidence(
                    source=EvidenceSource.LOG,
                    ref=f"log {where}{' (previous)' if log.previous else ''}:{number}",
                    excerpt=clip_middle(line.strip(), 600),
                )
    return None
