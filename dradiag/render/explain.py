"""The views of ``dradiag explain``: which rules a pasted message matches, and what to do.

Plain text, a block per rule, unwrapped (a terminal or a ticket wraps it), and the
``dradiag.explain/v1`` document for ``-o json``/``yaml``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.message_explain import MessageMatch

EXPLAIN_SCHEMA_VERSION = "dradiag.explain/v1"


def explain_document(text: str, matches: Sequence[MessageMatch]) -> dict[str, Any]:
    """The ``dradiag.explain/v1`` document."""
    return {
        "schemaVersion": EXPLAIN_SCHEMA_VERSION,
        "input": text,
        "matches": [
            {
                "rule": m.rule.id,
                "phase": m.rule.phase.value,
                "severity": m.rule.severity.value,
                "title": m.rule.title,
                "matchedAs": m.matched_as,
                "reason": m.reason,
                "captures": dict(m.captures),
                "explain": m.explain,
                "next": list(m.next),
            }
            for m in matches
        ],
    }


def render_explain(doc: dict[str, Any], *, prog: str = "dradiag") -> str:
    """The text view: per rule its id, phase and title, what it means, the next steps."""
    matches = doc.get("matches") or []
    if not matches:
        return (
            "no rule matches this text; paste the event message or log line as it was "
            f"written (see '{prog} rules list')\n"
        )
    lines: list[str] = []
    for i, m in enumerate(matches):
        if i:
            lines.append("")
        how = f"event message, reason {m['reason']}" if m.get("reason") else m["matchedAs"]
        if m["matchedAs"] == "log":
            how = "log line"
        lines.append(f"{m['rule']}  phase {m['phase']}  {m['severity']}  (matched as {how})")
        lines.append(f"  {m['title']}")
        lines.append(f"  meaning: {m['explain']}")
        if m.get("next"):
            lines.append("  next:")
            lines += [f"    - {step}" for step in m["next"]]
        lines.append(f"  more: {prog} rules show {m['rule']}")
    return "\n".join(lines) + "\n"
