"""``FeatureGates.with_evidence``: gates proven on by fields stored in ResourceSlices.

The apiserver drops a gated field while its gate is off, so a stored one proves the gate
on whatever the version's defaults say (k8s-dra-semantics §4.3); gates set explicitly
(``--feature-gates``) are never changed by evidence.
"""

from __future__ import annotations

from typing import Any

import pytest

from dradiag.analyses.allocation import FeatureGates

COUNTERS = [{"counterSet": "gpu-0-counter-set", "counters": {"memory": {"value": "10Gi"}}}]
TAINT = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}


def slice_with(spec: dict[str, Any] | None = None, **device: Any) -> dict[str, Any]:
    """One slice of node-a: ``spec`` fields, and one device with ``device`` fields."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu.nvidia.com-0"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", **device}],
            **(spec or {}),
        },
    }


PLAIN = slice_with(attributes={"type": {"string": "gpu"}})

# (evidence, the slice that carries it, the gates it proves on)
EVIDENCE = [
    (
        "sharedCounters",
        slice_with({"sharedCounters": [{"name": "cs", "counters": {"memory": {"value": "80Gi"}}}]}),
        {"DRAPartitionableDevices"},
    ),
    (
        "perDeviceNodeSelection",
        slice_with({"perDeviceNodeSelection": True, "nodeName": None}, nodeName="node-a"),
        {"DRAPartitionableDevices"},
    ),
    (
        # A pointer field: stored at all (even false), the gate was on when it was written.
        "perDeviceNodeSelection false",
        slice_with({"perDeviceNodeSelection": False}),
        {"DRAPartitionableDevices"},
    ),
    ("consumesCounters", slice_with(consumesCounters=COUNTERS), {"DRAPartitionableDevices"}),
    ("taints", slice_with(taints=[TAINT]), {"DRADeviceTaints"}),
    (
        "bindingConditions",
        slice_with(bindingConditions=["dra.example.com/attached"]),
        {"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"},
    ),
    (
        "allowMultipleAllocations",
        slice_with(allowMultipleAllocations=True),
        {"DRAConsumableCapacity"},
    ),
]


@pytest.mark.parametrize(
    ("slc", "proves"), [(s, p) for _n, s, p in EVIDENCE], ids=[n for n, _s, _p in EVIDENCE]
)
def test_each_kind_of_evidence_turns_its_gates_on(slc: dict[str, Any], proves: set[str]) -> None:
    # 1.32: every one of these gates is off by default.
    base = FeatureGates.for_version("1.32")
    assert not proves & base.enabled
    gates = base.with_evidence([PLAIN, slc])
    assert gates.inferred == proves
    assert gates.enabled == base.enabled | proves
    assert gates.version == (1, 32) and not gates.overridden


def test_evidence_changes_what_the_allocator_does() -> None:
    # 1.34 runs the stable allocator; a shared device proves consumable capacity, which
    # only the incubating one supports; counters make partitionable devices usable.
    base = FeatureGates.for_version("1.34")
    assert base.variant == "stable" and not base.partitionable_devices
    gates = base.with_evidence(
        [slice_with(allowMultipleAllocations=True, consumesCounters=COUNTERS)]
    )
    assert gates.consumable_capacity and gates.partitionable_devices
    assert gates.variant == "incubating"
    assert gates.inferred == {"DRAConsumableCapacity", "DRAPartitionableDevices"}
    assert gates.to_dict()["inferredFromSlices"] == [
        "DRAConsumableCapacity",
        "DRAPartitionableDevices",
    ]


def test_binding_conditions_prove_only_the_gate_the_version_lacks() -> None:
    # 1.34 has DRAResourceClaimDeviceStatus on by default (beta 1.33), not binding conditions.
    base = FeatureGates.for_version("1.34")
    assert base.is_enabled("DRAResourceClaimDeviceStatus") and not base.binding_conditions
    gates = base.with_evidence([slice_with(bindingConditions=["dra.example.com/attached"])])
    assert gates.inferred == {"DRADeviceBindingConditions"}
    assert gates.binding_conditions


def test_gates_already_on_by_default_are_not_reported_as_inferred() -> None:
    base = FeatureGates.for_version("1.36")
    every = [s for _n, s, _p in EVIDENCE]
    gates = base.with_evidence(every)
    assert gates is base
    assert not gates.inferred


def test_evidence_adds_up_across_slices_and_keeps_the_version() -> None:
    gates = FeatureGates.for_version("1.33").with_evidence(
        [slice_with(taints=[TAINT]), PLAIN, slice_with(allowMultipleAllocations=True)]
    )
    assert gates.inferred == {"DRADeviceTaints", "DRAConsumableCapacity"}
    assert gates.version == (1, 33) and not gates.assumed
    assert not gates.partitionable_devices


@pytest.mark.parametrize(
    "slices",
    [
        [],
        [PLAIN],
        [slice_with(taints=[], consumesCounters=[], bindingConditions=[])],
        [slice_with({"sharedCounters": []})],
        [{"metadata": {"name": "no-spec"}}],
        [{"spec": {"devices": None}}],
    ],
    ids=["none", "plain", "empty-device-lists", "empty-shared-counters", "no-spec", "null-devices"],
)
def test_no_evidence_changes_nothing(slices: list[dict[str, Any]]) -> None:
    base = FeatureGates.for_version("1.32")
    gates = base.with_evidence(slices)
    assert gates is base
    assert not gates.inferred


def test_an_explicit_setting_wins_over_contradicting_evidence() -> None:
    # The user says the cluster runs with DRADeviceTaints off; a stored taint says it was
    # on when the slice was written. The explicit setting stands, the rest is inferred.
    base = FeatureGates.parse("DRADeviceTaints=false", base=FeatureGates.for_version("1.36"))
    gates = base.with_evidence(
        [slice_with(taints=[TAINT]), slice_with(allowMultipleAllocations=True)]
    )
    assert not gates.device_taints
    assert "DRADeviceTaints" not in gates.inferred
    assert gates.overridden == {"DRADeviceTaints"}
    older = FeatureGates.parse("DRADeviceTaints=false", base=FeatureGates.for_version("1.33"))
    mixed = older.with_evidence([slice_with(taints=[TAINT], allowMultipleAllocations=True)])
    assert not mixed.device_taints
    assert mixed.inferred == {"DRAConsumableCapacity"}


def test_evidence_on_an_unknown_version_starts_from_the_assumed_defaults() -> None:
    base = FeatureGates.for_version(None)
    assert base.assumed
    gates = base.with_evidence([slice_with(taints=[TAINT])])
    # The assumed release already has the gate on: nothing to infer, still assumed.
    assert gates is base and gates.device_taints and gates.assumed
