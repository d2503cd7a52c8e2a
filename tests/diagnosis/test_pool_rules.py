"""Publication judges pools by the cluster's allocator: per slice before 1.35, per pool after."""

from __future__ import annotations

from dradiag.diagnosis.phases.publication import pool_findings, pool_rules
from dradiag.snapshot.model import Kind, Snapshot, SourceInfo

COUNTERS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-h-gpu.nvidia.com-counters"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-h",
        "pool": {"name": "node-h", "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [
            {"name": "gpu-0-counter-set", "counters": {"memory": {"value": "80Gi"}}}
        ],
    },
}
DEVICES = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-h-gpu.nvidia.com-devices"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-h",
        "pool": {"name": "node-h", "generation": 1, "resourceSliceCount": 2},
        "devices": [
            {
                "name": "gpu-0-mig-1g10gb-19-0",
                "attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.10gb"}},
                "capacity": {"memory": {"value": "10Gi"}},
                "consumesCounters": [
                    {"counterSet": "gpu-0-counter-set", "counters": {"memory": {"value": "10Gi"}}}
                ],
            }
        ],
    },
}


def _snapshot(version: str) -> Snapshot:
    return Snapshot(
        objects={Kind.RESOURCE_SLICE: [COUNTERS, DEVICES]},
        source=SourceInfo(server_version=version),
    )


def test_split_counter_slices_are_valid_from_1_35():
    snap = _snapshot("1.35")
    assert pool_rules(snap).legacy is False
    assert pool_findings(snap, [("gpu.nvidia.com", "node-h")], blocking=True) == []


def test_split_counter_slices_are_invalid_on_1_34():
    snap = _snapshot("1.34")
    rules = pool_rules(snap)
    # The stored counters prove DRAPartitionableDevices on; 1.34 checks counters per slice.
    assert rules.partitionable and rules.legacy
    (finding,) = pool_findings(snap, [("gpu.nvidia.com", "node-h")], blocking=True)
    # One rule covers incomplete and invalid pools (rules/publication.yaml).
    assert finding.rule == "DRA-PUB-POOL-INCOMPLETE"
    assert "counter set gpu-0-counter-set not found" in finding.detail
    assert "invalid pool" in finding.detail
