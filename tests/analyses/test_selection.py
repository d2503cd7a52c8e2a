"""The selection analysis on realistic slices from several driver versions."""

from __future__ import annotations

from collections.abc import Sequence
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


def test_a_negative_pool_generation_is_kept_not_a_crash() -> None:
    """The API server rejects a negative generation, but a hand-edited file can hold one
    (found by the fuzzer: a KeyError). It is still the pool's newest, so it counts."""
    odd = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "odd-gen"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-odd",
            "pool": {"name": "node-odd", "generation": -1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-7", "attributes": {"type": {"string": "gpu"}}}],
        },
    }
    inventory = build_inventory(Snapshot(objects={Kind.RESOURCE_SLICE: [odd]}))
    assert [d.slice_device_name for d in inventory.devices] == ["gpu-7"]


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


# -- grouped evaluation agrees with device-by-device evaluation -------------------------


def _varied_fleet(nodes: int = 6) -> list[dict[str, Any]]:
    """Slices that exercise every way devices can differ for a selector.

    DynamicMIG devices without uuid, a version that is not semver and a capacity that is
    not a quantity (the device errors for every selector), an attribute that is an empty
    map, a key published under both spellings in both orders, 1 / true / 1.0 under
    members that tell them apart, list attributes, shared devices, node-less devices of
    another driver, and a stale pool generation.
    """

    def gpu_attrs(n: int, g: int, kind: str) -> dict[str, Any]:
        uuid = f"GPU-{n:04x}-{g:04x}"
        attrs: dict[str, Any] = {
            "type": {"string": kind},
            "productName": {"string": "NVIDIA H100 80GB HBM3" if n % 2 else "NVIDIA A100"},
            "driverVersion": {"version": "580.126.20" if n % 3 else "570.1.0"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{g:02x}:00.0"},
            "numa": {"int": g % 2},
        }
        attrs["uuid" if kind == "gpu" else "parentUUID"] = {"string": uuid}
        return attrs

    items: list[dict[str, Any]] = []
    for n in range(nodes):
        node = f"node-{n}"
        devices: list[dict[str, Any]] = []
        for g in range(2):
            devices.append(
                {
                    "name": f"gpu-{g}",
                    "attributes": gpu_attrs(n, g, "gpu"),
                    "capacity": {"memory": {"value": "80Gi" if n % 2 else "40Gi"}},
                }
            )
            for profile, memory, count in (("1g.10gb", "9856Mi", 3), ("3g.40gb", "40Gi", 1)):
                for p in range(count):
                    attrs = gpu_attrs(n, g, "mig")
                    attrs["profile"] = {"string": profile}
                    devices.append(
                        {
                            "name": f"gpu-{g}-mig-{profile.replace('.', '')}-{p}",
                            "attributes": attrs,
                            "capacity": {"memory": {"value": memory}},
                        }
                    )
        odd: list[dict[str, Any]] = []
        if n == 1:  # not strict semver: the device errors for every selector
            bad = gpu_attrs(n, 7, "mig")
            bad["driverVersion"] = {"version": "580.65.06"}
            bad["profile"] = {"string": "1g.10gb"}
            odd.append({"name": "gpu-7-mig-bad-version", "attributes": bad})
            untyped = gpu_attrs(n, 20, "gpu")  # no type: the class selectors error
            del untyped["type"]
            odd.append({"name": "gpu-20", "attributes": untyped})
        if n == 2:  # not a quantity; and an attribute that is an empty map
            odd.append(
                {
                    "name": "gpu-8",
                    "attributes": gpu_attrs(n, 8, "gpu"),
                    "capacity": {"memory": {"value": "lots"}},
                }
            )
            empty = gpu_attrs(n, 9, "gpu")
            empty["broken"] = {}
            odd.append({"name": "gpu-9", "attributes": empty, "capacity": {}})
        if n == 3:  # both spellings, in both orders, with values other devices have
            # The later one is what CEL sees: the bare H100 here, the qualified A100 next.
            first = {"gpu.nvidia.com/productName": {"string": "NVIDIA A100"}}
            first.update(gpu_attrs(n, 5, "gpu"))
            second = gpu_attrs(n, 6, "gpu")
            second["gpu.nvidia.com/productName"] = {"string": "NVIDIA A100"}
            odd += [
                {"name": "gpu-5", "attributes": first, "capacity": {"memory": {"value": "40Gi"}}},
                {"name": "gpu-6", "attributes": second, "capacity": {"memory": {"value": "80Gi"}}},
            ]
        if n == 4:  # 1, true and 1.0 under members that tell them apart; lists; no type
            for i, (member, value) in enumerate(
                [("int", 1), ("int", True), ("string", 1), ("string", True), ("bool", 1)]
            ):
                attrs = gpu_attrs(n, 10 + i, "gpu")
                attrs["flag"] = {member: value}
                attrs["links"] = {"strings": ["nvlink-a", f"nvlink-{i % 2}"]}
                odd.append(
                    {
                        "name": f"gpu-{10 + i}",
                        "attributes": attrs,
                        "capacity": {"memory": {"value": "80Gi"}},
                        "allowMultipleAllocations": i % 2 == 0,
                    }
                )
        items.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpus"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": node,
                    "pool": {"name": node, "generation": 2, "resourceSliceCount": 1},
                    "devices": devices + odd,
                },
            }
        )
    items.append(  # superseded by generation 2
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "node-0-stale"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "node-0",
                "pool": {"name": "node-0", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-stale", "attributes": gpu_attrs(0, 0, "gpu")}],
            },
        }
    )
    items.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "fabric"},
            "spec": {
                "driver": "nic.example.com",
                "allNodes": True,
                "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"nic-{i}",
                        "attributes": {
                            "nic.example.com/speed": {"int": 100 * (1 + i % 2)},
                            "type": {"string": "nic"},
                            "links": {"strings": ["nvlink-a"]},
                        },
                        "capacity": {"nic.example.com/bandwidth": {"value": "100G"}},
                    }
                    for i in range(3)
                ],
            },
        }
    )
    classes = [dict(c) for c in _builtin_classes()] + [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "nic.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'nic.example.com'"}}]},
        }
    ]
    return items + classes


def _builtin_classes() -> tuple[Any, ...]:
    from dradiag.analyses.selection import builtin_device_classes

    return builtin_device_classes()


VARIED_REQUESTS: list[tuple[str, list[str], dict[str, Any]]] = [
    (
        "mig.nvidia.com",
        [
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb' && "
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('575.0.0')) >= 0"
        ],
        {"count": 2},
    ),
    (
        "gpu.nvidia.com",
        [
            "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')",
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0",
        ],
        {},
    ),
    ("mig.nvidia.com", ["device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].flag == 1"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].flag == true"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].flag == '1'"], {}),
    (
        "gpu.nvidia.com",
        ["has(device.attributes['gpu.nvidia.com'].flag)"],
        {"allocationMode": "All"},
    ),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].?flag.orValue(0) == 0"], {}),
    (
        "gpu.nvidia.com",
        ["device.attributes['gpu.nvidia.com'].links.exists(l, l == 'nvlink-1')"],
        {},
    ),
    ("gpu.nvidia.com", ["device.allowMultipleAllocations"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].exists(k, k == 'flag')"], {}),
    ("gpu.nvidia.com", ["'resource.kubernetes.io' in device.attributes"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].numa == 1"], {"count": 4}),
    ("nic.example.com", ["device.attributes['nic.example.com'].speed > 100"], {}),
    (
        "nic.example.com",
        ["device.capacity['nic.example.com'].bandwidth.isGreaterThan(quantity('1G'))"],
        {"count": 2},
    ),
    ("mig.nvidia.com", ["device.attributes['gpu.nvidia.com'].profile == '7g.80gb'"], {}),
    ("gpu.nvidia.com", ["device.attributes['gpu.nvidia.com'].productname == 'x' &&"], {}),
    ("missing.example.com", [], {}),
]


def _varied_spec(indices: Sequence[int], constraints: list[dict[str, Any]]) -> dict[str, Any]:
    requests = []
    for i in indices:
        cls, exprs, extra = VARIED_REQUESTS[i]
        requests.append(_request(f"r{i}", cls, *exprs, **extra))
    requests.append(
        {
            "name": "fallback",
            "firstAvailable": [
                {
                    "name": "a",
                    "deviceClassName": "mig.nvidia.com",
                    "selectors": [
                        {
                            "cel": {
                                "expression": "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"
                            }
                        }
                    ],
                },
                {"name": "b", "deviceClassName": "mig.nvidia.com", "count": 2},
            ],
        }
    )
    return {"devices": {"requests": requests, "constraints": constraints}}


def _varied_specs() -> list[dict[str, Any]]:
    specs = [_varied_spec([i], []) for i in range(len(VARIED_REQUESTS))]
    specs.append(
        _varied_spec(
            [0, 1, 12],
            [
                {"requests": ["r0"], "matchAttribute": "gpu.nvidia.com/parentUUID"},
                {"requests": ["r1", "r12"], "matchAttribute": "resource.kubernetes.io/pciBusID"},
                {"matchAttribute": "gpu.nvidia.com/productName"},
            ],
        )
    )
    specs.append(
        _varied_spec(
            [8, 14],
            [
                {"matchAttribute": "gpu.nvidia.com/links"},
                {"matchAttribute": "nic.example.com/links"},
            ],
        )
    )
    return specs


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import json

    path = tmp_path_factory.mktemp("varied") / "fleet.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _varied_fleet()}))
    return path


def _streamed(path: Path, monkeypatch: pytest.MonkeyPatch, *, whole_maps: bool = True) -> Snapshot:
    """The streaming loader's Snapshot, in small slices; ``whole_maps=False``: as when
    maps are seldom shared (values shared one by one, whole maps looked up rarely)."""
    from dradiag.sources import fleet as streaming

    monkeypatch.setattr(streaming, "CHUNK_CHARS", 512)
    monkeypatch.setattr(streaming, "MAX_PROBE_CHARS", 4096)
    if not whole_maps:
        looked: list[bool] = []

        def look_up_maps(self: Any) -> bool:
            looked.append(self.map_slices % 3 == 0)
            return looked[-1]

        monkeypatch.setattr(streaming._Interner, "_look_up_maps", look_up_maps)
        snapshot = streaming.stream_slice_snapshot(str(path))
        assert True in looked and False in looked
        return snapshot
    return streaming.stream_slice_snapshot(str(path))


@pytest.mark.parametrize("source", ["ordinary", "streamed", "streamed-values"])
def test_grouped_evaluation_equals_device_by_device(
    varied: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dradiag.analyses.cel import compile_selector
    from dradiag.analyses.selection import device_outcomes, selection_problems

    snapshot = (
        load_snapshot(str(varied))
        if source == "ordinary"
        else _streamed(varied, monkeypatch, whole_maps=source == "streamed")
    )
    statuses = set()
    # Devices that do not convert make every class selector error on nodes 1 and 2.
    for nodes in (None, ["node-2", "node-4"], ["node-0", "node-3", "node-4", "node-5"]):
        grouped = build_inventory(snapshot, nodes=nodes)
        reference = build_inventory(snapshot, nodes=nodes, grouped=False)
        assert list(grouped.devices) == list(reference.devices)
        assert grouped.grouped and not reference.grouped
        if source != "ordinary" and nodes is None:
            assert grouped._index is not None  # the loader's notes were used
        for spec in _varied_specs():
            fast = analyze_claim_selection(
                snapshot, spec, namespace="ml", claim_name="c", inventory=grouped
            )
            slow = analyze_claim_selection(
                snapshot, spec, namespace="ml", claim_name="c", inventory=reference
            )
            assert fast == slow
            assert [p.finding for p in selection_problems(fast)] == [
                p.finding for p in selection_problems(slow)
            ]
            statuses |= {a.status for g in fast.requests for a in g.alternatives}
        for _, exprs, _ in VARIED_REQUESTS:
            for expression in exprs[:1]:
                try:
                    selector = compile_selector(expression)
                except Exception:
                    continue
                assert device_outcomes(grouped, selector) == device_outcomes(reference, selector)
    # The fleet exercises every verdict the grouping could get wrong.
    assert {
        RequestStatus.OK,
        RequestStatus.NO_MATCH,
        RequestStatus.ERROR,
        RequestStatus.COMPILE_ERROR,
        RequestStatus.CLASS_MISSING,
        RequestStatus.COUNT_INFEASIBLE,
    } <= statuses


ROW_EXPRESSIONS = [
    *(e for _, exprs, _ in VARIED_REQUESTS for e in exprs if not e.endswith("&&")),
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100' || "
    "device.attributes['productName'].productName == 'x'",
    "device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:')",
    "has(device.attributes['gpu.nvidia.com'].uuid) && "
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('575.0.0'))",
    "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('1Ti')) || "
    "device.attributes['gpu.nvidia.com'].flag == 1.0",
    "!has(device.attributes['gpu.nvidia.com'].profile)",
]


@pytest.mark.parametrize("source", ["ordinary", "streamed", "streamed-values"])
def test_devices_read_as_columns_give_the_device_by_device_outcomes(
    varied: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``device_outcomes`` by rows of read values (no CelDevice) equals the reference.

    The varied fleet has devices without the key, values that do not convert, both
    spellings of a name in both orders, and 1 / true / 1.0 under one name.
    """
    from dradiag.analyses.cel import compile_selector
    from dradiag.analyses.selection import device_outcomes
    from dradiag.analyses.selection.columns import row_outcomes

    snapshot = (
        load_snapshot(str(varied))
        if source == "ordinary"
        else _streamed(varied, monkeypatch, whole_maps=source == "streamed")
    )
    verdicts: set[Any] = set()
    by_rows = 0
    for nodes in (None, ["node-1", "node-3"]):
        reference = build_inventory(snapshot, nodes=nodes, grouped=False)
        for expression in ROW_EXPRESSIONS:
            selector = compile_selector(expression)
            expected = device_outcomes(reference, selector)
            got = row_outcomes(build_inventory(snapshot, nodes=nodes), selector)
            if got is None:
                assert selector.rows() is None
                continue
            by_rows += 1
            assert got == expected, expression
            verdicts |= {o if isinstance(o, bool) else "error" for o in got}
            assert device_outcomes(build_inventory(snapshot, nodes=nodes), selector) == expected
    assert by_rows >= 2 * (len(ROW_EXPRESSIONS) - 4)
    assert verdicts == {True, False, "error"}


@pytest.mark.parametrize("source", ["ordinary", "streamed"])
def test_a_device_converted_for_what_a_selector_reads_gives_the_same_outcome(
    varied: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cel_reading`` converts only the keys read; every selector sees what ``cel`` gives."""
    from dradiag.analyses.cel import CelRuntimeError, compile_selector
    from dradiag.analyses.selection.grouping import _ReadSpec

    snapshot = (
        load_snapshot(str(varied)) if source == "ordinary" else _streamed(varied, monkeypatch)
    )
    expressions = [e for _, exprs, _ in VARIED_REQUESTS for e in exprs] + [
        "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-0')",
        "device.attributes['resource.kubernetes.io'].pciBusID.endsWith(':00.0')",
        "has(device.attributes['gpu.nvidia.com'].parentUUID) && device.driver == 'gpu.nvidia.com'",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].numa == 1 || device.allowMultipleAllocations",
    ]

    def outcome(selector: Any, device: Any) -> Any:
        try:
            return selector.matches(device)
        except CelRuntimeError as exc:
            return str(exc)

    whole = build_inventory(snapshot, grouped=False)
    compared = partial = 0
    for expression in expressions:
        try:
            selector = compile_selector(expression)
        except Exception:  # noqa: BLE001 - the varied requests include compile errors
            continue
        spec = _ReadSpec.of([selector])
        inventory = build_inventory(snapshot)  # fresh: no device built whole before
        for i in range(len(inventory)):
            reading = inventory.cel_reading(i, spec)
            assert outcome(selector, reading) == outcome(selector, whole.cel(i)), (expression, i)
            compared += 1
            if not spec.whole and reading.vals != whole.cel(i).vals:
                # Not the whole device (that is the fallback for a key spelled both ways
                # and for a device that does not convert): only what the selector reads.
                seen = {(d, n) for d, names in reading.attributes.items() for n in names}
                seen |= {(d, n) for d, names in reading.capacity.items() for n in names}
                assert seen <= {(d, n) for _, d, n in spec.keys}
                assert len(reading.vals) == len(seen) < len(whole.cel(i).vals)
                partial += 1
    assert compared > 1000 and partial > compared // 2


@pytest.mark.parametrize("source", ["ordinary", "streamed"])
def test_devices_assembled_in_a_batch_are_those_assembled_one_by_one(
    varied: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cel_readings`` (the sweep's batch) gives each device as ``cel_reading`` does.

    The varied fleet holds what the batch's fast path leaves to ``cel_reading``: values
    to convert, a key spelled both ways, devices that do not convert.
    """
    from dradiag.analyses.cel import compile_selector
    from dradiag.analyses.selection.grouping import _ReadSpec

    snapshot = (
        load_snapshot(str(varied)) if source == "ordinary" else _streamed(varied, monkeypatch)
    )
    expressions = [
        "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-0')",
        "device.attributes['resource.kubernetes.io'].pciBusID.endsWith(':00.0')",
        "device.attributes['gpu.nvidia.com'].index == 0 && device.attributes['gpu.nvidia.com'].uuid != ''",
        "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA')",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('1.0.0')) >= 0",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        "device.attributes['gpu.nvidia.com'].numa == 1 || device.allowMultipleAllocations",
    ]
    fast = 0
    for expression in expressions:
        spec = _ReadSpec.of([compile_selector(expression)])
        one = build_inventory(snapshot)
        batch = build_inventory(snapshot)
        indices = list(range(len(one)))[::-1]  # any order, as a sweep's groups come
        batched = batch.cel_readings(indices, spec)
        assert len(batched) == len(indices)
        for i, device in zip(indices, batched, strict=True):
            single = one.cel_reading(i, spec)
            assert (device.driver, device.name, device.error) == (
                single.driver,
                single.name,
                single.error,
            ), (expression, i)
            assert dict(device.attributes) == dict(single.attributes), (expression, i)
            assert dict(device.capacity) == dict(single.capacity), (expression, i)
            assert device.shape == single.shape and device.vals == single.vals, (expression, i)
            assert device.allow_multiple_allocations == single.allow_multiple_allocations
            fast += device is batch.cel_readings([i], spec)[0]  # kept, as cel_reading keeps it
    assert fast == len(expressions) * len(build_inventory(snapshot))


def test_grouped_evaluation_names_the_errors_of_the_reference(varied: Path) -> None:
    snapshot = load_snapshot(str(varied))
    inventory = build_inventory(snapshot)
    errors = inventory.conversion_errors()
    named = {inventory.device(i).slice_device_name: e for i, e in errors.items()}
    assert set(named) == {"gpu-7-mig-bad-version", "gpu-8", "gpu-9"}
    assert "parse semantic version" in named["gpu-7-mig-bad-version"]
    assert all(inventory.cel(i).error == e for i, e in errors.items())


def test_constraint_counting_equals_the_sets(varied: Path) -> None:
    from dradiag.analyses.selection import _constraint_counts, _constraint_sets

    snapshot = load_snapshot(str(varied))
    inventory = build_inventory(snapshot)
    result = analyze_claim_selection(
        snapshot, _varied_specs()[-2], namespace="ml", claim_name="c", inventory=inventory
    )
    alternatives = [g.alternatives[0] for g in result.requests[:3]]
    for attribute in (
        "gpu.nvidia.com/parentUUID",
        "resource.kubernetes.io/pciBusID",
        "gpu.nvidia.com/productName",
        "gpu.nvidia.com/numa",
    ):
        counted = _constraint_counts(inventory, attribute, alternatives)
        assert counted is not None
        per, unions, totals, lacking = counted
        exact = _constraint_sets(inventory, attribute, alternatives)
        assert (per, totals, lacking) == exact[0:1] + exact[2:]
        assert list(per) == list(exact[0])  # same order: the closest node reported is the same
        assert all(unions[key] == n for key, n in exact[1].items())


def test_inventory_devices_convert_as_the_cel_engine_does(varied: Path) -> None:
    # The inventory shares conversions between devices; each device must still be what
    # cel_device makes of it ({"string": 1} is "1", {"string": true} is "True").
    from dradiag.analyses.cel import cel_device

    inventory = build_inventory(load_snapshot(str(varied)))
    for index, device in enumerate(inventory.devices):
        ours, engine = inventory.cel(index), cel_device(device.driver, device.raw)
        assert (ours.attributes, ours.capacity, ours.error) == (
            engine.attributes,
            engine.capacity,
            engine.error,
        ), device.ref
        assert ours.allow_multiple_allocations == engine.allow_multiple_allocations


@pytest.mark.parametrize("source", ["ordinary", "streamed"])
def test_catalogue_by_columns_equals_device_by_device(
    varied: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dradiag.analyses.selection import AttributeCatalogue

    snapshot = (
        load_snapshot(str(varied)) if source == "ordinary" else _streamed(varied, monkeypatch)
    )
    for nodes in (None, ["node-4"]):
        inventory = build_inventory(snapshot, nodes=nodes)
        assert inventory.catalogue == AttributeCatalogue.of(inventory.devices)


def test_the_loader_names_the_values_that_need_a_conversion_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain ``{"string": ...}`` values always convert; every other one is looked at."""
    import json

    from dradiag.sources.fleet import fleet_index

    odd = {
        "two-members": {"string": "a", "int": "x"},  # CEL reads the int: does not convert
        "quoted": {"string": 'q"uote'},
        "version": {"version": "1.2.3"},
        "count": {"int": 3},
        "null": {"string": None},
    }
    devices = []
    for i in range(6):
        attributes: dict[str, Any] = {"uuid": {"string": f"GPU-{i}"}}
        if i < len(odd):
            name = list(odd)[i]
            attributes[name] = odd[name]
        devices.append({"name": f"gpu-{i}", "attributes": attributes})
    item = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n"}},
    }
    items = [{**item, "spec": {**item["spec"], "devices": [d]}} for d in devices]
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    snapshot = _streamed(path, monkeypatch)
    index = fleet_index(snapshot)
    assert index is not None and index.checked_values is not None
    assert sorted(map(json.dumps, index.checked_values)) == sorted(map(json.dumps, odd.values()))
    inventory = build_inventory(snapshot)
    errors = inventory.conversion_errors()
    assert [inventory.ref(i) for i in errors] == [
        "gpu.nvidia.com/n/gpu-0",
        "gpu.nvidia.com/n/gpu-4",
    ]
    reference = build_inventory(load_snapshot(str(path)), grouped=False)
    assert errors == {i: reference.cel(i).error for i in range(6) if reference.cel(i).error}
