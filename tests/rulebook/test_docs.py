"""docs/rules.md is generated from the rule files and must not be stale (ruff's --mode check)."""

from __future__ import annotations

from pathlib import Path

from dradiag.rulebook import load_rulebook
from dradiag.rulebook.docs import DOCS_PATH, GENERATED_NOTE, main, render_markdown

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_docs_rules_md_is_current() -> None:
    assert DOCS_PATH == REPO_ROOT / "docs" / "rules.md"
    expected = render_markdown(load_rulebook())
    current = DOCS_PATH.read_text(encoding="utf-8")
    assert current == expected, "docs/rules.md is stale: python -m dradiag.rulebook.docs --write"


def test_check_mode_agrees(capsys) -> None:
    assert main(["--check"]) == 0


def test_page_has_every_rule_and_alias_anchor() -> None:
    book = load_rulebook()
    text = render_markdown(book)
    assert text.startswith(GENERATED_NOTE)
    for rule in book.rules:
        assert f"\n### {rule.id}\n" in text
        assert f"(#{rule.id.lower()})" in text
        for alias in rule.aliases:
            assert f'<a id="{alias.lower()}"></a>' in text
    # Rule docs headings are nested under the rule's own heading.
    assert "\n#### What it detects\n" in text
    assert "\n## What it detects\n" not in text
