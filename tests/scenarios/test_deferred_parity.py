"""Deferred decoding changes nothing a diagnosis says.

``claim`` and ``pod`` split large JSON list files and decode only what their look-ups
need (``sources.json_lists``); everything else reads them whole. Every scenario is
rewritten as JSON lists in the layouts real files come in: compact ``<Kind>List``
responses whose items carry no kind (``kubectl get --raw``), kubectl's indented
``List`` with kinds, and one file holding several kinds. Each is diagnosed with the
files decoded whole and with them deferred (the size threshold dropped to 0): stdout,
stderr and the exit code must be identical, for the claim and for every pod using it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dradiag.sources import json_lists
from dradiag.sources.manifests import load_documents


def _as_json_lists(source: Path, target: Path) -> None:
    """``source``'s object files rewritten as JSON lists; logs and collection.json kept."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.yaml", "*.yml"))
    files = sorted(p for p in source.glob("*.y*ml"))
    mixed: list[dict[str, Any]] = []
    for number, path in enumerate(files):
        objs = [doc.obj for doc in load_documents(str(path))]
        if not objs:
            continue
        pairs = {(o.get("apiVersion"), o.get("kind")) for o in objs}
        name = path.with_suffix(".json").name
        if number % 3 == 2:
            mixed += objs  # several kinds in one kubectl `List`, below
        elif number % 3 == 0 and len(pairs) == 1:
            api_version, kind = next(iter(pairs))
            items = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in objs]
            body = {"kind": f"{kind}List", "apiVersion": api_version, "items": items}
            (target / name).write_text(json.dumps(body, separators=(",", ":")))
        else:
            body = {"apiVersion": "v1", "items": objs, "kind": "List", "metadata": {}}
            (target / name).write_text(json.dumps(body, indent=4))
    if mixed:
        body = {"apiVersion": "v1", "items": mixed, "kind": "List"}
        (target / "mixed.json").write_text(json.dumps(body, indent=2))


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from dradiag.cli.app import run

    capsys.readouterr()
    code = run(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_deferred_decoding_gives_the_same_diagnosis(
    scenario: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    converted = tmp_path / scenario.name
    _as_json_lists(scenario.path, converted)
    pods = [
        f"{doc.obj['metadata'].get('namespace', 'default')}/{doc.obj['metadata']['name']}"
        for doc in load_documents(str(scenario.path))
        if doc.obj.get("kind") == "Pod"
        and any(
            ref.get("resourceClaimName") == scenario.claim_name
            or ref.get("resourceClaimTemplateName")
            for ref in (doc.obj.get("spec") or {}).get("resourceClaims") or []
        )
    ]
    runs = [["claim", scenario.expected["claim"]]] + [["pod", p] for p in pods]
    for command in runs:
        argv = [*command, "--from", str(converted), "-o", "json"]
        monkeypatch.setattr(json_lists, "DEFER_MIN_BYTES", 1 << 40)
        whole = _run(argv, capsys)
        monkeypatch.setattr(json_lists, "DEFER_MIN_BYTES", 0)
        deferred = _run(argv, capsys)
        assert deferred == whole, f"{' '.join(command)}: deferred decoding changed the output"
    assert json.loads(whole[1])  # the comparison was between real documents
    monkeypatch.setattr(json_lists, "DEFER_MIN_BYTES", 0)
    from dradiag.sources.manifests import load_snapshot

    assert load_snapshot(str(converted), defer=True).undecoded, "nothing was deferred"
