"""Every scenario gives the same verdict live (through the local API server) as ``--from``.

Each scenario directory is served by the local Kubernetes API server as the cluster it
describes (``collection.json``): the resource.k8s.io versions it served, its server
version, the DeviceTaintRule API only where it existed, and a 403 for every read its
collection record lists as forbidden (the RBAC wording of the real server). Then
``dradiag claim NS/NAME --kubeconfig ... -o json`` must reach the verdict (status,
phase, rule) and exit code of ``dradiag claim NS/NAME --from DIR -o json``, with only
GETs on the wire. ``--now`` is the scenario's collection time in both runs: time is an
input of the diagnosis (how long something has been stuck), not part of the transport.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kube_api.server import DRA_VERSIONS, KubeAPIServer

from dradiag.cli.app import run


def _collection(path: Path) -> dict[str, Any]:
    record = path / "collection.json"
    return json.loads(record.read_text()) if record.exists() else {}


def _server_options(path: Path) -> dict[str, Any]:
    record = _collection(path)
    source = record.get("source") or {}
    served = tuple(v for v in DRA_VERSIONS if v in (source.get("servedVersions") or ["v1"]))
    taint = (record.get("kinds") or {}).get("DeviceTaintRule") or {}
    return {
        "versions": served or ("v1",),
        "taint_rule_versions": () if taint.get("coverage") == "absent" else served,
        "server_version": source.get("serverVersion") or "1.34",
    }


def _forbid(server: KubeAPIServer, path: Path) -> None:
    """403 for the reads the scenario's collection record says were forbidden."""
    for error in _collection(path).get("errors") or []:
        if error.get("status") != 403:
            continue
        ns = re.escape(str(error.get("namespace") or ""))
        resource = str(error.get("resource"))
        if resource == "pods/log":
            server.add_fault(
                rf"^/api/v1/namespaces/{ns}/pods/{re.escape(str(error['name']))}/log", status=403
            )
        elif resource in ("pods", "events"):
            # Denied in that namespace; a cluster-wide list would need more, not less.
            server.add_fault(rf"^/api/v1/(namespaces/{ns}/)?{resource}(/[^/]+)?([?]|$)", status=403)
        else:
            server.add_fault(rf"/{re.escape(resource)}([/?]|$)", status=403)


def _verdict(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = run(argv)
    out = capsys.readouterr().out
    doc = json.loads(out)
    verdict = doc["verdict"]
    return code, {
        "status": verdict["status"],
        "phase": verdict.get("phase"),
        "rule": verdict.get("rule"),
    }


def test_live_verdict_equals_from_verdict(
    scenario, kube_api_factory, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    now = (_collection(scenario.path).get("source") or {}).get("collectedAt")
    extra = ["--now", now] if now else []
    claim = scenario.expected["claim"]

    from_code, from_verdict = _verdict(
        ["claim", claim, "--from", str(scenario.path), "-o", "json", *extra], capsys
    )

    server = kube_api_factory(scenario.path, **_server_options(scenario.path))
    _forbid(server, scenario.path)
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    live_code, live_verdict = _verdict(
        ["claim", claim, "--kubeconfig", str(kubeconfig), "-o", "json", *extra], capsys
    )

    assert server.methods() == {"GET"}
    assert live_verdict == from_verdict
    assert live_code == from_code
