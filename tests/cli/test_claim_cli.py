"""``dradiag claim``: exit codes, stdout holds only the document, schema-valid JSON/YAML."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from dradiag.cli.app import run

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "docs" / "schema" / "diagnosis.schema.json").read_text())


def _builders():
    path = REPO / "tests" / "diagnosis" / "k8s_objects.py"
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_cli", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


def _run(capsys, *args):
    capsys.readouterr()
    code = run(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_healthy_claim_json_exit_0(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    code, out, err = _run(capsys, "claim", "ml/train-gpu", "--from", str(root), "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] == {
        "status": "ok",
        "phase": None,
        "rule": None,
        "summary": doc["verdict"]["summary"],
        "next": [],
    }
    assert doc["source"] == {
        "kind": "bundle",
        "context": "test",
        "collectedAt": k8s.COLLECTED_AT,
        "location": str(root),
    }
    assert [p["id"] for p in doc["phases"]] == [
        "publication",
        "selection",
        "allocation",
        "prepare",
        "injection",
        "workload",
        "unprepare",
    ]


def test_broken_claim_exit_1_and_yaml(tmp_path, capsys):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(container_lists_claim=False)
    root = k8s.write_input(
        tmp_path / "in",
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
    )
    code, out, _err = _run(capsys, "claim", "ml/train-gpu", "--from", str(root), "-o", "yaml")
    assert code == 1
    doc = yaml.safe_load(out)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["verdict"]["phase"], doc["verdict"]["rule"]) == (
        "workload",
        "DRA-WORK-CLAIM-NOT-REFERENCED",
    )
    code, _out, _err = _run(
        capsys, "claim", "ml/train-gpu", "--from", str(root), "-o", "json", "--exit-zero"
    )
    assert code == 0


def test_inconclusive_exit_4_records_the_forbidden_read(tmp_path, capsys):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating")
    collection = {
        "kinds": {
            "ResourceSlice": {"coverage": "collected"},
            "DeviceClass": {"coverage": "collected"},
            "ResourceClaim": {"coverage": "collected"},
            "Pod": {"coverage": "collected"},
            "Event": {"coverage": "unknown", "reason": "forbidden"},
        },
        "errors": [{"resource": "events", "verb": "list", "reason": "Forbidden", "status": 403}],
        "source": {"kind": "bundle", "collectedAt": k8s.COLLECTED_AT},
    }
    root = k8s.write_input(
        tmp_path / "in",
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
        collection=collection,
    )
    code, out, _err = _run(capsys, "claim", "ml/train-gpu", "--from", str(root), "-o", "json")
    assert code == 4
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"]["status"] == "inconclusive"
    assert doc["collection"] == {
        "partial": True,
        "errors": [{"resource": "events", "verb": "list", "reason": "Forbidden", "status": 403}],
    }


def test_text_output_is_plain_without_tty(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    code, out, _err = _run(capsys, "claim", "ml/train-gpu", "--from", str(root))
    assert code == 0
    assert out.startswith("OK  ResourceClaim ml/train-gpu")
    assert "\x1b[" not in out
    assert "✓ publication" in out


def test_unknown_claim_is_a_usage_error(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    code, out, err = _run(capsys, "claim", "ml/missing", "--from", str(root))
    assert code == 2
    assert out == ""
    assert "ResourceClaim ml/missing not found" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--now", "yesterday"], "--now: not an RFC 3339 time"),
        (["--stuck-after", "5 minutes"], "--stuck-after"),
        (["-o", "sarif"], "Invalid value for '-o' / '--output': 'sarif' is not one of 'text'"),
        (["--request-timeout", "5 minutes"], "Invalid timeout value. Timeout must be"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, capsys, args, message):
    root = k8s.healthy_input(tmp_path / "in")
    code, out, err = _run(capsys, "claim", "ml/train-gpu", "--from", str(root), *args)
    assert code == 2
    assert out == ""
    assert message in err


def test_stuck_after_option_decides_prepare(tmp_path, capsys):
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(state="creating", scheduled_at="2026-05-01T11:50:00Z")
    root = k8s.write_input(
        tmp_path / "in",
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
    )
    args = ["claim", "ml/train-gpu", "--from", str(root), "-o", "json"]
    code, out, _ = _run(capsys, *args)
    assert (code, json.loads(out)["verdict"]["rule"]) == (1, "DRA-PREP-STALLED")
    code, out, _ = _run(capsys, *args, "--stuck-after", "15m")
    assert code == 0
    code, out, _ = _run(capsys, *args, "--stuck-after", "15m", "--now", "2026-05-01T12:30:00Z")
    assert code == 1


def test_namespace_flag_with_bare_name(tmp_path, capsys):
    root = k8s.healthy_input(tmp_path / "in")
    code, out, _ = _run(capsys, "claim", "train-gpu", "-n", "ml", "--from", str(root), "-o", "json")
    assert code == 0
    assert json.loads(out)["target"]["name"] == "train-gpu"
