"""Rule matching over events, logs and objects: aggregation, precedence, evidence and findings."""

from __future__ import annotations

from typing import Any

import pytest

from dradiag.analyses.rule_matching import (
    RuleHit,
    match_events,
    match_log,
    match_logs,
    match_objects,
    match_snapshot,
)
from dradiag.rulebook import load_rulebook
from dradiag.snapshot.model import ContainerLog, Kind, Snapshot
from dradiag.vocabulary import EvidenceSource, Phase

UID = "6f04a69a-96a1-4662-9d32-d0881d43397e"
PREFIX = (
    "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed "
    f"for ResourceClaim train-gpu: error preparing devices for claim ml/train-gpu:{UID}: "
    "prepare devices failed: "
)


@pytest.fixture(scope="module")
def book() -> Any:
    return load_rulebook()


def _event(
    message: str, *, name: str, count: int, last: str, reason: str = "FailedPrepareDynamicResources"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "ml"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "ml",
            "name": "trainer-0",
            "uid": "9f1c2d4e",
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "count": count,
        "firstTimestamp": "2026-06-01T10:00:00Z",
        "lastTimestamp": last,
        "source": {"component": "kubelet", "host": "gpu-node-1"},
    }


def _ids(hits: list[RuleHit]) -> list[str]:
    return [h.rule.id for h in hits]


def test_events_aggregate_per_rule_and_object_quoting_the_latest(book: Any) -> None:
    older = _event(
        PREFIX
        + "error creating MIG device: error creating GPU instance for 'gpu-0-mig-1g10gb-19-0': Insufficient Resources",
        name="trainer-0.1",
        count=5,
        last="2026-06-01T10:05:00Z",
    )
    newer = _event(
        PREFIX
        + "error creating MIG device: error creating GPU instance for 'gpu-2-mig-4g95gb-5-0': Insufficient Resources",
        name="trainer-0.2",
        count=3,
        last="2026-06-01T10:09:00Z",
    )
    hits = match_events(book, [newer, older])
    assert _ids(hits) == ["DRA-PREP-MIG-CREATE-FAILED"]  # the fallback DRA-PREP-FAILED is dropped
    hit = hits[0]
    assert hit.count == 8
    assert hit.first_seen == "2026-06-01T10:00:00Z" and hit.last_seen == "2026-06-01T10:09:00Z"
    assert hit.captures["slice_device_name"] == "gpu-2-mig-4g95gb-5-0"
    assert hit.evidence.source is EvidenceSource.EVENT
    assert hit.evidence.ref == "Event ml/trainer-0.2 on Pod ml/trainer-0"
    assert hit.evidence.excerpt.startswith(
        "Warning FailedPrepareDynamicResources: Failed to prepare"
    )
    assert hit.evidence.excerpt.endswith("(x8, last 2026-06-01T10:09:00Z)")
    assert "gpu-2-mig-4g95gb-5-0" in hit.explain and "ml/trainer-0" in hit.explain
    finding = hit.to_finding(next_extra=["dradiag node"])
    assert finding.phase is Phase.PREPARE and finding.next[-1] == "dradiag node"
    assert ("slice device name", "gpu-2-mig-4g95gb-5-0") in finding.identifiers


def test_supersedes_drops_the_generic_rule_for_the_same_event(book: Any) -> None:
    busy = _event(
        PREFIX
        + 'error applying config: error configuring vfio device "gpu-vfio-0": error waiting for GPU "0000:3b:00.0" to be free: '
        + 'timed out waiting for gpu to be free: gpu device "0000:3b:00.0" has open fds by process(es): "nv-hostengine(4121)"',
        name="e1",
        count=1,
        last="2026-06-01T10:00:00Z",
    )
    hits = match_events(book, [busy])
    assert _ids(hits) == ["DRA-PREP-VFIO-GPU-BUSY"]
    assert hits[0].to_finding().identifiers == (("PCI bus ID", "0000:3b:00.0"),)


def test_fallback_fires_alone_when_nothing_specific_matches(book: Any) -> None:
    ev = _event(
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims",
        name="e2",
        count=2,
        last="2026-06-01T10:00:00Z",
    )
    hits = match_events(book, [ev])
    assert _ids(hits) == ["DRA-PREP-FAILED"] and hits[0].rule.fallback


def test_normal_events_and_other_reasons_do_not_match(book: Any) -> None:
    ev = _event(
        "Started container trainer",
        name="e3",
        count=1,
        last="2026-06-01T10:00:00Z",
        reason="Started",
    )
    assert match_events(book, [ev]) == []


def test_log_hits_quote_the_latest_line_with_its_number_and_count(book: Any) -> None:
    text = (
        "2026-06-01T11:00:00.100000Z I0601 11:00:00.100000 1 driver.go:200] Unprepare called for: [ml/train-gpu]\n"
        "2026-06-01T11:00:00.200000Z W0601 11:00:00.200000 1 device_state.go:702] Error deleting MIG device "
        "gpu-0-mig-1g10gb-19-0: error destroying GPU Instance: In use by another client\n"
        "2026-06-01T11:00:30.200000Z W0601 11:00:30.200000 1 device_state.go:702] Error deleting MIG device "
        "gpu-0-mig-1g10gb-19-0: error destroying GPU Instance: In use by another client\r\n"
        "2026-06-01T11:00:31.000000Z I0601 11:00:31.000000 1 driver.go:210] done\n"
    )
    log = ContainerLog(
        namespace="dra-driver-nvidia-gpu", pod="plugin-x7k2q", container="gpus", text=text
    )
    hits = match_log(book, log)
    assert _ids(hits) == ["DRA-UNPREP-MIG-IN-USE"]  # MIG-DELETE-FAILED is its fallback
    hit = hits[0]
    assert hit.count == 2 and hit.line == 3
    assert hit.evidence.ref == "log dra-driver-nvidia-gpu/plugin-x7k2q/gpus:3"
    assert "(2 matching lines, first at line 2)" in hit.evidence.excerpt
    assert not hit.evidence.excerpt.startswith("\r")
    assert (
        hit.first_seen == "2026-06-01T11:00:00.200000Z"
        and hit.last_seen == "2026-06-01T11:00:30.200000Z"
    )
    assert hit.subject.container == "gpus"


def test_log_rules_respect_their_container(book: Any) -> None:
    line = "2026-06-01T09:59:10Z  /driver-root (/ on host): nvidia-smi: not found, libnvidia-ml.so.1: not found, current contents: []\n"
    init = ContainerLog(namespace="d", pod="plugin", container="init-container", text=line)
    workload = ContainerLog(namespace="ml", pod="trainer-0", container="trainer", text=line)
    assert _ids(match_logs(book, [workload, init])) == ["DRA-PUB-DRIVER-ROOT-NOT-FOUND"]


def test_a_match_near_the_end_of_a_large_log_is_found_with_its_line_number(book: Any) -> None:
    filler = (
        "I0601 10:00:00.000000       1 driver.go:1] ordinary line with nothing to report\n" * 20000
    )
    text = (
        filler
        + "Error: feature gate validation failed: feature gate DynamicMIG is currently mutually exclusive with MPSSupport\n"
        + filler
    )
    hits = match_log(
        book, ContainerLog(namespace="d", pod="p", container="gpus", text=text, previous=True)
    )
    assert _ids(hits) == ["DRA-PUB-FEATURE-GATE-INVALID"]
    assert hits[0].line == 20001 and hits[0].captures["gate"] == "DynamicMIG"
    assert hits[0].evidence.ref == "log d/p/gpus (previous):20001"


def _pod(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer-0", "namespace": "ml", "uid": "9f1c2d4e"},
        "spec": {"nodeName": "gpu-node-1", "containers": [{"name": s["name"]} for s in statuses]},
        "status": {"phase": "Running", "containerStatuses": statuses},
    }


def test_object_predicates_hold_on_the_same_list_element(book: Any) -> None:
    pod = _pod(
        [
            {
                "name": "sidecar",
                "restartCount": 0,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            },
            {"name": "gpus", "restartCount": 3, "state": {"running": {}}},
        ]
    )
    hits = match_objects(book, "Pod", [pod])
    # `gpus` runs and `sidecar` (not a plugin container) crash-loops: the workload rule, not the plugin one.
    assert _ids(hits) == ["DRA-WORK-CONTAINER-CRASHLOOP"]
    assert hits[0].captures["container"] == "sidecar"
    assert hits[0].evidence.ref == "Pod ml/trainer-0 .status.containerStatuses[name=sidecar]"
    assert "state.waiting.reason=CrashLoopBackOff" in hits[0].evidence.excerpt


def test_object_fallback_yields_to_the_specific_cdi_rule(book: Any) -> None:
    pod = _pod(
        [
            {
                "name": "trainer",
                "restartCount": 0,
                "state": {
                    "waiting": {
                        "reason": "CreateContainerError",
                        "message": f"CDI device injection failed: unresolvable CDI devices k8s.gpu.nvidia.com/claim={UID}-gpu-0",
                    }
                },
            }
        ]
    )
    hits = match_objects(book, "Pod", [pod])
    assert _ids(hits) == ["DRA-INJ-CDI-UNRESOLVABLE"]
    assert hits[0].to_finding().identifiers == (
        ("CDI device ID", f"k8s.gpu.nvidia.com/claim={UID}-gpu-0"),
    )


def test_next_steps_are_filled_with_what_the_hit_knows(book: Any) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "train-gpu",
            "namespace": "ml",
            "deletionTimestamp": "2026-06-01T11:00:00Z",
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": {"devices": {"requests": []}},
    }
    hits = match_objects(book, "ResourceClaim", [claim])
    assert _ids(hits) == ["DRA-UNPREP-DELETION-STUCK"]
    finding = hits[0].to_finding()
    assert (
        finding.next[0]
        == "kubectl get resourceclaim train-gpu -n ml -o jsonpath='{.status.reservedFor}'"
    )


def test_match_snapshot_runs_every_kind_and_sorts_by_phase(book: Any) -> None:
    events = [
        _event(
            "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
            name="e4",
            count=4,
            last="2026-06-01T10:00:00Z",
        )
    ]
    logs = [
        ContainerLog(
            namespace="d",
            pod="plugin",
            container="gpus",
            text="Error: error creating driver: unable to get checkpoint: checkpoint is corrupted\n",
            previous=True,
        )
    ]
    snapshot = Snapshot(objects={Kind.EVENT: events}, logs=logs)
    hits = match_snapshot(book, snapshot)
    assert _ids(hits) == ["DRA-PUB-CHECKPOINT-CORRUPTED", "DRA-PREP-DRIVER-NOT-REGISTERED"]
    assert "gpu-node-1" in hits[1].explain
