"""``dradiag pod``: one diagnosis per claim of the pod, template claims included."""

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
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_pod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


def validate_diagnoses(doc):
    item = json.loads((SCHEMAS / "diagnosis.schema.json").read_text())
    items = json.loads((SCHEMAS / "diagnoses.schema.json").read_text())
    registry = Registry().with_resource(item["$id"], Resource.from_contents(item))
    jsonschema.Draft202012Validator(items, registry=registry).validate(doc)


def test_pod_with_direct_claim(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    capsys.readouterr()
    code = run(["pod", "ml/train-0", "--from", str(root), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    validate_diagnoses(doc)
    assert doc["schemaVersion"] == "dradiag.diagnoses/v1"
    [item] = doc["items"]
    assert item["target"]["name"] == "train-gpu"
    assert item["target"]["pods"] == ["ml/train-0"]


def test_pod_with_generated_claim_found_by_status_and_by_owner(tmp_path, capsys):
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    generated = k8s.claim(
        name="train-0-gpu-x7k2p", allocated=["gpu-0"], reserved_for=[("train-0", k8s.POD_UID)]
    )
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    generated["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "train-0",
            "uid": k8s.POD_UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    pod = k8s.pod(template_name="one-gpu")
    objects = {
        "resourceslices": [k8s.resource_slice()],
        "deviceclasses": [k8s.device_class()],
        "resourceclaimtemplates": [template],
        "resourceclaims": [generated],
        "pods": [pod, k8s.plugin_pod()],
    }
    # The orphan window: the pod status does not name the claim yet.
    root = k8s.write_input(tmp_path / "owner", objects=objects)
    capsys.readouterr()
    assert run(["pod", "ml/train-0", "--from", str(root), "-o", "json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["items"]
    assert item["target"]["name"] == "train-0-gpu-x7k2p"
    # And with the status entry the controller patches in.
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "train-0-gpu-x7k2p"}
    ]
    root = k8s.write_input(tmp_path / "status", objects=objects)
    assert run(["pod", "ml/train-0", "--from", str(root), "-o", "json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["items"]
    assert item["target"]["name"] == "train-0-gpu-x7k2p"
    assert "synthesized" not in item["target"]


def test_pod_without_claims_prints_an_empty_list(tmp_path, capsys):
    plain = k8s.pod(name="web", uid="web-uid")
    plain["spec"].pop("resourceClaims")
    root = k8s.write_input(tmp_path / "in", objects={"pods": [plain]})
    capsys.readouterr()
    code = run(["pod", "ml/web", "--from", str(root), "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["items"] == []
    assert "uses no ResourceClaim" in err
