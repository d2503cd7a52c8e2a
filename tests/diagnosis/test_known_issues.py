"""Known issues in the claim walk: a version-matched known issue decides its phase over the
generic rule on the same symptom, and a fixed version leaves the generic rule deciding."""

from __future__ import annotations

import copy
from types import ModuleType
from typing import Any

from dradiag.diagnosis.build import diagnose_claim
from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot, SourceInfo
from dradiag.snapshot.normalize import normalize
from dradiag.vocabulary import Phase

CLAIM_INFO_ERROR = "internal error: unable to get claim info for ResourceClaim train-gpu"


def _node(k8s: ModuleType, kubelet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": k8s.NODE},
        "status": {"nodeInfo": {"kubeletVersion": kubelet}},
    }


def _snapshot(k8s: ModuleType, kubelet: str, *, with_event: bool = True) -> Snapshot:
    """A claim prepared on the node whose pod cannot create its container (the kubelet's
    claim-info error), with the node's kubelet at ``kubelet``."""
    pod = k8s.pod(state="creating")
    pod["status"]["containerStatuses"][0]["state"] = {
        "waiting": {"reason": "CreateContainerConfigError", "message": CLAIM_INFO_ERROR}
    }
    events = [k8s.event("Failed", f"Error: {CLAIM_INFO_ERROR}")] if with_event else []
    objects = {
        Kind.RESOURCE_SLICE: [k8s.resource_slice()],
        Kind.DEVICE_CLASS: [k8s.device_class()],
        Kind.RESOURCE_CLAIM: [
            k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
        ],
        Kind.RESOURCE_CLAIM_TEMPLATE: [],
        Kind.POD: [pod, k8s.plugin_pod()],
        Kind.NODE: [_node(k8s, kubelet)],
        Kind.EVENT: events,
    }
    coverage = {k: KindRecord(kind=k, coverage=Coverage.COLLECTED, scope="cluster") for k in Kind}
    return Snapshot(
        objects={k: [normalize(k, copy.deepcopy(o)) for o in v] for k, v in objects.items()},
        logs=[],
        coverage=coverage,
        source=SourceInfo(kind="live", context="test", collected_at=k8s.COLLECTED_AT),
    )


def test_an_affected_kubelet_makes_the_known_issue_the_verdict(k8s: ModuleType) -> None:
    diagnosis = diagnose_claim(_snapshot(k8s, "v1.34.1"), "ml", "train-gpu")
    assert diagnosis.verdict.phase is Phase.INJECTION
    assert diagnosis.verdict.rule == "DRA-INJ-KI-KUBELET-CLAIM-INFO"
    injection = next(p for p in diagnosis.phases if p.phase is Phase.INJECTION)
    decided = injection.findings[0]
    assert "https://github.com/kubernetes/kubernetes/issues/135901" in decided.detail
    assert "1.34.4 / 1.35.1" in decided.detail and k8s.NODE in decided.detail
    refs = [e.ref for e in decided.evidence]
    assert any("kubeletVersion" in r for r in refs), refs
    # The generic rule on the same event is still shown, after the known issue.
    assert [f.rule for f in injection.findings].index("DRA-INJ-CLAIM-INFO-MISSING") > 0


def test_a_fixed_kubelet_leaves_the_generic_rule_deciding(k8s: ModuleType) -> None:
    diagnosis = diagnose_claim(_snapshot(k8s, "v1.34.4"), "ml", "train-gpu")
    assert diagnosis.verdict.phase is Phase.INJECTION
    assert diagnosis.verdict.rule == "DRA-INJ-CLAIM-INFO-MISSING"
    rules = {f.rule for p in diagnosis.phases for f in p.findings}
    assert "DRA-INJ-KI-KUBELET-CLAIM-INFO" not in rules


def test_an_unreadable_kubelet_version_claims_no_known_issue(k8s: ModuleType) -> None:
    diagnosis = diagnose_claim(_snapshot(k8s, "v1.34"), "ml", "train-gpu")
    assert diagnosis.verdict.rule == "DRA-INJ-CLAIM-INFO-MISSING"


def test_an_affected_kubelet_without_the_symptom_adds_nothing(k8s: ModuleType) -> None:
    diagnosis = diagnose_claim(_snapshot(k8s, "v1.34.1", with_event=False), "ml", "train-gpu")
    rules = {f.rule for p in diagnosis.phases for f in p.findings}
    assert not {r for r in rules if "-KI-" in r}, rules


def _scheduler(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-scheduler-cp-1",
            "namespace": "kube-system",
            "labels": {"component": "kube-scheduler"},
        },
        "spec": {"nodeName": "cp-1", "containers": [{"name": "kube-scheduler", "image": image}]},
    }


def test_a_claim_level_known_issue_reaches_the_per_pod_prepare_phase(k8s: ModuleType) -> None:
    claim = k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
    claim["status"]["allocation"]["devices"]["config"] = [
        {"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}
    ]

    def prepare_rules(scheduler_image: str) -> list[str]:
        objects = {
            Kind.RESOURCE_SLICE: [k8s.resource_slice()],
            Kind.DEVICE_CLASS: [k8s.device_class()],
            Kind.RESOURCE_CLAIM: [claim],
            Kind.POD: [k8s.pod(state="creating"), k8s.plugin_pod(), _scheduler(scheduler_image)],
            Kind.NODE: [_node(k8s, "v1.34.3")],
        }
        coverage = {k: KindRecord(kind=k, coverage=Coverage.COLLECTED) for k in Kind}
        snapshot = Snapshot(
            objects={k: [normalize(k, copy.deepcopy(o)) for o in v] for k, v in objects.items()},
            logs=[],
            coverage=coverage,
            source=SourceInfo(kind="live", collected_at=k8s.COLLECTED_AT),
        )
        diagnosis = diagnose_claim(snapshot, "ml", "train-gpu")
        prepare = next(p for p in diagnosis.phases if p.phase is Phase.PREPARE)
        return [f.rule for f in prepare.findings]

    assert "DRA-PREP-KI-SCHED-FROMCLASS-CONFIG" in prepare_rules(
        "registry.k8s.io/kube-scheduler:v1.34.1"
    )
    assert "DRA-PREP-KI-SCHED-FROMCLASS-CONFIG" not in prepare_rules(
        "registry.k8s.io/kube-scheduler:v1.34.2"
    )


def test_a_scans_clean_nodes_skip_only_what_holds_no_affected_version(k8s: ModuleType) -> None:
    """``clean_nodes`` (a scan's memo): a fixed kubelet's node is noted and then skipped;
    an affected kubelet's node is never noted, so its known issue still matches."""
    from dradiag.analyses.known_issues import match_known_issues
    from dradiag.rulebook.loader import load_rulebook

    rulebook = load_rulebook()
    fixed = _snapshot(k8s, "v1.34.4")
    clean: set[str | None] = set()
    assert match_known_issues(rulebook, fixed, nodes=[k8s.NODE], clean_nodes=clean) == []
    assert k8s.NODE in clean
    # Noted clean: a later call reads no version at all, even with a poisoned reading.
    fixed.nodes[0]["status"]["nodeInfo"]["kubeletVersion"] = "v1.34.1"
    assert match_known_issues(rulebook, fixed, nodes=[k8s.NODE], clean_nodes=clean) == []
    assert match_known_issues(rulebook, fixed, nodes=[k8s.NODE]) != []

    affected = _snapshot(k8s, "v1.34.1")
    noted: set[str | None] = set()
    with_memo = match_known_issues(rulebook, affected, nodes=[k8s.NODE], clean_nodes=noted)
    assert [h.rule.id for h in with_memo] == [
        h.rule.id for h in match_known_issues(rulebook, affected, nodes=[k8s.NODE])
    ]
    assert "DRA-INJ-KI-KUBELET-CLAIM-INFO" in {h.rule.id for h in with_memo}
    assert noted == set()
