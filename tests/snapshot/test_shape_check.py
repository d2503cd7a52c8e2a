"""The Snapshot-boundary shape check: one wrong-shaped field per kind, and what happens."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from dradiag.snapshot import shapes
from dradiag.snapshot.model import Coverage, Kind
from dradiag.snapshot.shape_check import check_object, schema_for
from dradiag.sources.manifests import load_snapshot

META = {"name": "x", "namespace": "ml", "uid": "u-1"}


def _slice(api: str, device: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{api}",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-0-gpu"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-0",
            "devices": [device, {"name": "gpu-1"}],
        },
    }


def _one(kind: Kind, obj: dict[str, Any]) -> tuple[Any, list[str]]:
    before = copy.deepcopy(obj)
    checked = check_object(kind, obj, "f.yaml:3")
    assert obj == before, "the input object must not change"
    return checked.obj, [p.describe() for p in checked.problems]


# -- per kind: a wrong-shaped field, dropped or skipping the object --------------------


def test_resource_slice_v1_attribute_of_the_wrong_type_is_dropped() -> None:
    # A scalar of another type is the CEL environment's to convert (a finding); a map
    # or a member of no known type is not a value at all.
    obj = _slice(
        "v1",
        {"name": "gpu-0", "attributes": {"uuid": {"string": {"a": 1}}, "n": {"int": "7"}}},
    )
    kept, warnings = _one(Kind.RESOURCE_SLICE, obj)
    assert warnings == [
        "f.yaml:3: ResourceSlice node-0-gpu: spec.devices[0].attributes.uuid.string: "
        "expected bool | int | float | str, got object; field dropped"
    ]
    assert kept["spec"]["devices"][0] == {
        "name": "gpu-0",
        "attributes": {"uuid": {}, "n": {"int": "7"}},
    }
    assert kept["spec"]["devices"][1] == {"name": "gpu-1"}


def test_resource_slice_v1beta1_basic_capacity_list_is_dropped() -> None:
    obj = _slice("v1beta1", {"name": "gpu-0", "basic": {"capacity": ["80Gi"]}})
    kept, warnings = _one(Kind.RESOURCE_SLICE, obj)
    assert warnings == [
        "f.yaml:3: ResourceSlice node-0-gpu: spec.devices[0].basic.capacity: "
        "expected object, got array; field dropped"
    ]
    assert kept["spec"]["devices"][0] == {"name": "gpu-0", "basic": {}}


def test_resource_slice_v1alpha3_bare_capacity_is_a_valid_shape() -> None:
    obj = _slice("v1alpha3", {"name": "gpu-0", "basic": {"capacity": {"memory": "80Gi"}}})
    assert _one(Kind.RESOURCE_SLICE, obj) == (obj, [])
    assert check_object(Kind.RESOURCE_SLICE, obj).obj is obj


def test_resource_slice_device_that_is_not_an_object_is_dropped_from_the_list() -> None:
    obj = _slice("v1", {"name": "gpu-0"})
    obj["spec"]["devices"][0] = ["gpu-0"]
    kept, warnings = _one(Kind.RESOURCE_SLICE, obj)
    assert warnings == [
        "f.yaml:3: ResourceSlice node-0-gpu: spec.devices[0]: expected object, got array; "
        "element dropped"
    ]
    assert kept["spec"]["devices"] == [{"name": "gpu-1"}]


def test_resource_slice_without_a_readable_pool_is_skipped() -> None:
    obj = _slice("v1", {"name": "gpu-0"})
    obj["spec"]["pool"] = "node-0"
    kept, warnings = _one(Kind.RESOURCE_SLICE, obj)
    assert kept is None
    assert warnings == [
        "f.yaml:3: ResourceSlice node-0-gpu: spec.pool: expected object, got str; object skipped"
    ]


def test_device_class_selector_that_is_a_string_is_dropped() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": ["device.driver == 'gpu.nvidia.com'", {"cel": {"expression": "true"}}]
        },
    }
    kept, warnings = _one(Kind.DEVICE_CLASS, obj)
    assert warnings == [
        "f.yaml:3: DeviceClass gpu.nvidia.com: spec.selectors[0]: expected object, got str; "
        "element dropped"
    ]
    assert kept["spec"]["selectors"] == [{"cel": {"expression": "true"}}]


def test_device_class_whose_selectors_are_not_a_list_is_skipped() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": {"cel": {"expression": "true"}}},
    }
    kept, warnings = _one(Kind.DEVICE_CLASS, obj)
    assert kept is None and warnings[0].endswith(
        "spec.selectors: expected array, got object; object skipped"
    )


def test_resource_claim_v1_count_as_a_string_is_dropped() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": META,
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": "2"}}]}},
    }
    kept, warnings = _one(Kind.RESOURCE_CLAIM, obj)
    assert warnings == [
        "f.yaml:3: ResourceClaim ml/x: spec.devices.requests[0].exactly.count: "
        "expected int, got str; field dropped"
    ]
    assert kept["spec"]["devices"]["requests"][0] == {"name": "gpu", "exactly": {}}


def test_resource_claim_v1beta1_top_level_request_fields_are_checked() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": META,
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": ["gpu"]}]}},
    }
    kept, warnings = _one(Kind.RESOURCE_CLAIM, obj)
    assert warnings[0].endswith(
        "spec.devices.requests[0].deviceClassName: expected str, got array; field dropped"
    )
    assert kept["spec"]["devices"]["requests"][0] == {"name": "gpu"}


def test_resource_claim_with_an_unreadable_allocation_is_skipped() -> None:
    # Dropping status.allocation would read as "not allocated": a false finding.
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": META,
        "status": {"allocation": "yes"},
    }
    kept, warnings = _one(Kind.RESOURCE_CLAIM, obj)
    assert kept is None
    assert warnings == [
        "f.yaml:3: ResourceClaim ml/x: status.allocation: expected object, got str; object skipped"
    ]


def test_resource_claim_template_request_list_of_strings_drops_the_element() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "ResourceClaimTemplate",
        "metadata": META,
        "spec": {"spec": {"devices": {"requests": ["gpu", {"name": "mig"}]}}},
    }
    kept, warnings = _one(Kind.RESOURCE_CLAIM_TEMPLATE, obj)
    assert warnings[0].endswith(
        "spec.spec.devices.requests[0]: expected object, got str; element dropped"
    )
    assert kept["spec"]["spec"]["devices"]["requests"] == [{"name": "mig"}]


def test_device_taint_rule_without_a_readable_taint_is_skipped() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "xid-79"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com"}, "taint": "NoExecute"},
    }
    kept, warnings = _one(Kind.DEVICE_TAINT_RULE, obj)
    assert kept is None and warnings[0].endswith(
        "spec.taint: expected object, got str; object skipped"
    )


def test_pod_container_limits_that_are_not_a_map_are_dropped() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": META,
        "spec": {"containers": [{"name": "main", "resources": {"limits": "1"}}]},
    }
    kept, warnings = _one(Kind.POD, obj)
    assert warnings == [
        "f.yaml:3: Pod ml/x: spec.containers[0].resources.limits: expected object, got str; "
        "field dropped"
    ]
    assert kept["spec"]["containers"][0] == {"name": "main", "resources": {}}


def test_pod_whose_container_claims_are_unreadable_is_skipped() -> None:
    # Dropped, they would read as "the container does not reference the claim".
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": META,
        "spec": {"containers": [{"name": "main", "resources": {"claims": [{"name": 1}]}}]},
    }
    kept, warnings = _one(Kind.POD, obj)
    assert kept is None
    assert warnings == [
        "f.yaml:3: Pod ml/x: spec.containers[0].resources.claims[0].name: expected str, "
        "got int; object skipped"
    ]


def test_resource_claim_whose_allocated_device_is_unreadable_is_skipped() -> None:
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": META,
        "status": {"allocation": {"devices": {"results": [{"device": "gpu-0", "pool": {}}]}}},
    }
    kept, warnings = _one(Kind.RESOURCE_CLAIM, obj)
    assert kept is None and warnings[0].endswith(
        "status.allocation.devices.results[0].pool: expected str, got object; object skipped"
    )


def test_pod_with_unreadable_resource_claims_is_skipped() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": META, "spec": {"resourceClaims": 7}}
    kept, warnings = _one(Kind.POD, obj)
    assert kept is None and warnings[0].endswith(
        "spec.resourceClaims: expected array, got int; object skipped"
    )


def _pod_with_extended_status(status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": META,
        "status": {"phase": "Running", "extendedResourceClaimStatus": status},
    }


@pytest.mark.parametrize(
    ("status", "path", "expected"),
    [
        ({"requestMappings": -1}, "requestMappings", "expected array, got int"),
        ({"resourceClaimName": ["c"]}, "resourceClaimName", "expected str, got array"),
        ({"requestMappings": [{"requestName": 3}]}, "requestMappings[0].requestName", "got int"),
        ("c", "", "expected object, got str"),
    ],
)
def test_pod_with_an_unreadable_extended_resource_claim_status_is_skipped(
    status: Any, path: str, expected: str
) -> None:
    # Once an internal TypeError (the fuzzer); dropped, the pod would lose its link to
    # the claim made for its extended resources, or a wrong mapping would go unseen.
    kept, warnings = _one(Kind.POD, _pod_with_extended_status(status))
    field_path = "status.extendedResourceClaimStatus" + (f".{path}" if path else "")
    assert kept is None
    assert len(warnings) == 1 and f"{field_path}: " in warnings[0]
    assert expected in warnings[0] and warnings[0].endswith("object skipped")


def test_pod_extended_resource_mapping_with_a_wrong_container_name_is_trimmed() -> None:
    status = {
        "resourceClaimName": "job-0-extended-resources-abcde",
        "requestMappings": [{"containerName": 1, "requestName": "r0", "resourceName": "x/gpu"}],
    }
    kept, warnings = _one(Kind.POD, _pod_with_extended_status(status))
    assert kept["status"]["extendedResourceClaimStatus"]["requestMappings"] == [
        {"requestName": "r0", "resourceName": "x/gpu"}
    ]
    assert warnings == [
        "f.yaml:3: Pod ml/x: status.extendedResourceClaimStatus.requestMappings[0]."
        "containerName: expected str, got int; field dropped"
    ]


def test_node_label_of_the_wrong_type_and_a_numeric_label_key_are_dropped() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-0", "labels": {"nvidia.com/gpu.present": True, 7: "x"}},
    }
    kept, warnings = _one(Kind.NODE, obj)
    assert warnings == [
        "f.yaml:3: Node node-0: metadata.labels['nvidia.com/gpu.present']: expected str, got bool; "
        "field dropped",
        "f.yaml:3: Node node-0: metadata.labels: map key expected str, got int; field dropped",
    ]
    assert kept["metadata"]["labels"] == {}


def test_core_v1_event_count_of_the_wrong_type_is_dropped() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": META,
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"},
        "reason": "FailedPrepareDynamicResources",
        "message": "boom",
        "count": {"n": 3},
        "lastTimestamp": 1714557600,
    }
    kept, warnings = _one(Kind.EVENT, obj)
    assert warnings == [
        "f.yaml:3: Event ml/x: count: expected int, got object; field dropped",
        "f.yaml:3: Event ml/x: lastTimestamp: expected datetime, got int; field dropped",
    ]
    assert "count" not in kept and "lastTimestamp" not in kept and kept["message"] == "boom"


def test_events_k8s_io_event_with_an_unreadable_regarding_is_skipped() -> None:
    obj = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": META,
        "regarding": "pod/p",
        "note": "boom",
        "reason": "Failed",
    }
    assert schema_for(Kind.EVENT, obj["apiVersion"]) is shapes.EventEventsV1
    kept, warnings = _one(Kind.EVENT, obj)
    assert kept is None and warnings[0].endswith(
        "regarding: expected object, got str; object skipped"
    )


# -- what every kind shares -------------------------------------------------------------


def test_null_means_unset_and_is_dropped_without_a_warning() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {**META, "creationTimestamp": None}}
    kept, warnings = _one(Kind.POD, obj)
    assert warnings == [] and kept["metadata"] == META


def test_unknown_and_newer_fields_survive_and_a_clean_object_is_not_copied() -> None:
    obj = _slice("v1", {"name": "gpu-0", "futureField": {"a": [1]}, "attributes": {}})
    obj["spec"]["brandNewSpec"] = "x"
    checked = check_object(Kind.RESOURCE_SLICE, obj)
    assert checked.obj is obj and checked.problems == ()


def test_a_timestamp_yaml_made_into_a_datetime_is_a_valid_shape(tmp_path: Path) -> None:
    (tmp_path / "pods.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml, "
        "creationTimestamp: 2026-05-01T10:00:00Z}\n"
    )
    snap = load_snapshot(str(tmp_path))
    assert snap.shape_problems == () and snap.pod("ml", "p") is not None


# -- at the boundary: files, deferred lists, coverage ------------------------------------


def test_a_load_warns_with_file_and_line_and_lists_what_it_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "claims.yaml").write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: ok, namespace: ml}\n"
        "---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: bad, namespace: ml}\n"
        "status: {reservedFor: pod-0}\n"
    )
    (tmp_path / "nodes.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n0, labels: {gpu: true}}\n"
    )
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snap = load_snapshot(str(tmp_path))
    claims = str(tmp_path / "claims.yaml")
    assert (
        f"{claims}:5: ResourceClaim ml/bad: status.reservedFor: expected array, got str; "
        "object skipped" in caplog.messages
    )
    assert snap.claim("ml", "ok") is not None and snap.claim("ml", "bad") is None
    # A skipped claim: the kind is no longer read in full, so nothing calls it healthy.
    record = snap.coverage_of(Kind.RESOURCE_CLAIM)
    assert record.coverage is Coverage.UNKNOWN and "ml/bad" in str(record.reason)
    # A dropped field keeps the object and the kind's coverage.
    assert snap.node("n0") is not None and snap.is_collected(Kind.NODE)
    reasons = [(e.resource, e.verb, e.name, e.reason) for e in snap.errors]
    assert (
        "nodes",
        "read",
        "n0",
        f"malformed ({tmp_path / 'nodes.yaml'}:1): "
        "metadata.labels.gpu: expected str, got bool; field dropped",
    ) in reasons
    assert snap.partial


def test_nothing_usable_left_is_an_input_error(tmp_path: Path) -> None:
    from dradiag.errors import InputError

    (tmp_path / "pods.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: [p]\n")
    with pytest.raises(InputError, match="1 malformed object"):
        load_snapshot(str(tmp_path))


def test_a_deferred_item_is_checked_when_it_is_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dradiag.sources import json_lists

    monkeypatch.setattr(json_lists, "DEFER_MIN_BYTES", 0)
    pods = [
        {"metadata": {"name": f"p{i}", "namespace": "ml"}, "spec": {"nodeName": "n0"}}
        for i in range(3)
    ]
    pods[1]["spec"] = {"nodeName": "n0", "nodeSelector": "gpu"}
    pods[2]["spec"] = ["n0"]
    (tmp_path / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "PodList", "items": pods})
    )
    snap = load_snapshot(str(tmp_path), defer=True)
    assert snap.undecoded and snap.shape_problems == ()
    assert snap.pod("ml", "p1")["spec"] == {"nodeName": "n0"}
    assert [p.field for p in snap.shape_problems] == ["spec.nodeSelector"]
    assert snap.is_collected(Kind.POD)
    assert snap.pod("ml", "p2") is None and not snap.is_collected(Kind.POD)
    assert [p["metadata"]["name"] for p in snap.pods] == ["p0", "p1"]
    assert str(tmp_path / "pods.json") in snap.shape_problems[-1].describe()


def test_a_junk_timestamp_is_dropped_with_its_warning() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {**META, "creationTimestamp": "2026-05-01T10:00:00.123456789Z"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "ml"},
        "reason": "Started",
        "message": "ok",
        "lastTimestamp": "yesterday",
        "firstTimestamp": "2026-05-01T12:00:00+02:00",
    }
    kept, warnings = _one(Kind.EVENT, obj)
    assert warnings == [
        "f.yaml:3: Event ml/x: lastTimestamp: invalid RFC3339 encoded datetime: 'yesterday'; "
        "field dropped"
    ]
    assert "lastTimestamp" not in kept and kept["firstTimestamp"] == obj["firstTimestamp"]


def test_many_malformed_objects_are_listed_up_to_a_cap_then_counted(tmp_path: Path) -> None:
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {"a": 1}}}
        for i in range(130)
    ]
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "List", "items": nodes}))
    snap = load_snapshot(str(tmp_path))
    assert len(snap.nodes) == 130 and len(snap.shape_problems) == 130
    node_errors = [e for e in snap.errors if e.resource == "nodes"]
    assert len(node_errors) == 101
    assert node_errors[-1].reason == "malformed: 30 more field(s) or object(s) not listed"
