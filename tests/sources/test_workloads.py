"""selector-check's manifest reader: every input kind, claim resolution, expression positions."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dradiag.errors import InputError
from dradiag.sources.manifests import load_snapshot
from dradiag.sources.workloads import (
    find_pod_specs,
    load_device_snapshot,
    load_manifests,
    stream_slice_snapshot,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "selector_check"
MANIFESTS = FIXTURES / "manifests"
WORKLOADS = FIXTURES / "workloads"
SLICES = FIXTURES / "slices"


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def test_claims_of_every_resource_version_are_normalized() -> None:
    found = load_manifests([str(MANIFESTS / "broken-claims.yaml")])
    by_name = {c.name: c for c in found.claims}
    assert set(by_name) == {"h100-by-name", "mig-by-uuid", "new-driver", "typo"}
    # v1beta1: top-level deviceClassName/selectors moved under `exactly`.
    v1beta1 = by_name["h100-by-name"]
    assert v1beta1.api_version == "resource.k8s.io/v1beta1"
    request = v1beta1.spec["devices"]["requests"][0]
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert "productname" in request["exactly"]["selectors"][0]["cel"]["expression"]
    assert by_name["mig-by-uuid"].api_version == "resource.k8s.io/v1beta2"


def test_plain_quoted_expression_position() -> None:
    path = MANIFESTS / "broken-claims.yaml"
    claim = next(c for c in load_manifests([str(path)]).claims if c.name == "h100-by-name")
    site = claim.selector_sites[("gpu", None, 0)]
    line = _line_of(path, "productname.startsWith")
    text = path.read_text().splitlines()[line - 1]
    assert site.location.line == line
    # The double-quoted scalar starts at the quote; offset 0 is the character after it.
    assert site.location.column == text.index('"') + 1
    start = site.position_of(0)
    assert text[start.column - 1 : start.column - 1 + 6] == "device"
    dot = site.position_of(len("device.attributes['gpu.nvidia.com']"))
    assert text[dot.column - 1 :].startswith(".productname")


def test_block_scalar_positions_map_onto_content_lines() -> None:
    path = MANIFESTS / "broken-claims.yaml"
    claims = {c.name: c for c in load_manifests([str(path)]).claims}
    literal = claims["mig-by-uuid"].selector_sites[("mig", None, 0)]
    line = _line_of(path, "uuid.startsWith('MIG-')")
    assert literal.location.line == line
    assert literal.location.column == 15
    folded = claims["new-driver"].selector_sites[("gpu", None, 0)]
    expression = claims["new-driver"].spec["devices"]["requests"][0]["exactly"]["selectors"][0][
        "cel"
    ]["expression"]
    second = expression.index("device.capacity")
    where = folded.position_of(second)
    assert where.line == _line_of(path, "device.capacity['gpu.nvidia.com'].memory")
    assert where.column == 15


def test_workloads_found_by_shape_and_resolved_by_name() -> None:
    found = load_manifests([str(WORKLOADS)])
    kinds = {w.kind: w for w in found.workloads}
    assert set(kinds) == {"CronJob", "JobSet", "ClusterTrainingRuntime", "Pod", "TrainJob"}
    assert kinds["CronJob"].pod_spec_paths == ("spec.jobTemplate.spec.template.spec",)
    assert kinds["JobSet"].pod_spec_paths == ("spec.replicatedJobs[0].template.spec.template.spec",)
    assert kinds["TrainJob"].pod_spec_paths == ("spec.podTemplateOverrides[0].spec",)
    for kind in ("CronJob", "JobSet", "Pod", "ClusterTrainingRuntime"):
        (use,) = kinds[kind].claim_uses
        assert use.resolved is not None, kind
        assert use.resolved.ref == "ResourceClaimTemplate ml/one-mig"
    # Pre-1.31 pods nest the reference under `source:`.
    assert kinds["Pod"].claim_uses[0].resource_claim_template_name == "one-mig"
    (missing,) = kinds["TrainJob"].claim_uses
    assert missing.resolved is None
    assert "ResourceClaim ml/shared-h100 not found" in (missing.problem or "")
    assert missing.location.path.endswith("trainjob.json")
    assert any("StatefulSet no-claims" in i for i in found.ignored)


def test_references_resolve_against_the_device_source() -> None:
    snapshot = load_snapshot(str(SLICES))
    claim_template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-mig", "namespace": "ml"},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "m", "deviceClassName": "mig.nvidia.com"}]}}
        },
    }
    from dradiag.snapshot.model import Kind, Snapshot

    cluster = Snapshot(
        objects={
            Kind.RESOURCE_SLICE: snapshot.slices,
            Kind.RESOURCE_CLAIM_TEMPLATE: [claim_template],
        }
    )
    pod = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\n"
        b"spec:\n  resourceClaims: [{name: g, resourceClaimTemplateName: one-mig}]\n"
        b"  containers: [{name: c, image: busybox}]\n"
    )
    found = load_manifests(["-"], snapshot=cluster, stdin=io.BytesIO(pod))
    (use,) = found.workloads[0].claim_uses
    assert use.resolved is not None and use.resolved.origin == "cluster"
    assert found.cluster_claims == (use.resolved,)
    assert use.resolved.spec["devices"]["requests"][0]["exactly"]["deviceClassName"] == (
        "mig.nvidia.com"
    )


def test_find_pod_specs_does_not_descend_into_metadata_or_pod_specs() -> None:
    obj = {
        "metadata": {"annotations": {"containers": []}},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}], "x": {"containers": []}}}},
    }
    assert [p for p, _ in find_pod_specs(obj)] == ["spec.template.spec"]


def test_malformed_yaml_is_an_input_error_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nspec: [unclosed\n")
    with pytest.raises(InputError) as info:
        load_manifests([str(bad)])
    assert info.value.path == str(bad)
    assert info.value.line is not None


def test_missing_file_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no such file"):
        load_manifests(["/nonexistent/claims.yaml"])


def test_streamed_json_equals_the_ordinary_loader(tmp_path: Path) -> None:
    import json

    import yaml

    items = []
    for path in sorted(SLICES.glob("*.yaml")):
        items += [d for d in yaml.safe_load_all(path.read_text()) if d]
    target = tmp_path / "fleet.json"
    target.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1))
    streamed = stream_slice_snapshot(str(target))
    ordinary = load_snapshot(str(target))
    assert streamed.slices == ordinary.slices
    # Interning shares equal values between devices without changing them.
    devices = [d for s in streamed.slices for d in s["spec"].get("devices", ())]
    migs = [d for d in devices if d["attributes"]["type"] == {"string": "mig"}]
    assert len({id(d["attributes"]["type"]) for d in migs}) == 1


def test_stream_rejects_malformed_json_with_position(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "List", "items": [{"kind": "ResourceSlice",}]}')
    with pytest.raises(InputError) as info:
        stream_slice_snapshot(str(bad))
    assert info.value.line == 1


def test_device_snapshot_small_files_use_the_ordinary_loader() -> None:
    snapshot = load_device_snapshot(str(SLICES))
    assert len(snapshot.slices) == 6
