"""Rule validation: what a bad rule file says (one line: file, line, rule, field) and what passes."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

import pytest

from dradiag.errors import InputError
from dradiag.rulebook.loader import load_rulebook_from, read_rule_file
from dradiag.rulebook.schema import RuleFileError, parse_path, render_template, validate_rule
from dradiag.vocabulary import Phase, Severity

DOCS = (
    "## What it detects\nX.\n\n## Why it breaks the claim\nY.\n\n"
    "## Example evidence\nZ.\n\n## Next\nW.\n"
)
GOOD: dict[str, Any] = {
    "id": "DRA-PREP-EXAMPLE",
    "phase": "prepare",
    "severity": "error",
    "title": "kubelet could not prepare the claim's devices",
    "match": {
        "event": {
            "reason": ["FailedPrepareDynamicResources"],
            "message": "prepare devices failed: (?P<cause>.+)",
        }
    },
    "explain": "NodePrepareResources failed for {pod}: {cause}",
    "next": ["kubectl describe pod {pod}"],
    "docs": DOCS,
}


def _with(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is None:
            raw.pop(key, None)
        else:
            raw[key] = value
    return raw


def _error(raw: Any) -> str:
    with pytest.raises(RuleFileError) as info:
        validate_rule(raw, path="rules/prepare.yaml", line=12)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, InputError)
    return message


def test_a_good_rule_becomes_frozen_data() -> None:
    rule = validate_rule(GOOD, path="rules/prepare.yaml", line=3)
    assert rule.phase is Phase.PREPARE and rule.severity is Severity.ERROR
    assert rule.source == "rules/prepare.yaml:3"
    assert rule.match is not None and rule.match.event is not None
    assert rule.match.event.reasons == frozenset({"FailedPrepareDynamicResources"})
    assert rule.match.event.messages[0].engine == "re2"
    assert rule.placeholders == {"pod", "cause"}
    assert not rule.code_backed


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (_with(id="DRA-PREPARE-X"), "id: 'DRA-PREPARE-X' is not of the form DRA-<PHASE>-<NAME>"),
        (
            _with(phase="selection"),
            "DRA-PREP-EXAMPLE: phase: selection does not match the id's PREP",
        ),
        (_with(phase="binding"), "DRA-PREP-EXAMPLE: phase: 'binding' is not a phase"),
        (_with(severity="fatal"), "DRA-PREP-EXAMPLE: severity: must be error, warning or info"),
        (_with(title=None), "DRA-PREP-EXAMPLE: title: is required"),
        (_with(colour="red"), "DRA-PREP-EXAMPLE: colour: unknown field"),
        (
            _with(match={"event": {"reason": ["X"], "message": "prepare (?P<cause>.+"}}),
            "DRA-PREP-EXAMPLE: match.event.message: invalid regex: missing ), unterminated subpattern",
        ),
        (
            _with(match={"event": {"reason": ["X"], "message": ["a", "b(("]}}),
            "match.event.message[1]: invalid regex",
        ),
        (_with(match={"event": {"type": "Warning"}}), "match.event: needs a reason or a message"),
        (_with(match={"log": {"container": "gpus"}}), "match.log.pattern: is required"),
        (_with(match={"metric": {}}), "match.metric: unknown field"),
        (
            _with(match={"object": {"kind": "Pod", "path": "status..x[]", "exists": True}}),
            "match.object.path:",
        ),
        (
            _with(match={"object": {"kind": "Pod", "path": "status", "where": [{"path": "x"}]}}),
            "match.object.where[0]: needs exactly one of equals, in, regex, exists",
        ),
        (_with(explain="failed: {reason_text}"), "explain: uses {reason_text}, which no capture"),
        (_with(next=[]), "next: needs at least one observation"),
        (
            _with(next=["kubectl delete pod {pod}"]),
            "next[0]: changes the cluster; prefix it with 'remediation:'",
        ),
        (
            _with(docs="## What it detects\nX\n"),
            "docs: lacks the heading '## Why it breaks the claim'",
        ),
        (
            _with(
                docs=DOCS.replace("## Next\nW.\n", "").replace("## What", "## Next\nW.\n\n## What")
            ),
            "docs: headings out of order",
        ),
        (_with(aliases=["OLD-1"]), "aliases: 'OLD-1' is not of the form"),
        (_with(match=None, fallback=True), "match: fallback needs a match"),
    ],
)
def test_bad_rules_fail_with_one_line_naming_file_rule_and_field(raw: Any, expected: str) -> None:
    message = _error(raw)
    assert message.startswith("rules/prepare.yaml:12: ")
    assert expected in message


def test_mutating_next_is_allowed_as_a_remediation() -> None:
    rule = validate_rule(
        _with(next=["remediation: kubectl delete pod {pod} once the node is drained"]),
        path="rules/prepare.yaml",
    )
    assert rule.next[0].startswith("remediation:")


def test_code_backed_rule_needs_no_match_and_any_placeholders() -> None:
    rule = validate_rule(_with(match=None, explain="Claim {claim} waits on {whatever}"), path="p")
    assert rule.code_backed
    assert rule.render_explain({"claim": "ml/c"}) == "Claim ml/c waits on (unknown)"


def test_object_match_paths_tests_and_captures() -> None:
    raw = _with(
        id="DRA-UNPREP-EXAMPLE",
        phase="unprepare",
        match={
            "object": {
                "kind": "ResourceClaim",
                "path": "metadata",
                "where": [
                    {"path": "deletionTimestamp", "exists": True},
                    {"path": "finalizers[]", "equals": "resource.kubernetes.io/delete-protection"},
                    {
                        "path": 'annotations["resource.kubernetes.io/pod-claim-name"]',
                        "regex": "^g",
                        "not": True,
                    },
                ],
                "capture": {"since": "deletionTimestamp"},
            }
        },
        explain="{claim} deleted at {since}",
    )
    rule = validate_rule(raw, path="rules/unprepare.yaml")
    om = rule.match.object  # type: ignore[union-attr]
    assert om.kind == "ResourceClaim" and [t.negate for t in om.tests] == [False, False, True]
    assert om.tests[2].path[-1].key == "resource.kubernetes.io/pod-claim-name"
    assert om.captures[0][0] == "since"


def test_parse_path_walks_lists_and_quoted_keys() -> None:
    steps = parse_path("status.containerStatuses[].state.waiting")
    assert [(s.key, s.each) for s in steps] == [
        ("status", False),
        ("containerStatuses", True),
        ("state", False),
        ("waiting", False),
    ]
    assert (
        parse_path('metadata.labels["app.kubernetes.io/name"]')[-1].key == "app.kubernetes.io/name"
    )
    with pytest.raises(ValueError):
        parse_path("[]")


def test_render_template_alternatives_and_jsonpath_braces() -> None:
    values = {"a": "", "b": "B", "pod": "ml/p"}
    assert render_template("{a|b} and {c}", values) == "B and (unknown)"
    kept = render_template(
        "kubectl get pod {pod} -o jsonpath='{.spec.nodeName}{end}'", values, missing=None
    )
    assert kept == "kubectl get pod ml/p -o jsonpath='{.spec.nodeName}{end}'"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_loader_names_the_line_of_the_bad_rule(tmp_path: Path) -> None:
    rule_yaml = "\n".join(
        "  " + line if i else line
        for i, line in enumerate(
            [
                "- id: DRA-PREP-ONE",
                "phase: prepare",
                "severity: error",
                "title: one",
                "explain: x",
                "next: [look]",
                "docs: |",
            ]
        )
    )
    docs = "\n".join("    " + line for line in DOCS.splitlines())
    good = rule_yaml + "\n" + docs + "\n"
    bad = good.replace("DRA-PREP-ONE", "DRA-PREP-TWO").replace("severity: error", "severity: loud")
    path = tmp_path / "prepare.yaml"
    path.write_text(good + "\n" + bad, encoding="utf-8")
    with pytest.raises(RuleFileError) as info:
        read_rule_file(path)
    line = good.count("\n") + 2
    assert (
        str(info.value) == f"{path}:{line}: DRA-PREP-TWO: severity: must be error, warning or info"
    )


def test_loader_reports_yaml_syntax_errors_with_position(tmp_path: Path) -> None:
    path = _write(tmp_path, "prepare.yaml", "- id: DRA-PREP-X\n  phase: [prepare\n")
    with pytest.raises(RuleFileError) as info:
        read_rule_file(path)
    assert str(info.value).startswith(f"{path}:3:")
    assert "invalid YAML" in str(info.value)


def test_loader_rejects_a_rule_in_the_wrong_phase_file_and_duplicates(tmp_path: Path) -> None:
    good_rule = GOOD
    import yaml

    (tmp_path / "selection.yaml").write_text(yaml.safe_dump([good_rule]), encoding="utf-8")
    with pytest.raises(
        RuleFileError, match="DRA-PREP-EXAMPLE: phase: prepare rule in selection.yaml"
    ):
        load_rulebook_from(tmp_path)
    (tmp_path / "selection.yaml").unlink()
    (tmp_path / "prepare.yaml").write_text(yaml.safe_dump([good_rule, good_rule]), encoding="utf-8")
    with pytest.raises(RuleFileError, match="DRA-PREP-EXAMPLE: id: duplicate"):
        load_rulebook_from(tmp_path)
    other = _with(id="DRA-PREP-OTHER", aliases=["DRA-PREP-EXAMPLE"])
    (tmp_path / "prepare.yaml").write_text(yaml.safe_dump([good_rule, other]), encoding="utf-8")
    with pytest.raises(RuleFileError, match="aliases: DRA-PREP-EXAMPLE is already an id"):
        load_rulebook_from(tmp_path)
    sup = _with(id="DRA-PREP-OTHER", supersedes=["DRA-PREP-NOPE"])
    (tmp_path / "prepare.yaml").write_text(yaml.safe_dump([good_rule, sup]), encoding="utf-8")
    with pytest.raises(RuleFileError, match="supersedes: unknown rule DRA-PREP-NOPE"):
        load_rulebook_from(tmp_path)


def test_bad_rule_file_is_exit_2_through_the_cli(tmp_path: Path, monkeypatch, capsys) -> None:
    """A broken shipped rule file surfaces as one error line and exit 2, never a traceback."""
    from dradiag.cli.app import run
    from dradiag.rulebook import loader

    _write(tmp_path, "prepare.yaml", "- id: DRA-PREP-X\n  phase: prepare\n")
    monkeypatch.setattr(loader, "default_rules_dir", lambda: tmp_path)
    loader.load_rulebook.cache_clear()
    try:
        code = run(["rules", "list"])
    finally:
        loader.load_rulebook.cache_clear()
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err.strip()
        == f"dradiag: error: {tmp_path / 'prepare.yaml'}:1: DRA-PREP-X: severity: is required"
    )


# -- known issues ---------------------------------------------------------------------

KNOWN: dict[str, Any] = {
    "id": "DRA-PREP-KI-EXAMPLE",
    "phase": "prepare",
    "severity": "error",
    "title": "kubelet bug",
    "match": {
        "known_issue": {
            "component": "kubelet",
            "affected": [
                {"introduced": "1.34.0", "fixed": "1.34.4"},
                {"introduced": "1.35.0", "fixed": "1.35.1"},
            ],
            "fixed_in": ["1.34.4", "1.35.1"],
            "upstream": "https://github.com/kubernetes/kubernetes/issues/135901",
            "symptom": {
                "event": {"reason": ["Failed"], "message": "claim info for (?P<claim_name>\\S+)"},
                "object": [
                    {"kind": "Node", "path": "status.nodeInfo", "exists": True},
                    {"kind": "Pod", "path": "spec.nodeName", "exists": True},
                ],
            },
        }
    },
    "explain": "{claim_name}: kubelet {version} on {node}; {upstream}, fixed in {fixed_in}",
    "next": ["kubectl get node {node}"],
    "docs": DOCS,
}


def _known(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(KNOWN)
    ki = raw["match"]["known_issue"]
    for key, value in changes.items():
        if value is None:
            ki.pop(key, None)
        else:
            ki[key] = value
    return raw


def test_a_known_issue_rule_keeps_its_ranges_and_symptom_parts() -> None:
    rule = validate_rule(KNOWN, path="rules/known-issues.yaml", line=3)
    assert rule.match is not None and rule.match.event is None
    ki = rule.match.known_issue
    assert ki is not None and ki.component == "kubelet"
    assert [str(r) for r in ki.affected] == [">=1.34.0 <1.34.4", ">=1.35.0 <1.35.1"]
    assert ki.fixed_in_text == "1.34.4 / 1.35.1"
    assert [key for key, _ in ki.symptom] == ["event", "object", "object#2"]
    assert ki.symptom[2][1].object is not None and ki.symptom[2][1].object.kind == "Pod"


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"component": "kubectl"}, "match.known_issue.component: 'kubectl' is not one of kubelet"),
        ({"affected": []}, "match.known_issue.affected: must be a non-empty list"),
        (
            {"affected": [{"introduced": "1.34", "fixed": "1.34.4"}]},
            "match.known_issue.affected[0].introduced: '1.34' is not a kubelet version",
        ),
        (
            {"affected": [{"introduced": "1.34.4", "fixed": "1.34.0"}], "fixed_in": "1.34.0"},
            "match.known_issue.affected[0]: introduced 1.34.4 is not below fixed 1.34.0",
        ),
        ({"affected": [{"since": "1.34.0"}]}, "match.known_issue.affected[0].since: unknown field"),
        (
            {"fixed_in": "1.34.5"},
            "match.known_issue.fixed_in: 1.34.5 is the fixed bound of no range",
        ),
        ({"fixed_in": "soon"}, "match.known_issue.fixed_in: 'soon' is not a kubelet version"),
        ({"upstream": "see slack"}, "match.known_issue.upstream: must be a GitHub issue"),
        ({"upstream": None}, "match.known_issue.upstream: is required"),
        ({"symptom": {"metric": {}}}, "match.known_issue.symptom.metric: unknown field"),
        (
            {"symptom": {"event": {"reason": ["Failed"], "message": "(unclosed"}}},
            "match.known_issue.symptom.event.message: invalid regex",
        ),
        (
            {
                "symptom": {
                    "object": [{"kind": "Pod", "path": "spec", "exists": True}, {"kind": "Node"}]
                }
            },
            "match.known_issue.symptom.object[1].path: must be a dotted path string",
        ),
    ],
)
def test_a_bad_known_issue_is_one_line_naming_the_field(
    changes: dict[str, Any], fragment: str
) -> None:
    message = _error(_known(**changes))
    assert "DRA-PREP-KI-EXAMPLE: " in message and fragment in message, message


def test_a_known_issue_stands_alone_in_its_match() -> None:
    raw = _known()
    raw["match"]["event"] = {"reason": ["Failed"]}
    assert "match.known_issue: stands alone" in _error(raw)


def test_a_known_issue_without_symptom_is_no_error_and_placeholders_are_checked() -> None:
    raw = _known(symptom=None)
    raw["explain"] = "kubelet {version} is affected; fixed in {fixed_in}"
    assert "a known issue without a symptom cannot be an error" in _error(raw)
    raw["severity"] = "warning"
    rule = validate_rule(raw, path="rules/known-issues.yaml")
    assert rule.match is not None and rule.match.known_issue is not None
    assert rule.match.known_issue.symptom == ()
    bad = _known()
    bad["explain"] = "{cause}"
    assert "uses {cause}, which no capture or context field supplies" in _error(bad)
