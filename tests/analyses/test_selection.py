"""The selection analysis on realistic slices from several driver versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dradiag.analyses.selection import (
    ANY_NODE,
    RequestStatus,
    analyze_claim_selection,
    build_inventory,
    selection_findings,
)
from dradiag.snapshot.model import Kind, Snapshot
from dradiag.sources.manifests import load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "selector_check"

MIG_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"


@pytest.fixture(scope="module")
def fleet() -> Snapshot:
    return load_snapshot(str(FIXTURES / "slices"))


def _request(name: str, cls: str, *exprs: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "exactly": {
            "deviceClassName": cls,
            "selectors": [{"cel": {"expression": e}} for e in exprs],
            **extra,
        },
    }


def _analyze(snapshot: Snapshot, *requests: dict[str, Any], **kw: Any) -> Any:
    spec = {"devices": {"requests": list(requests), **kw.pop("devices", {})}}
    return analyze_claim_selection(snapshot, spec, namespace="ml", claim_name="c", **kw)


def test_inventory_spans_driver_versions_and_api_versions(fleet: Snapshot) -> None:
    inventory = build_inventory(fleet)
    assert inventory.nodes == ("node-a", "node-h", "node-old", "node-v")
    assert inventory.classes_source == "builtin"
    by_ref = {d.ref: d for d in inventory.devices}
    # v1beta1 `basic:` devices (driver v25.3) are flattened and classified.
    old_mig = by_ref["gpu.nvidia.com/node-old/gpu-1-mig-19-0-1"]
    assert (old_mig.device_type, old_mig.mig_profile) == ("mig", "1g.10gb")
    assert by_ref["gpu.nvidia.com/node-v/gpu-vfio-0"].device_type == "vfio"
    assert len(inventory) == 44


def test_class_and_request_stages_counted_by_node_type_and_profile(fleet: Snapshot) -> None:
    result = _analyze(
        fleet,
        _request(
            "mig", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
        ),
    )
    (alt,) = result.requests[0].alternatives
    assert alt.status is RequestStatus.OK
    assert alt.class_stage.total.matched == 38
    assert alt.class_stage.by_type["gpu"].not_matched == 5
    assert alt.class_stage.by_type["vfio"].not_matched == 1
    assert alt.request_stage.total.total == 38  # only class matches reach the request stage
    assert alt.request_stage.by_profile["1g.10gb"].matched == 16
    assert alt.request_stage.by_profile["3g.40gb"].not_matched == 4
    assert alt.request_stage.by_node["node-h"].matched == 14
    assert alt.request_stage.by_node["node-old"].matched == 2
    assert (alt.best_node, alt.best_node_count) == ("node-h", 14)
    assert selection_findings(result) == []


def test_runtime_error_is_its_own_verdict_naming_the_device(fleet: Snapshot) -> None:
    # DynamicMIG devices have no uuid: the selector errors there (k8s-dra-semantics §1.6).
    result = _analyze(
        fleet,
        _request(
            "mig", "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].uuid.startsWith('MIG-')"
        ),
    )
    (alt,) = result.requests[0].alternatives
    assert alt.status is RequestStatus.ERROR
    assert alt.matched == 4  # the static MIG devices of v0.4 and v25.3
    (sel,) = alt.request_selectors
    assert sel.error_count == 34
    assert sel.errors[0].message == "no such key: uuid"
    assert sel.errors[0].device.startswith("gpu.nvidia.com/node-h/gpu-0-mig-")
    assert result.broken
    rules = [f.rule for f in selection_findings(result)]
    assert rules[0] == "DRA-SEL-CEL-RUNTIME-ERROR"
    finding = selection_findings(result)[0]
    assert "kube-scheduler would abort scheduling" in finding.detail
    assert "selector #0 on device gpu.nvidia.com/node-h/gpu-0-mig-1g10gb-19-0" in finding.detail
    assert "DRA-SEL-OPTIONAL-ATTRIBUTE" in rules


def test_selectors_stop_at_the_first_false(fleet: Snapshot) -> None:
    # The second selector would error on every device, but the first is false everywhere.
    result = _analyze(
        fleet,
        _request(
            "gpu",
            "gpu.nvidia.com",
            "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'",
            "device.attributes['gpu.nvidia.com'].nosuchkey == 1",
        ),
    )
    (alt,) = result.requests[0].alternatives
    assert alt.status is RequestStatus.NO_MATCH
    first, second = alt.request_selectors
    assert (first.evaluated, first.false) == (5, 5)
    assert second.evaluated == 0


def test_compile_error_and_missing_class(fleet: Snapshot) -> None:
    result = _analyze(
        fleet,
        _request("a", "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].type =="),
        _request("b", "no-such-class.example.com"),
    )
    a, b = (g.alternatives[0] for g in result.requests)
    assert a.status is RequestStatus.COMPILE_ERROR
    problem = a.request_selectors[0].compile_error
    assert problem is not None and problem.position is not None
    assert "^" in problem.caret
    assert b.status is RequestStatus.CLASS_MISSING
    rules = {f.rule for f in selection_findings(result)}
    assert {"DRA-SEL-CEL-COMPILE-ERROR", "DRA-SEL-CLASS-NOT-FOUND"} <= rules


def test_builtin_classes_only_when_the_source_has_none(fleet: Snapshot) -> None:
    result = _analyze(fleet, _request("g", "gpu.nvidia.com"), builtin_classes_fallback=False)
    assert result.requests[0].status is RequestStatus.CLASS_MISSING
    classes = load_snapshot(str(FIXTURES / "classes"))
    with_classes = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: fleet.slices,
            Kind.DEVICE_CLASS: classes.device_classes,
        }
    )
    # A site class with two selectors: type mig and an H100 product name.
    result = _analyze(with_classes, _request("m", "h100-mig.example.com"))
    (alt,) = result.requests[0].alternatives
    assert alt.class_source == "source"
    assert len(alt.class_selectors) == 2
    assert alt.matched == 34
    assert {alt.class_stage.by_node[n].matched for n in ("node-a", "node-old")} == {0}
    # vfio.gpu.nvidia.com is built in, but not in this cluster's classes.
    missing = _analyze(with_classes, _request("v", "vfio.gpu.nvidia.com"))
    assert missing.requests[0].status is RequestStatus.CLASS_MISSING


def test_count_all_and_first_available(fleet: Snapshot) -> None:
    h100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    result = _analyze(
        fleet,
        _request("eight", "gpu.nvidia.com", h100, count=8),
        _request("two", "gpu.nvidia.com", h100, count=2),
        _request(
            "all",
            "mig.nvidia.com",
            "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'",
            allocationMode="All",
        ),
        {
            "name": "pick",
            "firstAvailable": [
                {
                    "name": "big",
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.attributes['gpu.nvidia.com'].profile == '4g.40gb'"
                            }
                        }
                    ],
                },
                {
                    "name": "small",
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
                            }
                        }
                    ],
                },
            ],
        },
    )
    eight, two, every, pick = result.requests
    assert eight.status is RequestStatus.COUNT_INFEASIBLE
    assert eight.alternatives[0].best_node_count == 2
    assert two.status is RequestStatus.OK
    assert every.alternatives[0].best_node_count == 4
    assert pick.first_available and pick.chosen is not None
    assert pick.chosen.label == "pick/small"
    assert pick.alternatives[0].status is RequestStatus.NO_MATCH
    rules = [f.rule for f in selection_findings(result)]
    assert "DRA-SEL-COUNT-INFEASIBLE" in rules
    assert "DRA-SEL-ALL-MODE" in rules
    assert "DRA-SEL-SUBREQUEST-FALLBACK" in rules
    assert "DRA-SEL-NO-MATCH" not in rules  # the fallback subrequest matches


def test_match_attribute_constraint_feasibility(fleet: Snapshot) -> None:
    one_gpu = {"constraints": [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}]}
    ok = _analyze(
        fleet,
        _request(
            "m",
            "mig.nvidia.com",
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            count=7,
        ),
        devices=one_gpu,
    )
    (c,) = ok.constraints
    assert c.feasible and c.feasible_nodes == 1  # node-h: 7 placements per GPU
    too_many = _analyze(
        fleet,
        _request(
            "m",
            "mig.nvidia.com",
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            count=8,
        ),
        devices=one_gpu,
    )
    # 14 on node-h, but never 8 sharing one parent GPU.
    assert too_many.requests[0].status is RequestStatus.OK
    (c,) = too_many.constraints
    assert not c.feasible
    assert "no node has devices for m: 8" in c.detail
    assert "DRA-SEL-CONSTRAINT-INFEASIBLE" in [f.rule for f in selection_findings(too_many)]
    lacking = _analyze(
        fleet,
        _request("g", "gpu.nvidia.com", count=1),
        devices={
            "constraints": [{"requests": ["g"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]
        },
    )
    (c,) = lacking.constraints
    assert not c.feasible and c.lacking_attribute == 5


def test_node_restriction_and_node_less_devices(fleet: Snapshot) -> None:
    restricted = build_inventory(fleet, nodes=["node-a"])
    assert {d.node for d in restricted.devices} == {"node-a"}
    network = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "allNodes": True,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
        },
    }
    snapshot = Snapshot(objects={Kind.RESOURCE_SLICE: [*fleet.slices, network]})
    inventory = build_inventory(snapshot, nodes=["node-v"])
    labels = {d.node_label for d in inventory.devices}
    assert labels == {"node-v", ANY_NODE}
    result = _analyze(snapshot, _request("g", "gpu.nvidia.com", count=2), nodes=["node-v"])
    # node-v's gpu-0 plus the node-less device visible from it.
    assert result.requests[0].alternatives[0].best_node_count == 2


def test_only_the_newest_pool_generation_counts(fleet: Snapshot) -> None:
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "old-gen"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-old",
            "pool": {"name": "node-old", "generation": 2, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-9", "attributes": {"type": {"string": "gpu"}}}],
        },
    }
    inventory = build_inventory(Snapshot(objects={Kind.RESOURCE_SLICE: [*fleet.slices, stale]}))
    assert not any(d.slice_device_name == "gpu-9" for d in inventory.devices)


def test_claim_device_limit(fleet: Snapshot) -> None:
    result = _analyze(
        fleet, _request("a", "mig.nvidia.com", count=20), _request("b", "mig.nvidia.com", count=13)
    )
    assert result.device_limit_exceeded == 33
    assert "DRA-SEL-CLAIM-LIMIT" in [f.rule for f in selection_findings(result)]


def test_every_emitted_rule_is_in_the_catalogue() -> None:
    from dradiag.analyses.selection import RULES
    from dradiag.rulebook.loader import load_rulebook

    book = load_rulebook()
    for rule_id, info in RULES.items():
        rule = book.get(rule_id)
        assert rule is not None and rule.id == rule_id, rule_id
        assert rule.code_backed
        assert rule.severity is info.severity, rule_id
