"""Node-level publication problems that belong to no claim (``scan``): GPU nodes, their plugins, pools."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
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
from dradiag.diagnosis.next_context import node_context
from dradiag.diagnosis.next_steps import with_concrete_phases
from dradiag.diagnosis.phases.publication import pool_finding, pool_rules
from dradiag.diagnosis.rule_ids import PUB_NODE_NO_SLICES
from dradiag.diagnosis.scan_context import ScanContext
from dradiag.diagnosis.verdict import decide_verdict
from dradiag.snapshot.model import (
    Coverage,
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
    extra: Sequence[Finding] = (),
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
        and snapshot.coverage[Kind.RESOURCE_SLICE].coverage is Coverage.COLLECTED
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
    findings += extra
    for problem in (pool_problems_by_node or {}).get(node, ()):
        findings.append(pool_finding(problem, blocking=True))
    result = phase_result(rulebook, phase, findings, PhaseStatus.OK, NVIDIA_DRIVER)
    (result,) = with_concrete_phases((result,), node_context(snapshot, node, health.pod))
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
    orphans, unplaced = orphan_plugin_log_findings(snapshot, shared)
    nodes.update(orphans)
    out = []
    for node in sorted(nodes):
        diagnosis = diagnose_node(
            snapshot,
            node,
            options=options,
            pool_problems_by_node=by_node,
            shared=shared,
            extra=orphans.get(node, ()),
        )
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    for (namespace, pod), found in sorted(unplaced.items()):
        result = phase_result(shared.rulebook, Phase.PUBLICATION, found, PhaseStatus.OK)
        # The plugin pod is known from its log only: its namespace and name are the values.
        ctx = node_context(snapshot, "", None)
        ctx = replace(ctx, plugin_namespace=namespace or ctx.plugin_namespace, plugin_pod=pod)
        (result,) = with_concrete_phases((result,), ctx)
        target = Target(kind="Pod", namespace=namespace or None, name=pod)
        diagnosis = Diagnosis(
            target=target, verdict=decide_verdict(target, (result,)), phases=(result,)
        )
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    return out


_SLICE_NAME_NODE = re.compile(
    r"\b(?:[0-9a-f]{5}-gpu\.nvidia\.com-(?P<new>[a-z0-9][a-z0-9.-]*)-[a-z0-9]{5}"
    r"|(?P<old>[a-z0-9][a-z0-9.-]*)-gpu\.nvidia\.com-[a-z0-9]{5})\b"
)
"""A gpu.nvidia.com slice name and the node in it: ``<5-hex>-gpu.nvidia.com-<node>-<rand>``
from v0.4, ``<node>-gpu.nvidia.com-<rand>`` before (nvidia-driver-facts §1.1, §10)."""


def _node_of_log_hit(captures: Mapping[str, str], excerpt: str) -> str | None:
    """The node a plugin log line is about: a ``node`` or ``pool`` capture (the driver's
    pool is its node), else the node inside a slice name the line quotes."""
    for key in ("node", "pool"):
        if captures.get(key):
            return str(captures[key])
    found = _SLICE_NAME_NODE.search(excerpt)
    if found is None:
        return None
    return found.group("new") or found.group("old")


def orphan_plugin_log_findings(
    snapshot: Snapshot, shared: ScanContext
) -> tuple[dict[str, list[Finding]], dict[tuple[str, str], list[Finding]]]:
    """Publication findings in plugin logs whose pod object is not in the snapshot.

    A support case often holds the plugin's log and little else (``<pod>_gpus.log``
    pasted beside a claim); its lines still prove that the API server rejects the
    node's ResourceSlices or that the plugin cannot start. Returned by the node the
    line names (slice name, pool, node capture) and, where none can be told, by
    ``(namespace, pod)``, so scan never reads such a log as "nothing unhealthy".
    """
    match_logs = optional_matcher("match_logs")
    if shared.rulebook is None or match_logs is None:
        return {}, {}
    by_node: dict[str, list[Finding]] = {}
    unplaced: dict[tuple[str, str], list[Finding]] = {}
    for log in snapshot.logs:
        if log.container not in (ph.GPU_CONTAINER, ph.INIT_CONTAINER):
            continue
        namespace = log.namespace or ""
        if snapshot.pod(namespace, log.pod) is not None:
            continue  # the pod's own walk (plugin or workload) reads this log
        for hit in match_logs(shared.rulebook, [log]):
            finding = hit.to_finding()
            if finding.phase is not Phase.PUBLICATION:
                continue
            node = _node_of_log_hit(hit.captures, hit.evidence.excerpt)
            if node:
                by_node.setdefault(node, []).append(finding)
            else:
                unplaced.setdefault((namespace, log.pod), []).append(finding)
    return by_node, unplaced
