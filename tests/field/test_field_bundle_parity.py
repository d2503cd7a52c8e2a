"""Field cases through a bundle: ``bundle`` from the server, then ``--from`` it (issue 12).

Every field case with ``live_parity: true`` is served as ``test_live_verdict_equals_offline``
serves it (the reporter's release's API versions, its server version). A bundle collected
through that server — whole-cluster, and targeted at the case's claim or pod — must then
give, read with ``--from``, the live run's verdict (status, phase, rule) and exit code.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location(
    "dradiag_test_field_cases", HERE / "test_field_cases.py"
)
assert _spec and _spec.loader
_cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cases)
corpus = _cases.corpus
KEYS = ("status", "phase", "rule")


def _scope(case: Any, mode: str) -> list[str]:
    if mode == "all":
        return ["-A"]
    return ["--pod" if case.spec["command"] == "pod" else "--claim", case.spec["target"]]


@pytest.mark.parametrize("mode", ["all", "target"])
@pytest.mark.parametrize("case", _cases.LIVE, ids=lambda c: c.name)
def test_bundle_verdict_equals_live(
    case: Any, mode: str, kube_api_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    versions = _cases._served_versions(case)
    server = kube_api_factory(
        case.input,
        versions=versions,
        taint_rule_versions=versions if _cases._has_kind(case, "DeviceTaintRule") else (),
        server_version=case.spec["kubernetes"],
    )
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    live = corpus.answer(case, "--kubeconfig", kubeconfig)
    assert not live.problems, live.problems
    archive = tmp_path / "bundle.tar.gz"
    code, out, err = corpus.run_cli(
        ["bundle", *_scope(case, mode), "-o", str(archive), "--kubeconfig", kubeconfig]
    )
    assert code == 0 and out == f"{archive}\n", err[-800:]
    assert server.methods() == {"GET"}
    offline = corpus.answer(case, "--from", str(archive))
    assert not offline.problems, offline.problems
    assert {k: offline.verdict.get(k) for k in KEYS} == {k: live.verdict.get(k) for k in KEYS}, (
        f"\nbundle: {corpus.describe(offline)}\nlive:   {corpus.describe(live)}"
    )
    assert offline.code == live.code
