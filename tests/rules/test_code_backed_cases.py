"""Engine cases: each code-backed rule fires, or stays quiet, when the real command runs.

A code-backed rule (no ``match``) is computed by the diagnosis walk or an analysis, so its
proof is the command a user runs: ``dradiag claim|pod|scan|selector-check ... --from DIR
-o json`` on a scenario or a ``tests/fixtures/rule_cases/<RULE-ID>/`` directory, the rule
looked for among the findings of the document. A quiet case is a near miss: the same
input with the one detail the rule is about changed.

Every run also checks what the catalogue promises about ids and severities: findings carry
canonical ids (never an alias), no finding is more severe than its rule's catalogue entry,
and no next step shows an evidence placeholder (``{pod}``) left unfilled. (``test_catalogue.py`` checks the reverse over every run: each rule's strongest
emitted severity is its catalogue severity.)
"""

from __future__ import annotations

from typing import Any

from dradiag.vocabulary import Severity

SEVERITY_RANK = {Severity.INFO.value: 0, Severity.WARNING.value: 1, Severity.ERROR.value: 2}


def _evidence_placeholders(text: str) -> frozenset[str]:
    from dradiag.rulebook.schema import CONTEXT_FIELDS, explain_placeholders

    known = frozenset().union(*CONTEXT_FIELDS.values()) | {"container", "driver", "request"}
    return explain_placeholders(text) & known


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def test_engine_case(engine_case: Any, rulebook: Any, engine: Any) -> None:
    rule = rulebook.get(engine_case.rule)
    assert rule is not None, f"{engine_case.path.name}: unknown rule {engine_case.rule}"
    run = engine(engine_case.argv(), engine_case.hidden_modules)
    context = f"\n$ dradiag {' '.join(run.argv)}  (exit {run.code})\nstderr: {run.stderr[-1500:]}"
    assert run.code in (0, 1, 4), "the command ran to a document" + context
    findings = run.findings()
    hits = [f for f in findings if f["rule"] == rule.id]
    expect = engine_case.expect
    if not expect.get("fires"):
        assert hits == [], (
            f"{rule.id} fired on a near miss: {[h['detail'] for h in hits]}" + context
        )
        return
    seen = sorted({f["rule"] for f in findings})
    assert hits, f"{rule.id} did not fire; found {seen}" + context
    severities = {h["severity"] for h in hits}
    assert rule.severity.value in severities, (
        f"{rule.id} is catalogued as {rule.severity.value} but emitted as {sorted(severities)}"
        + context
    )
    for fragment in _as_list(expect.get("detail_contains")):
        assert any(fragment in h.get("detail", "") for h in hits), (
            f"{fragment!r} not in any {rule.id} detail: {[h.get('detail') for h in hits]}"
        )
    if expect.get("verdict"):
        assert rule.id in run.verdict_rules(), f"verdict rules {run.verdict_rules()}" + context
    for hit in hits:
        assert hit.get("title"), f"{rule.id}: a finding has a title"
        assert hit.get("next"), f"{rule.id}: a finding always says what to look at next"


def test_engine_findings_keep_the_catalogue_promises(
    engine_case: Any, rulebook: Any, engine: Any
) -> None:
    run = engine(engine_case.argv(), engine_case.hidden_modules)
    problems = []
    for finding in run.findings():
        rule = rulebook.get(finding["rule"])
        if rule is None:
            problems.append(f"{finding['rule']}: not in the catalogue")
            continue
        if rule.id != finding["rule"]:
            problems.append(f"{finding['rule']}: an alias of {rule.id}")
        if SEVERITY_RANK[finding["severity"]] > SEVERITY_RANK[rule.severity.value]:
            problems.append(
                f"{rule.id}: emitted as {finding['severity']}, catalogued as {rule.severity.value}"
            )
        unfilled = [n for n in finding.get("next", []) if _evidence_placeholders(n)]
        if unfilled:
            problems.append(f"{rule.id}: next step with an unfilled placeholder: {unfilled}")
    for verdict_rule in run.verdict_rules():
        rule = rulebook.get(verdict_rule)
        if rule is None or rule.id != verdict_rule:
            problems.append(f"verdict rule {verdict_rule} is not a canonical id")
    assert problems == [], problems
