"""Field cases: dradiag on the partial evidence real reports gave.

Every ``tests/field/*/case.yaml`` is run through the real CLI, offline (``--from input/``) and,
where the claim's own state proves its stage (``live_parity: true``), live against the local
API server loaded with the same objects. Expectations come from the maintainers' confirmed
cause (``source.md``), never from what dradiag says: a failing case is an engine gap to fix,
never a case to mark xfail.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMAS = REPO / "docs" / "schema"


def _corpus() -> Any:
    spec = importlib.util.spec_from_file_location("dradiag_field_corpus", HERE / "corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


corpus = _corpus()

MIN_CASES = 40
"""The whole corpus (part A: publication/selection/allocation/healthy; part B: the later phases)."""
MIN_HEALTHY = 3
EXIT_FOR_STATUS = {"ok": 0, "broken": 1, "inconclusive": 4}
URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/\S+|https://\S+")
TARGET = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
CASES = corpus.all_cases()
LIVE = [c for c in CASES if c.spec.get("live_parity") is True]


def _validate(doc: dict[str, Any], command: str) -> None:
    item = json.loads((SCHEMAS / "diagnosis.schema.json").read_text())
    if command == "claim":
        jsonschema.Draft202012Validator(item).validate(doc)
        return
    items = json.loads((SCHEMAS / "diagnoses.schema.json").read_text())
    registry = Registry().with_resource(item["$id"], Resource.from_contents(item))
    jsonschema.Draft202012Validator(items, registry=registry).validate(doc)


_ANSWERS: dict[str, Any] = {}


def _offline(case: Any) -> Any:
    if case.name not in _ANSWERS:
        _ANSWERS[case.name] = corpus.answer(case)
    return _ANSWERS[case.name]


def _context(case: Any, ans: Any) -> str:
    phases = {p["id"]: p["status"] for p in ans.diagnosis.get("phases") or []}
    return (
        f"\ncase {case.name}: expected {case.expected}\ngot {corpus.describe(ans)} (exit {ans.code})"
        f"\nphases: {phases}\nstderr: {ans.stderr[-1200:]}"
    )


# -- each case ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_is_well_formed(case: Any) -> None:
    spec = case.spec
    assert set(spec) >= corpus.CASE_KEYS, f"missing keys {corpus.CASE_KEYS - set(spec)}"
    assert set(spec) <= corpus.CASE_KEYS | corpus.OPTIONAL_KEYS, f"unknown keys in {sorted(spec)}"
    assert spec["command"] in corpus.COMMANDS
    assert TARGET.match(spec["target"]), spec["target"]
    assert isinstance(spec["live_parity"], bool)
    assert isinstance(spec["kubernetes"], str) and re.fullmatch(r"1\.\d+", spec["kubernetes"])
    assert isinstance(spec["driver"], str) and spec["driver"]
    if "now" in spec:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(spec["now"])), spec["now"]
    exp = spec["expected"]
    assert set(exp) == corpus.EXPECTED_KEYS, sorted(exp)
    assert exp["status"] in corpus.STATUSES
    assert isinstance(exp["cause"], list) and all(isinstance(c, str) and c for c in exp["cause"])
    if exp["status"] == "ok":
        assert exp["phase"] is None
    else:
        assert exp["phase"] in corpus.PHASES
    if exp["status"] == "broken":
        assert exp["cause"], "a broken case names its specific cause"
    prefix = case.name.split("-", 1)[0]
    assert prefix in corpus.PHASE_PREFIX, f"unknown case prefix {prefix!r}"
    assert corpus.PHASE_PREFIX[prefix] == exp["phase"], (
        "the directory prefix names the expected phase (ok- for healthy)"
    )
    source = (case.path / "source.md").read_text() if (case.path / "source.md").exists() else ""
    assert URL.search(source), "source.md gives the public URL of the report or spec"
    inputs = [p for p in case.input.rglob("*") if p.is_file()]
    assert inputs, "input/ holds the report's evidence"
    for path in inputs:
        assert path.suffix in {".yaml", ".yml", ".json", ".log"}, path
        if path.suffix in {".yaml", ".yml"}:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
            assert docs and all("kind" in d and "apiVersion" in d for d in docs), path


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_field_verdict(case: Any) -> None:
    ans = _offline(case)
    assert not ans.problems, ans.problems
    ctx = _context(case, ans)
    exp, got = case.expected, ans.verdict
    assert got.get("status") == exp["status"], ctx
    assert got.get("phase") == exp["phase"], ctx
    assert ans.code == EXIT_FOR_STATUS[exp["status"]], ctx
    if exp["status"] == "broken":
        assert corpus.deciding_finding(ans.diagnosis) is not None, (
            "the verdict's rule is a finding of the verdict's phase" + ctx
        )
    missing = corpus.missing_causes(case, ans.diagnosis)
    assert not missing, f"cause phrases not named in summary/title/detail: {missing}" + ctx


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_field_document_matches_schema(case: Any) -> None:
    ans = _offline(case)
    assert not ans.problems, ans.problems
    _validate(ans.doc, case.spec["command"])


SERVED_BY_RELEASE = {
    31: ("v1alpha3",),
    32: ("v1beta1", "v1alpha3"),
    33: ("v1beta2", "v1beta1", "v1alpha3"),
}
"""resource.k8s.io versions a release serves by default; 1.34 and later serve v1, v1beta2, v1beta1."""


def _served_versions(case: Any) -> tuple[str, ...]:
    """What the reporter's cluster served: its release's versions plus any version the input uses."""
    minor = int(str(case.spec["kubernetes"]).split(".")[1])
    found = set(SERVED_BY_RELEASE.get(minor, ("v1", "v1beta2", "v1beta1")))
    for path in case.input.rglob("*"):
        if path.suffix in {".yaml", ".yml", ".json"}:
            text = path.read_text()
            found.update(re.findall(r"resource\.k8s\.io/(v1(?:alpha|beta)?\d*)\b", text))
    return tuple(sorted(found))


def _has_kind(case: Any, kind: str) -> bool:
    pattern = re.compile(rf"kind\W+{kind}\b")
    return any(
        pattern.search(p.read_text())
        for p in case.input.rglob("*")
        if p.suffix in {".yaml", ".yml", ".json"}
    )


@pytest.mark.parametrize("case", LIVE, ids=lambda c: c.name)
def test_live_verdict_equals_offline(
    case: Any, kube_api_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same objects served live: same status, phase and rule as ``--from``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    offline = _offline(case)
    versions = _served_versions(case)
    server = kube_api_factory(
        case.input,
        versions=versions,
        taint_rule_versions=versions if _has_kind(case, "DeviceTaintRule") else (),
        server_version=case.spec["kubernetes"],
    )
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    live = corpus.answer(case, "--kubeconfig", str(kubeconfig))
    assert not live.problems, live.problems
    assert server.methods() == {"GET"}
    keys = ("status", "phase", "rule")
    assert {k: live.verdict.get(k) for k in keys} == {k: offline.verdict.get(k) for k in keys}, (
        f"\nlive:    {corpus.describe(live)}\noffline: {corpus.describe(offline)}"
    )


# -- the corpus as a whole --------------------------------------------------------------------


def test_corpus_size() -> None:
    assert len(CASES) >= MIN_CASES, f"{len(CASES)} field cases, want {MIN_CASES}"


def test_corpus_covers_every_phase_and_healthy_claims() -> None:
    broken = Counter(c.expected["phase"] for c in CASES if c.expected["status"] == "broken")
    missing = [p for p in corpus.PHASES if not broken[p]]
    assert not missing, f"phases without a field case: {missing}"
    healthy = sum(c.expected["status"] == "ok" for c in CASES)
    assert healthy >= MIN_HEALTHY, f"{healthy} healthy cases guard against false alarms"
