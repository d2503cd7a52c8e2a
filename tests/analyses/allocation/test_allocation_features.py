"""Feature gates by version, overrides, and the allocator variant they select (§3.1, §4.3)."""

from __future__ import annotations

import pytest

from dradiag.analyses.allocation import FeatureGates
from dradiag.errors import UsageError


def test_defaults_per_version_and_variant() -> None:
    v134 = FeatureGates.for_version("v1.34.2")
    assert v134.admin_access and v134.prioritized_list
    assert not v134.partitionable_devices and not v134.device_taints
    assert v134.variant == "stable" and v134.legacy_pools
    v136 = FeatureGates.for_version("1.36")
    assert v136.partitionable_devices and v136.consumable_capacity and v136.binding_conditions
    assert v136.variant == "incubating" and not v136.legacy_pools
    assert not v136.device_taint_rules
    assert FeatureGates.for_version(None).assumed


def test_overrides_and_variant_selection() -> None:
    gates = FeatureGates.parse(
        "DRAListTypeAttributes=true,DRAAdminAccess=false", base=FeatureGates.for_version("1.35")
    )
    assert gates.variant == "experimental"
    assert not gates.admin_access
    assert gates.overridden == frozenset({"DRAListTypeAttributes", "DRAAdminAccess"})
    half = FeatureGates.parse(
        "DRADeviceBindingConditions=true", base=FeatureGates.for_version("1.32")
    )
    assert not half.binding_conditions  # also needs DRAResourceClaimDeviceStatus


@pytest.mark.parametrize("text", ["DRAFoo=true", "DRAAdminAccess", "DRAAdminAccess=yes"])
def test_bad_gate_lists_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError, match="--feature-gates"):
        FeatureGates.parse(text)
