"""Every rule case in tests/rules/cases/ as one test: the rule fires (or stays quiet) on its evidence.

Cases run through the real matcher over a real Snapshot (``match_snapshot``), so a case also
proves that overlapping rules resolve as intended: a quiet case that another rule's
``supersedes`` or a specific rule's precedence over a ``fallback`` silences fails if the
resolution breaks.
"""

from __future__ import annotations

from typing import Any

from dradiag.analyses.rule_matching import match_snapshot


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def test_rule_case(rule_case: Any, rulebook: Any, snapshot_of: Any) -> None:
    rule = rulebook.get(rule_case.rule)
    assert rule is not None, f"{rule_case.path.name}: unknown rule {rule_case.rule}"
    assert rule.match is not None, f"{rule.id} is code-backed: evidence cases cannot fire it"
    snapshot = snapshot_of(rule_case)
    hits = [h for h in match_snapshot(rulebook, snapshot) if h.rule.id == rule.id]
    expect = rule_case.expect
    if not expect.get("fires"):
        assert hits == [], f"{rule.id} fired on a near miss: {[h.evidence for h in hits]}"
        return
    assert hits, f"{rule.id} did not fire"
    hit = hits[-1] if len(hits) > 1 else hits[0]
    for fragment in _as_list(expect.get("explain_contains")):
        assert fragment in hit.explain, f"{fragment!r} not in explain: {hit.explain}"
    assert "(unknown)" not in hit.explain or expect.get("allow_unknown"), hit.explain
    for fragment in _as_list(expect.get("evidence_contains")):
        text = f"{hit.evidence.ref} {hit.evidence.excerpt}"
        assert fragment in text, f"{fragment!r} not in evidence: {text}"
    for name, value in (expect.get("captures") or {}).items():
        assert hit.captures.get(name) == str(value), (name, hit.captures)
    if "count" in expect:
        assert hit.count == expect["count"]
    finding = hit.to_finding()
    assert finding.rule == rule.id and finding.phase is rule.phase
    assert finding.evidence and finding.evidence[0].excerpt
    assert finding.next, "a finding always says what to look at next"
