"""The seven-phase walk on hand-built snapshots: each phase's ok / broken / unknown cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dradiag.diagnosis.build import (
    WalkOptions,
    decompose_fit_error,
    diagnose_claim,
    diagnose_pod,
    scan,
)
from dradiag.diagnosis.model import VerdictStatus
from dradiag.errors import UsageError
from dradiag.snapshot.model import CollectionError, ContainerLog, Kind
from dradiag.vocabulary import Basis, Phase, PhaseStatus, Severity


def statuses(diagnosis):
    return {p.phase: p.status for p in diagnosis.phases}


def rules_of(diagnosis, phase):
    return [f.rule for p in diagnosis.phases if p.phase is phase for f in p.findings]


def test_healthy_running_claim_is_ok_with_no_findings(k8s):
    snap = k8s.snapshot(**k8s.healthy_objects())
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK
    assert d.verdict.phase is None and d.verdict.rule is None
    s = statuses(d)
    for phase in (
        Phase.PUBLICATION,
        Phase.SELECTION,
        Phase.ALLOCATION,
        Phase.PREPARE,
        Phase.INJECTION,
        Phase.WORKLOAD,
    ):
        assert s[phase] is PhaseStatus.OK, phase
    assert s[Phase.UNPREPARE] is PhaseStatus.NOT_REACHED
    assert not [f for p in d.phases for f in p.findings if f.severity is not Severity.INFO]
    assert d.target.pods == ("ml/train-0",)
    assert d.target.uid == k8s.CLAIM_UID


def test_healthy_claim_stays_ok_without_events_or_logs(k8s):
    """A running pod needs neither events nor logs: missing ones must not make it unknown."""
    snap = k8s.snapshot(**k8s.healthy_objects(), unknown=(Kind.EVENT, Kind.LOG))
    assert diagnose_claim(snap, "ml", "train-gpu").verdict.status is VerdictStatus.OK


def test_missing_claim_is_a_usage_error(k8s):
    snap = k8s.snapshot(**k8s.healthy_objects())
    with pytest.raises(UsageError, match="ml/nope not found"):
        diagnose_claim(snap, "ml", "nope")


def test_prepare_failure_event_breaks_prepare(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    message = (
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
        "failed for ResourceClaim train-gpu: error preparing devices for claim "
        f"ml/train-gpu:{k8s.CLAIM_UID}: prepare devices failed: allocatable not found for "
        'device "gpu-0"'
    )
    snap = k8s.snapshot(
        **objs, events=[k8s.event("FailedPrepareDynamicResources", message, count=7)]
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.BROKEN
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule.startswith("DRA-PREP-")
    s = statuses(d)
    assert s[Phase.ALLOCATION] is PhaseStatus.OK
    assert s[Phase.INJECTION] is PhaseStatus.NOT_REACHED
    prepare = next(p for p in d.phases if p.phase is Phase.PREPARE)
    assert any("allocatable not found" in e.excerpt for f in prepare.findings for e in f.evidence)


def test_old_prepare_failure_is_history_once_the_pod_runs(k8s):
    objs = k8s.healthy_objects()
    message = "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered"
    snap = k8s.snapshot(**objs, events=[k8s.event("FailedPrepareDynamicResources", message)])
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK
    prepare = next(p for p in d.phases if p.phase is Phase.PREPARE)
    assert prepare.status is PhaseStatus.OK
    assert prepare.findings and all(f.severity is Severity.INFO for f in prepare.findings)
    assert all(f.detail.startswith("Earlier, since resolved") for f in prepare.findings)


def test_stuck_container_creating_without_events_beyond_threshold(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating", scheduled_at="2026-05-01T11:00:05Z")
    snap = k8s.snapshot(**objs)  # collected 12:00, scheduled 11:00: an hour of silence
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule == "DRA-PREP-STALLED"
    detail = next(f.detail for p in d.phases for f in p.findings if f.rule == "DRA-PREP-STALLED")
    assert "59m" in detail or "1h" in detail


def test_container_creating_within_threshold_is_not_reached_yet(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating", scheduled_at="2026-05-01T11:58:00Z")
    snap = k8s.snapshot(**objs)
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK
    assert statuses(d)[Phase.PREPARE] is PhaseStatus.NOT_REACHED


def test_threshold_and_now_are_options(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating", scheduled_at="2026-05-01T11:58:00Z")
    snap = k8s.snapshot(**objs)
    short = WalkOptions(stuck_after=timedelta(seconds=30))
    assert diagnose_claim(snap, "ml", "train-gpu", options=short).verdict.rule == "DRA-PREP-STALLED"
    early = WalkOptions(
        now=datetime(2026, 5, 1, 11, 58, 30, tzinfo=UTC), stuck_after=short.stuck_after
    )
    d = diagnose_claim(snap, "ml", "train-gpu", options=early)
    assert d.verdict.status is VerdictStatus.OK


def test_now_defaults_to_newest_timestamp_without_collection_time(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating", scheduled_at="2026-05-01T11:00:05Z")
    late_event = k8s.event(
        "Pulled",
        "unrelated",
        kind="Pod",
        name="other",
        uid="x",
        last="2026-05-01T11:30:00Z",
        event_type="Normal",
    )
    snap = k8s.snapshot(**objs, events=[late_event], collected_at=None)
    # Newest timestamp 11:30, 30 minutes after scheduling: stuck.
    assert diagnose_claim(snap, "ml", "train-gpu").verdict.rule == "DRA-PREP-STALLED"


def test_events_not_collected_make_a_waiting_pod_inconclusive(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    errors = [
        CollectionError(
            resource="events", verb="list", reason="forbidden", status=403, namespace="ml"
        )
    ]
    snap = k8s.snapshot(**objs, unknown=(Kind.EVENT,), errors=errors)
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.INCONCLUSIVE
    assert d.verdict.phase is Phase.PREPARE
    assert d.verdict.rule == "DRA-PREP-NOT-COLLECTED"
    finding = next(f for p in d.phases for f in p.findings if f.rule == "DRA-PREP-NOT-COLLECTED")
    assert any("403" in e.excerpt and "events" in e.ref for e in finding.evidence)


def test_unknown_never_hides_an_earlier_break(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    objs["claims"][0] = k8s.claim(allocated=["gpu-0"], reserved_for=[("someone-else", "u-2")])
    snap = k8s.snapshot(**objs, unknown=(Kind.EVENT,))
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.BROKEN
    assert d.verdict.phase is Phase.ALLOCATION
    assert d.verdict.rule == "DRA-ALLOC-NOT-RESERVED"


def test_slices_not_collected_are_inferred_from_the_allocation(k8s):
    # An allocated claim proves publication happened: slices that were not collected do
    # not make the healthy claim inconclusive (DESIGN §2, basis `inferred`).
    snap = k8s.snapshot(**k8s.healthy_objects(), unknown=(Kind.RESOURCE_SLICE,))
    d = diagnose_claim(snap, "ml", "train-gpu")
    pub = next(p for p in d.phases if p.phase is Phase.PUBLICATION)
    assert pub.status is PhaseStatus.OK
    assert pub.basis is Basis.INFERRED
    assert ".status.allocation" in pub.basis_detail and "ResourceSlice" in pub.basis_detail
    assert d.verdict.status is VerdictStatus.OK


def test_slices_not_collected_leave_a_pending_claim_unknown(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim()]
    objs["pods"][0] = k8s.pod(node=None, state="pending")
    snap = k8s.snapshot(**objs, unknown=(Kind.RESOURCE_SLICE,))
    d = diagnose_claim(snap, "ml", "train-gpu")
    pub = next(p for p in d.phases if p.phase is Phase.PUBLICATION)
    assert pub.status is PhaseStatus.UNKNOWN
    assert pub.basis is Basis.UNKNOWN and "ResourceSlice" in pub.basis_detail
    assert d.verdict.status is not VerdictStatus.OK


def test_node_without_slices_breaks_publication_and_names_plugin_state(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    objs["slices"] = [k8s.resource_slice(node="gpu-node-2")]
    objs["pods"][1] = k8s.plugin_pod(gpus_state="crashloop", restarts=9)
    snap = k8s.snapshot(**objs)
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.phase is Phase.PUBLICATION
    # The plugin's state is more specific than "no slices" and decides.
    assert d.verdict.rule == "DRA-PUB-PLUGIN-CRASHLOOP"
    assert "DRA-PUB-NO-SLICES" in rules_of(d, Phase.PUBLICATION)


def test_crashlooping_plugin_only_warns_once_the_claim_runs(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][1] = k8s.plugin_pod(gpus_state="crashloop", restarts=9)
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK
    assert statuses(d)[Phase.PUBLICATION] is PhaseStatus.WARN


def test_previous_chart_generation_plugin_is_recognised(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    objs["pods"][1] = k8s.plugin_pod(
        chart="nvidia-dra-driver-gpu", init_done=False, gpus_state="init"
    )
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.PUBLICATION
    assert d.verdict.rule == "DRA-PUB-PLUGIN-INIT-STUCK"


def test_plugin_startup_error_in_log_decides_publication(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    objs["pods"][1] = k8s.plugin_pod(gpus_state="crashloop", restarts=4)
    log = ContainerLog(
        namespace="dra-driver-nvidia-gpu",
        pod="dra-driver-nvidia-gpu-kubelet-plugin-x7k2q",
        container="gpus",
        previous=True,
        text="I0501 11:00:00.000000       1 main.go:1] Traverse GPU devices\n"
        "Error: error creating driver: unable to get checkpoint: checkpoint is corrupted\n",
    )
    d = diagnose_claim(k8s.snapshot(**objs, logs=[log]), "ml", "train-gpu")
    assert d.verdict.phase is Phase.PUBLICATION
    assert d.verdict.rule == "DRA-PUB-CHECKPOINT-CORRUPTED"


def test_missing_device_class_breaks_selection(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim(class_name="gpu.example.com")]
    objs["pods"][0] = k8s.pod(node=None, state="pending")
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.SELECTION
    assert d.verdict.rule == "DRA-SEL-CLASS-NOT-FOUND"
    assert statuses(d)[Phase.PREPARE] is PhaseStatus.NOT_REACHED


def test_selector_matching_nothing_breaks_selection_before_allocation(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [
        k8s.claim(
            selectors=["device.attributes['gpu.nvidia.com'].productName == 'NONEXISTENT-GPU-XYZ'"]
        )
    ]
    message = (
        "0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't match Pod's "
        "node affinity/selector. still not schedulable, preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    )
    objs["pods"][0] = k8s.pod(node=None, state="pending", unschedulable_message=message)
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.SELECTION
    assert d.verdict.rule == "DRA-SEL-NO-MATCH"
    # The later allocation symptom is shown but does not outrank selection.
    assert statuses(d)[Phase.ALLOCATION] is PhaseStatus.BROKEN


def test_unschedulable_pod_breaks_allocation_with_per_node_breakdown(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim()]
    message = "0/2 nodes are available: 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
    objs["pods"][0] = k8s.pod(node=None, state="pending", unschedulable_message=message)
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.ALLOCATION
    details = " ".join(
        f.detail for p in d.phases if p.phase is Phase.ALLOCATION for f in p.findings
    )
    assert "2 node(s): node(s) had untolerated taint" in details


def test_pending_pod_without_scheduler_verdict_is_silent_rejection(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim()]
    objs["pods"][0] = k8s.pod(node=None, state="pending")
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    allocation = next(p for p in d.phases if p.phase is Phase.ALLOCATION)
    assert allocation.status is PhaseStatus.BROKEN
    assert "DRA-ALLOC-PENDING-SILENT" in [f.rule for f in allocation.findings]


def test_unallocated_claim_without_pods_is_not_reached(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim()]
    objs["pods"] = [k8s.plugin_pod()]
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK
    assert statuses(d)[Phase.ALLOCATION] is PhaseStatus.NOT_REACHED
    assert rules_of(d, Phase.ALLOCATION) == ["DRA-ALLOC-NO-CONSUMER"]


def test_pod_bound_without_reservation_breaks_allocation(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim(allocated=["gpu-0"])]
    objs["pods"][0] = k8s.pod(state="creating")
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.ALLOCATION
    assert d.verdict.rule == "DRA-ALLOC-NOT-RESERVED"


def test_pod_bound_to_node_with_unallocated_claim(k8s):
    objs = k8s.healthy_objects()
    objs["claims"] = [k8s.claim()]
    objs["pods"][0] = k8s.pod(state="creating")
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.ALLOCATION
    assert d.verdict.rule == "DRA-ALLOC-BOUND-UNALLOCATED"


def test_create_container_error_breaks_injection(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="create-error")
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.INJECTION
    assert statuses(d)[Phase.PREPARE] is PhaseStatus.OK
    finding = next(f for p in d.phases if p.phase is Phase.INJECTION for f in p.findings)
    assert (
        "CDI device ID",
        f"k8s.gpu.nvidia.com/claim={k8s.CLAIM_UID}-gpu-0",
    ) in finding.identifiers or finding.rule.startswith("DRA-INJ-")


def test_container_not_listing_claim_breaks_workload(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(container_lists_claim=False)
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.WORKLOAD
    assert d.verdict.rule == "DRA-WORK-CLAIM-NOT-REFERENCED"
    assert any(n.startswith("remediation:") for n in d.verdict.next)


def test_crashing_container_without_logs_is_unknown(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="crashloop")
    d = diagnose_claim(k8s.snapshot(**objs, unknown=(Kind.LOG,)), "ml", "train-gpu")
    assert statuses(d)[Phase.WORKLOAD] is PhaseStatus.UNKNOWN
    assert d.verdict.status is VerdictStatus.INCONCLUSIVE
    d2 = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert statuses(d2)[Phase.WORKLOAD] is PhaseStatus.WARN
    assert d2.verdict.status is VerdictStatus.OK


def test_reservation_for_a_gone_pod_breaks_unprepare(k8s):
    objs = k8s.healthy_objects()
    objs["pods"] = [k8s.plugin_pod()]
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.UNPREPARE
    assert d.verdict.rule == "DRA-UNPREP-RESERVED-FOR-GONE-POD"


def test_pod_stuck_terminating_breaks_unprepare(k8s):
    objs = k8s.healthy_objects()
    objs["pods"][0]["metadata"]["deletionTimestamp"] = "2026-05-01T11:30:00Z"
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.UNPREPARE
    assert d.verdict.rule == "DRA-UNPREP-POD-STUCK-TERMINATING"


def test_claim_deletion_stuck_on_finalizer(k8s):
    objs = k8s.healthy_objects()
    objs["claims"][0]["metadata"]["deletionTimestamp"] = "2026-05-01T11:10:00Z"
    objs["pods"] = [k8s.plugin_pod()]
    d = diagnose_claim(k8s.snapshot(**objs), "ml", "train-gpu")
    assert d.verdict.phase is Phase.UNPREPARE
    assert "DRA-UNPREP-DELETION-STUCK" in rules_of(d, Phase.UNPREPARE)


def test_prepare_blocked_by_another_claims_leftover_names_unprepare(k8s):
    """DESIGN §2: the cause lies in the other claim's release; the verdict says so."""
    other_uid = "11111111-2222-3333-4444-555555555555"
    leftover = k8s.claim(
        name="old-job-gpu",
        uid=other_uid,
        allocated=["gpu-0-mig-3g20gb-9-0"],
        reserved_for=[("old-job", "gone-pod-uid")],
    )
    target = k8s.claim(allocated=["gpu-0-mig-3g20gb-9-4"], reserved_for=[("train-0", k8s.POD_UID)])
    message = (
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
        "failed for ResourceClaim train-gpu: error preparing devices for claim "
        f"ml/train-gpu:{k8s.CLAIM_UID}: prepare devices failed: error creating MIG device: "
        "error creating GPU instance for 'gpu-0-mig-3g20gb-9-4': Insufficient Resources"
    )
    mig_devices = [
        {"name": "gpu-0-mig-3g20gb-9-0", "attributes": {"type": {"string": "mig"}}},
        {"name": "gpu-0-mig-3g20gb-9-4", "attributes": {"type": {"string": "mig"}}},
    ]
    snap = k8s.snapshot(
        slices=[k8s.resource_slice(devices=mig_devices)],
        claims=[target, leftover],
        pods=[k8s.pod(state="creating"), k8s.plugin_pod()],
        events=[k8s.event("FailedPrepareDynamicResources", message, count=8)],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    # Prepare's failure stays visible, as a symptom pointing at the cause.
    assert statuses(d)[Phase.PREPARE] is PhaseStatus.WARN
    prepare = next(p for p in d.phases if p.phase is Phase.PREPARE)
    assert prepare.findings[0].detail.startswith("Symptom of ml/old-job-gpu's unfinished Unprepare")
    assert d.verdict.phase is Phase.UNPREPARE
    assert d.verdict.rule == "DRA-UNPREP-LEAKED-STATE"
    assert "ml/old-job-gpu" in d.verdict.summary
    finding = next(f for p in d.phases for f in p.findings if f.rule == d.verdict.rule)
    assert ("claim UID", other_uid) in finding.identifiers


def test_partially_prepared_gone_claim_in_plugin_log_is_the_cause(k8s):
    gone_uid = "00aac82a-2a6f-5041-8403-30bd65547b48"
    message = (
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
        "failed for ResourceClaim train-gpu: error preparing devices for claim "
        f"ml/train-gpu:{k8s.CLAIM_UID}: prepare devices failed: error creating MIG device: "
        "error creating GPU instance for 'gpu-2-mig-4g95gb-5-0': Insufficient Resources"
    )
    log = ContainerLog(
        namespace="dra-driver-nvidia-gpu",
        pod="dra-driver-nvidia-gpu-kubelet-plugin-x7k2q",
        container="gpus",
        text="I0402 07:40:00.316365       1 device_state.go:771] unprepare noop: preparation "
        "started but not completed for claim ml/old-mig-claim:"
        f"{gone_uid} (devices: [gpu-2-mig-4g95gb-5-0])\n",
    )
    snap = k8s.snapshot(
        slices=[k8s.resource_slice(devices=[{"name": "gpu-2-mig-4g95gb-5-0"}])],
        claims=[
            k8s.claim(allocated=["gpu-2-mig-4g95gb-5-0"], reserved_for=[("train-0", k8s.POD_UID)])
        ],
        pods=[k8s.pod(state="creating"), k8s.plugin_pod()],
        events=[k8s.event("FailedPrepareDynamicResources", message)],
        logs=[log],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert (d.verdict.phase, d.verdict.rule) == (Phase.UNPREPARE, "DRA-UNPREP-LEAKED-STATE")
    finding = next(f for p in d.phases for f in p.findings if f.rule == d.verdict.rule)
    assert ("claim", "ml/old-mig-claim") in finding.identifiers
    assert any(e.source.value == "log" and gone_uid in e.excerpt for e in finding.evidence)


def test_pod_diagnosis_synthesizes_a_claim_not_created_yet(k8s):
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}
            }
        },
    }
    p = k8s.pod(template_name="one-gpu", node=None, state="pending")
    snap = k8s.snapshot(templates=[template], pods=[p, k8s.plugin_pod()])
    [d] = diagnose_pod(snap, "ml", "train-0")
    assert d.target.synthesized
    assert d.target.name == "train-0-gpu-"
    assert d.verdict.phase is Phase.ALLOCATION
    assert d.verdict.rule == "DRA-ALLOC-CLAIM-NOT-FOUND"


@pytest.mark.parametrize("templates_read", [True, False])
def test_the_controllers_claim_creation_event_settles_a_missing_template(k8s, templates_read):
    """With templates unread, a missing one "may exist" (inconclusive) — unless the pod's
    own FailedResourceClaimCreation event says it was not found: that settles it (was
    inconclusive, kubernetes/kubernetes#129362)."""
    p = k8s.pod(template_name="one-gpu", node=None, state="pending")
    message = (
        'PodResourceClaim gpu: resource claim template "one-gpu": '
        'resourceclaimtemplate.resource.k8s.io "one-gpu" not found'
    )
    snap = k8s.snapshot(
        pods=[p],
        events=[k8s.event("FailedResourceClaimCreation", message, count=13)],
        unknown=() if templates_read else (Kind.RESOURCE_CLAIM_TEMPLATE,),
    )
    [d] = diagnose_pod(snap, "ml", "train-0")
    assert d.verdict.status is VerdictStatus.BROKEN
    assert (d.verdict.phase, d.verdict.rule) == (Phase.SELECTION, "DRA-SEL-CLAIM-CREATION-FAILED")
    rules = [f.rule for ph in d.phases for f in ph.findings]
    assert "DRA-ALLOC-NOT-COLLECTED" not in rules
    assert "kubectl describe pod -n ml train-0" in d.verdict.next


def test_a_creation_failure_of_another_pod_claim_leaves_this_one_inconclusive(k8s):
    p = k8s.pod(template_name="one-gpu", node=None, state="pending")
    other = 'PodResourceClaim nic: resource claim template "nic": ... "nic" not found'
    snap = k8s.snapshot(
        pods=[p],
        events=[k8s.event("FailedResourceClaimCreation", other)],
        unknown=(Kind.RESOURCE_CLAIM_TEMPLATE,),
    )
    [d] = diagnose_pod(snap, "ml", "train-0")
    rules = [f.rule for ph in d.phases for f in ph.findings]
    assert "DRA-ALLOC-NOT-COLLECTED" in rules and "DRA-SEL-CLAIM-CREATION-FAILED" in rules


def test_scan_lists_unhealthy_claims_and_nodes_sorted_by_phase(k8s):
    healthy = k8s.healthy_objects()
    broken_claim = k8s.claim(
        name="b", uid="u-b", allocated=["gpu-0"], node="gpu-node-2", reserved_for=[("b-0", "pod-b")]
    )
    broken_pod = k8s.pod(
        name="b-0", uid="pod-b", claim_name="b", node="gpu-node-2", container_lists_claim=False
    )
    snap = k8s.snapshot(
        slices=[*healthy["slices"], k8s.resource_slice(node="gpu-node-2")],
        claims=[*healthy["claims"], broken_claim],
        pods=[
            *healthy["pods"],
            broken_pod,
            k8s.plugin_pod("gpu-node-3", gpus_state="crashloop", restarts=3),
            k8s.plugin_pod("gpu-node-2"),
        ],
    )
    items = scan(snap)
    targets = [(d.target.kind, d.target.name, d.verdict.phase) for d in items]
    assert ("Node", "gpu-node-3", Phase.PUBLICATION) in targets
    assert ("ResourceClaim", "b", Phase.WORKLOAD) in targets
    assert all(name != "train-gpu" for _k, name, _p in targets)
    phases = [list(Phase).index(p) for _k, _n, p in targets]
    assert phases == sorted(phases)
    assert [d.target.name for d in scan(snap, namespace="other")] == ["gpu-node-3"]


def test_decompose_fit_error():
    message = (
        "0/5 nodes are available: 3 cannot allocate all claims, 2 node(s) didn't match Pod's "
        "node affinity/selector. still not schedulable, preemption: 0/5 nodes are available: "
        "5 Preemption is not helpful for scheduling."
    )
    assert decompose_fit_error(message) == [
        (3, "cannot allocate all claims"),
        (2, "node(s) didn't match Pod's node affinity/selector"),
    ]
    assert decompose_fit_error("running PreBind plugin: boom") == []


IN_FLIGHT = (
    "0/3 nodes are available: resource claim ml/train-gpu is in the process of being allocated."
)


@pytest.mark.parametrize(
    ("count", "last", "expected"),
    [
        (2, "2026-05-01T11:01:02Z", Severity.INFO),  # seconds: the first pod's allocation
        (2, "2026-05-01T11:30:00Z", Severity.ERROR),  # half an hour: stuck
        (5000, "2026-05-01T11:01:30Z", Severity.ERROR),  # a retry loop, whatever the span
    ],
)
def test_an_allocation_in_flight_that_lasts_is_an_error(k8s, count, last, expected):
    p = k8s.pod(node=None, state="pending", unschedulable_message=IN_FLIGHT)
    claim = k8s.claim()
    snap = k8s.snapshot(
        claims=[claim],
        pods=[p],
        events=[k8s.event("FailedScheduling", IN_FLIGHT, count=count, last=last)],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    [f] = [f for ph in d.phases for f in ph.findings if f.rule == "DRA-ALLOC-ALLOCATION-IN-FLIGHT"]
    assert f.severity is expected
    if expected is Severity.ERROR:
        assert f"({count} times)" in f.detail and "gang" not in f.detail
