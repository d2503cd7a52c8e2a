"""The simulator on realistic gpu.nvidia.com slices: each allocator rule, and its explanation."""

from __future__ import annotations

from typing import Any

from dradiag.analyses.allocation import FeatureGates, explain_across_nodes, simulate_allocation
from dradiag.snapshot.model import Kind, Snapshot

V135 = FeatureGates.parse("DRAPartitionableDevices=true", base=FeatureGates.for_version("1.35"))
V136 = FeatureGates.for_version("1.36")


def snap(
    nv: Any,
    slices: list[dict],
    claims: list[dict] = (),
    nodes: list[str] = (),
    rules: list[dict] = (),
) -> Snapshot:  # type: ignore[assignment]
    return Snapshot(
        objects={
            Kind.RESOURCE_SLICE: slices,
            Kind.DEVICE_CLASS: nv.CLASSES,
            Kind.RESOURCE_CLAIM: list(claims),
            Kind.NODE: [nv.node(n) for n in nodes],
            Kind.DEVICE_TAINT_RULE: list(rules),
        }
    )


def devices_of(sim: Any) -> list[str]:
    return [r["device"] for item in sim.results for r in item["allocation"]["devices"]["results"]]


def test_dynamic_mig_match_parent_uuid_backtracks_where_greedy_fails(nv: Any) -> None:
    # GPU 0 has only 1g placement 6 free; a greedy pick of it for `lead` strands `rest`.
    held = [nv.result("node-h", f"gpu-0-mig-1g10gb-19-{i}") for i in range(6)]
    holder = nv.claim(
        "busy", [nv.exactly("r", "mig.nvidia.com", count=6)], namespace="team-a", allocated=held
    )
    wanted = nv.claim(
        "train",
        [
            nv.exactly("lead", "mig.nvidia.com", selectors=[nv.profile_selector("1g.10gb")]),
            nv.exactly(
                "rest", "mig.nvidia.com", count=3, selectors=[nv.profile_selector("1g.10gb")]
            ),
        ],
        constraints=[{"matchAttribute": "gpu.nvidia.com/parentUUID"}],
    )
    cluster = snap(nv, nv.h100_split("node-h"), [holder], ["node-h"])
    # ≤1.36 schedulers leak the counters of devices the constraint rejects and fail here.
    sim = simulate_allocation(cluster, [wanted], "node-h", features=V136)
    assert sim.outcome == "unschedulable"
    assert sim.upstream_bug == "kubernetes/kubernetes#140436"
    assert sim.combination  # every request passes its funnel alone
    sim = simulate_allocation(
        cluster, [wanted], "node-h", features=FeatureGates.for_version("1.37")
    )
    assert sim.outcome == "allocated", sim.error
    picked = devices_of(sim)
    assert picked == [
        "gpu-1-mig-1g10gb-19-0",
        "gpu-1-mig-1g10gb-19-1",
        "gpu-1-mig-1g10gb-19-2",
        "gpu-1-mig-1g10gb-19-3",
    ]
    assert sim.results[0]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"
    ] == ["node-h"]


def test_counters_exhausted_by_full_profile_split_and_combined(nv: Any) -> None:
    holder = nv.claim(
        "big",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="team-b",
        allocated=[nv.result("node-h", "gpu-0-mig-7g80gb-0-0")],
    )
    wanted = nv.claim(
        "small", [nv.exactly("r", "mig.nvidia.com", selectors=[nv.profile_selector("1g.10gb")])]
    )
    for slices, gates in (
        (nv.h100_split("node-h", gpus=1), V135),
        (
            nv.h100_combined("node-h", gpus=1),
            FeatureGates.parse(
                "DRAPartitionableDevices=true", base=FeatureGates.for_version("1.34")
            ),
        ),
    ):
        sim = simulate_allocation(
            snap(nv, slices, [holder], ["node-h"]), [wanted], "node-h", features=gates
        )
        assert sim.outcome == "unschedulable"
        assert sim.error == "cannot allocate all claims"
        (funnel,) = sim.explanation
        assert funnel.blocking == "counters"
        assert funnel.description == "mig 1g.10gb partition"
        assert [s.count for s in funnel.stages][:5] == [19, 18, 7, 7, 0]
        assert "team-b/big" in funnel.holders
        assert any(c.startswith("gpu-0-counter-set/memory-slice-") for c in funnel.counters)


def test_combined_model_counters_count_only_same_pool(nv: Any) -> None:
    # A 1g partition on GPU 0 leaves GPU 0's 7g impossible but GPU 1's possible.
    holder = nv.claim(
        "one",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="t",
        allocated=[nv.result("node-h", "gpu-0-mig-1g10gb-19-3")],
    )
    wanted = nv.claim(
        "full", [nv.exactly("r", "mig.nvidia.com", selectors=[nv.profile_selector("7g.80gb")])]
    )
    v134 = FeatureGates.parse("DRAPartitionableDevices=true", base=FeatureGates.for_version("1.34"))
    cluster = snap(nv, nv.h100_combined("node-h"), [holder], ["node-h"])
    assert devices_of(simulate_allocation(cluster, [wanted], "node-h", features=v134)) == [
        "gpu-1-mig-7g80gb-0-0"
    ]
    # ≥1.35 reads slices that carry sharedCounters as counters only: their devices vanish.
    later = simulate_allocation(cluster, [wanted], "node-h", features=V136)
    assert later.outcome == "unschedulable"
    assert later.explanation[0].stages[0].count == 0


def test_static_mig_in_use_and_funnel_names_holders(nv: Any) -> None:
    holder = nv.claim(
        "inference",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="serving",
        allocated=[nv.result("node-a", "gpu-0-mig-1g5gb-19-0")],
    )
    two = nv.claim("two", [nv.exactly("r", "mig.nvidia.com", count=2)])
    sim = simulate_allocation(
        snap(nv, nv.a100_static_mig("node-a"), [holder], ["node-a"]), [two], "node-a", features=V136
    )
    assert devices_of(sim) == ["gpu-0-mig-1g5gb-19-1", "gpu-0-mig-1g5gb-19-2"]
    seven = nv.claim("seven", [nv.exactly("r", "mig.nvidia.com", count=7)])
    sim = simulate_allocation(
        snap(nv, nv.a100_static_mig("node-a"), [holder], ["node-a"]),
        [seven],
        "node-a",
        features=V136,
    )
    assert sim.outcome == "unschedulable"
    (funnel,) = sim.explanation
    assert funnel.blocking == "free"
    assert funnel.holders == ("serving/inference",)
    assert "only 6 mig 1g.5gb partitions free" in funnel.reason


def test_simulated_claim_own_allocation_is_not_in_use(nv: Any) -> None:
    # Re-simulating an allocated claim must not count its own devices as taken.
    mine = nv.claim(
        "mine", [nv.exactly("r", "gpu.nvidia.com")], allocated=[nv.result("node-a", "gpu-1")]
    )
    sim = simulate_allocation(
        snap(nv, nv.a100_static_mig("node-a"), [mine], ["node-a"]), [mine], "node-a", features=V136
    )
    assert devices_of(sim) == ["gpu-1"]


def test_vfio_sibling_selected_by_class(nv: Any) -> None:
    wanted = nv.claim("vm", [nv.exactly("r", "vfio.gpu.nvidia.com")])
    sim = simulate_allocation(
        snap(nv, nv.vfio_slice("node-v"), [], ["node-v"]), [wanted], "node-v", features=V136
    )
    assert devices_of(sim) == ["gpu-vfio-0"]
    gpu = nv.claim("gpu", [nv.exactly("r", "gpu.nvidia.com")])
    sim = simulate_allocation(
        snap(nv, nv.vfio_slice("node-v"), [], ["node-v"]), [gpu], "node-v", features=V136
    )
    assert devices_of(sim) == ["gpu-0"]


def _taint(slices: list[dict], device: str, effect: str, value: str = "48") -> list[dict]:
    for slc in slices:
        for dev in slc["spec"].get("devices", []):
            if dev["name"] == device:
                dev["taints"] = [{"key": "gpu.nvidia.com/xid", "value": value, "effect": effect}]
    return slices


def test_taints_block_unless_tolerated_and_none_effect_is_ignored(nv: Any) -> None:
    wanted = nv.claim("job", [nv.exactly("r", "gpu.nvidia.com")])
    slices = _taint(nv.a100_static_mig("node-a"), "gpu-1", "NoSchedule")
    sim = simulate_allocation(snap(nv, slices, [], ["node-a"]), [wanted], "node-a", features=V136)
    assert sim.outcome == "unschedulable"
    assert sim.explanation[0].blocking == "tolerated"
    assert "gpu.nvidia.com/xid=48:NoSchedule" in sim.explanation[0].reason

    toleration = {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoSchedule"}
    tolerant = nv.claim("job", [nv.exactly("r", "gpu.nvidia.com", tolerations=[toleration])])
    sim = simulate_allocation(snap(nv, slices, [], ["node-a"]), [tolerant], "node-a", features=V136)
    assert devices_of(sim) == ["gpu-1"]
    assert sim.results[0]["allocation"]["devices"]["results"][0]["tolerations"] == [toleration]

    none_effect = _taint(nv.a100_static_mig("node-a"), "gpu-1", "None", value="43")
    sim = simulate_allocation(
        snap(nv, none_effect, [], ["node-a"]), [wanted], "node-a", features=V136
    )
    assert devices_of(sim) == ["gpu-1"]

    # Before 1.36 DRADeviceTaints is off by default: the taint is not enforced.
    sim = simulate_allocation(snap(nv, slices, [], ["node-a"]), [wanted], "node-a", features=V135)
    assert devices_of(sim) == ["gpu-1"]


def test_device_taint_rule_merged_only_with_its_gate(nv: Any) -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain-gpu-1"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-1"},
            "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"},
        },
    }
    wanted = nv.claim("job", [nv.exactly("r", "gpu.nvidia.com")])
    cluster = snap(nv, nv.a100_static_mig("node-a"), [], ["node-a"], rules=[rule])
    on = FeatureGates.parse("DRADeviceTaintRules=true", base=V136)
    sim = simulate_allocation(cluster, [wanted], "node-a", features=on)
    assert sim.outcome == "unschedulable"
    assert "DeviceTaintRule drain-gpu-1" in sim.explanation[0].stages[5].removed[0]["taints"][0]
    assert simulate_allocation(cluster, [wanted], "node-a", features=V136).outcome == "allocated"


def test_all_mode_fails_with_one_device_in_use(nv: Any) -> None:
    holder = nv.claim(
        "one",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="t",
        allocated=[nv.result("node-a", "gpu-0-mig-1g5gb-19-4")],
    )
    everything = nv.claim(
        "all",
        [{"name": "r", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "All"}}],
    )
    cluster = snap(nv, nv.a100_static_mig("node-a"), [holder], ["node-a"])
    sim = simulate_allocation(cluster, [everything], "node-a", features=V136)
    assert sim.outcome == "unschedulable"
    (funnel,) = sim.explanation
    assert funnel.needed is None
    assert funnel.blocking == "free"
    assert funnel.holders == ("t/one",)
    free = snap(nv, nv.a100_static_mig("node-a"), [], ["node-a"])
    assert len(devices_of(simulate_allocation(free, [everything], "node-a", features=V136))) == 7


def test_incomplete_pool_differs_between_134_and_135(nv: Any) -> None:
    slices = nv.a100_static_mig("node-a")
    slices[0]["spec"]["pool"]["resourceSliceCount"] = 2  # a second slice never arrived
    wanted = nv.claim("job", [nv.exactly("r", "gpu.nvidia.com")])
    cluster = snap(nv, slices, [], ["node-a"])
    new = simulate_allocation(cluster, [wanted], "node-a", features=V135)
    assert new.outcome == "unschedulable"
    assert new.pools[0]["state"] == "incomplete"
    old = simulate_allocation(
        cluster, [wanted], "node-a", features=FeatureGates.for_version("1.34")
    )
    assert devices_of(old) == ["gpu-1"]
    every = nv.claim(
        "all",
        [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}],
    )
    err = simulate_allocation(cluster, [every], "node-a", features=V135)
    assert err.outcome == "error"
    assert err.error == (
        "claim ml/all, request r: asks for all devices, but resource pool "
        "gpu.nvidia.com/node-a is currently being updated"
    )


def test_first_available_falls_through_to_smaller_profile(nv: Any) -> None:
    holder = nv.claim(
        "one",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="t",
        allocated=[nv.result("node-h", "gpu-0-mig-1g10gb-19-0")],
    )
    wanted = nv.claim(
        "flex",
        [
            {
                "name": "gpu",
                "firstAvailable": [
                    {
                        "name": "full",
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [{"cel": {"expression": nv.profile_selector("7g.80gb")}}],
                    },
                    {
                        "name": "half",
                        "deviceClassName": "mig.nvidia.com",
                        "selectors": [{"cel": {"expression": nv.profile_selector("3g.40gb")}}],
                    },
                ],
            }
        ],
    )
    sim = simulate_allocation(
        snap(nv, nv.h100_split("node-h", gpus=1), [holder], ["node-h"]),
        [wanted],
        "node-h",
        features=V136,
    )
    results = sim.results[0]["allocation"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("gpu/half", "gpu-0-mig-3g40gb-9-4")]


def test_cel_runtime_error_aborts_naming_claim_selector_and_device(nv: Any) -> None:
    # DynamicMIG partitions publish no uuid: the scheduler aborts, it does not skip them.
    wanted = nv.claim(
        "bad",
        [
            nv.exactly(
                "r",
                "mig.nvidia.com",
                selectors=["device.attributes['gpu.nvidia.com'].uuid.startsWith('MIG-')"],
            )
        ],
    )
    sim = simulate_allocation(
        snap(nv, nv.h100_split("node-h", gpus=1), [], ["node-h"]), [wanted], "node-h", features=V136
    )
    assert sim.outcome == "error"
    assert sim.scheduler_status == "Error"
    assert sim.error is not None
    assert sim.error.startswith(
        "claim ml/bad: selector #0 on device gpu.nvidia.com/node-h/gpu-0-mig-1g10gb-19-0: "
        "CEL runtime error: no such key: uuid"
    )


def test_claim_limit_of_32(nv: Any) -> None:
    wanted = nv.claim("huge", [nv.exactly("r", "mig.nvidia.com", count=33)])
    sim = simulate_allocation(
        snap(nv, nv.h100_split("node-h"), [], ["node-h"]), [wanted], "node-h", features=V136
    )
    assert sim.outcome == "error"
    assert (
        sim.error == "claim ml/huge: number of requested devices 33 exceeds the claim limit of 32"
    )


def test_explain_across_nodes_summarizes_and_finds(nv: Any) -> None:
    slices = (
        nv.h100_split("node-1", gpus=1)
        + nv.h100_split("node-2", gpus=1)
        + nv.h100_split("node-3", gpus=1)
    )
    holders = [
        nv.claim(
            f"big-{n}",
            [nv.exactly("r", "mig.nvidia.com")],
            namespace="team-b",
            allocated=[nv.result(f"node-{n}", "gpu-0-mig-7g80gb-0-0")],
        )
        for n in (1, 2)
    ]
    wanted = nv.claim(
        "small", [nv.exactly("r", "mig.nvidia.com", selectors=[nv.profile_selector("1g.10gb")])]
    )
    cluster = snap(nv, slices, holders, ["node-1", "node-2", "node-3"])
    found = explain_across_nodes(cluster, [wanted], features=V136)
    assert found.fitting_nodes == ["node-3"]
    assert [f.rule for f in found.findings()] == ["DRA-ALLOC-FITS"]

    blocked = explain_across_nodes(cluster, [wanted], nodes=["node-1", "node-2"], features=V136)
    assert blocked.binding == "counters"
    assert blocked.binding_rule == "DRA-ALLOC-COUNTERS-EXHAUSTED"
    assert blocked.summary[0].startswith("on 2 of 2 nodes counters gpu-0-counter-set/")
    assert blocked.summary[0].endswith("are consumed by claim team-b/big-1, team-b/big-2")
    (finding,) = blocked.findings()
    assert finding.rule == "DRA-ALLOC-COUNTERS-EXHAUSTED"
    assert ("claim", "team-b/big-1") in finding.identifiers


def test_explain_across_nodes_in_use_summary(nv: Any) -> None:
    slices = nv.a100_static_mig("node-1") + nv.a100_static_mig("node-2")
    holders = [
        nv.claim(
            f"mig-{n}",
            [nv.exactly("r", "mig.nvidia.com", count=7)],
            namespace="t",
            allocated=[nv.result(f"node-{n}", f"gpu-0-mig-1g5gb-19-{i}") for i in range(7)],
        )
        for n in (1, 2)
    ]
    wanted = nv.claim("one", [nv.exactly("r", "mig.nvidia.com")])
    found = explain_across_nodes(
        snap(nv, slices, holders, ["node-1", "node-2"]), [wanted], features=V136
    )
    # The summary names examples of the devices in use and the claims holding them.
    assert found.summary == [
        "on 2 of 2 nodes every mig 1g.5gb partition is in use (gpu-0-mig-1g5gb-19-0, "
        "gpu-0-mig-1g5gb-19-1, gpu-0-mig-1g5gb-19-2 …), held by t/mig-1, t/mig-2"
    ]
    assert found.findings()[0].rule == "DRA-ALLOC-ALL-IN-USE"


def test_counters_stage_with_partitionable_devices_off_names_no_counter(nv: Any) -> None:
    # 1.34 defaults: DRAPartitionableDevices off, so allocateDevice refuses every device
    # that consumes counters; no counter is short, and none may be named.
    slices = nv.h100_split("node-1", gpus=1) + nv.h100_split("node-2", gpus=1)
    wanted = nv.claim(
        "small", [nv.exactly("r", "mig.nvidia.com", selectors=[nv.profile_selector("1g.10gb")])]
    )
    v134 = FeatureGates.for_version("1.34")
    assert not v134.partitionable_devices
    blocked = explain_across_nodes(
        snap(nv, slices, [], ["node-1", "node-2"]), [wanted], features=v134
    )
    assert blocked.binding == "counters"
    (line,) = blocked.summary
    assert "are consumed" not in line and "is consumed" not in line
    assert line == (
        "on 2 of 2 nodes: 7 free mig 1g.10gb partitions consume shared counters, which the "
        "allocator refuses while DRAPartitionableDevices is off (0 left, need 1)"
    )
    (funnel,) = blocked.nodes[0].simulation.explanation
    assert funnel.counters == ()
    assert funnel.reason.startswith("7 free mig 1g.10gb partitions consume shared counters")
    (finding,) = blocked.findings()
    assert finding.detail == line
