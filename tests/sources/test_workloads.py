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
    assert start.column is not None
    assert text[start.column - 1 : start.column - 1 + 6] == "device"
    dot = site.position_of(len("device.attributes['gpu.nvidia.com']"))
    assert dot.column is not None
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


# -- the streaming loader's fast path (sources.fleet) ------------------------------------


def _slice_item(n: int, note: str = "") -> dict[str, object]:
    devices = [
        {
            "name": f"gpu-{g}",
            "attributes": {
                "type": {"string": "gpu" if g else "mig"},
                "note": {"string": note},
                "uuid": {"string": f"GPU-{n}-{g}"},
                "numa": {"int": g % 2},
            },
            "capacity": {"memory": {"value": "80Gi"}},
            "consumesCounters": [{"counterSet": "s", "counters": {"memory": {"value": "1"}}}],
        }
        for g in range(3)
    ]
    return {
        "metadata": {"name": f"slice-{n}"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": f"node-{n}",
            "pool": {"name": f"node-{n}", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


# Strings that look like item boundaries, or unbalance a naive brace count.
TRICKY_NOTES = ["", "}, {", "}},{{", "{{{", "}]}", '"quoted" },\n {', "ünïcode ✓", "\\"]


@pytest.fixture()
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    from dradiag.sources import fleet

    monkeypatch.setattr(fleet, "CHUNK_CHARS", 300)
    monkeypatch.setattr(fleet, "MAX_PROBE_CHARS", 20_000)


def _stdlib_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from dradiag.sources import fleet

    monkeypatch.setattr(fleet, "_orjson_loads", lambda: None)


@pytest.mark.parametrize("indent", [None, 4])
@pytest.mark.parametrize("layout", ["kind-first", "items-first", "array"])
@pytest.mark.parametrize("typed", [False, True])
def test_slices_of_the_array_decode_as_item_by_item(
    indent: int | None,
    layout: str,
    typed: bool,
    small_chunks: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import json

    from dradiag.sources import fleet

    items = [_slice_item(n, TRICKY_NOTES[n % len(TRICKY_NOTES)]) for n in range(60)]
    if typed:
        # Items that begin alike (the boundary is then found by their opening), some
        # holding a nested list of objects that begin the same way (decoys).
        head = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
        items = [{**head, **item} for item in items]
        for n in range(0, 60, 7):
            decoy = {**head, "metadata": {"name": "decoy"}}
            items[n]["spec"]["decoys"] = [{"a": 1}, decoy, decoy]  # type: ignore[index]
    doc: object
    if layout == "kind-first":
        doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "items": items}
    elif layout == "items-first":  # kubectl's key order: kind comes after the items
        doc = {"items": items, "kind": "List", "metadata": {"x": [{"a": 1}, {"b": 2}]}}
    else:
        doc = items
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    calls = []
    loads = fleet._orjson_loads()
    assert loads is not None

    def counting(chunk: str) -> object:
        calls.append(len(chunk))
        return loads(chunk)

    monkeypatch.setattr(fleet, "_orjson_loads", lambda: counting)
    fast = list(fleet.iter_json_items(text, "fleet.json"))
    assert len(calls) > 5  # the array was decoded a slice at a time
    _stdlib_only(monkeypatch)
    assert fast == list(fleet.iter_json_items(text, "fleet.json"))
    if layout == "kind-first":
        assert all(item["kind"] == "ResourceSlice" for item in fast)  # type: ignore[index]
    assert [item["metadata"]["name"] for item in fast] == [f"slice-{n}" for n in range(60)]  # type: ignore[index]


@pytest.mark.parametrize("where", [3, 41, 59])
def test_malformed_json_deep_in_the_array_is_reported_as_before(
    where: int, small_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from dradiag.sources import fleet

    items = [json.dumps(_slice_item(n)) for n in range(60)]
    items[where] = items[where].replace('"gpu-1"', '"gpu-1",', 1)  # a trailing comma
    text = '{"kind": "List", "items": [\n' + ",\n".join(items) + "\n]}"
    with pytest.raises(InputError) as fast:
        list(fleet.iter_json_items(text, "bad.json"))
    _stdlib_only(monkeypatch)
    with pytest.raises(InputError) as slow:
        list(fleet.iter_json_items(text, "bad.json"))
    assert (fast.value.line, fast.value.column, str(fast.value)) == (
        slow.value.line,
        slow.value.column,
        str(slow.value),
    )
    assert fast.value.line == where + 2


def test_values_json_cannot_tell_apart_are_not_shared(tmp_path: Path, small_chunks: None) -> None:
    # NaN (only the standard library's decoder reads it; orjson would write it as null),
    # null, and 1 / 1.0 / true (equal in Python, not in CEL) stay what they were.
    import json

    from dradiag.sources import fleet

    literals = ["1", "null", "1.0", "true", "NaN", "null", "1", "NaN", "true"] * 3
    items = []
    for n, literal in enumerate(literals):
        text = json.dumps(_slice_item(n))
        odd = f'"odd": {{"int": {literal}}}, '
        text = text.replace('"type": ', odd + '"type": ', 1)
        items.append(text.replace('"80Gi"', literal, 1))
    target = tmp_path / "fleet.json"
    header = '{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "items": ['
    target.write_text(header + ", ".join(items) + "]}")
    reference = json.loads(target.read_text())["items"]
    snapshot = fleet.stream_slice_snapshot(str(target))
    got = [sl["spec"]["devices"][0]["attributes"]["odd"]["int"] for sl in snapshot.slices]
    want = [item["spec"]["devices"][0]["attributes"]["odd"]["int"] for item in reference]
    assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in want]
    got = [sl["spec"]["devices"][0]["capacity"]["memory"]["value"] for sl in snapshot.slices]
    want = [item["spec"]["devices"][0]["capacity"]["memory"]["value"] for item in reference]
    assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in want]


def test_the_loader_notes_every_value_and_device(tmp_path: Path, small_chunks: None) -> None:
    import json

    from dradiag.analyses.selection import build_inventory
    from dradiag.sources import fleet

    target = tmp_path / "fleet.json"
    target.write_text(
        json.dumps(
            {
                "kind": "List",
                "items": [
                    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **_slice_item(n)}
                    for n in range(30)
                ],
            }
        )
    )
    snapshot = fleet.stream_slice_snapshot(str(target))
    index = fleet.fleet_index(snapshot)
    assert index is not None and index.complete
    known = {id(v) for v in index.attribute_values}
    maps = {id(m) for m in index.capacity_maps}
    for sl in snapshot.slices:
        noted = index.slices[id(sl["spec"]["devices"])]
        assert noted.names == [d["name"] for d in sl["spec"]["devices"]]
        for device in sl["spec"]["devices"]:
            assert {id(v) for v in device["attributes"].values()} <= known
            assert id(device["capacity"]) in maps
    assert fleet.fleet_index(load_snapshot(str(target))) is None
    streamed = build_inventory(snapshot)
    ordinary = build_inventory(load_snapshot(str(target)))
    assert list(streamed.devices) == list(ordinary.devices)
    assert streamed._index is index and ordinary._index is None


def test_equal_attribute_maps_are_shared_and_hash_collisions_kept_apart() -> None:
    import json

    import orjson

    from dradiag.sources import fleet

    interner = fleet._Interner()
    devices = [json.loads(json.dumps(d)) for d in _slice_item(0)["spec"]["devices"]]  # type: ignore[index]
    twin = json.loads(json.dumps(devices[1]))
    twin["name"] = "twin"
    impostor = json.loads(json.dumps(devices[2]))
    # Another map already filed under the impostor's hash: it must not be taken for it.
    interner.maps[hash(orjson.dumps(impostor["attributes"]))] = {"other": {"string": "x"}}
    want = [json.loads(json.dumps(d)) for d in [*devices, twin, impostor]]
    noted = interner.note_slice([*devices, twin, impostor], "gpu.nvidia.com")
    assert noted is not None
    assert [*devices, twin, impostor] == want  # nothing changed but identities
    assert twin["attributes"] is devices[1]["attributes"]
    assert impostor["attributes"] is not devices[2]["attributes"]
    assert noted.attributes[3] is devices[1]["attributes"]


def test_per_device_names_are_left_unshared_but_noted(
    tmp_path: Path, small_chunks: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name whose values are new on nearly every device stops being looked up: its
    values stay as decoded, every one still in the index, the odd ones still checked."""
    import json

    from dradiag.sources import fleet

    monkeypatch.setattr(fleet, "NAME_PROBE_VALUES", 12)
    items = []
    for n in range(40):
        item = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **_slice_item(n)}
        for g, device in enumerate(item["spec"]["devices"]):  # type: ignore[index]
            # A per-device value that is not a plain string: it must still be checked.
            device["attributes"]["serial"] = (
                {"int": n * 3 + g} if n == 30 else {"string": f"s{n}{g}"}
            )
        items.append(item)
    items[-1]["spec"]["devices"][0]["attributes"]["uuid"] = {"string": "GPU-0-0"}  # type: ignore[index]
    target = tmp_path / "fleet.json"
    target.write_text(json.dumps({"kind": "List", "items": items}))
    snapshot = fleet.stream_slice_snapshot(str(target))
    assert snapshot.slices == load_snapshot(str(target)).slices
    index = fleet.fleet_index(snapshot)
    assert index is not None and index.checked_values is not None
    devices = [d for sl in snapshot.slices for d in sl["spec"]["devices"]]
    known = {id(v) for v in index.attribute_values}
    assert all({id(v) for v in d["attributes"].values()} <= known for d in devices)
    # uuid was judged per-device: a late device keeps its own (equal) object; type is shared.
    first, last = devices[0]["attributes"], devices[-3]["attributes"]
    assert last["uuid"] == first["uuid"] and last["uuid"] is not first["uuid"]
    late = [d["attributes"] for d in devices[-6:]]
    assert len({id(a["type"]) for a in late if a["type"] == {"string": "gpu"}}) == 1
    checked = {id(v) for v in index.checked_values}
    assert {id(d["attributes"]["serial"]) for d in devices[90:93]} <= checked
    assert not {id(d["attributes"]["uuid"]) for d in devices} & checked


@pytest.mark.parametrize("names", [("a",), ("a", "b", "c")])
def test_maps_of_one_layout_share_values_and_keep_their_order(names: tuple[str, ...]) -> None:
    """Maps with the same names (in any order) are shared a map at a time: each keeps
    its own key order and every value is the shared one."""
    import json

    from dradiag.sources import fleet

    interner = fleet._Interner()
    interner.map_tries = fleet.MAP_PROBE_AFTER  # whole maps seldom shared: values one by one
    maps = [{n: {"string": f"{n}{i % 2}"} for n in names} for i in range(4)]
    maps.append({n: {"string": f"{n}1"} for n in reversed(names)})
    devices = [{"name": f"d{i}", "attributes": m} for i, m in enumerate(maps)]
    want = json.loads(json.dumps(devices))
    assert interner.note_slice(devices, "gpu.nvidia.com") is not None
    assert devices == want
    assert [list(d["attributes"]) for d in devices] == [list(d["attributes"]) for d in want]
    for name in names:
        assert maps[1][name] is maps[3][name] is maps[4][name]
        assert maps[0][name] is maps[2][name] is not maps[1][name]


def test_rows_of_kept_values_are_shared_whole_and_value_by_value() -> None:
    """Once every name is judged, a map's kept values are looked up as one row: a row
    seen before shares all of them at once, a new row still shares each value it has in
    common with earlier ones, and a value orjson cannot write falls back to one by one."""
    import json

    from dradiag.sources import fleet

    interner = fleet._Interner()
    interner.map_tries = fleet.MAP_PROBE_AFTER  # whole maps seldom shared
    interner.map_slices = fleet.NAME_PROBE_SLICES + 1  # past judging

    def devices(tag: str, product: str, extra: object = 1) -> list[dict[str, object]]:
        return [
            {
                "name": f"{tag}{i}",
                "attributes": {
                    "productName": {"string": product},
                    "type": {"string": "gpu"},
                    "index": {"int": extra},
                },
            }
            for i in range(3)
        ]

    first, again, other = devices("a", "H100"), devices("b", "H100"), devices("c", "A100")
    odd = devices("d", "H100", extra=2**70)  # beyond 64 bits: orjson cannot write it
    for batch in (first, again, other, odd):
        want = json.loads(json.dumps(batch))
        assert interner.note_slice(batch, "gpu.nvidia.com") is not None
        assert batch == want
    assert interner.row_hits == 3 and len(interner.rows) == 2  # `again`, found whole
    attrs = [d["attributes"] for d in first + again + other + odd]
    assert len({id(a["productName"]) for a in attrs[:6]}) == 1
    assert len({id(a["index"]) for a in attrs[:9]}) == 1
    assert (
        attrs[6]["type"] is attrs[0]["type"]
        and attrs[6]["productName"] is not attrs[0]["productName"]
    )
    # The odd slice is shared device by device (by value, not by text): equal, kept whole.
    assert attrs[9] == {
        "productName": {"string": "H100"},
        "type": {"string": "gpu"},
        "index": {"int": 2**70},
    }
