"""Reasoning from partial evidence (issue 11): what later stages prove, how evidence is tied
to a claim, component logs without a pod, the innermost cause of a wrapped error.

Each test builds the evidence a user really has (a claim, a pod, one event, a pasted log)
and checks the verdict and the basis the engine gives it.
"""

from __future__ import annotations

import copy

import pytest

from dradiag.analyses.double_publication import double_published
from dradiag.analyses.error_chain import clip_middle, innermost_error
from dradiag.diagnosis.build import diagnose_claim
from dradiag.diagnosis.links import claim_links, generated_for, message_names_claim
from dradiag.diagnosis.model import VerdictStatus
from dradiag.render.document import collection_of, diagnosis_document
from dradiag.snapshot.model import ContainerLog, Kind, mentioned_names
from dradiag.vocabulary import Basis, Phase, PhaseStatus

PREPARE_MESSAGE = (
    "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources "
    "failed for claim ml/train-gpu: error preparing devices for claim "
    "3c8337ad-f366-4541-883d-30b9e99fd6be: prepare devices failed: error applying GPU "
    "config: MIG profile 3g.40gb is not supported on device GPU-1234"
)


def phase(diagnosis, which: Phase):
    return next(p for p in diagnosis.phases if p.phase is which)


# -- the error chain ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        (PREPARE_MESSAGE, "MIG profile 3g.40gb is not supported on device GPU-1234"),
        # A last link that is only a value is read with the link before it.
        (
            "rpc error: code = Unknown desc = error preparing devices: unable to create GPU "
            "instance: Insufficient Resources",
            "unable to create GPU instance: Insufficient Resources",
        ),
        ("context deadline exceeded", "context deadline exceeded"),
        ("", ""),
    ],
)
def test_innermost_error_is_the_last_link_of_the_chain(message: str, cause: str) -> None:
    assert innermost_error(message) == cause


def test_clip_middle_keeps_the_end_where_the_cause_is() -> None:
    clipped = clip_middle(PREPARE_MESSAGE, 120)
    assert len(clipped) <= 120
    assert clipped.endswith("on device GPU-1234")
    assert clipped.startswith("Failed to prepare")
    assert clip_middle("short", 120) == "short"


# -- naming a claim in a message ------------------------------------------------------------


def test_mentioned_names_reads_uids_keys_and_labelled_names() -> None:
    found = list(mentioned_names(PREPARE_MESSAGE + '; resourceclaim "other" not found'))
    assert "ml/train-gpu" in found and "train-gpu" in found
    assert "3c8337ad-f366-4541-883d-30b9e99fd6be" in found
    assert "other" in found


def test_a_bare_name_counts_only_labelled_or_quoted_and_in_its_namespace(k8s) -> None:
    claim = k8s.claim()
    assert message_names_claim("claim train-gpu: boom", claim, "ml") == "name"
    assert message_names_claim('resourceclaim "train-gpu" not found', claim, "ml") == "name"
    # The same words in another namespace, or unlabelled, name nothing.
    assert message_names_claim("claim train-gpu: boom", claim, "other") is None
    assert message_names_claim("pod train-gpu-0 started", claim, "ml") is None
    assert message_names_claim("for ml/train-gpu: x", claim, "other") == "ns/name"


# -- linking -----------------------------------------------------------------------------------


def test_an_event_naming_the_claim_is_its_evidence_without_the_pod(k8s) -> None:
    # The user pasted the claim and one kubelet event; the pod object is not in the input.
    event = k8s.event("FailedPrepareDynamicResources", PREPARE_MESSAGE)
    claim = k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
    snap = k8s.snapshot(claims=[claim], events=[event])
    links = claim_links(snap, snap.claim("ml", "train-gpu"))
    assert [(link.pod_key, link.via) for link in links.mentioned_by] == [
        ("ml/train-0", "its message names the claim (UID)")
    ]
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE
    assert "MIG profile 3g.40gb is not supported" in d.verdict.summary
    assert ("Event ml/" + event["metadata"]["name"], "its message names the claim (UID)") in (
        d.target.links
    )


def test_an_event_naming_the_claim_ties_the_pod_it_is_about(k8s) -> None:
    # The pod's spec was pasted without resourceClaims; the event about it names the claim.
    pod = k8s.pod(state="creating", claim_name=None)
    event = k8s.event("FailedPrepareDynamicResources", PREPARE_MESSAGE)
    snap = k8s.snapshot(claims=[k8s.claim()], pods=[pod], events=[event])
    links = claim_links(snap, snap.claim("ml", "train-gpu"))
    assert [(p["metadata"]["name"], via) for p, via in links.pods] == [
        ("train-0", f"Event ml/{event['metadata']['name']} names the claim")
    ]


def test_a_generated_claim_is_tied_by_annotation_and_name(k8s) -> None:
    pod = k8s.pod(name="trainer-0", claim_name=None, template_name="gpu-template")
    claim = k8s.claim(name="trainer-0-gpu-7xk2p")
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert generated_for(claim, pod)
    other = copy.deepcopy(claim)
    other["metadata"]["name"] = "someone-else-gpu-7xk2p"
    assert not generated_for(other, pod)


# -- what later stages prove -------------------------------------------------------------------


def test_a_claim_given_without_status_is_proven_allocated_by_the_kubelet(k8s) -> None:
    claim = k8s.claim()
    del claim["status"]  # pasted from the manifest the user applied
    pod = k8s.pod(state="creating")
    event = k8s.event("FailedPrepareDynamicResources", PREPARE_MESSAGE)
    snap = k8s.snapshot(
        claims=[claim],
        pods=[pod],
        events=[event],
        unknown=(Kind.RESOURCE_SLICE, Kind.DEVICE_CLASS),
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.BROKEN and d.verdict.phase is Phase.PREPARE
    for earlier in (Phase.PUBLICATION, Phase.SELECTION, Phase.ALLOCATION):
        result = phase(d, earlier)
        assert result.status in (PhaseStatus.OK, PhaseStatus.WARN), earlier
        assert result.basis is Basis.INFERRED, earlier
        assert "FailedPrepareDynamicResources" in result.basis_detail, earlier


def test_a_claim_without_status_and_no_later_evidence_is_unknown_not_broken(k8s) -> None:
    claim = k8s.claim()
    del claim["status"]
    snap = k8s.snapshot(claims=[claim], pods=[k8s.pod(state="creating")])
    d = diagnose_claim(snap, "ml", "train-gpu")
    alloc = phase(d, Phase.ALLOCATION)
    # Not "bound but unallocated": the status was simply not given.
    assert alloc.status is PhaseStatus.UNKNOWN and alloc.basis is Basis.UNKNOWN
    assert "without .status" in alloc.basis_detail
    assert d.verdict.status is not VerdictStatus.OK


def test_slices_listed_empty_live_and_missing_offline_give_one_verdict(k8s) -> None:
    # An allocated, running claim: publication happened; slices gone now are a warning
    # about the driver, whether the list came back empty or was never read.
    objs = k8s.healthy_objects()
    empty = k8s.snapshot(**{**objs, "slices": []})
    missing = k8s.snapshot(**objs, unknown=(Kind.RESOURCE_SLICE,))
    verdicts = {
        name: diagnose_claim(snap, "ml", "train-gpu").verdict
        for name, snap in (("empty", empty), ("missing", missing))
    }
    assert {v.status for v in verdicts.values()} == {VerdictStatus.OK}
    pub = phase(diagnose_claim(empty, "ml", "train-gpu"), Phase.PUBLICATION)
    assert pub.status is PhaseStatus.WARN and pub.basis is Basis.CHECKED


def test_every_phase_carries_its_basis_in_the_document(k8s) -> None:
    snap = k8s.snapshot(**k8s.healthy_objects(), unknown=(Kind.RESOURCE_SLICE,))
    doc = diagnosis_document(
        diagnose_claim(snap, "ml", "train-gpu"), snap.source, collection_of(snap)
    )
    kinds = {p["id"]: p["basis"]["kind"] for p in doc["phases"]}
    assert kinds["publication"] == "inferred"
    assert kinds["allocation"] == "checked"
    assert set(kinds.values()) <= {"checked", "inferred", "unknown"}


# -- component logs ----------------------------------------------------------------------------


def _kubelet_log(line: str) -> ContainerLog:
    return ContainerLog(
        namespace=None,
        pod="",
        container="kubelet",
        component="kubelet",
        text=line + "\n",
        source="kubelet.log",
    )


KUBELET_LINE = (
    'E0501 11:59:00.1 1 dra_manager.go:201] "Failed to prepare dynamic resources" '
    'err="NodePrepareResources failed for claim ml/train-gpu: error applying GPU config: '
    'timed out waiting for MPS control daemon to start" pod="ml/train-0"'
)


def test_a_kubelet_log_line_naming_the_claim_decides_prepare(k8s) -> None:
    snap = k8s.snapshot(
        claims=[k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])],
        pods=[k8s.pod(state="creating")],
        logs=[_kubelet_log(KUBELET_LINE)],
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.phase is Phase.PREPARE
    assert "timed out waiting for MPS control daemon to start" in d.verdict.summary
    deciding = next(f for f in phase(d, Phase.PREPARE).findings if f.rule == d.verdict.rule)
    assert deciding.evidence[0].ref == "log kubelet.log:1"


def test_a_kubelet_line_about_another_claim_is_not_this_claims_evidence(k8s) -> None:
    mine = k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
    other = k8s.claim(name="other-gpu", uid="00000000-0000-4000-8000-000000000001")
    line = KUBELET_LINE.replace("ml/train-gpu", "ml/other-gpu")
    snap = k8s.snapshot(
        claims=[mine, other], pods=[k8s.pod(state="running")], logs=[_kubelet_log(line)]
    )
    d = diagnose_claim(snap, "ml", "train-gpu")
    assert d.verdict.status is VerdictStatus.OK


# -- double publication --------------------------------------------------------------------


def _mig(name: str, parent: str, counters: bool) -> dict:
    dev = {
        "name": name,
        "attributes": {"type": {"string": "mig"}, "parentUUID": {"string": parent}},
    }
    if counters:
        dev["consumesCounters"] = [{"counterSet": "gpu-0-counter-set", "counters": {}}]
    return dev


def test_a_gpu_published_whole_and_as_mig_without_counters_is_found(k8s) -> None:
    gpu = k8s.gpu_device(0)
    static = k8s.resource_slice(devices=[gpu, _mig("gpu-0-mig-9-0-2", k8s.GPU_UUID, False)])
    found = double_published([static])
    assert [(p.gpu, p.migs) for p in found] == [("gpu-0", ("gpu-0-mig-9-0-2",))]
    # Dynamic MIG ties the GPU and its MIG devices by one counter set: exclusive.
    tied = copy.deepcopy(gpu)
    tied["consumesCounters"] = [{"counterSet": "gpu-0-counter-set", "counters": {}}]
    dynamic = k8s.resource_slice(devices=[tied, _mig("gpu-0-mig-1g10gb-0-0", k8s.GPU_UUID, True)])
    assert double_published([dynamic]) == []


def test_scan_ties_component_log_lines_as_claim_does(k8s) -> None:
    # A scan matches the component logs once and hands each claim the lines about it.
    from dradiag.diagnosis.build import scan

    mine = k8s.claim(allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)])
    other = k8s.claim(name="other-gpu", uid="00000000-0000-4000-8000-000000000001")
    snap = k8s.snapshot(
        claims=[mine, other], pods=[k8s.pod(state="creating")], logs=[_kubelet_log(KUBELET_LINE)]
    )
    alone = diagnose_claim(snap, "ml", "train-gpu").verdict
    rows = {d.target.name: d.verdict for d in scan(snap) if d.target.kind == "ResourceClaim"}
    assert alone.phase is Phase.PREPARE
    assert (rows["train-gpu"].phase, rows["train-gpu"].rule) == (alone.phase, alone.rule)
    assert rows.get("other-gpu") is None or rows["other-gpu"].rule != alone.rule


def test_a_generated_claim_of_a_long_pod_name_is_tied_through_the_cut_name(k8s) -> None:
    # The controller cuts "<pod>-<pod claim>" at 57 characters before the random suffix.
    pod_name = "a" * 60
    pod = k8s.pod(name=pod_name, claim_name=None, template_name="gpu-template")
    pod_claim = pod["spec"]["resourceClaims"][0]["name"]
    claim = k8s.claim(name=f"{pod_name}-{pod_claim}"[:57] + "-x7k2p")
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": pod_claim}
    snap = k8s.snapshot(claims=[claim], pods=[pod])
    links = claim_links(snap, snap.claim("ml", claim["metadata"]["name"]))
    assert [(p["metadata"]["name"], via) for p, via in links.pods] == [
        (pod_name, "annotation resource.kubernetes.io/pod-claim-name and the generated name")
    ]
