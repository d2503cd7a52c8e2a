"""Every rule id the walk emits from code has a catalogue entry (DESIGN §6: one registry)."""

from __future__ import annotations

from dradiag.diagnosis.build import CODE_RULE_IDS, NOT_COLLECTED, PHASE_CODE
from dradiag.diagnosis.verdict import CROSS_CLAIM_CAUSE_RULES
from dradiag.rulebook import load_rulebook


def test_every_code_rule_is_in_the_rulebook():
    rulebook = load_rulebook()
    missing = [rule for rule in CODE_RULE_IDS if rulebook.get(rule) is None]
    assert not missing, f"add entries to rules/<phase>.yaml for {missing}"


def test_code_rules_name_their_phase():
    rulebook = load_rulebook()
    for rule_id in CODE_RULE_IDS:
        rule = rulebook.get(rule_id)
        assert rule_id.split("-")[1] == PHASE_CODE[rule.phase], rule_id


def test_not_collected_rules_cover_every_phase():
    assert set(NOT_COLLECTED) == set(PHASE_CODE)
    assert all(load_rulebook().get(r) is not None for r in NOT_COLLECTED.values())


def test_cross_claim_cause_rules_are_unprepare_rules():
    for rule_id in CROSS_CLAIM_CAUSE_RULES:
        assert load_rulebook().get(rule_id).phase.value == "unprepare"
