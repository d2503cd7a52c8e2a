"""``scan`` and ``claim`` give every claim the same verdict: status, phase, deciding rule.

Both commands walk a claim through the same path (diagnosis/build.py ``walk_claim``);
``scan`` only shares per-snapshot facts (ScanContext) and skips claims its conservative
``_quick_healthy`` test proves healthy. This checks, over every scenario, that neither
changes an answer: scan's row for a claim (no row: ok) equals ``claim``'s verdict.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from dradiag.cli.app import run

SCENARIOS = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"


def _document(argv: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = run(argv)
    assert code in (0, 1, 4), f"dradiag {' '.join(argv)} exited {code}"
    return dict(json.loads(out.getvalue()))


def _line(verdict: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return verdict["status"], verdict["phase"], verdict["rule"]


@pytest.mark.parametrize("name", sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir()))
def test_scan_row_is_claims_verdict(name: str) -> None:
    from dradiag.sources.manifests import load_snapshot

    root = SCENARIOS / name
    scan = _document(["scan", "-A", "--from", str(root), "-o", "json"])
    rows = {
        f"{i['target'].get('namespace')}/{i['target']['name']}": _line(i["verdict"])
        for i in scan["items"]
        if i["target"]["kind"] == "ResourceClaim" and not i["target"].get("synthesized")
    }
    claims = [
        f"{c['metadata'].get('namespace')}/{c['metadata']['name']}"
        for c in load_snapshot(str(root)).claims
    ]
    assert claims, f"{name}: no claim to compare"
    mismatches = {}
    for key in claims:
        single = _line(_document(["claim", key, "--from", str(root), "-o", "json"])["verdict"])
        row = rows.get(key, ("ok", None, None))
        if row != single:
            mismatches[key] = {"scan": row, "claim": single}
    assert mismatches == {}
