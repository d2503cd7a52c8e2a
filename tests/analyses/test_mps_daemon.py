"""The MPS control daemon of a claim: found by the claim UID in its name, judged by status."""

from __future__ import annotations

from typing import Any

from dradiag.analyses.mps_daemon import claim_daemons, daemon_down, first_down, mps_requests
from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot, name_of

UID = "3b1f6c2e-8d4a-4f7b-9e21-5c0d7a9b8e64"
OTHER = "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


def _deployment(name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "dra-driver-nvidia-gpu"},
        "status": status,
    }


def _cond(ctype: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": ctype, "status": status, "reason": reason, "message": message}


def _claim(*configs: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"devices": {"config": list(configs)}}}


def _opaque(strategy: str, driver: str = "gpu.nvidia.com", **extra: Any) -> dict[str, Any]:
    params = {"kind": "GpuConfig", "sharing": {"strategy": strategy}}
    return {"opaque": {"driver": driver, "parameters": params}, **extra}


def test_mps_requests_reads_only_the_nvidia_drivers_mps_configs():
    assert mps_requests(_claim(_opaque("MPS", requests=["a", "b"]))) == ["a", "b"]
    assert mps_requests(_claim(_opaque("MPS"))) == ["*"]
    assert mps_requests(_claim(_opaque("TimeSlicing", requests=["a"]))) == []
    assert mps_requests(_claim(_opaque("MPS", driver="example.com", requests=["a"]))) == []
    assert mps_requests({"spec": {"devices": {"config": ["junk", {"opaque": "x"}]}}}) == []


def test_daemons_are_indexed_by_the_claim_uid_their_name_carries():
    mine = _deployment(f"mps-control-daemon-{UID}-5d2c1")
    theirs = _deployment(f"mps-control-daemon-{OTHER}-aaaaa")
    named_elsewise = _deployment(f"backup-{UID}")
    snap = Snapshot(
        objects={Kind.DEPLOYMENT: [mine, theirs, named_elsewise]},
        coverage={Kind.DEPLOYMENT: KindRecord(kind=Kind.DEPLOYMENT, coverage=Coverage.COLLECTED)},
    )
    assert [name_of(d) for d in snap.deployments_for_claim(UID)] == [
        name_of(mine),
        name_of(named_elsewise),
    ]
    assert [name_of(d) for d in claim_daemons(snap, UID)] == [name_of(mine)]
    assert claim_daemons(snap, "") == []
    assert Snapshot(objects={}).coverage[Kind.DEPLOYMENT].coverage is Coverage.UNKNOWN


def test_replica_failure_is_the_cause_and_wins_over_unavailability():
    refused = _deployment(
        "d1",
        unavailableReplicas=1,
        conditions=[
            _cond("Available", "False", "MinimumReplicasUnavailable", "no minimum"),
            _cond("ReplicaFailure", "True", "FailedCreate", 'pods "x" is forbidden: quota'),
        ],
    )
    down = daemon_down(refused)
    assert down is not None and (down.condition, down.reason) == ("ReplicaFailure", "FailedCreate")
    assert down.message == 'pods "x" is forbidden: quota'
    waiting = _deployment(
        "d0", unavailableReplicas=1, conditions=[_cond("Available", "False", "R", "no minimum")]
    )
    found = first_down([waiting, refused])
    assert found is not None and found[0] is refused


def test_an_available_or_merely_starting_daemon_is_not_down():
    up = _deployment("d", availableReplicas=1, conditions=[_cond("Available", "True")])
    cleared = _deployment("d", conditions=[_cond("ReplicaFailure", "False", "", "")])
    # Available=False alone, before the controller counted any replica: no verdict yet.
    starting = _deployment("d", conditions=[_cond("Available", "False", "R", "m")])
    assert daemon_down(up) is None
    assert daemon_down(cleared) is None
    assert daemon_down(starting) is None
    assert first_down([up, starting]) is None
    assert daemon_down(_deployment("d")) is None
