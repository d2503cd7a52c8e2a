"""``dradiag demo``: runs ``claim`` on the packaged samples; exit 0 when each gave its verdict."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from dradiag.cli.app import run
from dradiag.cli.commands import demo as demo_module

REPO = Path(__file__).resolve().parents[2]


def _builders():
    path = REPO / "tests" / "diagnosis" / "k8s_objects.py"
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_demo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


@pytest.fixture
def samples(tmp_path, monkeypatch):
    """Two samples: a healthy claim and one whose container does not list it."""
    root = tmp_path / "samples"
    k8s.healthy_input(root / "healthy-gpu")
    (root / "healthy-gpu" / "sample.yaml").write_text(
        yaml.safe_dump(
            {
                "claim": "ml/train-gpu",
                "description": "a running full-GPU claim",
                "expected": {"status": "ok"},
            }
        )
    )
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(container_lists_claim=False)
    k8s.write_input(
        root / "unwired",
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
    )
    (root / "unwired" / "sample.yaml").write_text(
        yaml.safe_dump(
            {
                "claim": "ml/train-gpu",
                "description": "the container forgot the claim",
                "status": "broken",
                "phase": "workload",
                "rule": "DRA-WORK-CLAIM-NOT-REFERENCED",
            }
        )
    )
    monkeypatch.setattr(demo_module, "samples_root", lambda: root)
    return root


def test_demo_list(samples, capsys):
    assert run(["demo", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "healthy-gpu  a running full-GPU claim",
        "unwired      the container forgot the claim",
    ]


def test_demo_runs_every_sample_and_exits_0_even_when_one_is_broken(samples, capsys):
    assert run(["demo"]) == 0
    captured = capsys.readouterr()
    assert "sample healthy-gpu" in captured.out and "sample unwired" in captured.out
    assert "BROKEN  ResourceClaim ml/train-gpu is broken at workload" in captured.out
    assert "skipped" not in captured.err  # sample.yaml is not read as a cluster object


def test_demo_one_sample_json(samples, capsys):
    assert run(["demo", "unwired", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [i["verdict"]["rule"] for i in doc["items"]] == ["DRA-WORK-CLAIM-NOT-REFERENCED"]


def test_demo_unexpected_verdict_is_reported(samples, capsys):
    (samples / "healthy-gpu" / "sample.yaml").write_text(
        yaml.safe_dump({"claim": "ml/train-gpu", "description": "x", "status": "broken"})
    )
    assert run(["demo", "healthy-gpu"]) == 3
    assert "expected status 'broken', got 'ok'" in capsys.readouterr().err


def test_demo_unknown_sample(samples, capsys):
    assert run(["demo", "nope"]) == 2
    assert "no sample named 'nope'" in capsys.readouterr().err


def test_shipped_samples_give_their_verdicts(capsys):
    shipped = demo_module.list_samples()
    assert shipped, "dradiag/samples ships no sample"
    assert run(["demo", "-o", "json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["items"]) == len(shipped)
