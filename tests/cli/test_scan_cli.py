"""``dradiag scan``: one row per unhealthy claim and node, sorted by phase; -n / -A."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
from referencing import Registry, Resource

from dradiag.cli.app import run

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "docs" / "schema"


def _builders():
    path = REPO / "tests" / "diagnosis" / "k8s_objects.py"
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_scan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


def _cluster(tmp_path):
    healthy = k8s.healthy_objects()
    pending = k8s.claim(
        name="pending", uid="u-p", namespace="research", class_name="gpu.example.com"
    )
    pending_pod = k8s.pod(
        name="p-0",
        uid="pod-p",
        namespace="research",
        claim_name="pending",
        node=None,
        state="pending",
    )
    return k8s.write_input(
        tmp_path / "in",
        objects={
            "resourceslices": [*healthy["slices"], k8s.resource_slice(node="gpu-node-2")],
            "deviceclasses": healthy["classes"],
            "resourceclaims": [*healthy["claims"], pending],
            "pods": [
                *healthy["pods"],
                pending_pod,
                k8s.plugin_pod("gpu-node-2", gpus_state="crashloop", restarts=12),
            ],
        },
    )


def validate(doc):
    item = json.loads((SCHEMAS / "diagnosis.schema.json").read_text())
    items = json.loads((SCHEMAS / "diagnoses.schema.json").read_text())
    registry = Registry().with_resource(item["$id"], Resource.from_contents(item))
    jsonschema.Draft202012Validator(items, registry=registry).validate(doc)


def test_scan_json_rows_sorted_by_phase(tmp_path, capsys):
    root = _cluster(tmp_path)
    capsys.readouterr()
    code = run(["scan", "--from", str(root), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    validate(doc)
    rows = [(i["target"]["kind"], i["target"]["name"], i["verdict"]["phase"]) for i in doc["items"]]
    assert rows == [
        ("Node", "gpu-node-2", "publication"),
        ("ResourceClaim", "pending", "selection"),
    ]


def test_scan_namespace_filter_keeps_node_rows(tmp_path, capsys):
    root = _cluster(tmp_path)
    capsys.readouterr()
    run(["scan", "--from", str(root), "-o", "json", "-n", "ml"])
    rows = [i["target"]["name"] for i in json.loads(capsys.readouterr().out)["items"]]
    assert rows == ["gpu-node-2"]


def test_scan_text_table(tmp_path, capsys):
    root = _cluster(tmp_path)
    capsys.readouterr()
    run(["scan", "--from", str(root)])
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["PHASE", "STATUS", "TARGET", "RULE", "WHY"]
    assert "DRA-PUB-PLUGIN-CRASHLOOP" in out and "DRA-SEL-CLASS-NOT-FOUND" in out
    assert "2 unhealthy: 2 broken, 0 inconclusive" in out


def test_scan_healthy_cluster_exit_0(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    capsys.readouterr()
    assert run(["scan", "--from", str(root), "-A"]) == 0
    assert "nothing unhealthy found" in capsys.readouterr().out


def test_scan_namespace_and_all_namespaces_conflict(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    assert run(["scan", "--from", str(root), "-A", "-n", "ml"]) == 2
    assert "mutually exclusive" in capsys.readouterr().err


_REJECTED = (
    'E0601 10:00:03.118227       1 resourceslicecontroller.go:403] "processing ResourceSlice '
    'objects" err="create resource slice: ResourceSlice.resource.k8s.io '
    '\\"00000-gpu.nvidia.com-gpu-node-3-abcde\\" is invalid: spec.devices[0].attributes: '
    'Too many: 40: must have at most 32 items"\n'
)


def test_scan_plugin_log_without_its_pod_names_the_node(tmp_path, capsys):
    """Only the plugin's log, its API server rejecting every slice: a row, never "ok"."""
    root = k8s.write_input(
        tmp_path / "in",
        objects={"resourceslices": [], "pods": []},
        logs={"dra-driver-nvidia-gpu-kubelet-plugin-x7k2q_gpus.log": _REJECTED},
    )
    capsys.readouterr()
    code = run(["scan", "-A", "--from", str(root), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    validate(doc)
    assert code == 1
    rows = [(i["target"]["kind"], i["target"]["name"], i["verdict"]["rule"]) for i in doc["items"]]
    assert rows == [("Node", "gpu-node-3", "DRA-PUB-SLICE-PUBLISH-FAILED")]


def test_scan_plugin_log_naming_no_node_gets_a_pod_row(tmp_path, capsys):
    forbidden = _REJECTED.replace(
        'ResourceSlice.resource.k8s.io \\"00000-gpu.nvidia.com-gpu-node-3-abcde\\" is invalid: '
        "spec.devices[0].attributes: Too many: 40: must have at most 32 items",
        'resourceslices.resource.k8s.io is forbidden: User \\"system:serviceaccount:d:p\\" '
        'cannot create resource \\"resourceslices\\"',
    )
    root = k8s.write_input(
        tmp_path / "in",
        objects={"resourceslices": []},
        logs={"logs/d/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q/gpus.log": forbidden},
    )
    capsys.readouterr()
    code = run(["scan", "-A", "--from", str(root)])
    out = capsys.readouterr().out
    assert code == 1
    assert "Pod d/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q" in out
    assert "DRA-PUB-SLICE-PUBLISH-FAILED" in out and "nothing unhealthy" not in out


def test_scan_healthy_plugin_log_is_no_row(tmp_path, capsys):
    synced = (
        'I0601 10:00:03.1 1 resourceslicecontroller.go:634] "ResourceSlice informer has synced"\n'
    )
    root = k8s.write_input(
        tmp_path / "in",
        objects={"resourceslices": [k8s.resource_slice(node="gpu-node-3")]},
        logs={"dra-driver-nvidia-gpu-kubelet-plugin-x7k2q_gpus.log": synced},
    )
    capsys.readouterr()
    assert run(["scan", "-A", "--from", str(root)]) == 0
    assert "nothing unhealthy found" in capsys.readouterr().out


SAMPLE = REPO / "dradiag" / "samples" / "mig-create-failed-at-prepare"
SAMPLE_CLAIM = "default/pod-memsat-0004-mig-070gb-8g9dwhd-gpu-tpghv"


def test_output_name_is_one_ns_name_line_per_row(capsys):
    assert run(["scan", "--from", str(SAMPLE), "-o", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert run(["scan", "--from", str(SAMPLE), "-o", "name"]) == 1
    lines = capsys.readouterr().out.splitlines()
    expected = [
        f"{i['target']['namespace']}/{i['target']['name']}"
        if i["target"].get("namespace")
        else i["target"]["name"]
        for i in doc["items"]
    ]
    assert lines == expected and SAMPLE_CLAIM in lines


def test_output_wide_on_an_80_column_terminal_shows_every_column_whole(capsys):
    from dradiag.render.console import forced_terminal

    with forced_terminal(80):
        run(["scan", "--from", str(SAMPLE)])
        narrow = capsys.readouterr().out
        run(["scan", "--from", str(SAMPLE), "-o", "wide"])
        wide = capsys.readouterr().out
    assert "DRA-PREP-MIG-CREATE-FAILED" not in narrow
    assert "hidden at 80 columns; -o wide shows all" in narrow
    row = next(line for line in wide.splitlines() if SAMPLE_CLAIM in line)
    assert "DRA-PREP-MIG-CREATE-FAILED" in row
    assert "the plugin could not create the MIG device for the claim" in row


def test_no_headers_leaves_the_rows(capsys):
    assert run(["scan", "--from", str(SAMPLE), "--no-headers"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("prepare") and SAMPLE_CLAIM in lines[0]


def test_name_and_wide_are_table_outputs_only(capsys):
    code = run(["claim", SAMPLE_CLAIM, "--from", str(SAMPLE), "-o", "name"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "Invalid value for '-o' / '--output': 'name' is not one of" in captured.err
