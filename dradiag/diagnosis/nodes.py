"""Node-level publication problems that belong to no claim (``scan``): GPU nodes, their plugins, pools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.diagnosis.context import (
    NVIDIA_DRIVER,
    WalkOptions,
    optional_matcher,
    optional_rulebook,
)
from dradiag.diagnosis.findings import as_historical, phase_result
from dradiag.diagnosis.model import Diagnosis, Target
from dradiag.diagnosis.phases.publication import pool_finding, pool_rules
from dradiag.diagnosis.scan_context import ScanContext
from dradiag.diagnosis.rule_ids import PUB_NODE_NO_SLICES
from dradiag.diagnosis.verdict import decide_verdict
from dradiag.snapshot.model import (
    K8sObject,
    Kind,
    Snapshot,
    name_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

GPU_NODE_LABELS: Mapping[str, str] = {
    "nvidia.com/gpu.present": "true",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/pci-0302_10de.present": "true",
    "feature.node.kubernetes.io/pci-0300_10de.present": "true",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA",
}
"""Labels the kubelet-plugin DaemonSet's node affinity accepts (nvidia-driver-facts §5.1)."""


GPU_EXTENDED_RESOURCE = "nvidia.com/gpu"
"""The extended resource the NVIDIA device plugin (or DRA's extendedResourceName) counts."""


def gpu_node_evidence(node: K8sObject) -> str | None:
    """What shows the node has NVIDIA GPUs (a label, or a nonzero ``nvidia.com/gpu`` in
    capacity or allocatable), or None."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in GPU_NODE_LABELS.items():
        if str(labels.get(key)).lower() == value.lower():
            return f"label {key}={labels.get(key)}"
    status = node.get("status") or {}
    for field in ("capacity", "allocatable"):
        amount = str((status.get(field) or {}).get(GPU_EXTENDED_RESOURCE) or "0").strip()
        if amount not in ("", "0"):
            return f"status.{field}[{GPU_EXTENDED_RESOURCE}]={amount}"
    return None


def is_gpu_node(node: K8sObject) -> bool:
    """True when NFD or the GPU Operator labelled the node as having NVIDIA GPUs, or the
    node advertises ``nvidia.com/gpu`` capacity."""
    return gpu_node_evidence(node) is not None


def diagnose_node(
    snapshot: Snapshot,
    node: str,
    *,
    options: WalkOptions | None = None,
    pool_problems_by_node: Mapping[str, Sequence[Any]] | None = None,
    shared: ScanContext | None = None,
) -> Diagnosis:
    """The publication phase of one node: slices, pools, the kubelet plugin and its logs.

    For ``scan``: problems that belong to no claim yet (a GPU node publishing nothing, a
    crash-looping plugin, an incomplete pool) are what the next claim there will hit.
    """
    del options  # node publication has no time-based checks yet
    phase = Phase.PUBLICATION
    shared = shared or ScanContext.of(snapshot, optional_rulebook())
    rulebook = shared.rulebook
    findings: list[Finding] = []
    health = shared.plugin(node)
    node_slices = snapshot.slices_for(node=node, driver=NVIDIA_DRIVER)
    node_obj = snapshot.node(node)
    if (
        not node_slices
        and snapshot.is_collected(Kind.RESOURCE_SLICE)
        and ((node_obj is not None and is_gpu_node(node_obj)) or health.pod is not None)
    ):
        findings.append(
            Finding(
                rule=PUB_NODE_NO_SLICES,
                phase=phase,
                severity=Severity.ERROR,
                title="the node publishes no ResourceSlice for the driver",
                detail=f"Node {node} "
                + (
                    f"advertises NVIDIA GPUs ({gpu_node_evidence(node_obj)})"
                    if node_obj is not None and is_gpu_node(node_obj)
                    else "runs a DRA kubelet-plugin pod"
                )
                + f" but no ResourceSlice of {NVIDIA_DRIVER} names it: claims cannot get its GPUs."
                + (
                    f" Plugin state: {health.state.value}."
                    if health.state is not ph.PluginState.NOT_COLLECTED
                    else ""
                ),
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"ResourceSlices with spec.nodeName={node}",
                        excerpt=f"none for {NVIDIA_DRIVER}",
                    ),
                ),
                next=(f"kubectl get resourceslices --field-selector spec.nodeName={node}",),
                identifiers=(("node", node),),
            )
        )
    hits: list[Finding] = []
    if rulebook is not None and health.pod is not None:
        match_objects = optional_matcher("match_objects")
        match_logs = optional_matcher("match_logs")
        if match_objects is not None:
            hits += shared.plugin_object_hits(node, match_objects)
        if match_logs is not None:
            hits += [
                as_historical(h.finding, "the plugin has since restarted and runs")
                if h.previous and health.healthy
                else h.finding
                for h in shared.plugin_log_hits(node, match_logs)
            ]
    hits = [h for h in hits if h.phase is phase]
    matched = {h.rule for h in hits}
    if health.state is not ph.PluginState.MISSING or (
        node_obj is not None and is_gpu_node(node_obj)
    ):
        findings += [
            f
            for f in ph.plugin_findings(health, blocking=True, has_slices=bool(node_slices))
            if f.rule not in matched
        ]
    findings += hits
    for problem in (pool_problems_by_node or {}).get(node, ()):
        findings.append(pool_finding(problem, blocking=True))
    result = phase_result(rulebook, phase, findings, PhaseStatus.OK, NVIDIA_DRIVER)
    target = Target(kind="Node", name=node)
    return Diagnosis(target=target, verdict=decide_verdict(target, (result,)), phases=(result,))


def scan_nodes(
    snapshot: Snapshot, *, options: WalkOptions | None = None, shared: ScanContext | None = None
) -> list[Diagnosis]:
    """Node-level publication problems: GPU nodes publishing nothing, unhealthy plugins,
    incomplete or invalid pools."""
    from dradiag.diagnosis.model import VerdictStatus

    shared = shared or ScanContext.of(snapshot, optional_rulebook())
    by_node: dict[str, list[Any]] = {}
    try:
        from dradiag.analyses.pools import pool_problems
    except ImportError:
        pool_problems = None  # type: ignore[assignment]
    if pool_problems is not None and snapshot.is_collected(Kind.RESOURCE_SLICE):
        rules = pool_rules(snapshot)
        for problem in pool_problems(
            snapshot, partitionable=rules.partitionable, legacy=rules.legacy
        ):
            if problem.kind == "stale":
                continue
            for problem_node in problem.nodes or ("",):
                by_node.setdefault(problem_node, []).append(problem)
    nodes: set[str] = {n for n in by_node if n}
    for node_obj in snapshot.nodes:
        if is_gpu_node(node_obj):
            nodes.add(name_of(node_obj))
    nodes.update(shared.plugins.nodes)
    out = []
    for node in sorted(nodes):
        diagnosis = diagnose_node(
            snapshot, node, options=options, pool_problems_by_node=by_node, shared=shared
        )
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    return out
