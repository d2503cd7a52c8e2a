"""Prepare and injection on partial evidence: a deleted pod that never started, a Prepare
skipped from a checkpoint older than the node's restart, a container seeing more GPUs than
its claim allocated."""

from __future__ import annotations

import copy

from dradiag.diagnosis.build import diagnose_claim
from dradiag.diagnosis.model import VerdictStatus
from dradiag.snapshot.model import ContainerLog, Kind, Snapshot
from dradiag.vocabulary import Phase, PhaseStatus, Severity

NOT_REGISTERED = (
    "Failed to prepare dynamic resources: failed to get gRPC client for driver gpu.nvidia.com: "
    "plugin name gpu.nvidia.com not found in the list of registered DRA plugins"
)


CLAIM_UID = "3c8337ad-f366-4541-883d-30b9e99fd6be"
"""The builders' claim UID (k8s_objects.CLAIM_UID), named by the plugin's log line."""


def _phase(d, phase):
    return next(p for p in d.phases if p.phase is phase)


def _with_nodes(snap: Snapshot, nodes: list[dict]) -> Snapshot:
    """The builder's Snapshot plus Node objects (the builder has no nodes parameter)."""
    from dradiag.snapshot.normalize import normalize

    objects = {k: list(snap._all(k)) for k in Kind if k is not Kind.LOG}
    objects[Kind.NODE] = [normalize(Kind.NODE, copy.deepcopy(n)) for n in nodes]
    return Snapshot(
        objects=objects,
        logs=list(snap.logs),
        coverage=snap.coverage,
        errors=list(snap.errors),
        source=snap.source,
    )


def test_deleted_pod_that_never_started_keeps_its_prepare_failure(k8s):
    pod = k8s.pod(state="creating")
    pod["metadata"]["deletionTimestamp"] = "2026-05-01T11:30:00Z"
    snap = k8s.snapshot(
        claims=[k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])],
        pods=[pod],
        events=[k8s.event("FailedPrepareDynamicResources", NOT_REGISTERED, count=6)],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.BROKEN
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule == "DRA-PREP-DRIVER-NOT-REGISTERED"


def test_deleted_pod_that_never_started_without_failure_is_not_prepared(k8s):
    pod = k8s.pod(state="creating")
    pod["metadata"]["deletionTimestamp"] = "2026-05-01T11:30:00Z"
    snap = k8s.snapshot(
        claims=[k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])],
        pods=[pod],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert _phase(d, Phase.PREPARE).status is PhaseStatus.NOT_REACHED


def _skip_log() -> ContainerLog:
    return ContainerLog(
        namespace=None,
        pod="",
        container="gpus",
        component="kubelet-plugin",
        source="kubelet-plugin.log",
        text="I0501 11:40:02.019871       1 device_state.go:198] Skip prepare: claim already in "
        f"PrepareCompleted state: {CLAIM_UID}\n",
    )


def _node(ready_since: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node-1"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ready_since}]
        },
    }


def _crashing_pod(k8s, last_started: str) -> dict:
    pod = k8s.pod(state="crashloop")
    pod["status"]["startTime"] = "2026-05-01T11:00:05Z"
    pod["status"]["containerStatuses"][0]["lastState"]["terminated"]["startedAt"] = last_started
    return pod


def test_prepare_skipped_after_node_restart_is_the_cause(k8s):
    snap = k8s.snapshot(
        claims=[k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])],
        pods=[_crashing_pod(k8s, "2026-05-01T11:50:00Z")],
        logs=[_skip_log()],
    )
    d = diagnose_claim(_with_nodes(snap, [_node("2026-05-01T11:40:00Z")]), "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule == "DRA-PREP-SKIPPED-COMPLETED"
    assert "PrepareCompleted" in d.verdict.summary


def test_prepare_skipped_without_node_restart_stays_history(k8s):
    snap = k8s.snapshot(
        claims=[k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])],
        pods=[_crashing_pod(k8s, "2026-05-01T11:50:00Z")],
        logs=[_skip_log()],
    )
    # The node has been Ready since before the pod started: a plugin restart, not a reboot.
    d = diagnose_claim(_with_nodes(snap, [_node("2026-04-01T00:00:00Z")]), "ml", "train-gpu")
    prepare = _phase(d, Phase.PREPARE)
    assert prepare.status is PhaseStatus.OK
    skipped = [f for f in prepare.findings if f.rule == "DRA-PREP-SKIPPED-COMPLETED"]
    assert skipped and all(f.severity is Severity.INFO for f in skipped)


def _app_log(text: str) -> ContainerLog:
    return ContainerLog(namespace="ml", pod="train-0", container="trainer", text=text)


SMI_TWO = (
    "GPU 0: NVIDIA RTX A6000 (UUID: GPU-60191ee1-f437-565c-ab0f-914032019dc5)\n"
    "GPU 1: NVIDIA RTX A6000 (UUID: GPU-c2f4e0a8-1d3b-4e6f-9a7c-5b8d0e2f4a61)\n"
)


def test_container_seeing_more_gpus_than_allocated_breaks_injection(k8s):
    objs = k8s.healthy_objects()
    snap = k8s.snapshot(**objs, logs=[_app_log(SMI_TWO)])
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.phase is Phase.INJECTION
    assert d.verdict.rule == "DRA-INJ-CDI-NOT-APPLIED"
    finding = _phase(d, Phase.INJECTION).findings[0]
    assert "sees 2 GPUs" in finding.detail and "allocated 1" in finding.detail


def test_container_seeing_its_allocated_gpus_is_fine(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [
        k8s.claim(allocated=["gpu-0", "gpu-1"], reserved_for=[("train-0", k8s.POD_UID)])
    ]
    snap = k8s.snapshot(**objs, logs=[_app_log(SMI_TWO)])
    assert diagnose_claim(snap, "ml", "train-gpu").verdict.status is VerdictStatus.OK


CDI_SPEC_ERROR = (
    "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed "
    "for ResourceClaim train-gpu: error preparing devices for claim ml/train-gpu:"
    f"{CLAIM_UID}: unable to create CDI spec file for claim: failed to construct MIG device "
    "DeviceNode edits: failed to parse GI capabilities file /proc/driver/nvidia/capabilities/"
    "gpu0/mig/gi2/access: open /proc/driver/nvidia/capabilities/gpu0/mig/gi2/access: no such "
    "file or directory"
)
MIG_INSUFFICIENT = (
    "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources failed "
    "for ResourceClaim train-gpu: error preparing devices for claim ml/train-gpu:"
    f"{CLAIM_UID}: prepare devices failed: error creating MIG device: error creating GPU "
    "instance for 'gpu-2-mig-4g95gb-5-0': Insufficient Resources"
)
GONE_UID = "6f04a69a-96a1-4662-9d32-d0881d43397e"
LEAK_LOG = (
    "I0501 11:45:30.452168       1 cleanup.go:159] Checkpointed RC cleanup: partially prepared "
    f"claim 'ml/old-gpu:{GONE_UID}' is stale: not found in API server\n"
    "I0501 11:45:30.452557       1 device_state.go:369] unprepare noop: claim preparation started "
    f"but not completed for claim 'ml/old-gpu:{GONE_UID}' (devices: [{{req-mig gpu.nvidia.com "
    "gpu-node-1 gpu-1-mig-2g47gb-14-0 <nil> [] [] [] <nil> map[]}])\n"
)


def _mig_prepare_snapshot(k8s, logs=None):
    claim = k8s.claim(allocated=["gpu-2-mig-4g95gb-5-0"], reserved_for=[("train-0", k8s.POD_UID)])
    return k8s.snapshot(
        claims=[claim],
        pods=[k8s.pod(state="creating")],
        events=[
            k8s.event("FailedPrepareDynamicResources", CDI_SPEC_ERROR, last="2026-05-01T11:20:00Z"),
            k8s.event(
                "FailedPrepareDynamicResources",
                MIG_INSUFFICIENT,
                last="2026-05-01T11:59:00Z",
                count=8,
            ),
        ],
        logs=logs,
    )


def test_the_current_prepare_failure_outranks_an_older_one(k8s):
    d = diagnose_claim(_mig_prepare_snapshot(k8s), "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule == "DRA-PREP-MIG-CREATE-FAILED"
    older = [
        f for f in _phase(d, Phase.PREPARE).findings if f.rule == "DRA-PREP-CDI-MIG-CAPS-UNREADABLE"
    ]
    assert older and older[0].severity is Severity.INFO


def test_a_gone_claims_leaked_mig_state_is_the_cause_of_insufficient_resources(k8s):
    log = ContainerLog(
        namespace=None,
        pod="",
        container="gpus",
        component="kubelet-plugin",
        source="kubelet-plugin.log",
        text=LEAK_LOG,
    )
    d = diagnose_claim(_mig_prepare_snapshot(k8s, logs=[log]), "ml", "train-gpu")
    assert d.verdict.phase is Phase.UNPREPARE
    assert d.verdict.rule == "DRA-UNPREP-LEAKED-STATE"
    assert "ml/old-gpu" in d.verdict.summary
    leak = next(f for f in _phase(d, Phase.UNPREPARE).findings if f.rule == d.verdict.rule)
    assert "Insufficient Resources" in leak.detail and "partially prepared" in leak.detail


def test_a_noop_unprepare_without_the_stale_verdict_blames_no_one(k8s):
    """Without the clean-up's own "not found in API server", the no-op may be a live claim's."""
    log = ContainerLog(
        namespace=None,
        pod="",
        container="gpus",
        component="kubelet-plugin",
        source="kubelet-plugin.log",
        text=LEAK_LOG.splitlines(keepends=True)[1],
    )
    d = diagnose_claim(_mig_prepare_snapshot(k8s, logs=[log]), "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE


def _extended(k8s, request_name: str):
    claim = k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
    pod = k8s.pod(claim_name=None)
    pod["spec"]["resourceClaims"] = []
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "train-gpu",
        "requestMappings": [
            {
                "containerName": "trainer",
                "requestName": request_name,
                "resourceName": "nvidia.com/gpu",
            }
        ],
    }
    return k8s.snapshot(claims=[claim], pods=[pod])


def test_extended_resource_mapping_to_the_claims_request_is_healthy(k8s):
    d = diagnose_claim(_extended(k8s, "gpu"), "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK


def test_extended_resource_mapping_to_a_missing_request_breaks_workload(k8s):
    d = diagnose_claim(_extended(k8s, "container-0-request-0"), "ml", "train-gpu")
    assert d.verdict.phase is Phase.WORKLOAD
    assert d.verdict.rule == "DRA-WORK-WRONG-REQUEST"
    assert "container-0-request-0" in d.verdict.summary
