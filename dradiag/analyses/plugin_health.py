"""Health of the gpu.nvidia.com kubelet-plugin pod on a node (the publication boundary).

The plugin pod is found by what the Helm chart stamps on it, in both chart generations
(nvidia-driver-facts §5.1): ``dra-driver-nvidia-gpu`` (v0.4+) and
``nvidia-dra-driver-gpu`` (v25.x, or v0.4+ with ``nameOverride``), selector label
``<name>-component: kubelet-plugin``, DaemonSet ``<name>-kubelet-plugin``. The GPU
plugin is the container ``gpus``; a pod without it (``resources.gpus.enabled=false``)
runs only the ComputeDomain plugin and publishes no GPUs. The init container loops
until ``nvidia-smi`` works, so a wrong ``nvidiaDriverRoot`` shows as ``Init:0/1``.

Absence is evidence only where plugin pods were collected at all: a ``--from``
directory holding just the workload must not read as "no plugin on any node".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from dradiag.analyses.error_chain import clip_middle
from dradiag.snapshot.driver_workloads import PLUGIN_BINARIES, other_driver_workload
from dradiag.snapshot.model import Coverage, K8sObject, Kind, Snapshot, name_of, namespace_of
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

CHART_NAMES = ("dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu")
"""``<name>`` of the two chart generations (v0.4+, v25.x)."""
COMPONENT_VALUE = "kubelet-plugin"
GPU_CONTAINER = "gpus"
INIT_CONTAINER = "init-container"
RESTART_WARNING_THRESHOLD = 3
"""Restarts of ``gpus`` from which a running plugin is reported as unstable."""

PLUGIN_MISSING = "DRA-PUB-PLUGIN-MISSING"
PLUGIN_NO_GPU_CONTAINER = "DRA-PUB-PLUGIN-NO-GPU-CONTAINER"
PLUGIN_INIT_WAITING = "DRA-PUB-PLUGIN-INIT-STUCK"
PLUGIN_CRASHLOOP = "DRA-PUB-PLUGIN-CRASHLOOP"
PLUGIN_NOT_RUNNING = "DRA-PUB-PLUGIN-NOT-RUNNING"
PLUGIN_NOT_READY = "DRA-PUB-PLUGIN-NOT-READY"
PLUGIN_RESTARTS = "DRA-PUB-PLUGIN-RESTARTS"
RULE_IDS = (
    PLUGIN_MISSING,
    PLUGIN_NO_GPU_CONTAINER,
    PLUGIN_INIT_WAITING,
    PLUGIN_CRASHLOOP,
    PLUGIN_NOT_RUNNING,
    PLUGIN_NOT_READY,
    PLUGIN_RESTARTS,
)


class PluginState(StrEnum):
    """What the plugin pod on a node is doing, worst first when several pods exist."""

    MISSING = "missing"
    NO_GPU_CONTAINER = "no-gpu-container"
    CRASH_LOOP = "crash-loop"
    INIT_WAITING = "init-waiting"
    NOT_RUNNING = "not-running"
    """``gpus`` is not running and not crash-looping: waiting (image pull, container
    creation), terminated, or the pod was never scheduled or started."""
    NOT_READY = "not-ready"
    """``gpus`` runs but is not ready: inside its startup probe's window (the chart has
    no readiness probe; a plugin failing startup or liveness gets restarted)."""
    RESTARTING = "restarting"
    HEALTHY = "healthy"
    NOT_COLLECTED = "not-collected"
    """No plugin pods anywhere in the snapshot: their absence proves nothing."""


_STATE_RANK = {s: i for i, s in enumerate(PluginState)}


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginHealth:
    """The kubelet-plugin pod on one node and what is wrong with it, if anything."""

    node: str
    state: PluginState
    pod: K8sObject | None = None
    chart_name: str | None = None
    """Which chart generation's labels/names identified the pod."""
    restarts: int = 0
    waiting_reason: str = ""
    message: str = ""
    """The waiting message or the last termination message of ``gpus``."""
    exit_code: int | None = None

    @property
    def pod_key(self) -> str:
        """``namespace/name`` of the plugin pod, or ``""``."""
        return f"{namespace_of(self.pod)}/{name_of(self.pod)}" if self.pod is not None else ""

    @property
    def healthy(self) -> bool:
        """True when the plugin is running and ready (or nothing can be said)."""
        return self.state in (PluginState.HEALTHY, PluginState.NOT_COLLECTED)


PLUGIN_IMAGES: Mapping[str, str] = {
    "k8s-dra-driver-gpu": "nvidia-dra-driver-gpu",
    "dra-driver-nvidia-gpu": "dra-driver-nvidia-gpu",
}
"""Image repository names of the two generations (nvidia-driver-facts §5.1, §10:
``nvcr.io/nvidia/k8s-dra-driver-gpu``, ``registry.k8s.io/dra-driver-nvidia/dra-driver-
nvidia-gpu``) and the chart ``<name>`` each implies."""


def _image_chart(image: object) -> str | None:
    """The chart ``<name>`` implied by a driver image reference, else None."""
    repo = str(image or "").split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    return PLUGIN_IMAGES.get(repo)


def plugin_chart_name(pod: K8sObject) -> str | None:
    """The chart ``<name>`` if ``pod`` is a DRA-driver kubelet-plugin pod, else None.

    Labels first (``<name>-component: kubelet-plugin``, any ``<name>`` from a
    ``nameOverride``), then the DaemonSet owner ``<name>-kubelet-plugin``, then the pod
    name that DaemonSet generates, then the driver image run by a DaemonSet or running
    the plugin binary: ``selectorLabelsOverride`` and a ``nameOverride`` without
    "dra-driver" in it defeat the first three, and a crash-looping plugin that is not
    recognised would read as "nothing unhealthy".
    """
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key, value in labels.items():
        if value == COMPONENT_VALUE and str(key).endswith("-component"):
            return str(key)[: -len("-component")]
    daemonset = False
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "DaemonSet":
            daemonset = True
            owner = str(ref.get("name") or "")
            if owner.endswith("-kubelet-plugin") and "dra-driver" in owner:
                return owner[: -len("-kubelet-plugin")]
    name = name_of(pod)
    for chart in CHART_NAMES:
        if name.startswith(f"{chart}-kubelet-plugin-"):
            return chart
    for container in _containers(pod):
        by_image = _image_chart(container.get("image"))
        command = " ".join(
            str(c) for c in [*(container.get("command") or ()), *(container.get("args") or ())]
        )
        runs_plugin = any(binary in command for binary in PLUGIN_BINARIES)
        # The driver image alone does not make a plugin (the ComputeDomain daemon).
        if (
            by_image is not None
            and (daemonset or runs_plugin)
            and not other_driver_workload(pod, command)
        ):
            return by_image
        if container.get("name") == GPU_CONTAINER and PLUGIN_BINARIES[0] in command:
            # A mirrored or rebuilt image: the container and its binary still say it.
            return CHART_NAMES[0]
    return None


def _containers(pod: K8sObject, key: str = "containers") -> list[Mapping[str, Any]]:
    return [c for c in (pod.get("spec") or {}).get(key) or () if isinstance(c, Mapping)]


def _statuses(pod: K8sObject, key: str) -> dict[str, Mapping[str, Any]]:
    return {
        str(s.get("name")): s
        for s in (pod.get("status") or {}).get(key) or ()
        if isinstance(s, Mapping)
    }


def has_gpu_container(pod: K8sObject) -> bool:
    """True when the pod runs the GPU plugin container ``gpus``."""
    if any(c.get("name") == GPU_CONTAINER for c in _containers(pod)):
        return True
    return GPU_CONTAINER in _statuses(pod, "containerStatuses")


def is_plugin_pod(pod: K8sObject) -> bool:
    """True for a DRA-driver kubelet-plugin pod (either chart generation)."""
    return plugin_chart_name(pod) is not None


def _absence_proves(snapshot: Snapshot, any_plugin_pod: bool) -> bool:
    """Whether "no plugin pod on this node" is evidence: pods were read, and either some
    plugin pod was seen or the read covered every namespace."""
    record = snapshot.coverage[Kind.POD]
    if record.coverage is Coverage.UNKNOWN:
        return False
    if any_plugin_pod:
        return True
    # A cluster-wide read proves absence; a namespace-scoped or files read does not.
    return record.scope in (None, "", "cluster", "all namespaces")


def _plugin_pods_collected(snapshot: Snapshot) -> bool:
    if snapshot.coverage[Kind.POD].coverage is Coverage.UNKNOWN:
        return False
    return _absence_proves(snapshot, any(is_plugin_pod(p) for p in snapshot.pods))


def plugin_pod_node(pod: K8sObject) -> str | None:
    """The node a plugin pod runs on, or is meant for: ``spec.nodeName``, else the single
    node its DaemonSet pins it to (``matchFields metadata.name In [node]``), so a plugin
    pod the scheduler cannot place still counts against its node."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    names = {
        str(v)
        for term in required.get("nodeSelectorTerms") or ()
        if isinstance(term, Mapping)
        for req in term.get("matchFields") or ()
        if isinstance(req, Mapping)
        and req.get("key") == "metadata.name"
        and req.get("operator") == "In"
        for v in req.get("values") or ()
    }
    return names.pop() if len(names) == 1 else None


class PluginIndex:
    """The kubelet-plugin pods of one snapshot, recognised once and indexed by node.

    ``scan`` asks for the plugin of every GPU node and of every claim's node; testing
    every pod of the cluster once per node made a 5,000-node scan quadratic (nodes ×
    pods). One index per scan, passed down, answers each node in constant time.
    """

    __slots__ = ("_by_node", "_collected", "any_plugin_pod")

    def __init__(self, snapshot: Snapshot) -> None:
        by_node: dict[str, list[tuple[K8sObject, str]]] = {}
        found = False
        for pod in snapshot.pods:
            chart = plugin_chart_name(pod)
            if chart is None:
                continue
            found = True
            node = plugin_pod_node(pod)
            if node:
                by_node.setdefault(node, []).append((pod, chart))
        self._by_node = by_node
        self.any_plugin_pod = found
        """True when the snapshot holds any plugin pod, on a node or not."""
        self._collected = _absence_proves(snapshot, found)

    @property
    def nodes(self) -> list[str]:
        """Nodes running a plugin pod, sorted."""
        return sorted(self._by_node)

    def pods_on(self, node: str) -> list[tuple[K8sObject, str]]:
        """(pod, chart name) of the plugin pods bound to ``node``."""
        return self._by_node.get(node, [])

    @property
    def collected(self) -> bool:
        """Whether a node without a plugin pod is evidence of a missing plugin."""
        return self._collected


def _pod_reason(pod: K8sObject, terminated: Mapping[str, Any]) -> str:
    """Why a pod's ``gpus`` has no running state when the container says nothing itself:
    its termination reason, else the pod's phase and the PodScheduled reason."""
    if terminated:
        return (
            f"terminated: {terminated.get('reason') or 'exit ' + str(terminated.get('exitCode'))}"
        )
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "no status")
    for cond in status.get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "PodScheduled"
            and cond.get("status") != "True"
        ):
            return f"{phase}, not scheduled: {cond.get('reason') or ''} {cond.get('message') or ''}".strip()
    return phase


def _pod_health(node: str, pod: K8sObject, chart: str | None) -> PluginHealth:
    if not has_gpu_container(pod):
        return PluginHealth(
            node=node, state=PluginState.NO_GPU_CONTAINER, pod=pod, chart_name=chart
        )
    status = _statuses(pod, "containerStatuses").get(GPU_CONTAINER) or {}
    restarts = int(status.get("restartCount") or 0)
    state = status.get("state") or {}
    waiting = state.get("waiting") or {}
    last = (status.get("lastState") or {}).get("terminated") or {}
    terminated = state.get("terminated") or {}
    message = str(waiting.get("message") or last.get("message") or terminated.get("message") or "")
    exit_code = last.get("exitCode", terminated.get("exitCode"))
    common: dict[str, Any] = {
        "node": node,
        "pod": pod,
        "chart_name": chart,
        "restarts": restarts,
        "message": message,
        "exit_code": int(exit_code) if isinstance(exit_code, int) else None,
    }
    reason = str(waiting.get("reason") or "")
    if reason == "CrashLoopBackOff" or (terminated and restarts > 0):
        return PluginHealth(state=PluginState.CRASH_LOOP, waiting_reason=reason, **common)
    init = _statuses(pod, "initContainerStatuses")
    init_blocked = next(
        (
            s
            for s in init.values()
            if not ((s.get("state") or {}).get("terminated") or {}).get("exitCode") == 0
        ),
        None,
    )
    if init_blocked is not None and "running" not in state:
        init_state = init_blocked.get("state") or {}
        detail = init_state.get("waiting") or init_state.get("running") or {}
        return PluginHealth(
            state=PluginState.INIT_WAITING,
            waiting_reason=str(detail.get("reason") or f"Init:0/{len(init)}"),
            **{**common, "message": str(detail.get("message") or "")},
        )
    if "running" not in state:
        return PluginHealth(
            state=PluginState.NOT_RUNNING,
            waiting_reason=reason or _pod_reason(pod, terminated),
            **common,
        )
    if status.get("ready") is False:
        return PluginHealth(state=PluginState.NOT_READY, waiting_reason=reason, **common)
    if restarts >= RESTART_WARNING_THRESHOLD:
        return PluginHealth(state=PluginState.RESTARTING, **common)
    return PluginHealth(state=PluginState.HEALTHY, **common)


def plugin_health(
    snapshot: Snapshot, node: str, *, index: PluginIndex | None = None
) -> PluginHealth:
    """The state of the gpu.nvidia.com kubelet plugin on ``node`` (worst pod wins).

    ``index``: the snapshot's PluginIndex when many nodes are asked (``scan``); without
    it only the node's own pods are read, plus every pod once when the node has none.
    """
    if index is not None:
        charted = index.pods_on(node)
    else:
        charted = [
            (p, chart)
            for p in snapshot.pods_on_node(node)
            if (chart := plugin_chart_name(p)) is not None
        ]
    live = [(p, c) for p, c in charted if not (p.get("metadata") or {}).get("deletionTimestamp")]
    charted = live or charted
    if not charted:
        collected = index.collected if index is not None else _plugin_pods_collected(snapshot)
        if not collected:
            return PluginHealth(node=node, state=PluginState.NOT_COLLECTED)
        return PluginHealth(node=node, state=PluginState.MISSING)
    healths = [_pod_health(node, p, chart) for p, chart in charted]
    # Prefer a pod that runs `gpus`: a separate ComputeDomain-only pod is not the GPU plugin.
    with_gpus = [h for h in healths if h.state is not PluginState.NO_GPU_CONTAINER] or healths
    return min(with_gpus, key=lambda h: _STATE_RANK[h.state])


def _pod_evidence(health: PluginHealth) -> tuple[Evidence, ...]:
    if health.pod is None:
        return ()
    parts = [f"container {GPU_CONTAINER}"]
    if health.waiting_reason:
        parts.append(f"waiting: {health.waiting_reason}")
    if health.restarts:
        parts.append(f"restarts: {health.restarts}")
    if health.exit_code is not None:
        parts.append(f"last exit code: {health.exit_code}")
    if health.message:
        parts.append(f"message: {clip_middle(health.message.strip(), 300)}")
    return (
        Evidence(
            source=EvidenceSource.OBJECT,
            ref=f"Pod {health.pod_key} .status.containerStatuses",
            excerpt="; ".join(parts),
        ),
    )


def plugin_findings(health: PluginHealth, *, blocking: bool, has_slices: bool) -> list[Finding]:
    """Findings for an unhealthy plugin.

    ``blocking``: the claim still needs the plugin (not yet prepared), so a dead plugin
    breaks it; once its pods run, the same state is a warning (Unprepare will need it).
    ``has_slices``: the node still has slices (the kubelet wipes them 30 s after the
    plugin unregisters, k8s-dra-semantics §5.2), which softens a missing pod.
    """
    node = health.node
    pod: K8sObject = health.pod or {}
    error = Severity.ERROR if blocking else Severity.WARNING
    logs_cmd = (
        f"kubectl logs -n {namespace_of(pod)} {name_of(pod)} -c {GPU_CONTAINER} --previous"
        if health.pod is not None
        else ""
    )
    if health.state is PluginState.MISSING:
        return [
            Finding(
                rule=PLUGIN_MISSING,
                phase=Phase.PUBLICATION,
                severity=error if not has_slices else Severity.WARNING,
                title="no gpu.nvidia.com kubelet-plugin pod on the node",
                detail=f"No kubelet-plugin pod of {' / '.join(CHART_NAMES)} runs on node {node}"
                + (
                    "; its slices are left over from an earlier plugin instance."
                    if has_slices
                    else ", and nothing publishes its GPUs."
                ),
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pods on node {node}",
                        excerpt="no pod labelled <name>-component=kubelet-plugin",
                    ),
                ),
                next=(
                    f"kubectl get node {node} --show-labels  (the DaemonSet needs "
                    "nvidia.com/gpu.present=true or feature.node.kubernetes.io/pci-10de.present=true)",
                    "kubectl get daemonset -A -l 'app.kubernetes.io/name in (dra-driver-nvidia-gpu,"
                    "nvidia-dra-driver-gpu)'  (DESIRED vs. the GPU nodes; an untolerated taint)",
                ),
                identifiers=(("node", node),),
            )
        ]
    if health.state is PluginState.NO_GPU_CONTAINER:
        return [
            Finding(
                rule=PLUGIN_NO_GPU_CONTAINER,
                phase=Phase.PUBLICATION,
                severity=error,
                title="the kubelet-plugin pod runs no 'gpus' container",
                detail=f"Pod {health.pod_key} on node {node} has no container {GPU_CONTAINER}: "
                "the chart was installed with resources.gpus.enabled=false, so no GPU is published.",
                evidence=_pod_evidence(health),
                next=(
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.spec.containers[*].name}'",
                    "helm get values <release> -n <driver namespace>  (resources.gpus.enabled)",
                ),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    if health.state is PluginState.CRASH_LOOP:
        return [
            Finding(
                rule=PLUGIN_CRASHLOOP,
                phase=Phase.PUBLICATION,
                severity=error,
                title="the gpu.nvidia.com kubelet plugin is crash-looping",
                detail=f"Container {GPU_CONTAINER} of {health.pod_key} on node {node} keeps exiting "
                f"({health.restarts} restarts); the driver is not registered there, so Prepare "
                "fails with 'DRA driver gpu.nvidia.com is not registered'."
                + (
                    f" Last message: {clip_middle(health.message.strip(), 300)}"
                    if health.message
                    else ""
                ),
                evidence=_pod_evidence(health),
                next=(
                    f"{logs_cmd}  (the last line 'Error: ...' names the cause, e.g. "
                    "'checkpoint is corrupted', 'feature gate validation failed')",
                ),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    if health.state is PluginState.INIT_WAITING:
        ns, name = namespace_of(pod), name_of(pod)
        return [
            Finding(
                rule=PLUGIN_INIT_WAITING,
                phase=Phase.PUBLICATION,
                severity=error,
                title="the kubelet plugin is stuck in its init container",
                detail=f"Pod {health.pod_key} on node {node} is still in {INIT_CONTAINER} "
                f"({health.waiting_reason or 'Init:0/1'}): it loops until nvidia-smi works "
                "under NVIDIA_DRIVER_ROOT, so the host driver is missing or nvidiaDriverRoot is wrong.",
                evidence=_pod_evidence(health),
                next=(
                    f"kubectl logs -n {ns} {name} -c {INIT_CONTAINER}  (look for 'Check failed' "
                    "and 'Hint:' lines)",
                ),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    if health.state is PluginState.NOT_RUNNING:
        return [
            Finding(
                rule=PLUGIN_NOT_RUNNING,
                phase=Phase.PUBLICATION,
                severity=error,
                title="the gpu.nvidia.com kubelet plugin is not running",
                detail=f"Container {GPU_CONTAINER} of {health.pod_key} on node {node} is not running"
                + (f" ({health.waiting_reason})" if health.waiting_reason else "")
                + ": the driver is not registered there, so nothing publishes or prepares its "
                "GPUs until it starts.",
                evidence=_pod_evidence(health),
                next=(
                    f"kubectl describe pod -n {namespace_of(pod)} {name_of(pod)}  (Events: image "
                    "pull, volume mount, scheduling)",
                ),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    if health.state is PluginState.NOT_READY:
        return [
            Finding(
                rule=PLUGIN_NOT_READY,
                phase=Phase.PUBLICATION,
                severity=Severity.WARNING,
                title="the kubelet plugin is not ready",
                detail=f"Container {GPU_CONTAINER} of {health.pod_key} on node {node} is not ready"
                + (f" ({health.waiting_reason})" if health.waiting_reason else "")
                + "; its gRPC health check (GetInfo / NodePrepareResources) is failing or "
                "it is still starting.",
                evidence=_pod_evidence(health),
                next=(f"kubectl describe pod -n {namespace_of(pod)} {name_of(pod)}",),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    if health.state is PluginState.RESTARTING:
        return [
            Finding(
                rule=PLUGIN_RESTARTS,
                phase=Phase.PUBLICATION,
                severity=Severity.WARNING,
                title="the kubelet plugin has restarted repeatedly",
                detail=f"Container {GPU_CONTAINER} of {health.pod_key} on node {node} is running "
                f"but has restarted {health.restarts} times; each restart re-enumerates the GPUs "
                "and briefly unregisters the driver.",
                evidence=_pod_evidence(health),
                next=(logs_cmd,),
                identifiers=(("node", node), ("pod", health.pod_key)),
            )
        ]
    return []


def plugin_logs(snapshot: Snapshot, health: PluginHealth) -> list[Any]:
    """Captured logs of the plugin pod's ``gpus`` and init containers (current and previous)."""
    pod = health.pod
    if pod is None:
        return []
    logs = snapshot.logs_for(namespace_of(pod), name_of(pod))
    if not logs:
        # `<pod>_<container>.log` without a namespace lands under "" when ambiguous.
        logs = snapshot.logs_for("", name_of(pod))
    return [lg for lg in logs if lg.container in (GPU_CONTAINER, INIT_CONTAINER)]


_ERROR_LINE = re.compile(r"(?i)\b(?:error|failed|fatal|panic|not found|cannot|unable|no such)\b")


def last_error_line(snapshot: Snapshot, health: PluginHealth, *, init: bool) -> str:
    """The plugin container's last error line (the previous instance's first), or "".

    A crash-looping or stuck container's state is the symptom; its last error before it
    exited or while it waits is the cause, so the finding quotes it.
    """
    wanted = INIT_CONTAINER if init else GPU_CONTAINER
    logs = [lg for lg in plugin_logs(snapshot, health) if lg.container == wanted]
    for log in sorted(logs, key=lambda lg: not lg.previous):
        lines = [ln.strip() for ln in log.text.splitlines() if ln.strip()]
        for line in reversed(lines):
            if _ERROR_LINE.search(line):
                return line
    return ""
