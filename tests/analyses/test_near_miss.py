"""Near-miss explanations, one test per kind of explanation, on realistic fleets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dradiag.analyses.near_miss import closest_devices, explain_request
from dradiag.analyses.selection import analyze_claim_selection, build_inventory
from dradiag.snapshot.model import Kind, Snapshot
from dradiag.sources.manifests import load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "selector_check"


@pytest.fixture(scope="module")
def fleet() -> Snapshot:
    return load_snapshot(str(FIXTURES / "slices"))


def _explain(snapshot: Snapshot, cls: str, expression: str, **extra: Any) -> Any:
    inventory = build_inventory(snapshot)
    spec = {
        "devices": {
            "requests": [
                {
                    "name": "r",
                    "exactly": {
                        "deviceClassName": cls,
                        "selectors": [{"cel": {"expression": expression}}],
                        **extra,
                    },
                }
            ]
        }
    }
    result = analyze_claim_selection(
        snapshot, spec, namespace="ml", claim_name="c", inventory=inventory
    )
    alt = result.requests[0].alternatives[0]
    return inventory, alt, explain_request(inventory, alt)


def _kinds(report: Any) -> set[str]:
    return {h.kind for h in report.hints}


def test_failing_clause_with_the_actual_value(fleet: Snapshot) -> None:
    _, alt, report = _explain(
        fleet,
        "gpu.nvidia.com",
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('90Gi')) >= 0",
    )
    assert alt.matched == 0
    closest = report.closest[0]
    # The H100 fails only the memory clause; its actual memory is shown.
    assert closest.device.startswith("gpu.nvidia.com/node-h/gpu-")
    assert closest.clauses == 2
    (failure,) = closest.failed
    assert failure.outcome == "false"
    assert "memory" in failure.clause
    assert failure.actual == (("device.capacity['gpu.nvidia.com'].memory", "80Gi"),)
    # Devices failing both clauses rank after it.
    assert all(len(n.failed) >= 1 for n in report.closest[1:])
    assert len(report.closest[-1].failed) == 2


def test_or_tree_reports_every_failing_operand(fleet: Snapshot) -> None:
    inventory, alt, _ = _explain(
        fleet,
        "mig.nvidia.com",
        "device.attributes['gpu.nvidia.com'].profile == '4g.40gb' || "
        "device.attributes['gpu.nvidia.com'].profile == '7g.40gb'",
    )
    near = closest_devices(inventory, alt, limit=1)[0]
    assert len(near.failed) == 2
    assert near.failed[0].actual[0][0] == "device.attributes['gpu.nvidia.com'].profile"


def test_unknown_key_suggests_the_closest_existing_one(fleet: Snapshot) -> None:
    _, _, report = _explain(
        fleet, "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].productname == 'x'"
    )
    (hint,) = [h for h in report.hints if h.kind == "unknown-key"]
    assert hint.rule == "DRA-SEL-UNKNOWN-ATTRIBUTE"
    assert "did you mean productName?" in hint.message


def test_renamed_key_of_an_older_driver(fleet: Snapshot) -> None:
    # v25.3/v25.8 published pcieBusID; v25.12+ resource.kubernetes.io/pciBusID. On a fleet
    # without v25.3 slices the old key is unknown, and the rename is named.
    newer = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: [
                s for s in fleet.slices if (s.get("spec") or {}).get("nodeName") != "node-old"
            ]
        }
    )
    _, _, report = _explain(
        newer, "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].pcieBusID == '0000:65:00.0'"
    )
    (hint,) = [h for h in report.hints if h.kind == "unknown-key"]
    assert "renamed in driver v25.12" in hint.message
    assert "device.attributes['resource.kubernetes.io'].pciBusID" in hint.message


def test_bare_key_read_under_the_wrong_domain(fleet: Snapshot) -> None:
    _, _, report = _explain(
        fleet, "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].pciBusID == '0000:65:00.0'"
    )
    (hint,) = [h for h in report.hints if h.kind == "wrong-domain"]
    assert hint.rule == "DRA-SEL-WRONG-DOMAIN"
    assert "use device.attributes['resource.kubernetes.io'].pciBusID" in hint.message
    _, _, report = _explain(
        fleet,
        "gpu.nvidia.com",
        "device.attributes['resource.kubernetes.io'].productName.startsWith('NVIDIA')",
    )
    assert "device.attributes['gpu.nvidia.com'].productName" in next(
        h.message for h in report.hints if h.kind == "wrong-domain"
    )


def test_version_compared_with_a_string(fleet: Snapshot) -> None:
    _, alt, report = _explain(
        fleet, "gpu.nvidia.com", "device.attributes['gpu.nvidia.com'].driverVersion >= '580.65.06'"
    )
    assert alt.request_selectors[0].errors[0].message.startswith("no such overload")
    (hint,) = [h for h in report.hints if h.kind == "type-mismatch"]
    assert "semver('580.65.6')" in hint.message
    assert "leading zeros dropped" in hint.message


def test_quantity_compared_with_a_number_and_string_with_number(fleet: Snapshot) -> None:
    _, _, report = _explain(
        fleet,
        "gpu.nvidia.com",
        "device.attributes['gpu.nvidia.com'].productName == 100 || "
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability > 8",
    )
    messages = [h.message for h in report.hints if h.kind == "type-mismatch"]
    assert any("productName is a string" in m for m in messages)
    assert any("cudaComputeCapability is a version" in m for m in messages)


def test_version_compared_as_a_string(fleet: Snapshot) -> None:
    _, _, report = _explain(
        fleet,
        "gpu.nvidia.com",
        "string(device.attributes['gpu.nvidia.com'].cudaComputeCapability) >= '10.0.0'",
    )
    (hint,) = [h for h in report.hints if h.kind == "version-as-string"]
    assert "'10.0.0' < '9.0.0' as strings" in hint.message
    assert "compareTo(semver('10.0.0'))" in hint.message


def test_mig_profile_spelled_like_the_device_name(fleet: Snapshot) -> None:
    _, alt, report = _explain(
        fleet,
        "mig.nvidia.com",
        "device.attributes['gpu.nvidia.com'].profile in ['1g10gb', '2g.10gb']",
    )
    assert alt.matched == 0
    hints = [h for h in report.hints if h.kind == "mig-profile"]
    assert len(hints) == 2
    assert "the profile attribute is '1g.10gb'" in hints[0].message
    assert "closest published profile" in hints[1].message
    assert hints[0].offset is not None


def test_profile_label_is_not_memory_capacity(fleet: Snapshot) -> None:
    _, alt, report = _explain(
        fleet,
        "mig.nvidia.com",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-PCIE-40GB' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('5Gi')) >= 0",
    )
    assert alt.matched == 0
    (hint,) = [h for h in report.hints if h.kind == "profile-capacity"]
    assert hint.rule == "DRA-SEL-PROFILE-CAPACITY"
    assert "1g.5gb publishes memory 4864Mi" in hint.message
    # ... and the closest device shows it too.
    near = report.closest[0]
    assert near.mig_profile == "1g.5gb"
    assert near.failed[0].actual == (("device.capacity['gpu.nvidia.com'].memory", "4864Mi"),)


def test_a_healthy_selector_gets_no_hints(fleet: Snapshot) -> None:
    _, alt, report = _explain(
        fleet,
        "mig.nvidia.com",
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb' && "
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0",
    )
    assert alt.matched == 16
    assert report.hints == () and report.closest == ()
