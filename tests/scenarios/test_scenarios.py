"""Run every scenario through the CLI (``dradiag claim NS/NAME --from DIR -o json``) and check the
verdict against the scenario's expected.json: status, phase, deciding rule and exit code.

Beyond the verdict line, each run must tell the same story phase by phase (DESIGN §2): a
healthy claim has no broken phase (no false alarms); a broken verdict is the *first*
broken phase and its rule is among that phase's findings; an inconclusive verdict leaves
the phase that needed the unread evidence ``unknown`` and records the failed read.
The document is validated against the published JSON Schema (DESIGN §5).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dradiag.rulebook import load_rulebook

PHASE_ORDER = [
    "publication",
    "selection",
    "allocation",
    "prepare",
    "injection",
    "workload",
    "unprepare",
]
REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = REPO_ROOT / "docs" / "schema" / "diagnosis.schema.json"

KNOWN_ENGINE_ISSUES: dict[str, str] = {}
"""Scenario name -> the engine or rule bug that makes it fail today (reported, not hidden).

Each entry runs as a strict xfail: when the bug is fixed the test XPASSes, fails, and the
entry must be removed. Expectations are never weakened to make a scenario pass.
"""


def _canonical(rule: str | None) -> str | None:
    """A rule id as the rulebook names it now (aliases resolve to their rule, STYLE "Rules")."""
    if rule is None:
        return None
    found = load_rulebook().get(rule)
    return found.id if found is not None else rule


_RUNS: dict[str, tuple[int, dict[str, Any], str]] = {}
"""One CLI run per scenario, shared by the tests below (the run is pure: same input, same output)."""


def _diagnose(scenario: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    if scenario.name not in _RUNS:
        _RUNS[scenario.name] = _run_cli(scenario, capsys)
    return _RUNS[scenario.name]


def _run_cli(scenario: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any], str]:
    from dradiag.cli.app import run

    capsys.readouterr()
    code = run(["claim", scenario.expected["claim"], "--from", str(scenario.path), "-o", "json"])
    out, err = capsys.readouterr()
    try:
        doc = json.loads(out)
    except json.JSONDecodeError as exc:  # pragma: no cover - a failure message, not a path
        pytest.fail(
            f"stdout is not one JSON document ({exc}); stderr:\n{err}\nstdout:\n{out[:2000]}"
        )
    return code, doc, err


def _phases(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["id"]: p for p in doc.get("phases", [])}


def _rules_in(phase: dict[str, Any]) -> set[str | None]:
    return {_canonical(f.get("rule")) for f in phase.get("findings", [])}


def test_scenario_verdict(
    scenario: Any, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    if scenario.name in KNOWN_ENGINE_ISSUES:
        request.applymarker(
            pytest.mark.xfail(reason=KNOWN_ENGINE_ISSUES[scenario.name], strict=True)
        )
    exp = scenario.expected
    code, doc, err = _diagnose(scenario, capsys)
    verdict = doc["verdict"]
    phases = _phases(doc)
    story = {pid: phases[pid]["status"] for pid in PHASE_ORDER if pid in phases}
    context = (
        f"\nscenario {scenario.name}: expected {exp['status']}/{exp['phase']}/{exp['rule']}/exit "
        f"{exp['exit_code']}\ngot {verdict.get('status')}/{verdict.get('phase')}/"
        f"{verdict.get('rule')}/exit {code}\nphases: {story}\nsummary: {verdict.get('summary')}\n"
        f"stderr: {err[-1500:]}"
    )
    assert verdict["status"] == exp["status"], context
    assert code == exp["exit_code"], context
    if exp["phase"] is not None:
        assert verdict.get("phase") == exp["phase"], context
    if exp["rule"] is not None:
        assert _canonical(verdict.get("rule")) == _canonical(exp["rule"]), context

    assert doc["target"]["kind"] == "ResourceClaim"
    assert f"{doc['target']['namespace']}/{doc['target']['name']}" == exp["claim"]
    assert [p["id"] for p in doc["phases"]] == PHASE_ORDER, "every phase, in order"

    broken = [pid for pid in PHASE_ORDER if story.get(pid) == "broken"]
    if exp["status"] == "ok":
        assert not broken, f"false alarm: {broken}" + context
        assert verdict.get("phase") is None, context
    elif exp["status"] == "broken":
        assert broken and broken[0] == exp["phase"], f"first broken phase {broken}" + context
        found = _rules_in(phases[exp["phase"]])
        assert _canonical(exp["rule"]) in found, (
            "the deciding rule is among the broken phase's findings" + context
        )
        for rule in exp.get("phase_findings", []):
            assert _canonical(rule) in found, f"{rule} must also be found" + context
    else:
        assert not broken, "an inconclusive verdict has no broken phase" + context
        assert story.get(exp["phase"]) == "unknown", context
        assert doc["collection"]["errors"], "the failed read is reported" + context
        assert doc["collection"]["partial"] is True, context

    for mention in exp.get("mentions", []):
        assert mention in json.dumps(doc), f"the document must name {mention}" + context


def test_scenario_document_matches_schema(
    scenario: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema

    _code, doc, _err = _diagnose(scenario, capsys)
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(doc, schema)
    assert doc["schemaVersion"] == "dradiag.diagnosis/v1"
    assert (
        doc["source"]["collectedAt"]
        == json.loads((scenario.path / "collection.json").read_text())["source"]["collectedAt"]
    )
