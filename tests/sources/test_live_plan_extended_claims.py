"""A pod whose only claim is the one generated for its extended resources is a claim user.

Such a pod names its claim in ``status.extendedResourceClaimStatus.resourceClaimName``
only (no ``spec.resourceClaims``): whole-cluster reads (``scan -A``, ``bundle -A``) that
keep "pods using claims" must keep it, or its claim reads as reserved for a gone pod.
"""

from __future__ import annotations

from dradiag.sources.live_plan import pod_claim_names, pod_uses_claims

EXTENDED = {
    "kind": "Pod",
    "metadata": {"name": "job-0", "namespace": "ml"},
    "spec": {"containers": [{"name": "main"}]},
    "status": {
        "extendedResourceClaimStatus": {
            "resourceClaimName": "job-0-extended-resources-abcde",
            "requestMappings": [{"containerName": "main", "requestName": "container-0-request-0"}],
        }
    },
}


def test_an_extended_resource_pod_uses_its_generated_claim() -> None:
    assert pod_uses_claims(EXTENDED)
    assert pod_claim_names(EXTENDED) == {"job-0-extended-resources-abcde"}


def test_a_pod_without_claims_is_not_kept() -> None:
    plain = {**EXTENDED, "status": {"phase": "Running"}}
    assert not pod_uses_claims(plain)
    assert pod_claim_names(plain) == set()
