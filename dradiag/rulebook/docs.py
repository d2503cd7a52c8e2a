"""Views of the rulebook for people: docs/rules.md, and the rows and documents of ``dradiag rules``.

Everything a user reads about a rule comes from the rule files through here, so the
catalogue page, ``rules list``, ``rules show`` and SARIF help cannot disagree (STYLE
"Rules as data"). ``python -m dradiag.rulebook.docs --write`` regenerates docs/rules.md;
``--check`` exits 1 when the file is stale (ruff's ``generate_all --mode check``), and a
test runs the same comparison.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dradiag.rulebook.loader import Rulebook, load_rulebook
from dradiag.rulebook.schema import Rule
from dradiag.vocabulary import PHASE_ORDER, Phase

DOCS_PATH = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
"""Where the generated catalogue lives in a source checkout."""

GENERATED_NOTE = (
    "<!-- Generated from rules/*.yaml by `python -m dradiag.rulebook.docs --write`. "
    "Do not edit by hand: a test fails when this file is stale. -->"
)

PHASE_BLURB = {
    Phase.PUBLICATION: "the driver discovers hardware and publishes ResourceSlices",
    Phase.SELECTION: "the DeviceClass and the request's CEL selectors pick candidate devices",
    Phase.ALLOCATION: "the scheduler allocates devices and reserves the claim for the pod",
    Phase.PREPARE: "kubelet calls the plugin's NodePrepareResources",
    Phase.INJECTION: "the CDI spec is resolved by the runtime and the container is created",
    Phase.WORKLOAD: "the container sees and uses the device",
    Phase.UNPREPARE: "release: Unprepare, deallocation, node-side cleanup",
}


def evidence_kinds(rule: Rule) -> tuple[str, ...]:
    """What a rule reads: ``event``, ``log``, ``object``, or ``code`` for code-backed ones."""
    if rule.match is None:
        return ("code",)
    ki = rule.match.known_issue
    if ki is not None:
        kinds = {k for _key, part in ki.symptom for k in _kinds(part)}
        return ("version", *(k for k in ("event", "log", "object") if k in kinds))
    return _kinds(rule.match)


def _kinds(match: Any) -> tuple[str, ...]:
    return tuple(k for k in ("event", "log", "object") if getattr(match, k) is not None)


def rule_row(rule: Rule) -> dict[str, Any]:
    """One line of ``rules list``: the summary fields, JSON-ready."""
    return {
        "id": rule.id,
        "phase": rule.phase.value,
        "severity": rule.severity.value,
        "title": rule.title,
        "evidence": list(evidence_kinds(rule)),
        "aliases": list(rule.aliases),
    }


def rule_document(rule: Rule) -> dict[str, Any]:
    """Everything about one rule (``rules show -o json``), without the compiled regexes."""
    doc = rule_row(rule)
    doc["explain"] = rule.explain
    doc["next"] = list(rule.next)
    doc["versions"] = list(rule.versions)
    doc["docs"] = rule.docs
    if rule.match is not None:
        doc["match"] = match_summary(rule)
    if rule.fallback:
        doc["fallback"] = True
    if rule.supersedes:
        doc["supersedes"] = list(rule.supersedes)
    doc["source"] = rule.source
    return doc


def match_summary(rule: Rule) -> dict[str, Any]:
    """The match block as written (patterns as source text), for reading and JSON.

    A known issue reads as its version facts, then one entry per symptom part
    (``symptom event``, ``symptom object``, ``symptom object#2``)."""
    assert rule.match is not None
    ki = rule.match.known_issue
    if ki is None:
        return _part_summary(rule.match)
    out: dict[str, Any] = {
        "known_issue": {
            "component": ki.component,
            "affected": [str(r) for r in ki.affected],
            "fixed_in": list(ki.fixed_in),
            "upstream": ki.upstream,
        }
    }
    for key, part in ki.symptom:
        for kind, spec in _part_summary(part).items():
            out[f"symptom {key}" if key.startswith(kind) else f"symptom {kind}"] = spec
    return out


def _part_summary(match: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    em = match.event
    if em is not None:
        event: dict[str, Any] = {}
        if em.reasons:
            event["reason"] = sorted(em.reasons)
        elif em.reason_pattern is not None:
            event["reason"] = em.reason_pattern.source
        if em.messages:
            event["message"] = [p.source for p in em.messages]
        for key, value in (("type", em.type), ("involvedKind", em.involved_kind)):
            if value:
                event[key] = value
        if em.source is not None:
            event["source"] = em.source.source
        out["event"] = event
    lm = match.log
    if lm is not None:
        log: dict[str, Any] = {"pattern": [p.source for p in lm.patterns]}
        if lm.container is not None:
            log["container"] = lm.container.source
        if lm.pod is not None:
            log["pod"] = lm.pod.source
        out["log"] = log
    om = match.object
    if om is not None:
        out["object"] = {
            "kind": om.kind,
            "path": _path_text(om.path),
            "where": [_test_text(t) for t in om.tests],
        }
    return out


def _path_text(steps: Sequence[Any]) -> str:
    return ".".join(s.key + ("[]" if s.each else "") for s in steps)


def _test_text(test: Any) -> str:
    path = _path_text(test.path) or "."
    if test.exists is not None:
        text = f"{path} {'exists' if test.exists else 'absent'}"
    elif test.one_of is not None:
        text = f"{path} in {list(test.one_of)}"
    elif test.pattern is not None:
        text = f"{path} =~ {test.pattern.source}"
    else:
        text = f"{path} == {test.equals!r}"
    return f"not ({text})" if test.negate else text


_SLOT = re.compile(r"\{(?!end\})([a-z_][a-z0-9_]*(?:\|[a-z_][a-z0-9_]*)*)\}")
"""A template slot; ``{end}`` closes a kubectl jsonpath ``{range}`` and is no slot."""


def template_slots(template: str, *, markdown: bool = False) -> str:
    """An explain template as readers see it without evidence: ``{claim}`` reads
    ``<claim>`` (``{a|b}`` reads ``<a>``), a code span in markdown, where a bare ``<claim>``
    would be taken for an HTML tag."""

    def slot(m: re.Match[str]) -> str:
        name = m.group(1).split("|")[0]
        return f"`<{name}>`" if markdown else f"<{name}>"

    return _SLOT.sub(slot, template)


def docs_sections(docs: str) -> dict[str, str]:
    """The ``## Heading`` sections of a rule's docs, heading → text (whitespace folded)."""
    out: dict[str, str] = {}
    heading = ""
    for line in docs.splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
            out[heading] = ""
        elif heading:
            out[heading] = (out[heading] + " " + line.strip()).strip()
    return out


def plain_docs(docs: str) -> str:
    """A rule's docs as plain text: ``What it detects: ...`` paragraphs, no markdown
    headings (SARIF ``help.text`` is shown verbatim)."""
    return "\n\n".join(f"{h}: {t}" for h, t in docs_sections(docs).items() if t)


def _shift_headings(docs: str, levels: int) -> str:
    prefix = "#" * levels
    return "\n".join(prefix + line if line.startswith("#") else line for line in docs.splitlines())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(rulebook: Rulebook) -> str:
    """docs/rules.md: the phase tables, then one section per rule with its full docs."""
    lines = [GENERATED_NOTE, "", "# dradiag rule catalogue", ""]
    lines.append(
        f"{len(rulebook)} rules. Each has a stable id `DRA-<PHASE>-<NAME>`; rules marked "
        "*code* are emitted by dradiag's analyses (CEL, allocation, pools, wiring), the others "
        "match events, logs or object fields. `dradiag rules show ID` prints one entry."
    )
    lines.append("")
    for phase in PHASE_ORDER:
        rules = rulebook.by_phase(phase)
        blurb = PHASE_BLURB[phase]
        lines += [f"## {phase.value}", "", f"{blurb[0].upper()}{blurb[1:]}.", ""]
        lines += ["| id | severity | evidence | title |", "|---|---|---|---|"]
        for rule in rules:
            lines.append(
                f"| [{rule.id}](#{rule.id.lower()}) | {rule.severity.value} | "
                f"{', '.join(evidence_kinds(rule))} | {_cell(rule.title)} |"
            )
        lines.append("")
    lines += ["## Rules", ""]
    for rule in rulebook.rules:
        lines.append(f"### {rule.id}")
        lines.append("")
        for alias in rule.aliases:
            lines.append(f'<a id="{alias.lower()}"></a>')
        meta = f"**{rule.title}** · phase `{rule.phase.value}` · severity `{rule.severity.value}`"
        meta += f" · evidence: {', '.join(evidence_kinds(rule))}"
        if rule.aliases:
            meta += " · formerly " + ", ".join(f"`{a}`" for a in rule.aliases)
        lines += [meta, ""]
        lines += [_shift_headings(rule.docs.strip(), 2), ""]
        lines += [
            "#### Explain template",
            "",
            f"> {template_slots(rule.explain, markdown=True)}",
            "",
        ]
        if rule.versions:
            lines += ["#### Versions", ""] + [f"- {v}" for v in rule.versions] + [""]
        if rule.match is not None:
            lines += ["#### Match", ""]
            for kind, spec in match_summary(rule).items():
                lines.append(f"- {kind}:")
                for key, value in spec.items():
                    values = value if isinstance(value, list) else [value]
                    for v in values:
                        lines.append(f"  - {key}: `{v}`")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dradiag.rulebook.docs [--write | --check]``; with neither, print to stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = render_markdown(load_rulebook())
    if "--write" in args:
        DOCS_PATH.parent.mkdir(parents=True, exist_ok=True)
        DOCS_PATH.write_text(text, encoding="utf-8")
        return 0
    if "--check" in args:
        current = DOCS_PATH.read_text(encoding="utf-8") if DOCS_PATH.exists() else ""
        if current != text:
            sys.stderr.write(f"{DOCS_PATH} is stale: run python -m dradiag.rulebook.docs --write\n")
            return 1
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
