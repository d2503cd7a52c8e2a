"""``dradiag bundle``, then ``claim --from`` the bundle, gives the live verdict (issue 12).

Every scenario is served by the local API server as ``test_live_parity`` serves it (its
API versions, server version, and a 403 for each read its collection record lists as
forbidden). The bundle is collected through that server, whole-cluster and targeted at
the claim; ``claim --from BUNDLE`` must then reach the live run's verdict, exit code
and per-phase statuses: a kind that was forbidden during collection reads as unknown
offline, exactly as live.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from dradiag.cli.app import run

_spec = importlib.util.spec_from_file_location(
    "dradiag_test_live_parity", Path(__file__).with_name("test_live_parity.py")
)
assert _spec and _spec.loader
_live = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_live)


def _result(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = run(argv)
    doc = json.loads(capsys.readouterr().out)
    verdict = doc["verdict"]
    return code, {
        "status": verdict["status"],
        "phase": verdict.get("phase"),
        "rule": verdict.get("rule"),
        "phases": {p["id"]: p["status"] for p in doc["phases"]},
    }


@pytest.mark.parametrize("mode", ["all", "claim"])
def test_bundle_verdict_equals_live_verdict(
    scenario, mode, kube_api_factory, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    now = (_live._collection(scenario.path).get("source") or {}).get("collectedAt")
    extra = ["--now", now] if now else []
    claim = scenario.expected["claim"]
    server = kube_api_factory(scenario.path, **_live._server_options(scenario.path))
    _live._forbid(server, scenario.path)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))

    live_code, live = _result(
        ["claim", claim, "--kubeconfig", kubeconfig, "-o", "json", *extra], capsys
    )
    archive = tmp_path / "bundle.tar.gz"
    scope = ["-A"] if mode == "all" else ["--claim", claim]
    assert run(["bundle", *scope, "-o", str(archive), "--kubeconfig", kubeconfig]) == 0
    assert capsys.readouterr().out == f"{archive}\n"
    bundle_code, offline = _result(
        ["claim", claim, "--from", str(archive), "-o", "json", *extra], capsys
    )

    assert server.methods() == {"GET"}
    assert offline == live
    assert bundle_code == live_code
