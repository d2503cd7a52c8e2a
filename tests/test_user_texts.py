"""Every text a user reads says something they can act on or look up.

Scanned: each rule's title, docs, versions, explain and next (as ``rules show`` prints
them), the generated ``docs/rules.md``, the other docs pages and ``docs/rbac.yaml``, the
SARIF rule descriptors, and every command's and option's ``--help`` text. Flagged: template slots left unfilled (``{candidates}``),
and references into this project's internal notes that users cannot open (the fact
sheets and their section marks, bare issue numbers of unnamed trackers, internal
jargon). Public upstream links (``owner/repo#N``, URLs) are fine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dradiag.cli.app import app, run
from dradiag.rulebook import load_rulebook
from dradiag.rulebook.docs import template_slots

REPO = Path(__file__).resolve().parents[1]

INTERNAL = {
    "internal fact sheet": re.compile(
        r"nvidia-driver-facts|k8s-dra-semantics|cel-engines|peers\.md|DESIGN\.md|STYLE\.md"
        r"|\bDESIGN §|\bSTYLE §"
    ),
    "section mark of an internal document": re.compile(r"§"),
    "issue number without its tracker": re.compile(r"(?<![\w/.-])[Ii]ssues?\s+#\d+"),
    "internal jargon": re.compile(r"witness allocation|Code-backed|\[A\]|\[S\]|\[ext\]"),
}
SLOT = re.compile(r"\{(?!end\})[a-z_][a-z0-9_]*(?:\|[a-z_][a-z0-9_]*)*\}")
"""A template slot (``{claim}``, ``{a|b}``); ``{end}`` closes a kubectl jsonpath range."""


def problems(text: str, *, slots: bool = True) -> list[str]:
    found = [f"{what}: {m.group(0)!r}" for what, rx in INTERNAL.items() for m in rx.finditer(text)]
    if slots:
        found += [f"unfilled template slot: {m.group(0)}" for m in SLOT.finditer(text)]
    return found


def _rule_texts() -> Iterator[tuple[str, str]]:
    for rule in load_rulebook().rules:
        yield f"{rule.id} title", rule.title
        yield f"{rule.id} docs", rule.docs
        for v in rule.versions:
            yield f"{rule.id} versions", v
        yield f"{rule.id} explain as shown", template_slots(rule.explain)
        for n in rule.next:
            yield f"{rule.id} next as shown", template_slots(n)


def _help_texts() -> Iterator[tuple[str, str]]:
    import typer

    root = typer.main.get_command(app)

    def walk(command: object, path: str) -> Iterator[tuple[str, str]]:
        yield path, str(getattr(command, "help", "") or "")
        for param in getattr(command, "params", ()):
            yield f"{path} {param.name}", str(getattr(param, "help", "") or "")
        for name, sub in (getattr(command, "commands", None) or {}).items():
            yield from walk(sub, f"{path} {name}")

    yield from walk(root, "dradiag")


def test_the_scanner_finds_what_it_looks_for():
    bad = "see nvidia-driver-facts §2, issue #35; the witness allocation of {candidates}"
    assert len(problems(bad)) == 5
    good = "kubernetes-sigs/dra-driver-nvidia-gpu#35 and kubernetes/kubernetes#1; {.status}"
    assert problems(good) == []


@pytest.mark.parametrize("where", ["rules", "help"])
def test_no_internal_references_or_unfilled_slots(where):
    texts = list(_rule_texts() if where == "rules" else _help_texts())
    assert len(texts) > (500 if where == "rules" else 100)
    bad = [(name, p) for name, text in texts for p in problems(text)]
    assert bad == []


def test_docs_rules_md_is_clean():
    text = (REPO / "docs" / "rules.md").read_text()
    # The Match sections quote regexes, whose {n,m} quantifiers are not slots.
    assert problems(text) == []


DOC_PAGES = sorted(
    p for p in (REPO / "docs").rglob("*") if p.suffix in {".md", ".yaml"} and p.name != "rules.md"
)
"""The docs pages (and docs/rbac.yaml, which ``dradiag rbac`` prints), rules.md aside:
its Match sections quote regexes and it has its own test above."""


def test_the_docs_pages_are_covered():
    names = {p.relative_to(REPO / "docs").as_posix() for p in DOC_PAGES}
    assert {"phases.md", "troubleshooting.md", "rbac.yaml", "commands/claim.md"} <= names


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_docs_pages_are_clean(page):
    assert problems(page.read_text()) == []


def test_rules_show_prints_no_template_braces(capsys):
    for rule in load_rulebook().rules:
        assert run(["rules", "show", rule.id]) == 0
        out = capsys.readouterr().out
        assert problems(out) == [], rule.id


def test_sarif_rule_descriptors_are_plain_text():
    from dradiag.render.sarif import findings_sarif

    book = load_rulebook()
    findings = [
        {"rule": r.id, "severity": r.severity.value, "title": r.title, "detail": "", "next": []}
        for r in book.rules
    ]
    log = findings_sarif(findings, tool_version="test")
    descriptors = log["runs"][0]["tool"]["driver"]["rules"]
    assert len(descriptors) == len(book.rules)
    for d in descriptors:
        for text in (d["shortDescription"]["text"], d["fullDescription"]["text"]):
            assert problems(text) == [], d["id"]
        assert problems(d["help"]["text"]) == [], d["id"]
        assert "## " not in d["help"]["text"], d["id"]
