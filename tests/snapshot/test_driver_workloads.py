"""What ties a claim to the driver's per-claim workloads (snapshot/driver_workloads)."""

from __future__ import annotations

from dradiag.snapshot.driver_workloads import compute_domain_ids


def test_compute_domain_ids_read_from_spec_and_allocation_config():
    def cfg(domain, driver="compute-domain.nvidia.com"):
        return {"opaque": {"driver": driver, "parameters": {"domainID": domain}}}

    claim = {
        "spec": {"devices": {"config": [cfg("d-1"), cfg("x", driver="gpu.nvidia.com"), "junk"]}},
        "status": {"allocation": {"devices": {"config": [cfg("d-1"), cfg("d-2")]}}},
    }
    assert compute_domain_ids(claim) == ["d-1", "d-2"]
    assert compute_domain_ids({"spec": {"devices": {"config": [{"opaque": []}]}}}) == []
