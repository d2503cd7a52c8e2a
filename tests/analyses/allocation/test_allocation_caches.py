"""The allocator's caches change nothing: warm results equal cold ones, fast paths equal slow.

What is shared between analyses of one snapshot (``SnapshotStore``: pool indexes, device
records, selector engines), between nodes (pools built once per distinct slices, selector
results per device) and between devices (quantities parsed once, selector results per
distinct attribute values) is checked against the same work done from scratch.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dradiag.analyses.allocation import FeatureGates, explain_across_nodes, simulate_allocation
from dradiag.analyses.allocation.candidates import (
    AllocatorError,
    DeviceEntry,
    SelectorEngine,
    _parse_consumes,
    device_entries,
)
from dradiag.analyses.allocation.search import (
    AllocatedState,
    AllocationContext,
    forget_snapshots,
    snapshot_store,
)
from dradiag.analyses.inventory import _fits_in, build_inventory
from dradiag.analyses.pools import (
    NANOS_OR_ZERO,
    PoolIndex,
    _check_devices,
    _counter_sets_of,
    _scan_devices,
    nanos_or_zero,
    pool_problems,
    quantity_nanos,
)
from dradiag.snapshot.model import Kind, Snapshot

VERSIONS = {
    "1.34": FeatureGates.for_version("1.34"),
    "1.35": FeatureGates.parse(
        "DRAPartitionableDevices=true", base=FeatureGates.for_version("1.35")
    ),
    "1.36": FeatureGates.for_version("1.36"),
    "1.36-lists": FeatureGates.parse(
        "DRAListTypeAttributes=true", base=FeatureGates.for_version("1.36")
    ),
    "1.37": FeatureGates.parse("DRADeviceTaintRules=true", base=FeatureGates.for_version("1.37")),
}


def _mixed(nv: Any) -> Snapshot:
    """Several nodes and pool shapes: split and combined DynamicMIG, static MIG with a
    tainted device, an incomplete pool, a network pool every node sees, a DeviceTaintRule,
    a list-valued attribute, and claims holding devices and counters."""
    slices: list[dict[str, Any]] = []
    claims = []
    nodes = []
    for i in range(3):
        name = f"split-{i}"
        nodes.append(nv.node(name, zone=f"z{i % 2}"))
        slices += nv.h100_split(name)
        held = [nv.result(name, f"gpu-0-mig-1g10gb-19-{j}") for j in range(2 * i)]
        claims.append(
            nv.claim(
                f"h-{name}", [nv.exactly("r", "mig.nvidia.com")], namespace="t", allocated=held
            )
        )
    nodes.append(nv.node("comb-0"))
    slices += nv.h100_combined("comb-0")
    claims.append(
        nv.claim(
            "h-comb",
            [nv.exactly("r", "mig.nvidia.com")],
            namespace="t",
            allocated=[nv.result("comb-0", "gpu-1-mig-4g40gb-5-0")],
        )
    )
    static = nv.a100_static_mig("a100-0")
    static[0]["spec"]["devices"][0]["taints"] = [
        {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    ]
    static[0]["spec"]["devices"][2]["attributes"]["zones"] = {"strings": ["a", "b"]}
    nodes.append(nv.node("a100-0"))
    slices += static
    nodes.append(nv.node("inc-0"))
    slices += nv.h100_split("inc-0")[1:]
    network = nv.a100_static_mig("x")[0]
    network["metadata"]["name"] = "fabric-0"
    del network["spec"]["nodeName"]
    network["spec"]["allNodes"] = True
    network["spec"]["pool"]["name"] = "fabric"
    slices.append(network)
    claims.append(
        nv.claim(
            "net",
            [nv.exactly("r", "mig.nvidia.com")],
            namespace="t",
            allocated=[
                {
                    "request": "r",
                    "driver": nv.DRIVER,
                    "pool": "fabric",
                    "device": "gpu-0-mig-1g5gb-19-0",
                }
            ],
        )
    )
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": {"driver": nv.DRIVER, "pool": "split-1"},
            "taint": {"key": "maintenance", "value": "x", "effect": "NoExecute"},
        },
    }
    return Snapshot(
        objects={
            Kind.RESOURCE_SLICE: slices,
            Kind.DEVICE_CLASS: nv.CLASSES,
            Kind.RESOURCE_CLAIM: claims,
            Kind.NODE: nodes,
            Kind.DEVICE_TAINT_RULE: [rule],
        }
    )


def _wanted(nv: Any) -> dict[str, list[dict[str, Any]]]:
    parent = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
    return {
        "four-on-one": [
            nv.claim(
                "four",
                [
                    nv.exactly(
                        "r", "mig.nvidia.com", count=4, selectors=[nv.profile_selector("1g.10gb")]
                    )
                ],
                constraints=parent,
            )
        ],
        "static": [
            nv.claim(
                "st",
                [
                    nv.exactly(
                        "r", "mig.nvidia.com", count=3, selectors=[nv.profile_selector("1g.5gb")]
                    )
                ],
                constraints=parent,
            )
        ],
        "gpu-and-mig": [
            nv.claim("g", [nv.exactly("r", "gpu.nvidia.com")]),
            nv.claim(
                "m", [nv.exactly("r", "mig.nvidia.com", selectors=[nv.profile_selector("3g.40gb")])]
            ),
        ],
        "error": [
            nv.claim(
                "bad",
                [
                    nv.exactly(
                        "r",
                        "mig.nvidia.com",
                        selectors=["device.attributes['gpu.nvidia.com'].nosuch == 'x'"],
                    )
                ],
            )
        ],
        "holder-itself": [
            nv.claim(
                "h-split-2",
                [nv.exactly("r", "mig.nvidia.com", count=2)],
                namespace="t",
                allocated=[nv.result("split-2", "gpu-0-mig-1g10gb-19-0")],
            )
        ],
    }


def _scrub(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: "<share>" if k == "shareID" else _scrub(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_scrub(v) for v in doc]
    return doc


def _explained(snapshot: Snapshot, claims: list[dict[str, Any]], gates: FeatureGates) -> Any:
    explanation = explain_across_nodes(snapshot, claims, features=gates)
    doc = explanation.to_dict()
    doc["simulations"] = [n.simulation.to_dict() for n in explanation.nodes]
    doc["findings"] = [repr(f) for f in explanation.findings()]
    return _scrub(doc)


def test_explanations_sharing_a_snapshot_equal_cold_ones(nv: Any) -> None:
    snapshot = _mixed(nv)
    wanted = _wanted(nv)
    forget_snapshots()
    warm = {
        (version, name): _explained(snapshot, claims, gates)
        for version, gates in VERSIONS.items()
        for name, claims in wanted.items()
    }
    assert len(snapshot_store(snapshot)._entries) > 0  # the calls above shared one store
    for (version, name), doc in warm.items():
        forget_snapshots()
        assert _explained(snapshot, wanted[name], VERSIONS[version]) == doc, (version, name)
    # A copy of the snapshot has its own store: the same answers from scratch.
    twin = Snapshot(objects={kind: copy.deepcopy(list(objs)) for kind, objs in _kinds(snapshot)})
    for version in ("1.36", "1.37"):
        assert (
            _explained(twin, wanted["four-on-one"], VERSIONS[version])
            == warm[(version, "four-on-one")]
        )


def _kinds(snapshot: Snapshot) -> list[tuple[Kind, Any]]:
    return [
        (Kind.RESOURCE_SLICE, snapshot.slices),
        (Kind.DEVICE_CLASS, snapshot.device_classes),
        (Kind.RESOURCE_CLAIM, snapshot.claims),
        (Kind.NODE, snapshot.nodes),
        (Kind.DEVICE_TAINT_RULE, snapshot.taint_rules),
    ]


def test_inventory_after_explanations_equals_cold_inventory(nv: Any) -> None:
    snapshot = _mixed(nv)
    forget_snapshots()
    cold = {v: build_inventory(snapshot, features=g).to_dict() for v, g in VERSIONS.items()}
    for version, gates in VERSIONS.items():
        _explained(snapshot, _wanted(nv)["four-on-one"], gates)
        assert build_inventory(snapshot, features=gates).to_dict() == cold[version]


def test_simulation_on_one_node_is_unchanged_by_a_warm_store(nv: Any) -> None:
    snapshot = _mixed(nv)
    claims = _wanted(nv)["four-on-one"]
    forget_snapshots()
    cold = simulate_allocation(snapshot, claims, "split-0", features=VERSIONS["1.37"]).to_dict()
    explain_across_nodes(snapshot, claims, features=VERSIONS["1.37"])
    warm = simulate_allocation(snapshot, claims, "split-0", features=VERSIONS["1.37"]).to_dict()
    assert _scrub(warm) == _scrub(cold)


def test_store_shares_the_in_use_state_only_when_the_excluded_claims_hold_nothing(nv: Any) -> None:
    snapshot = _mixed(nv)
    store = snapshot_store(snapshot)
    pending = store.allocated([("ml", "four")])
    assert pending is store.allocated([])
    # The claim being re-simulated holds a device: it must not count as in use for itself.
    own = store.allocated([("t", "h-split-2")])
    assert own is not pending
    assert (
        own.devices
        == AllocatedState.from_claims(snapshot.claims, exclude=[("t", "h-split-2")]).devices
    )
    assert ("gpu.nvidia.com", "split-2", "gpu-0-mig-1g10gb-19-0") in pending.devices
    assert ("gpu.nvidia.com", "split-2", "gpu-0-mig-1g10gb-19-0") not in own.devices


def test_context_without_a_shared_store_builds_its_own(nv: Any) -> None:
    snapshot = _mixed(nv)
    shared = AllocationContext(snapshot, VERSIONS["1.36"])
    alone = AllocationContext(snapshot, VERSIONS["1.36"], store=False)
    assert shared.store is snapshot_store(snapshot)
    assert alone.store is not shared.store
    assert alone.pool_index is not shared.pool_index


# -- pools ------------------------------------------------------------------------------------


def test_pools_are_built_once_per_distinct_slices_and_shared(nv: Any) -> None:
    snapshot = _mixed(nv)
    index = PoolIndex.from_snapshot(snapshot)
    a = {p.pool_id: p for p in index.gather(nv.node("split-0"))}
    b = {p.pool_id: p for p in index.gather(nv.node("split-1"))}
    assert a["gpu.nvidia.com/fabric"] is b["gpu.nvidia.com/fabric"]
    again = {p.pool_id: p for p in index.gather(nv.node("split-0"))}
    assert again["gpu.nvidia.com/split-0"] is a["gpu.nvidia.com/split-0"]
    # A fresh index builds equal pools (and validates them the same way).
    fresh = {p.pool_id: p for p in PoolIndex.from_snapshot(snapshot).gather(nv.node("split-0"))}
    assert fresh.keys() == a.keys()
    for pool_id, pool in fresh.items():
        assert pool is not a[pool_id]
        assert pool == a[pool_id]


def test_pool_problems_with_a_lent_index_equal_those_without(nv: Any) -> None:
    snapshot = _mixed(nv)
    dup = nv.h100_split("dup-0", gpus=1)
    dup.append(copy.deepcopy(dup[1]))
    dup[2]["metadata"]["name"] += "-again"
    for slc in dup:
        slc["spec"]["pool"]["resourceSliceCount"] = 3
    snapshot = Snapshot(objects={Kind.RESOURCE_SLICE: [*snapshot.slices, *dup]})
    for partitionable in (True, False):
        index = PoolIndex.from_snapshot(snapshot, partitionable=partitionable)
        for node in ("split-0", "dup-0", "inc-0"):
            index.gather(nv.node(node))
        lent = pool_problems(snapshot, partitionable=partitionable, index=index)
        assert lent == pool_problems(snapshot, partitionable=partitionable)
    kinds = {(p.pool, p.kind): p.reason for p in pool_problems(snapshot)}
    assert kinds[("dup-0", "invalid")] == "duplicate device name gpu-0"


def _slice(devices: list[dict[str, Any]], name: str = "s") -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"devices": devices}}


@pytest.mark.parametrize(
    "slices",
    [
        [_slice([{"name": "a"}, {"name": "b"}]), _slice([{"name": "c"}, {"name": "a"}])],
        [_slice([{"name": "a"}, {"name": "b"}, {"name": "b"}])],
        [_slice([{"name": None}, {"name": ""}])],
        [_slice([{"name": 1}, {"name": "1"}])],
        [
            _slice(
                [
                    {
                        "name": "a",
                        "consumesCounters": [{"counterSet": "cs", "counters": {"c1": {}}}],
                    },
                    {
                        "name": "b",
                        "consumesCounters": [{"counterSet": "cs", "counters": {"zz": {}}}],
                    },
                ]
            )
        ],
        [_slice([{"name": "a", "consumesCounters": [{"counterSet": "nope", "counters": {}}]}])],
        [
            _slice(
                [{"name": "a", "consumesCounters": [{"counterSet": "cs", "counters": ["c1", "x"]}]}]
            )
        ],
        [_slice([{"name": "a", "bindingConditions": ["ready"]}, {"name": "b"}])],
        [
            _slice(
                [{"name": "a", "consumesCounters": [{"counterSet": None, "counters": {"c1": {}}}]}]
            )
        ],
    ],
)
def test_device_checks_from_slice_summaries_equal_the_exact_scan(slices: list[dict]) -> None:
    counter_sets = {"cs": {"c1": 1, "c2": 2}}
    for sets in (counter_sets, None):
        for names in (True, False):
            assert _check_devices(slices, sets, {}, names=names) == _scan_devices(
                slices, sets, names=names
            )


# -- quantities and counters ------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["80Gi", "1", "0.5", "1e3", "bogus", "", None, 7, "12K"])
def test_quantity_cache_equals_parsing(raw: Any) -> None:
    text = str(raw if raw is not None else "0")
    try:
        expected = quantity_nanos(text)
    except ValueError:
        expected = 0
    assert nanos_or_zero(raw) == expected
    assert nanos_or_zero(raw) == expected  # cached
    assert NANOS_OR_ZERO[text] == expected


def _consumes_reference(uses: Any) -> Any:
    def nanos(v: Any) -> int:
        raw = v.get("value") if isinstance(v, dict) else v
        try:
            return quantity_nanos(str(raw if raw is not None else "0"))
        except ValueError:
            return 0

    return tuple(
        (
            str(use.get("counterSet") or ""),
            tuple((str(k), nanos(v)) for k, v in (use.get("counters") or {}).items()),
        )
        for use in uses or []
    )


@pytest.mark.parametrize(
    "uses",
    [
        [{"counterSet": "cs", "counters": {"memory": {"value": "10Gi"}, "s0": {"value": "1"}}}],
        [{"counterSet": "cs", "counters": {"memory": {"value": "never-seen-9Mi"}}}],
        [{"counterSet": "cs", "counters": {1: {"value": "1"}}}],
        [{"counterSet": "cs", "counters": {"m": {"value": 3}}}],
        [{"counterSet": "cs", "counters": {"m": {}}}],
        [{"counterSet": "cs", "counters": {"m": "2"}}],
        [{"counterSet": "cs", "counters": {"m": {"value": "bad"}}}],
        [{"counters": {"m": {"value": "1"}}}, {"counterSet": "b", "counters": {}}],
        [],
        None,
    ],
)
def test_parsed_consumption_equals_reference(uses: Any) -> None:
    assert _parse_consumes(uses) == _consumes_reference(uses)
    assert _parse_consumes(uses) == _consumes_reference(uses)  # now from the cache


def test_counter_sets_fast_path_equals_reference() -> None:
    slc = {
        "spec": {
            "sharedCounters": [
                {"name": "a", "counters": {"memory": {"value": "80Gi"}, "s0": {"value": "1"}}},
                {"name": "b", "counters": {2: {"value": "1"}, "x": {"value": "odd-value"}}},
                {"name": "c", "counters": {"y": {}}},
            ]
        }
    }
    sets, problem = _counter_sets_of([slc])
    assert problem is None
    assert sets == {
        "a": {"memory": 80 * 2**30 * 10**9, "s0": 10**9},
        "b": {"2": 10**9, "x": 0},
        "c": {"y": 0},
    }


def test_first_fit_check_reads_counters_like_the_parsed_consumption(nv: Any) -> None:
    (pool,) = PoolIndex(nv.h100_split("node-h", gpus=1)).gather(nv.node("node-h"))
    entries = device_entries(pool)
    have = {"gpu-0-counter-set": dict(pool.counter_sets["gpu-0-counter-set"])}
    have["gpu-0-counter-set"]["memory-slice-3"] = 0
    for entry in entries:
        lazy = _fits_in(entry, have)
        entry.consumes  # noqa: B018 - parse, then the parsed path answers
        assert _fits_in(entry, have) == lazy
        parsed = all(
            have.get(s, {}).get(c, 0) >= v for s, counters in entry.consumes for c, v in counters
        )
        assert lazy == parsed


# -- selectors --------------------------------------------------------------------------------


def _entries(nv: Any) -> list[DeviceEntry]:
    slices = nv.a100_static_mig("node-a")
    devices = slices[0]["spec"]["devices"]
    devices[3]["attributes"]["zones"] = {"strings": ["a", "b"]}  # only with list support
    devices[4]["attributes"]["broken"] = {}  # converts for no engine
    devices[5]["attributes"]["cudaComputeCapability"] = {"version": "not-a-version"}
    (pool,) = PoolIndex(slices).gather(nv.node("node-a"))
    return device_entries(pool)


@pytest.mark.parametrize(
    "expressions",
    [
        ["device.attributes['gpu.nvidia.com'].type == 'mig'"],
        [
            "device.driver == 'gpu.nvidia.com'",
            "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'",
        ],
        ["device.attributes['gpu.nvidia.com'].uuid.startsWith('MIG-')"],
        ["device.attributes['gpu.nvidia.com'].nosuch == 'x'"],
        ["device.attributes['gpu.nvidia.com'].type =="],
        ["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('4Gi')) > 0"],
        [],
    ],
)
def test_batched_and_cached_selector_results_equal_single_calls(
    nv: Any, expressions: list[str]
) -> None:
    selectors = [{"cel": {"expression": e}} for e in expressions]

    def outcome(engine: SelectorEngine, entry: DeviceEntry) -> Any:
        try:
            return engine.matches(selectors, entry, owner="class x")
        except AllocatorError as exc:
            return exc.message

    for list_types in (False, True):
        reference = [
            outcome(SelectorEngine(list_types=list_types, allow_multiple=True), entry)
            for entry in _entries(nv)
        ]
        # One engine, records shared with an engine of the other kind (as in a store).
        shared = _entries(nv)
        other = SelectorEngine(list_types=not list_types, allow_multiple=True)
        engine = SelectorEngine(list_types=list_types, allow_multiple=True)
        prepared = engine.prepare(selectors)
        other.match_many(other.prepare(selectors), shared, owner="class x")
        for _ in range(2):  # the second time from the results kept on each device
            batch = engine.match_many(prepared, shared, owner="class x")
            assert [r if isinstance(r, bool) else r.message for r in batch] == reference
            assert [outcome(engine, entry) for entry in shared] == reference


def _typed_entries(nv: Any, values: list[Any]) -> list[DeviceEntry]:
    devices = [
        {"name": f"d{i}", "attributes": {"x": value, "y": {"string": "a"}}}
        for i, value in enumerate(values)
    ]
    slc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "typed"},
        "spec": {
            "driver": "example.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }
    (pool,) = PoolIndex([slc]).gather(nv.node("node-a"))
    return device_entries(pool)


class _ByRawType:
    """A compiled selector that answers from the raw type of attribute ``x``: true only
    for a plain int (or ints), so a memo that lets Python's ``1 == True == 1.0`` merge
    keys hands a wrong answer to the second device."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def matches(self, entry: Any) -> bool:
        (value,) = entry.device["attributes"]["x"].values()
        if isinstance(value, list):
            return all(type(v) is int for v in value)
        return type(value) is int


@pytest.mark.parametrize(
    "expression",
    [
        "device.attributes['example.com'].x == 1",  # one read: the single-lookup key
        "device.attributes['example.com'].x == 1 && device.attributes['example.com'].y == 'a'",
    ],
)
def test_selector_memo_keys_keep_json_types_apart(nv: Any, expression: str) -> None:
    values = [
        {"int": 1},
        {"int": True},
        {"int": 1.0},
        {"bool": 1},
        {"bool": True},
        {"ints": [1, 2]},
        {"ints": [True, 2]},
    ]
    entries = _typed_entries(nv, values)
    engine = SelectorEngine(list_types=True, allow_multiple=True)
    real = engine.compile(expression)
    assert engine._keys[expression] is not None  # the memo is in play
    engine._compiled[expression] = _ByRawType(real)
    engine._cel_device = lambda entry: entry  # type: ignore[method-assign]
    got = [engine._evaluate(expression, engine._compiled[expression], e) for e in entries]
    assert got == [True, False, False, True, False, True, False]
    assert len(engine._results[expression]) == len(values)
