"""Pod → claim resolution (k8s-dra-semantics §6), including the not-created-yet window."""

from __future__ import annotations

from dradiag.diagnosis.resolve import (
    POD_CLAIM_NAME_ANNOTATION,
    Resolution,
    is_synthesized,
    pod_claim_names_for,
    resolve_pod_claims,
)

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "ml", "uid": "tpl"},
    "spec": {
        "metadata": {"labels": {"team": "ml"}},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    },
}


def _generated(k8s, name="train-0-gpu-x7k2p", owner_uid=None):
    claim = k8s.claim(name=name)
    claim["metadata"]["annotations"] = {POD_CLAIM_NAME_ANNOTATION: "gpu"}
    claim["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "train-0",
            "uid": owner_uid or k8s.POD_UID,
            "controller": True,
        }
    ]
    return claim


def test_direct_claim_name(k8s):
    snap = k8s.snapshot(claims=[k8s.claim()], pods=[k8s.pod()])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert (pc.resolution, pc.claim_name, pc.synthesized) == (
        Resolution.CLAIM_NAME,
        "train-gpu",
        False,
    )
    assert pod_claim_names_for(snap, snap.pod("ml", "train-0"), pc.claim) == ["gpu"]


def test_direct_claim_missing_is_unresolved(k8s):
    snap = k8s.snapshot(pods=[k8s.pod()])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert pc.resolution is Resolution.UNRESOLVED and pc.claim is None
    assert "not in the snapshot" in pc.note


def test_template_claim_via_pod_status(k8s):
    pod = k8s.pod(template_name="one-gpu")
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2p"}
    ]
    snap = k8s.snapshot(claims=[_generated(k8s)], templates=[TEMPLATE], pods=[pod])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert (pc.resolution, pc.claim_name, pc.note) == (
        Resolution.POD_STATUS,
        "train-0-gpu-x7k2p",
        "",
    )


def test_template_claim_not_owned_by_pod_is_noted(k8s):
    pod = k8s.pod(template_name="one-gpu")
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2p"}
    ]
    snap = k8s.snapshot(claims=[_generated(k8s, owner_uid="someone-else")], pods=[pod])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert "Pod is not owner" in pc.note


def test_orphan_window_found_by_owner_and_annotation(k8s):
    pod = k8s.pod(template_name="one-gpu")
    snap = k8s.snapshot(
        claims=[_generated(k8s), _generated(k8s, name="other", owner_uid="x")],
        templates=[TEMPLATE],
        pods=[pod],
    )
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert (pc.resolution, pc.claim_name) == (Resolution.OWNER_ANNOTATION, "train-0-gpu-x7k2p")


def test_not_created_yet_is_synthesized_from_the_template(k8s):
    snap = k8s.snapshot(templates=[TEMPLATE], pods=[k8s.pod(template_name="one-gpu")])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert pc.resolution is Resolution.NOT_CREATED and pc.synthesized
    claim = pc.claim
    assert is_synthesized(claim)
    assert claim["metadata"]["generateName"] == "train-0-gpu-"
    assert claim["metadata"]["labels"] == {"team": "ml"}
    assert claim["metadata"]["ownerReferences"][0]["uid"] == k8s.POD_UID
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert claim["status"] == {}


def test_template_missing_and_no_claim_needed(k8s):
    pod = k8s.pod(template_name="gone-template")
    snap = k8s.snapshot(pods=[pod])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert pc.resolution is Resolution.UNRESOLVED and "gone-template" in pc.note
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu"}]
    snap = k8s.snapshot(pods=[pod])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert pc.resolution is Resolution.NOT_NEEDED and pc.claim is None


def test_extended_resource_claim_resolves_without_a_pod_claim_name(k8s):
    """DRAExtendedResource: the pod names its generated claim only in its status."""
    claim = k8s.claim(name="train-0-extended-resources-x7k2p")
    pod = k8s.pod(claim_name=None)
    pod["spec"]["resourceClaims"] = []
    pod["spec"]["containers"][0].pop("resources", None)
    pod["status"]["extendedResourceClaimStatus"] = {
        "resourceClaimName": "train-0-extended-resources-x7k2p",
        "requestMappings": [
            {"containerName": "trainer", "requestName": "gpu", "resourceName": "nvidia.com/gpu"}
        ],
    }
    snap = k8s.snapshot(claims=[claim], pods=[pod])
    [pc] = resolve_pod_claims(snap, snap.pod("ml", "train-0"))
    assert pc.resolution is Resolution.EXTENDED_RESOURCE
    assert pc.claim is snap.claim("ml", "train-0-extended-resources-x7k2p")
    # No container lists it by a pod claim name: the wiring check must not read it as unused.
    assert pod_claim_names_for(snap, snap.pod("ml", "train-0"), pc.claim) == []
    assert snap.pods_for_claim(pc.claim) == [snap.pod("ml", "train-0")]
