"""The MPS control daemon live: Deployments listed in the driver's namespace only, for an
MPS claim, and the prepare verdict they decide; forbidden, the phase says what is missing."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.cli.app import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rule_cases"
REFUSED = FIXTURES / "DRA-PREP-MPS-DAEMON-NOT-RUNNING" / "fires-replica-failure"
DRIVER_NS = "dra-driver-nvidia-gpu"

PLUGIN_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "dra-driver-nvidia-gpu-kubelet-plugin-q8w2e",
        "namespace": DRIVER_NS,
        "labels": {"dra-driver-nvidia-gpu-component": "kubelet-plugin"},
    },
    "spec": {
        "nodeName": "gpu-node-1",
        "containers": [{"name": "gpus", "image": "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"}],
    },
    "status": {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "gpus",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-05-19T12:00:00Z"}},
            }
        ],
    },
}


def _objects(*, mps: bool = True) -> list[dict[str, Any]]:
    docs = [d for f in sorted(REFUSED.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    claim = next(d for d in docs if d["kind"] == "ResourceClaim")
    if not mps:
        del claim["spec"]["devices"]["config"]
    daemon = next(d for d in docs if d["kind"] == "Deployment")
    # The same daemon name outside the driver's namespace, and another Deployment inside
    # it: neither is the driver's daemon, and only the first may not even be read.
    elsewhere = copy.deepcopy(daemon)
    elsewhere["metadata"]["namespace"] = "ml"
    unrelated = copy.deepcopy(daemon)
    unrelated["metadata"]["name"] = "dra-driver-nvidia-gpu-controller"
    return [*docs, elsewhere, unrelated, PLUGIN_POD]


def _claim(kubeconfig: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = run(["claim", "ml/mps-shared", "--kubeconfig", str(kubeconfig), "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def _prepare(doc: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in doc["phases"] if p["id"] == "prepare")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    return tmp_path


def test_live_reads_the_daemon_in_the_driver_namespace_and_names_its_refusal(
    kube_api_factory, home, capsys
):
    server = kube_api_factory(None, objects=_objects())
    code, doc = _claim(server.write_kubeconfig(home / "kubeconfig"), capsys)

    assert server.methods() == {"GET"}
    reads = server.requests_to(r"/deployments")
    assert [r.path for r in reads] == [f"/apis/apps/v1/namespaces/{DRIVER_NS}/deployments"]
    assert code == 1
    assert doc["verdict"]["rule"] == "DRA-PREP-MPS-DAEMON-NOT-RUNNING"
    finding = next(
        f for f in _prepare(doc)["findings"] if f["rule"] == "DRA-PREP-MPS-DAEMON-NOT-RUNNING"
    )
    assert 'violates PodSecurity "baseline:latest"' in finding["detail"]
    assert f"{DRIVER_NS}/mps-control-daemon-3b1f6c2e" in finding["detail"]


def test_live_reads_no_deployment_for_a_claim_without_mps(kube_api_factory, home, capsys):
    server = kube_api_factory(None, objects=_objects(mps=False))
    _code, doc = _claim(server.write_kubeconfig(home / "kubeconfig"), capsys)

    assert server.requests_to(r"/deployments") == []
    assert all(f["rule"] != "DRA-PREP-MPS-DAEMON-NOT-RUNNING" for f in _prepare(doc)["findings"])


def test_forbidden_deployments_are_named_as_missing_by_prepare(kube_api_factory, home, capsys):
    server = kube_api_factory(None, objects=_objects())
    server.add_fault(r"/deployments([/?]|$)", status=403)
    code, doc = _claim(server.write_kubeconfig(home / "kubeconfig"), capsys)

    prepare = _prepare(doc)
    # The pod has waited for months without an event: a stall, whatever the daemon says;
    # the phase names the Deployment it could not read, and the cause stays unnamed.
    assert code == 1 and doc["verdict"]["rule"] == "DRA-PREP-STALLED"
    missing = [f for f in prepare["findings"] if f["rule"] == "DRA-PREP-NOT-COLLECTED"]
    assert missing and "Deployment: forbidden" in missing[0]["detail"]
    assert all(f["rule"] != "DRA-PREP-MPS-DAEMON-NOT-RUNNING" for f in prepare["findings"])
    assert any(e["resource"] == "deployments" for e in doc["collection"]["errors"])


def test_forbidden_deployments_leave_a_fresh_wait_unknown(kube_api_factory, home, capsys):
    server = kube_api_factory(None, objects=_objects())
    server.add_fault(r"/deployments([/?]|$)", status=403)
    capsys.readouterr()
    argv = ["claim", "ml/mps-shared", "--kubeconfig", str(server.write_kubeconfig(home / "kc"))]
    code = run([*argv, "-o", "json", "--now", "2026-05-19T13:02:00Z"])
    doc = json.loads(capsys.readouterr().out)

    prepare = _prepare(doc)
    assert code == 4
    assert prepare["status"] == "unknown"
    assert [f["rule"] for f in prepare["findings"]] == ["DRA-PREP-NOT-COLLECTED"]


def test_bundle_keeps_the_daemon_and_gives_the_live_verdict(kube_api_factory, home, capsys):
    server = kube_api_factory(None, objects=_objects())
    kubeconfig = server.write_kubeconfig(home / "kubeconfig")
    archive = home / "b.tar.gz"
    capsys.readouterr()
    assert run(["bundle", "-o", str(archive), "--kubeconfig", str(kubeconfig)]) == 0
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    kept = json.loads(members[f"resources/apps/v1/deployments/{DRIVER_NS}.json"])
    assert [d["metadata"]["name"] for d in kept["items"]] == [
        "mps-control-daemon-3b1f6c2e-8d4a-4f7b-9e21-5c0d7a9b8e64-5d2c1"
    ]
    assert not [m for m in members if m.startswith("resources/apps/v1/deployments/ml")]
    manifest = json.loads(members["manifest.json"])
    assert any(c.get("kind") == "Deployment" for c in manifest["collectors"])

    capsys.readouterr()
    code = run(["claim", "ml/mps-shared", "--from", str(archive), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["verdict"]["rule"] == "DRA-PREP-MPS-DAEMON-NOT-RUNNING"
