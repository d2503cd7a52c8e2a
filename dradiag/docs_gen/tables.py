"""Tables the docs draw from the rulebook: the rules of one phase (``phase-rules:PHASE``)."""

from __future__ import annotations

from dradiag.vocabulary import Phase


def phase_rules(phase_name: str, *, rules_page: str) -> str:
    """A Markdown table of the rules of ``phase_name``: id (linked), severity, title."""
    from dradiag.rulebook import load_rulebook
    from dradiag.rulebook.docs import evidence_kinds

    phase = Phase(phase_name)
    lines = ["| rule | severity | evidence | what it finds |", "|---|---|---|---|"]
    for rule in load_rulebook().by_phase(phase):
        title = rule.title.replace("|", "\\|")
        lines.append(
            f"| [{rule.id}]({rules_page}#{rule.id.lower()}) | {rule.severity.value} "
            f"| {', '.join(evidence_kinds(rule))} | {title} |"
        )
    return "\n".join(lines) + "\n"


def schema_index(*, schema_dir: str) -> str:
    """A Markdown table of the published JSON Schemas: file, document version, what it holds."""
    import json
    import re

    from dradiag.packaged import docs_file

    lines = ["| schema | document | what it describes |", "|---|---|---|"]
    folder = docs_file("schema")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".schema.json"):
            continue
        schema = json.loads(entry.read_text("utf-8"))
        title = str(schema.get("title") or "")
        version = re.search(r"\((dradiag\.[a-z-]+/v\d+)\)", title)
        description = " ".join(str(schema.get("description") or "").split()).replace("|", "\\|")
        lines.append(
            f"| [{entry.name}]({schema_dir}/{entry.name}) "
            f"| `{version.group(1) if version else ''}` | {description} |"
        )
    return "\n".join(lines) + "\n"
