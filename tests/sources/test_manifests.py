"""--from input: every accepted form loads, and bad input is one clear InputError."""

from __future__ import annotations

import io
import json
import logging
import time
from pathlib import Path

import pytest

from dradiag.errors import InputError
from dradiag.snapshot.model import Coverage, Kind
from dradiag.sources.manifests import load_documents, load_snapshot

SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-a-gpu.nvidia.com-x7k2q"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
    },
}
CLAIM_YAML = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
"""


def test_multi_document_yaml_and_lists(tmp_path: Path):
    (tmp_path / "a.yaml").write_text(
        CLAIM_YAML + "---\n" + json.dumps({"apiVersion": "v1", "kind": "List", "items": [SLICE]})
    )
    snap = load_snapshot(str(tmp_path))
    assert len(snap.claims) == 1 and len(snap.slices) == 1


def test_raw_api_list_items_get_their_kind(tmp_path: Path):
    item = {k: v for k, v in SLICE.items() if k not in ("apiVersion", "kind")}
    doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList", "items": [item]}
    (tmp_path / "slices.json").write_text(json.dumps(doc))
    snap = load_snapshot(str(tmp_path / "slices.json"))
    assert snap.slices[0]["spec"]["driver"] == "gpu.nvidia.com"


def test_empty_kubectl_list_proves_the_kind_is_empty(tmp_path: Path):
    (tmp_path / "claims.yaml").write_text(CLAIM_YAML)
    (tmp_path / "events.yaml").write_text("apiVersion: v1\nkind: List\nitems: []\n")
    snap = load_snapshot(str(tmp_path))
    assert snap.coverage_of(Kind.EVENT).coverage is Coverage.COLLECTED
    assert snap.coverage_of(Kind.POD).coverage is Coverage.UNKNOWN


def test_collection_record_overrides_coverage(tmp_path: Path):
    (tmp_path / "claims.yaml").write_text(CLAIM_YAML)
    (tmp_path / "collection.json").write_text(
        json.dumps(
            {
                "source": {
                    "kind": "bundle",
                    "collectedAt": "2026-03-02T10:05:00Z",
                    "serverVersion": "1.34",
                    "serverGitVersion": "v1.34.2-eks-113cf36",
                },
                "kinds": {
                    "Event": {"coverage": "unknown", "reason": "forbidden"},
                    "Pod": {"coverage": "collected"},
                },
                "errors": [
                    {
                        "resource": "events",
                        "verb": "list",
                        "namespace": "ns",
                        "reason": "forbidden",
                        "status": 403,
                    }
                ],
            }
        )
    )
    snap = load_snapshot(str(tmp_path))
    assert snap.coverage_of(Kind.EVENT).reason == "forbidden"
    assert snap.is_collected(Kind.POD)
    assert snap.errors[0].status == 403
    assert snap.source.collected_at == "2026-03-02T10:05:00Z"
    assert snap.source.server_version == "1.34"
    assert snap.source.server_git_version == "v1.34.2-eks-113cf36"


def test_stdin(tmp_path: Path):
    snap = load_snapshot("-", stdin=io.BytesIO(CLAIM_YAML.encode()))
    assert snap.claim("ns", "c") is not None


def test_log_files_in_both_layouts(tmp_path: Path):
    (tmp_path / "claims.yaml").write_text(CLAIM_YAML)
    bundle = tmp_path / "logs" / "nvidia-dra-driver-gpu" / "plugin-x" / "gpus.log"
    bundle.parent.mkdir(parents=True)
    bundle.write_text("E0302 error\n")
    (bundle.parent / "gpus.previous.log").write_text("old\n")
    (tmp_path / "trainer-0_trainer.log").write_text("no CUDA-capable device is detected\n")
    snap = load_snapshot(str(tmp_path))
    logs = snap.logs_for("nvidia-dra-driver-gpu", "plugin-x", "gpus")
    assert [(lg.previous, lg.text) for lg in logs] == [(False, "E0302 error\n"), (True, "old\n")]
    assert snap.logs_for("", "trainer-0")[0].container == "trainer"
    assert snap.is_collected(Kind.LOG)


def test_non_utf8_log_is_kept_with_a_warning(tmp_path: Path, caplog):
    (tmp_path / "p_c.log").write_bytes(b"ok\n\xff\xfe bad\n")
    with caplog.at_level(logging.WARNING):
        snap = load_snapshot(str(tmp_path))
    assert "\ufffd" in snap.logs[0].text
    assert "not UTF-8" in caplog.text and ":2:" in caplog.text


# -- the bad-input corpus ---------------------------------------------------------


def _input_error(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        load_snapshot(str(path))
    message = str(info.value)
    assert "\n" not in message
    return info.value


def test_truncated_yaml_names_file_and_line(tmp_path: Path):
    bad = tmp_path / "claim.yaml"
    bad.write_text(CLAIM_YAML + "---\nkind: Pod\nmetadata: {name: [unterminated\n")
    err = _input_error(bad)
    # libyaml notices the unterminated flow sequence at the end of the stream (line 8).
    assert err.path == str(bad) and err.line == 8
    assert str(err).startswith(f"{bad}:8:1: malformed YAML:")


def test_malformed_json_names_line_and_column(tmp_path: Path):
    bad = tmp_path / "x.json"
    bad.write_text('{\n  "kind": "Pod",\n  "apiVersion": \n}')
    err = _input_error(bad)
    assert err.line == 4 and "malformed JSON" in err.reason


def test_json_array_of_junk(tmp_path: Path, caplog):
    bad = tmp_path / "junk.json"
    bad.write_text(json.dumps([1, "two", {"three": 3}, None]))
    err = _input_error(bad)
    assert "no Kubernetes objects" in err.reason
    assert "not a Kubernetes object" in caplog.text


def test_binary_file(tmp_path: Path):
    bad = tmp_path / "core.yaml"
    bad.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)))
    assert "binary" in _input_error(bad).reason


def test_non_utf8_manifest(tmp_path: Path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(CLAIM_YAML.encode() + b"# caf\xe9\n")
    err = _input_error(bad)
    assert "not UTF-8" in err.reason and err.line == 5


def test_fifty_megabytes_of_one_line(tmp_path: Path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"x" * (50 * 1024 * 1024))
    started = time.perf_counter()
    err = _input_error(big)
    assert "no Kubernetes objects" in err.reason
    assert time.perf_counter() - started < 30


def test_directory_without_kubernetes_objects(tmp_path: Path):
    (tmp_path / "README.md").write_text("# notes\n")
    (tmp_path / "values.yaml").write_text("replicas: 3\nimage: {tag: v1}\n")
    assert "no Kubernetes objects" in _input_error(tmp_path).reason


def test_unknown_kinds_are_reported_and_skipped(tmp_path: Path, caplog):
    (tmp_path / "mixed.yaml").write_text(
        CLAIM_YAML + "---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: d}\n"
    )
    with caplog.at_level(logging.WARNING):
        snap = load_snapshot(str(tmp_path))
    assert len(snap.claims) == 1
    assert "apps/v1/StatefulSet" in caplog.text
    # ...but the documents stay available to commands that read workloads.
    assert {d.obj["kind"] for d in load_documents(str(tmp_path))} == {
        "ResourceClaim",
        "StatefulSet",
    }


def test_only_unknown_kinds_is_an_error(tmp_path: Path):
    (tmp_path / "d.yaml").write_text(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: d}\n"
    )
    assert "no Kubernetes objects" in _input_error(tmp_path).reason


def test_missing_path(tmp_path: Path):
    assert "no such file" in _input_error(tmp_path / "nope").reason


def test_yaml_document_start_lines(tmp_path: Path):
    path = tmp_path / "two.yaml"
    path.write_text(CLAIM_YAML + "---\n" + CLAIM_YAML.replace("name: c,", "name: d,"))
    assert [d.line for d in load_documents(str(path))] == [1, 6]


def test_a_yaml_timestamp_that_does_not_parse_loses_its_field_not_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # YAML 1.1 reads the unquoted value as a timestamp; month 13 made PyYAML raise
    # ValueError (an internal error). It is kept as text and the shape check drops it.
    path = tmp_path / "claim.yaml"
    path.write_text(
        CLAIM_YAML.replace(
            "metadata: {name: c, namespace: ns}",
            "metadata: {name: c, namespace: ns, creationTimestamp: 2025-13-45T99:99:99Z}",
        )
    )
    with caplog.at_level(logging.WARNING):
        snapshot = load_snapshot(str(path))
    (claim,) = snapshot.claims
    assert claim["metadata"] == {"name": "c", "namespace": "ns"}
    assert "metadata.creationTimestamp: invalid RFC3339" in caplog.text
    assert "2025-13-45T99:99:99Z" in caplog.text


def test_a_valid_yaml_timestamp_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(
        CLAIM_YAML.replace(
            "metadata: {name: c, namespace: ns}",
            "metadata: {name: c, namespace: ns, creationTimestamp: 2025-07-14T05:10:00Z}",
        )
    )
    (claim,) = load_snapshot(str(path)).claims
    assert "creationTimestamp" in claim["metadata"]


@pytest.mark.parametrize("tagged", ["!!int abc", "!!float x1"])
def test_an_explicitly_tagged_scalar_that_does_not_construct_is_an_input_error(
    tmp_path: Path, tagged: str
) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(CLAIM_YAML.replace("namespace: ns}", f"namespace: ns, generation: {tagged}}}"))
    err = _input_error(path)
    assert err.path == str(path) and str(err.reason).startswith("malformed YAML:")
