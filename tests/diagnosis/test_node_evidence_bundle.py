"""Saved node state inside a bundle decides claims as it does in a directory (issue 13).

Each node fixture is served by the local API server (its ``node/`` is not served: it is
not Kubernetes objects), bundled with ``--node-state`` the fixture folder, and every
claim's verdict, and the status and basis of the phases node state is evidence for, from ``claim --from bundle.tar.gz`` must
equal ``claim --from DIR``'s — and the node state must matter: the same bundle without
it reads at least one claim otherwise (verdict, phases or finding rules), so equality is
not two runs that both ignore it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.cli.app import run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node"
CASES = ["leaky", "healthy", "stale-mig", "corrupt-checkpoint"]
DECIDES_CLAIMS = {"leaky", "stale-mig"}
"""Fixtures whose node state changes a claim's reading; a healthy node adds none, and an
unreadable checkpoint is a node-level finding (``dradiag node``), not a claim's."""
NODE_PHASES = ("prepare", "injection", "unprepare")
"""The phases saved node state is evidence for (the cluster-side ones come from what the
server served, which ``test_bundle_parity`` covers)."""


def _claims(root: Path) -> list[str]:
    docs = yaml.safe_load_all((root / "claims.yaml").read_text())
    items = [i for d in docs if d for i in (d.get("items") or [d])]
    return sorted(
        f"{i['metadata']['namespace']}/{i['metadata']['name']}"
        for i in items
        if i.get("kind") == "ResourceClaim"
    )


def _now(root: Path) -> str:
    return str(json.loads((root / "collection.json").read_text())["source"]["collectedAt"])


def _verdict(source: str, claim: str, now: str, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    code = run(["claim", claim, "--from", source, "-o", "json", "--now", now])
    doc = json.loads(capsys.readouterr().out)
    verdict = doc["verdict"]
    rules = sorted(f["rule"] for p in doc["phases"] for f in p.get("findings") or [])
    phases = {
        p["id"]: (p["status"], (p.get("basis") or {}).get("kind"))
        for p in doc["phases"]
        if p["id"] in NODE_PHASES
    }
    return code, verdict["status"], verdict.get("phase"), verdict.get("rule"), rules, phases


@pytest.mark.parametrize("name", CASES)
def test_bundle_with_node_state_gives_the_directory_verdicts(
    name: str,
    kube_api_factory: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    root = FIXTURES / name
    server = kube_api_factory(root, server_version="1.34")
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    with_node, without = tmp_path / "with.tar.gz", tmp_path / "without.tar.gz"
    common = ["bundle", "-A", "--kubeconfig", kubeconfig]
    assert run([*common, "-o", str(with_node), "--node-state", str(root)]) == 0
    assert run([*common, "-o", str(without)]) == 0
    now = _now(root)
    claims = _claims(root)
    assert claims
    differs = False
    for claim in claims:
        directory = _verdict(str(root), claim, now, capsys)
        bundled = _verdict(str(with_node), claim, now, capsys)
        assert bundled[:4] == directory[:4] and bundled[5] == directory[5], claim
        differs |= _verdict(str(without), claim, now, capsys) != bundled
    if name in DECIDES_CLAIMS:
        assert differs, "the node state decided nothing: the parity would prove nothing"
    assert server.methods() == {"GET"}
