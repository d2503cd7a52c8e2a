"""The text view (``-o text``) of diagnosis documents, drawn with rich from the canonical dict.

Drawn from ``render/document.py``'s dict rather than from the dataclasses, so the text
and the JSON cannot say different things. Layout, top to bottom: the verdict in one
sentence; what was diagnosed; the seven phases as a vertical track with a status mark
each, findings under the phase they belong to (evidence excerpt, identifiers labelled by
layer, the next observation); then the next steps of the verdict. ``scan`` gets one
compact table, a row per unhealthy target, sorted by phase.

Colour is the caller's decision (``--no-color``, ``NO_COLOR``, TTY): with ``color=False``
the output is plain text with the same marks, fit for logs and ``grep``: no box or rule
characters and no wrapping (a terminal, a pager or a ticket wraps as it likes), so a
claim name or a UID is never split. On a terminal the text fits its width; ``scan``'s
table then folds the WHY column and keeps every identifier whole.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from dradiag.analyses.error_chain import clip_middle

MARKS: Mapping[str, tuple[str, str]] = {
    "ok": ("✓", "green"),
    "broken": ("✗", "bold red"),
    "warn": ("!", "yellow"),
    "unknown": ("?", "magenta"),
    "not-reached": ("·", "dim"),
}
"""Phase status → (mark, style)."""

VERDICT_STYLE: Mapping[str, tuple[str, str]] = {
    "ok": ("OK", "bold green"),
    "broken": ("BROKEN", "bold red"),
    "inconclusive": ("INCONCLUSIVE", "bold magenta"),
}
SEVERITY_STYLE: Mapping[str, str] = {"error": "red", "warning": "yellow", "info": "dim"}
PLAIN_WIDTH = 100_000
"""Plain text is not wrapped: wider than any line drawn (excerpts are clipped shorter)."""
EXCERPT_CHARS = 300
COLUMNS = ("PHASE", "STATUS", "TARGET", "RULE", "WHY")
"""``scan``'s table."""


def _console(buffer: io.StringIO, *, color: bool, width: int | None) -> Console:
    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=width or (None if color else PLAIN_WIDTH),
        highlight=False,
        emoji=False,
        markup=False,
    )


def _plain(console: Console) -> bool:
    """True when drawing plain text (no colour): no box or rule characters then."""
    return console.no_color


def _finish(buffer: io.StringIO) -> str:
    """The drawn text without the padding rich leaves at line ends."""
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    # Quoted evidence keeps its end, where an error chain's innermost cause is.
    return clip_middle(" ".join(str(text).split()), limit)


def _target_label(target: Mapping[str, Any]) -> str:
    ns = target.get("namespace")
    name = f"{ns}/{target.get('name')}" if ns else str(target.get("name"))
    return f"{target.get('kind')} {name}"


def _draw_finding(console: Console, finding: Mapping[str, Any]) -> None:
    severity = str(finding.get("severity"))
    style = SEVERITY_STYLE.get(severity, "")
    head = Text()
    head.append(f"[{severity}] ", style=style)
    head.append(str(finding.get("rule")), style="bold")
    head.append(f"  {finding.get('title')}")
    console.print(Padding(head, (0, 0, 0, 6), expand=False))
    if finding.get("detail"):
        console.print(Padding(Text(str(finding["detail"])), (0, 0, 0, 8), expand=False))
    for ev in finding.get("evidence") or ():
        line = Text()
        line.append(f"{ev.get('source')}: ", style="cyan")
        line.append(str(ev.get("ref")))
        if ev.get("excerpt"):
            line.append(f"\n{_clip(ev['excerpt'])}", style="dim")
        console.print(Padding(line, (0, 0, 0, 8), expand=False))
    identifiers = finding.get("identifiers") or ()
    if identifiers:
        ids = Text("identifiers: ", style="cyan")
        ids.append("; ".join(f"{i.get('layer')} {i.get('value')}" for i in identifiers))
        console.print(Padding(ids, (0, 0, 0, 8), expand=False))
    nexts = finding.get("next") or ()
    if nexts and severity != "info":
        nxt = Text("next: ", style="cyan")
        nxt.append(str(nexts[0]))
        console.print(Padding(nxt, (0, 0, 0, 8), expand=False))


def _draw_diagnosis(console: Console, doc: Mapping[str, Any]) -> None:
    verdict = doc.get("verdict") or {}
    label, style = VERDICT_STYLE.get(str(verdict.get("status")), ("?", "bold"))
    head = Text()
    head.append(f"{label}  ", style=style)
    head.append(str(verdict.get("summary") or ""))
    console.print(head)
    target = doc.get("target") or {}
    info = Text("  ")
    info.append(_target_label(target), style="bold")
    if target.get("uid"):
        info.append(
            f"  (claim UID {target['uid']})"
            if target.get("kind") == "ResourceClaim"
            else f"  (UID {target['uid']})"
        )
    if target.get("synthesized"):
        info.append("  not created yet: read from its template", style="yellow")
    console.print(info)
    if target.get("pods"):
        console.print(Text(f"  pods: {', '.join(target['pods'])}"))
    links = [
        f"{link.get('object')} via {link.get('via')}"
        for link in target.get("links") or ()
        if isinstance(link, Mapping)
    ]
    if links:
        console.print(Text(f"  tied by: {'; '.join(links)}", style="dim"))
    source = doc.get("source") or {}
    src = f"  source: {source.get('kind')}"
    if source.get("location"):
        src += f" {source['location']}"
    if source.get("context"):
        src += f" (context {source['context']})"
    if source.get("collectedAt"):
        src += f", collected {source['collectedAt']}"
    console.print(Text(src, style="dim"))
    console.print()
    phases = doc.get("phases") or ()
    for index, phase in enumerate(phases):
        status = str(phase.get("status"))
        mark, mstyle = MARKS.get(status, ("?", ""))
        row = Text("  ")
        row.append(f"{mark} ", style=mstyle)
        row.append(f"{phase.get('id'):<12}", style="bold" if status == "broken" else "")
        row.append(f" {status:<12}", style=mstyle)
        if phase.get("summary"):
            row.append(f" {phase['summary']}", style="dim")
        basis = phase.get("basis") or {}
        if basis.get("kind") == "inferred":
            row.append(f"  (inferred from {basis.get('detail') or 'later evidence'})", style="dim")
        elif basis.get("kind") == "unknown" and status != "unknown" and basis.get("detail"):
            row.append(f"  (unknown: {basis['detail']})", style="dim")
        console.print(row)
        for finding in phase.get("findings") or ():
            _draw_finding(console, finding)
        if index < len(phases) - 1 and phase.get("findings"):
            console.print(Text("  |" if _plain(console) else "  │", style="dim"))
    collection = doc.get("collection") or {}
    errors = collection.get("errors") or ()
    if errors:
        console.print()
        console.print(Text("  collection errors (the evidence is partial):", style="magenta"))
        for err in errors:
            console.print(Text(f"    {err.get('verb')} {err.get('resource')}: {err.get('reason')}"))
    nexts = verdict.get("next") or ()
    if nexts:
        console.print()
        console.print(Text("  Next:", style="bold"))
        for i, step in enumerate(nexts, 1):
            console.print(Padding(Text(f"{i}. {step}"), (0, 0, 0, 4), expand=False))


def render_diagnosis(
    doc: Mapping[str, Any], *, color: bool = False, width: int | None = None
) -> str:
    """One ``dradiag.diagnosis/v1`` document as text."""
    buffer = io.StringIO()
    _draw_diagnosis(_console(buffer, color=color, width=width), doc)
    return _finish(buffer)


def render_diagnoses(
    doc: Mapping[str, Any], *, color: bool = False, width: int | None = None
) -> str:
    """A ``dradiag.diagnoses/v1`` document (``pod``) as text: each diagnosis in turn."""
    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    items: Sequence[Mapping[str, Any]] = doc.get("items") or ()
    if not items:
        console.print(Text("no ResourceClaims to diagnose"))
    for i, item in enumerate(items):
        if i:
            if _plain(console):
                console.print()
                console.print(Text("---"))
            else:
                console.rule(style="dim")
        _draw_diagnosis(console, item)
    return _finish(buffer)


def _deciding_title(doc: Mapping[str, Any]) -> str:
    """The title of the finding that decided the verdict, else the verdict sentence."""
    verdict = doc.get("verdict") or {}
    for phase in doc.get("phases") or ():
        if phase.get("id") != verdict.get("phase"):
            continue
        for finding in phase.get("findings") or ():
            if finding.get("rule") == verdict.get("rule"):
                return str(finding.get("title") or "")
    return str(verdict.get("summary") or "")


def render_scan(doc: Mapping[str, Any], *, color: bool = False, width: int | None = None) -> str:
    """A ``scan`` result as one table: phase, status, target, deciding rule, summary."""
    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    items: Sequence[Mapping[str, Any]] = doc.get("items") or ()
    unread: Sequence[Mapping[str, Any]] = (doc.get("collection") or {}).get("unread") or ()
    gaps = "; ".join(f"{u.get('kind')} ({u.get('reason') or u.get('coverage')})" for u in unread)
    if not items:
        if unread:
            console.print(
                Text(
                    f"inconclusive: nothing unhealthy in what was read, but could not read {gaps}",
                    style="yellow",
                )
            )
        else:
            console.print(Text("nothing unhealthy found", style="green"))
        return _finish(buffer)
    rows = []
    for item in items:
        verdict = item.get("verdict") or {}
        status = str(verdict.get("status"))
        label, style = VERDICT_STYLE.get(status, (status, ""))
        rows.append(
            (
                str(verdict.get("phase") or "-"),
                Text(label.lower(), style=style),
                _target_label(item.get("target") or {}),
                str(verdict.get("rule") or "-"),
                _clip(_deciding_title(item), 160),
            )
        )
    table = Table(
        box=None if _plain(console) else box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        expand=False,
    )
    # Nothing is cut or dropped: plain text is not wrapped at all; on a terminal too
    # narrow for the table, the target, rule and WHY cells fold onto more lines (the
    # target at its space first), so every identifier keeps all its characters.
    # Rule ids stay on one line while the target and WHY keep room to fold into.
    widths = [max([len(c)] + [len(str(r[i])) for r in rows]) for i, c in enumerate(COLUMNS)]
    rule_whole = console.width - (widths[0] + widths[1] + widths[3] + 2 * len(COLUMNS)) >= 40
    for index, column in enumerate(COLUMNS):
        if column in ("PHASE", "STATUS") or (column == "RULE" and rule_whole):
            table.add_column(column, no_wrap=True, min_width=widths[index])
        else:
            table.add_column(column, overflow="fold", ratio={"TARGET": 3, "RULE": 2}.get(column, 2))
    for row in rows:
        table.add_row(*row)
    console.print(table)
    broken = sum(1 for i in items if (i.get("verdict") or {}).get("status") == "broken")
    unknown = sum(1 for i in items if (i.get("verdict") or {}).get("status") == "inconclusive")
    console.print(
        Text(f"{len(items)} unhealthy: {broken} broken, {unknown} inconclusive", style="dim")
    )
    if unread:
        console.print(Text(f"could not read {gaps}: the list may be incomplete", style="yellow"))
    return _finish(buffer)
