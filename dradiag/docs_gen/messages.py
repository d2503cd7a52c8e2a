"""The troubleshooting blocks: what ``dradiag explain`` says about the messages users paste.

Each ``<!-- explain: MESSAGE -->`` block is the rulebook's answer for that message — the
same matchers a diagnosis uses, through ``dradiag explain -o json`` — so the page cannot
name a rule the tool would not. The ``message-index`` table is drawn from every event and
log rule's own example evidence, keeping only the examples that ``explain`` maps back to
that rule.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dradiag.docs_gen.runner import CommandLine, SampleWorkspace

_ANGLE = re.compile(r"(?<!`)<([a-z][a-z0-9 _./-]*)>(?!`)")
_CODE_SPAN = re.compile(r"^`+|`+$")


def explain(workspace: SampleWorkspace, message: str) -> list[dict[str, Any]]:
    """The matches ``dradiag explain -o json MESSAGE`` gives (empty when no rule matched)."""
    command = CommandLine(
        text="", prog="dradiag", args=("explain", "-o", "json", message), exit=0, head=None
    )
    ran = workspace.run(command)
    if ran.code not in (0, 1) or not ran.stdout.strip():
        raise RuntimeError(f"dradiag explain failed ({ran.code}): {ran.stderr.strip()}")
    matches: list[dict[str, Any]] = json.loads(ran.stdout).get("matches") or []
    return matches


def _md(text: str) -> str:
    """Plain text as Markdown: ``<pod>`` would read as an HTML tag, so it becomes code."""
    return _ANGLE.sub(r"`<\1>`", text.replace("|", "\\|"))


def explain_block(workspace: SampleWorkspace, message: str, *, rules_page: str) -> str:
    """The Markdown of one ``explain`` block."""
    matches = explain(workspace, message)
    if not matches:
        raise ValueError(f"no rule explains {message!r}: pick a message the rulebook knows")
    lines = ["```text", message, "```", ""]
    for m in matches:
        rule = m["rule"]
        how = "an event message" if m["matchedAs"] == "event" else "a log line"
        if m.get("reason"):
            how += f" (reason {m['reason']})"
        lines.append(
            f"- **[{rule}]({rules_page}#{rule.lower()})** — phase `{m['phase']}`, "
            f"{m['severity']}: {_md(m['title'])}; matched as {how}."
        )
        lines.append(f"  - What it means: {_md(m['explain'])}")
        for step in m.get("next") or []:
            lines.append(f"  - Next: {_md(step)}")
    lines.append("")
    quoted = message.replace("'", "'\\''")
    lines.append(f"Check it yourself: `dradiag explain '{quoted}'`.")
    return "\n".join(lines) + "\n"


def _examples(docs: str) -> list[str]:
    """The example evidence texts of a rule's docs: its code spans, unquoted."""
    from dradiag.rulebook.docs import docs_sections

    section = docs_sections(docs).get("Example evidence", "")
    return [s.strip() for s in re.findall(r"`([^`]+)`", section) if len(s.strip()) > 12]


def message_index(workspace: SampleWorkspace, *, rules_page: str) -> str:
    """A table of every event or log rule whose example evidence ``explain`` maps to it."""
    from dradiag.rulebook import load_rulebook
    from dradiag.rulebook.docs import evidence_kinds

    rows = []
    for rule in load_rulebook().rules:
        if not set(evidence_kinds(rule)) & {"event", "log"}:
            continue
        for example in _examples(rule.docs):
            stripped = re.sub(r"^(?:Warning|Normal)\s+\w+:\s*", "", example)
            text = next(
                (
                    candidate
                    for candidate in dict.fromkeys((example, stripped))
                    if rule.id in {m["rule"] for m in explain(workspace, candidate)}
                ),
                None,
            )
            if text is not None:
                rows.append(
                    f"| `{text.replace('|', chr(92) + '|')}` "
                    f"| [{rule.id}]({rules_page}#{rule.id.lower()}) | {rule.phase.value} |"
                )
                break
    head = ["| message (as pasted) | rule | phase |", "|---|---|---|"]
    return "\n".join(head + rows) + "\n"
