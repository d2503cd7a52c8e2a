"""The catalogue's own invariants: ids, docs, aliases, and a case file that proves each rule.

sqlfluff checks every rule's docstring sections and that each code has YAML cases; ruff
keeps one registry of codes and redirects. These tests do the same for ``rules/*.yaml``:
every rule has a case that fires and a near miss that stays quiet (evidence cases for data
rules, engine runs for code-backed ones); every code-backed rule names the analysis that
emits it, and that analysis really mentions the id; every id the analyses emit has a
catalogue entry and is canonical, never an alias; and the severity the engine emits a rule
with is the one the catalogue gives it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dradiag.rulebook.schema import DOC_HEADINGS, PHASE_CODES, RULE_ID_RE
from dradiag.vocabulary import Phase

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path(__file__).resolve().parent / "cases"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"
SCENARIOS_DIR = FIXTURES_DIR / "scenarios"
RULE_CASES_DIR = FIXTURES_DIR / "rule_cases"
ENGINE_COMMANDS = ("claim", "pod", "scan", "selector-check", "node")
_EMITTED_ID = re.compile(r"[\"'](DRA-(?:PUB|SEL|ALLOC|PREP|INJ|WORK|UNPREP)-[A-Z0-9-]+)[\"']")


def _cases_of(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in data.items() if isinstance(v, dict) and "expect" in v}


def test_catalogue_is_big_enough_and_covers_every_phase(rulebook: Any) -> None:
    assert len(rulebook) >= 40
    for phase in Phase:
        assert rulebook.by_phase(phase), f"no rule for {phase.value}"
        assert any(r.match is not None for r in rulebook.by_phase(phase)), phase


def test_ids_are_unique_well_formed_and_name_their_phase(rulebook: Any) -> None:
    ids = [r.id for r in rulebook.rules]
    assert len(ids) == len(set(ids))
    for rule in rulebook.rules:
        m = RULE_ID_RE.match(rule.id)
        assert m, rule.id
        assert PHASE_CODES[m.group(1)] is rule.phase, rule.id


def test_every_docs_has_the_headings_in_order(rulebook: Any) -> None:
    for rule in rulebook.rules:
        positions = [rule.docs.find(h) for h in DOC_HEADINGS]
        assert all(p >= 0 for p in positions), (rule.id, positions)
        assert positions == sorted(positions), rule.id
        for heading, nxt in zip(DOC_HEADINGS, [*DOC_HEADINGS[1:], None], strict=True):
            start = rule.docs.index(heading) + len(heading)
            end = rule.docs.index(nxt) if nxt else len(rule.docs)
            assert rule.docs[start:end].strip(), f"{rule.id}: empty section {heading}"


def test_aliases_resolve_to_their_rule_and_clash_with_nothing(rulebook: Any) -> None:
    ids = set(rulebook.ids)
    for rule in rulebook.rules:
        for alias in rule.aliases:
            assert alias not in ids
            assert rulebook.get(alias) is rule
            assert rulebook.get(alias.lower()) is rule


def test_every_rule_has_a_case_file_and_every_case_file_a_known_rule(
    rulebook: Any, case_files: dict[str, dict[str, Any]]
) -> None:
    missing = [r.id for r in rulebook.rules if r.id not in case_files]
    assert missing == [], f"rules without tests/rules/cases/<ID>.yaml: {missing}"
    for stem, data in case_files.items():
        assert data.get("rule") == stem, f"{stem}.yaml names rule {data.get('rule')}"
        assert rulebook.get(stem) is not None and rulebook.get(stem).id == stem, stem


@pytest.mark.parametrize("phase", list(Phase), ids=[p.value for p in Phase])
def test_every_rule_has_a_firing_case_and_a_quiet_near_miss(
    phase: Phase, rulebook: Any, case_files: dict[str, dict[str, Any]]
) -> None:
    """Data rules prove themselves on evidence, code-backed rules on an engine run."""
    missing = []
    for rule in rulebook.by_phase(phase):
        data = case_files.get(rule.id, {})
        cases = [
            c
            for c in _cases_of(data).values()
            if (rule.match is not None) or any(k in c for k in ENGINE_COMMANDS)
        ]
        if not any(c["expect"].get("fires") for c in cases):
            missing.append(f"{rule.id}: no firing case")
        if not any(not c["expect"].get("fires") for c in cases):
            missing.append(f"{rule.id}: no near-miss case that stays quiet")
    assert missing == [], missing


def test_every_wording_variant_has_a_firing_case(
    rulebook: Any, case_files: dict[str, dict[str, Any]]
) -> None:
    """A rule claiming several wordings (pattern lists) proves each one on real evidence."""
    from dradiag.rulebook.patterns import first_match

    missing: dict[str, list[str]] = {}
    for rule in rulebook.rules:
        if rule.match is None:
            continue
        firing = [c for c in _cases_of(case_files[rule.id]).values() if c["expect"].get("fires")]
        event_texts = [
            str(e.get("message") or e.get("note") or "")
            for c in firing
            for e in c.get("events", [])
        ]
        log_lines = [
            line
            for c in firing
            for entry in c.get("logs", [])
            for line in str(entry["text"]).splitlines()
        ]
        for variants, texts in (
            (rule.match.event.messages if rule.match.event else (), event_texts),
            (rule.match.log.patterns if rule.match.log else (), log_lines),
        ):
            if len(variants) < 2:
                continue
            covered = set()
            for text in texts:
                found = first_match(variants, text)
                if found is not None:
                    covered.add(found[0].source)
            uncovered = [v.source for v in variants if v.source not in covered]
            if uncovered:
                missing[rule.id] = uncovered
    assert missing == {}, "wording variants without a firing case"


def test_code_backed_rules_name_a_live_emitter(
    rulebook: Any, case_files: dict[str, dict[str, Any]]
) -> None:
    for rule in rulebook.rules:
        if rule.match is not None:
            continue
        data = case_files[rule.id]
        assert "pending" not in data, f"{rule.id}: reserved, nothing emits it"
        emitters = data.get("emitted_by") or []
        assert emitters, f"{rule.id}: code-backed rule names no emitter"
        for emitter in emitters:
            source = (REPO_ROOT / emitter["module"]).read_text(encoding="utf-8")
            literals = [f'"{rule.id}"']
            if "literal" in emitter:
                literals.append(emitter["literal"])
            assert any(lit in source for lit in literals), f"{rule.id}: not in {emitter['module']}"


def test_every_id_the_code_emits_is_catalogued(rulebook: Any) -> None:
    """One registry (ruff's codes.rs): an id in an analysis without a rule entry is a bug."""
    unknown: dict[str, str] = {}
    for path in sorted((REPO_ROOT / "dradiag").rglob("*.py")):
        for rule_id in _EMITTED_ID.findall(path.read_text(encoding="utf-8")):
            if rule_id not in rulebook and not rule_id.startswith("DRA-PREP-EXAMPLE"):
                unknown.setdefault(rule_id, str(path.relative_to(REPO_ROOT)))
    assert unknown == {}


def test_the_code_emits_canonical_ids_never_aliases(rulebook: Any) -> None:
    """An alias keeps an old id resolving for users; the engine itself speaks canonical ids."""
    aliased = []
    for path in sorted((REPO_ROOT / "dradiag").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for match in _EMITTED_ID.finditer(text):
            rule = rulebook.get(match.group(1))
            if rule is not None and rule.id != match.group(1):
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path.relative_to(REPO_ROOT)}:{line}"
                aliased.append(f"{where}: {match.group(1)} is an alias of {rule.id}")
    assert aliased == []


def test_emitted_severity_is_the_catalogue_severity(
    rulebook: Any, engine: Any, engine_cases: list[Any]
) -> None:
    """Over every scenario and engine case: a rule's strongest emitted severity is its
    catalogue severity. The engine may show a rule weaker in context (history, a symptom of
    another claim's leak, a plugin that no longer blocks), never stronger, and the catalogue
    says what the rule means when it is the current cause, which decides the phase status."""
    import json

    runs = [engine(case.argv(), case.hidden_modules) for case in engine_cases]
    for expected in sorted(SCENARIOS_DIR.glob("*/expected.json")):
        claim = json.loads(expected.read_text(encoding="utf-8"))["claim"]
        runs.append(engine(["claim", claim, "--from", str(expected.parent), "-o", "json"]))
    rank = {"info": 0, "warning": 1, "error": 2}
    strongest: dict[str, tuple[str, str]] = {}
    for run in runs:
        for finding in run.findings():
            rule = rulebook.get(finding["rule"])
            assert rule is not None, finding["rule"]
            seen = strongest.get(rule.id)
            if seen is None or rank[finding["severity"]] > rank[seen[0]]:
                strongest[rule.id] = (finding["severity"], " ".join(run.argv[:2]))
    wrong = {
        rule_id: f"emitted at most as {sev} ({where}), catalogued as "
        f"{rulebook.get(rule_id).severity.value}"
        for rule_id, (sev, where) in strongest.items()
        if sev != rulebook.get(rule_id).severity.value
    }
    assert wrong == {}


def test_rule_case_fixtures_exist_and_are_used(
    rulebook: Any, case_files: dict[str, dict[str, Any]]
) -> None:
    """Each engine case's directory and files exist; each fixture directory serves a case."""
    used: set[Path] = set()
    for data in case_files.values():
        for case in _cases_of(data).values():
            paths = [case["from"]] if "from" in case else []
            if "selector-check" in case:
                target = case["selector-check"]
                paths += [target] if isinstance(target, str) else list(target)
            for rel in paths:
                path = FIXTURES_DIR / str(rel)
                assert path.exists(), f"{data['rule']}: {rel} does not exist"
                used.add(path.resolve())
    unused = []
    for rule_dir in sorted(RULE_CASES_DIR.iterdir()) if RULE_CASES_DIR.exists() else []:
        assert rulebook.get(rule_dir.name) is not None, f"{rule_dir.name}: not a rule id"
        for fixture in sorted(rule_dir.iterdir()):
            if fixture.resolve() not in used:
                unused.append(str(fixture.relative_to(FIXTURES_DIR)))
    assert unused == [], "fixtures no case uses"


def test_scenario_expectations_name_known_rules(rulebook: Any) -> None:
    import json

    for expected in sorted(SCENARIOS_DIR.glob("*/expected.json")):
        rule_id = json.loads(expected.read_text(encoding="utf-8")).get("rule")
        if rule_id:
            assert rule_id in rulebook, f"{expected.parent.name}: unknown rule {rule_id}"


def test_next_steps_never_mutate_unless_marked(rulebook: Any) -> None:
    mutating = re.compile(r"\bkubectl\s+(delete|apply|create|edit|patch|scale|drain|cordon)\b")
    for rule in rulebook.rules:
        for item in rule.next:
            if mutating.search(item):
                assert item.startswith("remediation:"), (rule.id, item)


def test_shipped_log_patterns_have_a_prefilter_and_run_on_re2(rulebook: Any) -> None:
    """Log scanning cost rests on literal prefilters; RE2 keeps every pattern linear."""
    for rule in rulebook.rules:
        if rule.match is None or rule.match.log is None:
            continue
        for pattern in rule.match.log.patterns:
            assert pattern.engine == "re2", (rule.id, pattern.source)
            assert pattern.literals, (rule.id, pattern.source)
