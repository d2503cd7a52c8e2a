"""The per-scan context (ScanContext) changes how fast ``scan`` is, never what it says.

``scan`` shares per-snapshot facts among its walks: plugin pods indexed once, each node's
plugin health and plugin rule hits once, one allocation simulation per distinct pending
spec. Here every scenario, and a bench-shaped snapshot in both plugin shapes, is
scanned with the context and "by hand" (each claim and node walked alone, with nothing
shared), and the two documents must be identical.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from dradiag.diagnosis import build
from dradiag.diagnosis.model import Diagnosis, VerdictStatus
from dradiag.diagnosis.nodes import diagnose_node
from dradiag.render.document import collection_block, diagnosis_document
from dradiag.snapshot.model import Snapshot
from dradiag.sources.manifests import load_snapshot

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "tests" / "fixtures" / "scenarios"


def _by_hand(snapshot: Snapshot) -> list[Diagnosis]:
    """scan's rows with nothing shared: every claim and node diagnosed on its own."""
    from dradiag.analyses import plugin_health as ph
    from dradiag.diagnosis.context import WalkOptions
    from dradiag.diagnosis.nodes import is_gpu_node, orphan_plugin_log_findings, scan_nodes
    from dradiag.diagnosis.scan_context import ScanContext

    options = WalkOptions()
    out = [
        d
        for claim in snapshot.claims
        if (d := build.walk_claim(snapshot, claim, options=options)).verdict.status
        is not VerdictStatus.OK
    ]
    for pod in snapshot.pods:
        if not (pod.get("spec") or {}).get("resourceClaims") or build.pod_done(pod):
            continue
        if (u := build.diagnose_unresolved(snapshot, pod)) is not None:
            if u.verdict.status is not VerdictStatus.OK:
                out.append(u)
        for pc in build.resolve_pod_claims(snapshot, pod):
            if pc.synthesized and pc.claim is not None:
                d = build.walk_claim(snapshot, pc.claim, options=options, pods=[pod])
                if d.verdict.status is not VerdictStatus.OK:
                    out.append(d)
    # Nodes: the same set scan_nodes considers, each diagnosed with a fresh context.
    nodes = {n.target.name for n in scan_nodes(snapshot) if n.target.kind == "Node"}
    nodes |= {str(n["metadata"]["name"]) for n in snapshot.nodes if is_gpu_node(n)}
    nodes |= {
        str(p["spec"]["nodeName"])
        for p in snapshot.pods
        if (p.get("spec") or {}).get("nodeName") and ph.is_plugin_pod(p)
    }
    fresh = ScanContext.of(snapshot, build.optional_rulebook())
    orphans, _ = orphan_plugin_log_findings(snapshot, fresh)
    by_node: dict[str, list[Any]] = {}
    if snapshot.is_collected(build.Kind.RESOURCE_SLICE):
        from dradiag.analyses.pools import pool_problems
        from dradiag.diagnosis.phases.publication import pool_rules

        rules = pool_rules(snapshot)
        for problem in pool_problems(
            snapshot, partitionable=rules.partitionable, legacy=rules.legacy
        ):
            if problem.kind != "stale":
                for n in problem.nodes or ("",):
                    by_node.setdefault(n, []).append(problem)
    for node in sorted(nodes | {n for n in by_node if n} | set(orphans)):
        d = diagnose_node(
            snapshot, node, pool_problems_by_node=by_node, extra=orphans.get(node, ())
        )
        if d.verdict.status is not VerdictStatus.OK:
            out.append(d)
    out += [d for d in scan_nodes(snapshot) if d.target.kind == "Pod"]
    return sorted(out, key=build._scan_sort_key)


def _docs(snapshot: Snapshot, diagnoses: list[Diagnosis]) -> list[dict[str, Any]]:
    return [diagnosis_document(d, snapshot.source, collection_block([])) for d in diagnoses]


@pytest.mark.parametrize("name", sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir()))
def test_scan_with_its_context_says_what_each_walk_says_alone(name: str) -> None:
    snapshot = load_snapshot(str(SCENARIOS / name))
    assert _docs(snapshot, build.scan(snapshot)) == _docs(snapshot, _by_hand(snapshot))


def _bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_diagnose", REPO / "bench" / "diagnose.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("plugin_labels", [True, False], ids=["plugins", "unrecognised"])
def test_bench_shaped_scan_rows_are_unchanged(tmp_path: Path, plugin_labels: bool) -> None:
    """bench/scan.py's shapes, small: pending claims sharing a spec, plugins or none."""
    _bench_module().build(
        tmp_path, 6, claims_total=80, events_total=160, plugin_labels=plugin_labels
    )
    snapshot = load_snapshot(str(tmp_path))
    rows = build.scan(snapshot)
    assert len(rows) >= 30  # the 32 pending claims (and the broken one) are rows
    assert _docs(snapshot, rows) == _docs(snapshot, _by_hand(snapshot))


def _unmatched_claim(namespace: str, name: str) -> dict[str, Any]:
    selector = {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == 'H100'"}}
    request = {"deviceClassName": "gpu.nvidia.com", "selectors": [selector]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}},
        "status": {},
    }


def test_one_spec_in_many_namespaces_is_labelled_per_claim(tmp_path: Path) -> None:
    """The selection analysis runs once per spec, across namespaces; each row still names
    its own claim (``ns/name``) wherever the analysis named the first one."""
    import json

    _bench_module().build(tmp_path, 2, claims_total=16, events_total=0)
    claims = [_unmatched_claim(ns, name) for ns in ("a", "b") for name in ("x", "x-1", "y")]
    (tmp_path / "extra-claims.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": claims})
    )
    snapshot = load_snapshot(str(tmp_path))
    rows = build.scan(snapshot)
    labelled = {
        f"{d.target.namespace}/{d.target.name}"
        for d in rows
        for p in d.phases
        if p.phase.value == "selection"
        for f in p.findings
        if f"claim {d.target.namespace}/{d.target.name}," in f.detail + f.title
    }
    assert labelled == {f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in claims}
    assert _docs(snapshot, rows) == _docs(snapshot, _by_hand(snapshot))
