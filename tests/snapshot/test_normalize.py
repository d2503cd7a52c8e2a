"""Every resource.k8s.io version normalizes to the v1 shape, field by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from dradiag.snapshot.model import Kind, Snapshot, name_of
from dradiag.snapshot.normalize import kind_of, normalize, normalize_event, normalize_request
from dradiag.sources.manifests import load_snapshot

VERSIONS = Path(__file__).resolve().parents[1] / "fixtures" / "versions"
ALL = ("v1alpha3", "v1beta1", "v1beta2", "v1")


@pytest.fixture(scope="module")
def snapshots() -> dict[str, Snapshot]:
    return {v: load_snapshot(str(VERSIONS / v)) for v in ALL}


def _slice(snap: Snapshot, name: str) -> dict:
    return next(dict(s) for s in snap.slices if name_of(s) == name)


def _device(sl: dict, name: str) -> dict:
    return next(d for d in sl["spec"]["devices"] if d["name"] == name)


@pytest.mark.parametrize("version", ALL)
def test_slice_devices_are_flat_with_wrapped_capacity(snapshots, version):
    sl = _slice(snapshots[version], "node-a-gpu.nvidia.com-x7k2q")
    assert sl["apiVersion"] == "resource.k8s.io/v1"
    assert sl["spec"]["nodeName"] == "node-a"
    assert "allNodes" not in sl["spec"]  # v1beta1 `allNodes: false` means unset
    gpu = _device(sl, "gpu-1")
    assert "basic" not in gpu
    assert gpu["attributes"]["productName"] == {"string": "NVIDIA A100-PCIE-40GB"}
    assert gpu["attributes"]["driverVersion"] == {"version": "580.126.20"}
    assert gpu["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:66:00.0"}
    assert gpu["capacity"] == {"memory": {"value": "40Gi"}}
    mig = _device(sl, "gpu-0-mig-1g5gb-19-0")
    assert mig["attributes"]["profile"] == {"string": "1g.5gb"}
    assert mig["capacity"]["memorySlice0"] == {"value": "1"}
    assert mig["capacity"]["memory"] == {"value": "4864Mi"}
    vfio = _device(sl, "gpu-vfio-0")
    assert vfio["attributes"]["iommuFDEnabled"] == {"bool": True}
    assert vfio["attributes"]["numa"] == {"int": 0}
    assert vfio["capacity"] == {"addressableMemory": {"value": "40Gi"}}


@pytest.mark.parametrize("version", ALL)
def test_partitionable_devices_keep_counters_and_taints(snapshots, version):
    sl = _slice(snapshots[version], "node-h-gpu.nvidia.com-4lpks")
    counters = sl["spec"]["sharedCounters"][0]
    assert counters["name"] == "gpu-0-counter-set"
    assert counters["counters"]["memory"] == {"value": "80Gi"}
    part = _device(sl, "gpu-0-mig-1g10gb-19-0")
    assert "uuid" not in part["attributes"]  # abstract partition (nvidia-driver-facts §9.3)
    assert part["consumesCounters"] == [
        {
            "counterSet": "gpu-0-counter-set",
            "counters": {
                "memory": {"value": "10Gi"},
                "memory-slice-0": {"value": "1"},
                "multiprocessors": {"value": "16"},
            },
        }
    ]
    assert part["taints"][0]["effect"] == "None"
    assert part["capacity"]["memory"] == {"value": "10Gi"}


@pytest.mark.parametrize("version", ("v1alpha3", "v1beta1", "v1beta2"))
def test_slices_equal_the_v1_fixture(snapshots, version):
    for sl in snapshots["v1"].slices:
        assert _slice(snapshots[version], name_of(sl)) == dict(sl)


@pytest.mark.parametrize("version", ALL)
def test_claim_requests_use_exactly_and_first_available(snapshots, version):
    claim = snapshots[version].claim("ml", "train-mig")
    assert claim is not None
    assert claim["apiVersion"] == "resource.k8s.io/v1"
    mig, choice = claim["spec"]["devices"]["requests"]
    assert mig["name"] == "mig"
    assert mig["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert mig["exactly"]["count"] == 1
    assert mig["exactly"]["allocationMode"] == "ExactCount"
    assert mig["exactly"]["selectors"][0]["cel"]["expression"].endswith("== '1g.5gb'")
    assert "deviceClassName" not in mig and "selectors" not in mig
    assert "exactly" not in choice and "deviceClassName" not in choice
    assert [s["name"] for s in choice["firstAvailable"]] == ["big", "small"]
    assert choice["firstAvailable"][0]["deviceClassName"] == "gpu.nvidia.com"
    constraint = claim["spec"]["devices"]["constraints"][0]
    assert constraint["matchAttribute"] == "resource.kubernetes.io/pcieRoot"
    results = claim["status"]["allocation"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [
        ("mig", "gpu-0-mig-1g5gb-19-0"),
        ("gpu-or-mig/big", "gpu-1"),
    ]


def test_v1alpha3_fields_that_v1_lacks_survive(snapshots):
    claim = snapshots["v1alpha3"].claim("ml", "train-mig")
    assert claim["spec"]["controller"] == ""
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] is False
    raw = snapshots["v1alpha3"].raw_object(Kind.RESOURCE_CLAIM, "ml", "train-mig")
    assert raw["apiVersion"] == "resource.k8s.io/v1alpha3"
    assert raw["spec"]["devices"]["requests"][0]["deviceClassName"] == "mig.nvidia.com"


@pytest.mark.parametrize("version", ALL)
def test_templates_normalize_their_claim_spec(snapshots, version):
    tpl = snapshots[version].claim_template("ml", "one-mig")
    request = tpl["spec"]["spec"]["devices"]["requests"][0]
    assert request == {"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 1}}


@pytest.mark.parametrize("version", ALL)
def test_pods_reference_claims_in_the_flat_shape(snapshots, version):
    snap = snapshots[version]
    pod = snap.pod("ml", "trainer-0")
    refs = pod["spec"]["resourceClaims"]
    assert refs == [
        {"name": "mig", "resourceClaimName": "train-mig"},
        {"name": "gen", "resourceClaimTemplateName": "one-mig"},
    ]
    assert pod["status"]["resourceClaimStatuses"] == [
        {"name": "gen", "resourceClaimName": "trainer-0-gen-7xk2p"}
    ]
    claim = snap.claim("ml", "train-mig")
    assert [name_of(p) for p in snap.pods_for_claim(claim)] == ["trainer-0"]
    assert snap.pods_on_node("node-a") == [pod]


@pytest.mark.parametrize("version", ALL)
def test_events_of_both_apis_read_alike(snapshots, version):
    snap = snapshots[version]
    (event,) = snap.events_for("Pod", "ml", "trainer-0", "9d1e2f3a-4b5c-4d6e-8f70-112233445566")
    assert event["reason"] == "FailedPrepareDynamicResources"
    assert event["message"].endswith("MIG mode is not enabled")
    assert event["count"] == 4
    assert event["firstTimestamp"] == "2026-03-02T10:00:00Z"
    assert event["lastTimestamp"] == "2026-03-02T10:04:00Z"
    assert event["source"]["component"] == "kubelet"
    assert event["involvedObject"]["name"] == "trainer-0"


def test_indexes_answer_the_analyses_lookups(snapshots):
    snap = snapshots["v1"]
    claim = snap.claim_by_uid("0c3b9f6e-8d1d-4a8e-9a55-0f2d6c7b8a91")
    assert claim is snap.claim("ml", "train-mig")
    assert snap.claims_reserving_device("gpu.nvidia.com", "node-a", "gpu-1") == [claim]
    assert snap.claims_reserving_device("gpu.nvidia.com", "node-a", "gpu-vfio-0") == []
    assert [name_of(s) for s in snap.slices_for(driver="gpu.nvidia.com", node="node-h")] == [
        "node-h-gpu.nvidia.com-4lpks"
    ]
    assert snap.pools() == [("gpu.nvidia.com", "node-a"), ("gpu.nvidia.com", "node-h")]
    assert snap.node_names() == ["node-a", "node-h"]
    assert snap.is_collected(Kind.EVENT)
    assert not snap.is_collected(Kind.NODE)
    assert "no Node objects" in (snap.coverage_of(Kind.NODE).reason or "")


def test_request_normalization_is_idempotent():
    v1 = {"name": "r", "exactly": {"deviceClassName": "c", "count": 2}}
    assert normalize_request(v1) == v1
    assert normalize_request(normalize_request({"name": "r", "deviceClassName": "c"})) == {
        "name": "r",
        "exactly": {"deviceClassName": "c"},
    }


def test_v1_objects_are_their_own_raw_form(snapshots):
    snap = snapshots["v1"]
    claim = snap.claim("ml", "train-mig")
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "train-mig") is claim
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "nope") is None


def test_normalize_does_not_mutate_and_keeps_unknown_fields():
    raw = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "futureField": {"x": 1},
            "pool": {"name": "n", "generation": 3, "resourceSliceCount": 1},
            "devices": [{"name": "d", "basic": {"attributes": {}, "bindsToNode": True}}],
        },
    }
    out = normalize(Kind.RESOURCE_SLICE, raw)
    assert raw["spec"]["devices"][0]["basic"]["bindsToNode"] is True
    assert out["spec"]["futureField"] == {"x": 1}
    assert out["spec"]["devices"][0] == {"name": "d", "attributes": {}, "bindsToNode": True}


def test_kind_of_requires_the_right_group():
    assert kind_of({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}) is Kind.DEVICE_CLASS
    assert kind_of({"apiVersion": "example.com/v1", "kind": "DeviceClass"}) is None
    assert kind_of({"apiVersion": "v1", "kind": "Pod"}) is Kind.POD
    assert kind_of({"apiVersion": "apps/v1", "kind": "Deployment"}) is Kind.DEPLOYMENT
    assert kind_of({"apiVersion": "extensions/v1beta1", "kind": "Deployment"}) is None
    assert kind_of({"apiVersion": "apps/v1", "kind": "StatefulSet"}) is None
    assert kind_of({"apiVersion": "events.k8s.io/v1", "kind": "Event"}) is Kind.EVENT


def test_event_series_count_is_used_when_no_deprecated_count():
    ev = normalize_event(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "regarding": {"kind": "ResourceClaim", "name": "c", "namespace": "ns"},
            "note": "x",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-01-01T01:00:00.000000Z"},
        }
    )
    assert ev["count"] == 7
    assert ev["lastTimestamp"] == "2026-01-01T01:00:00.000000Z"
    assert ev["firstTimestamp"] == "2026-01-01T00:00:00.000000Z"
