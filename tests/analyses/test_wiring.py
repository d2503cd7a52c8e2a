"""Claim ↔ container wiring and reservedFor consistency (k8s-dra-semantics §5.2, §5.3)."""

from __future__ import annotations

from dradiag.analyses.wiring import (
    analyze_pod_wiring,
    claim_request_names,
    is_reserved_for,
    reservation_finding,
    wiring_findings,
)

CLAIM = {
    "metadata": {"name": "train-gpu", "namespace": "ml", "uid": "c-1"},
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                {
                    "name": "mig",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "mig.nvidia.com"},
                        {"name": "small", "deviceClassName": "mig.nvidia.com"},
                    ],
                },
            ]
        }
    },
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "p-1"}],
    },
}


def _pod(containers, init=(), uid="p-1", node="n1"):
    return {
        "metadata": {"name": "train-0", "namespace": "ml", "uid": uid},
        "spec": {
            "nodeName": node,
            "containers": list(containers),
            "initContainers": list(init),
            "resourceClaims": [{"name": "gpus", "resourceClaimName": "train-gpu"}],
        },
    }


def _c(name, *claims):
    return (
        {"name": name, "resources": {"claims": [dict(c) for c in claims]}}
        if claims
        else {"name": name}
    )


def test_request_names_include_subrequests():
    assert claim_request_names(CLAIM) == ("gpu", "mig", "mig/big", "mig/small")


def test_one_wired_container_is_enough():
    pod = _pod([_c("trainer", {"name": "gpus"}), _c("sidecar")])
    wiring = analyze_pod_wiring(pod, CLAIM, ["gpus"])
    assert wiring.wired
    assert [u.container for u in wiring.using] == ["trainer"]
    assert wiring.not_using == ("sidecar",)
    assert wiring_findings(wiring, CLAIM) == []


def test_no_container_lists_the_claim():
    pod = _pod([_c("trainer", {"name": "other"})], init=[_c("setup")])
    wiring = analyze_pod_wiring(pod, CLAIM, ["gpus"])
    assert not wiring.wired
    [finding] = wiring_findings(wiring, CLAIM)
    assert finding.rule == "DRA-WORK-CLAIM-NOT-REFERENCED"
    assert "'gpus'" in finding.detail and "trainer" in finding.detail
    assert any(n.startswith("remediation:") for n in finding.next)


def test_init_container_use_counts_as_wired():
    pod = _pod([_c("trainer")], init=[_c("warmup", {"name": "gpus"})])
    assert analyze_pod_wiring(pod, CLAIM, ["gpus"]).wired


def test_wrong_request_name():
    pod = _pod(
        [
            _c("trainer", {"name": "gpus", "request": "gpu0"}),
            _c("helper", {"name": "gpus", "request": "mig"}),
        ]
    )
    wiring = analyze_pod_wiring(pod, CLAIM, ["gpus"])
    assert wiring.unknown_requests == (("trainer", "gpu0"),)
    [finding] = wiring_findings(wiring, CLAIM)
    assert finding.rule == "DRA-WORK-WRONG-REQUEST"
    assert ("request", "gpu0") in finding.identifiers


def test_reserved_for_pod_by_uid_not_by_name():
    assert is_reserved_for(CLAIM, _pod([]))
    assert not is_reserved_for(CLAIM, _pod([], uid="p-2"))  # same name, recreated pod


def test_reservation_finding_only_for_a_bound_unreserved_pod():
    assert reservation_finding(CLAIM, _pod([])) is None
    assert reservation_finding(CLAIM, _pod([], uid="p-2", node=None)) is None
    finding = reservation_finding(CLAIM, _pod([], uid="p-2"))
    assert finding is not None and finding.rule == "DRA-ALLOC-NOT-RESERVED"
    assert ("pod UID", "p-2") in finding.identifiers and ("claim UID", "c-1") in finding.identifiers
    unallocated = {**CLAIM, "status": {}}
    assert reservation_finding(unallocated, _pod([], uid="p-2")) is None


def _extended_pod(request_name: str, claim_name: str = "train-gpu") -> dict:
    """A pod whose container asks for an extended resource served by a generated claim."""
    return {
        "metadata": {"name": "train-0", "namespace": "ml", "uid": "p-1"},
        "spec": {
            "containers": [{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
        },
        "status": {
            "extendedResourceClaimStatus": {
                "resourceClaimName": claim_name,
                "requestMappings": [
                    {
                        "containerName": "trainer",
                        "requestName": request_name,
                        "resourceName": "nvidia.com/gpu",
                    }
                ],
            }
        },
    }


def test_extended_resource_mapping_to_a_missing_request_is_reported():
    from dradiag.analyses.wiring import extended_resource_findings

    findings = extended_resource_findings(_extended_pod("container-0-request-0"), CLAIM)
    assert [f.rule for f in findings] == ["DRA-WORK-WRONG-REQUEST"]
    assert "container-0-request-0" in findings[0].detail and "'gpu'" in findings[0].detail


def test_extended_resource_mapping_to_an_existing_request_or_another_claim_is_fine():
    from dradiag.analyses.wiring import extended_resource_findings, extended_resource_mappings

    assert extended_resource_findings(_extended_pod("gpu"), CLAIM) == []
    other = _extended_pod("container-0-request-0", claim_name="someone-else")
    assert extended_resource_mappings(other, CLAIM) == []
    assert extended_resource_findings(other, CLAIM) == []
