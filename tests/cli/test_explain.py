"""``dradiag explain``: a pasted message gets the rules a diagnosis would match it with."""

from __future__ import annotations

import json
from pathlib import Path

import doc_schemas
import pytest
import yaml

from dradiag.analyses.message_explain import explain_message
from dradiag.cli.app import run
from dradiag.cli.exit_codes import ExitCode
from dradiag.rulebook import load_rulebook

CASES = Path(__file__).resolve().parents[1] / "rules" / "cases"


def _pasteable_cases() -> list[tuple[str, str, str, str]]:
    """(rule, case, how, text) of every firing case made of one event or one log."""
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        rule = doc["rule"]
        for name, case in doc.items():
            if name == "rule" or not isinstance(case, dict):
                continue
            if not (case.get("expect") or {}).get("fires") or case.get("objects"):
                continue
            events, logs = case.get("events") or [], case.get("logs") or []
            if len(events) == 1 and not logs and "message" in events[0]:
                out.append((rule, name, "event", str(events[0]["message"])))
            elif len(logs) == 1 and not events:
                out.append((rule, name, "log", str(logs[0]["text"])))
    return out


PASTEABLE = _pasteable_cases()


def test_the_corpus_has_cases_of_both_kinds():
    hows = [how for _, _, how, _ in PASTEABLE]
    assert hows.count("event") >= 20 and hows.count("log") >= 20


@pytest.mark.parametrize(("rule", "case", "how", "text"), PASTEABLE, ids=lambda v: str(v)[:40])
def test_every_firing_case_text_is_explained_by_its_rule(rule, case, how, text):
    book = load_rulebook()
    matched = {m.rule.id: m for m in explain_message(book, text)}
    wanted = book.get(rule)
    assert wanted is not None
    # A rule that supersedes this one, or a specific rule over a fallback, may stand instead.
    replacing = {r.id for r in book.rules if rule in r.supersedes}
    assert rule in matched or matched.keys() & replacing or (wanted.fallback and matched), (
        case,
        sorted(matched),
    )
    if rule in matched:
        # An event text is matched as an event; a log text as a log line, unless the rule
        # reads the same words in events too.
        has_events = wanted.match is not None and wanted.match.event is not None
        assert matched[rule].matched_as == how or (how == "log" and has_events)
        assert "(unknown)" not in matched[rule].explain


def test_a_kubectl_describe_row_is_matched_under_its_reason(capsys):
    row = (
        "  Warning  FailedScheduling  2m (x4 over 6m)  default-scheduler  0/3 nodes are "
        "available: 3 cannot allocate all claims. still not schedulable"
    )
    assert run(["explain", row, "-o", "json"]) == ExitCode.OK
    doc = json.loads(capsys.readouterr().out)
    doc_schemas.validate(doc, "explain")
    assert doc["schemaVersion"] == "dradiag.explain/v1"
    assert [m["rule"] for m in doc["matches"]] == ["DRA-ALLOC-CANNOT-ALLOCATE"]
    match = doc["matches"][0]
    assert match["reason"] == "FailedScheduling" and match["phase"] == "allocation"
    assert "3 of 3 nodes" in match["explain"] and match["next"]


def test_text_view_and_stdin(monkeypatch, capsys):
    import io

    line = (
        "Error: error creating driver: failed to create device library: failed to locate "
        'driver libraries: error locating "libnvidia-ml.so.1"\n'
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(line))
    assert run(["explain", "-"]) == ExitCode.OK
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("DRA-PUB-DRIVER-LIBRARIES-NOT-FOUND  phase publication  error")
    assert "(matched as log line)" in first
    assert "  meaning: The plugin found no libnvidia-ml.so.1" in out
    assert "  more: dradiag rules show DRA-PUB-DRIVER-LIBRARIES-NOT-FOUND" in out


def test_nothing_matched_exits_1_and_empty_is_a_usage_error(capsys):
    assert run(["explain", "the weather is nice today"]) == ExitCode.BROKEN
    assert capsys.readouterr().out.startswith("no rule matches this text")
    assert run(["explain", "   "]) == ExitCode.USAGE
    assert run(["explain", "x", "-o", "sarif"]) == ExitCode.USAGE


def test_a_reason_alone_does_not_fire_reason_only_rules_on_any_text():
    book = load_rulebook()
    reason_only = {
        r.id
        for r in book.rules
        if r.match is not None and r.match.event is not None and not r.match.event.messages
    }
    assert not {m.rule.id for m in explain_message(book, "some unrelated words")} & reason_only
