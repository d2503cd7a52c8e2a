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

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from dradiag.analyses.error_chain import clip_middle
from dradiag.render.columns import Column, fitted_table, hidden_note, print_table
from dradiag.render.console import print_hanging, strip_line_ends, terminal_width

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
SCAN_COLUMNS = (
    Column("PHASE"),
    Column("STATUS", drop=1),
    Column("TARGET", fold="tokens"),
    Column("RULE", drop=3),
    Column("WHY", fold="words", drop=2),
)
"""``scan``'s table. RULE gives way first (``dradiag claim`` shows it), then the WHY
prose, then STATUS: a person reads the reason before the rule's handle."""


def _console(buffer: io.StringIO, *, color: bool, width: int | None) -> Console:
    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        width=width or (terminal_width() if color else PLAIN_WIDTH),
        highlight=False,
        emoji=False,
        markup=False,
    )


def _plain(console: Console) -> bool:
    """True when drawing plain text (no colour): no box or rule characters then."""
    return console.no_color


def _finish(buffer: io.StringIO) -> str:
    """The drawn text without the padding rich leaves at line ends."""
    return strip_line_ends(buffer.getvalue())


def _clip(text: str, limit: int = EXCERPT_CHARS) -> str:
    # Quoted evidence keeps its end, where an error chain's innermost cause is.
    return clip_middle(" ".join(str(text).split()), limit)


def _pack(
    console: Console,
    atoms: Sequence[Text],
    *,
    indent: int,
    hangs: Sequence[int],
    sep: str = "  ",
    label: Text | None = None,
) -> None:
    """Print ``label`` and ``atoms`` (each an identifier with its own label) on one line,
    or on a terminal too narrow for that, one line per run of atoms that fits, so no
    identifier is parted from its label. A continuation starts at the first of ``hangs``
    it fits after; a first atom too long for its line folds under itself, not ``label``."""
    atoms = [a for a in atoms if a.plain]
    if not atoms:
        return
    head = label or Text()
    if _plain(console):
        console.print(Text(" " * indent) + head + Text(sep).join(atoms))
        return
    width = console.width
    lines: list[tuple[int, Text]] = [(indent + head.cell_len, atoms[0].copy())]
    for atom in atoms[1:]:
        at, line = lines[-1]
        if at + line.cell_len + len(sep) + atom.cell_len <= width:
            line.append_text(Text(sep) + atom)
            continue
        piece = atom[len(atom.plain) - len(atom.plain.lstrip()) :]
        longest = max(len(word) for word in piece.plain.split())
        hang = next(
            (h for h in hangs if h + piece.cell_len <= width),
            # Too long for one line anyway: the first indent its longest token fits after.
            next((h for h in hangs if h + longest <= width), hangs[-1]),
        )
        lines.append((hang, piece.copy()))
    print_hanging(console, head, lines[0][1], indent=indent)
    # Padding, not leading spaces: a piece wider than the line folds under itself.
    for at, line in lines[1:]:
        console.print(Padding(line, (0, 0, 0, at), expand=False))


def _hanging(console: Console, label: Text, body: Text, *, indent: int = 0) -> None:
    print_hanging(console, label, body, indent=indent)


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
        atoms = [Text(f"{i.get('layer')} {i.get('value')}") for i in identifiers]
        label = Text("identifiers: ", style="cyan")
        _pack(console, atoms, indent=8, hangs=(21, 10), sep="; ", label=label)
    nexts = finding.get("next") or ()
    if nexts and severity != "info":
        nxt = Text("next: ", style="cyan")
        nxt.append(str(nexts[0]))
        console.print(Padding(nxt, (0, 0, 0, 8), expand=False))


def _draw_diagnosis(console: Console, doc: Mapping[str, Any]) -> None:
    verdict = doc.get("verdict") or {}
    label, style = VERDICT_STYLE.get(str(verdict.get("status")), ("?", "bold"))
    _hanging(console, Text(f"{label}  ", style=style), Text(str(verdict.get("summary") or "")))
    target = doc.get("target") or {}
    info = [Text(_target_label(target), style="bold")]
    if target.get("uid"):
        info.append(
            Text(f"(claim UID {target['uid']})")
            if target.get("kind") == "ResourceClaim"
            else Text(f"(UID {target['uid']})")
        )
    if target.get("synthesized"):
        info.append(Text("not created yet: read from its template", style="yellow"))
    _pack(console, info, indent=2, hangs=(4,))
    if target.get("pods"):
        pods = [Text(f"{p},") for p in target["pods"][:-1]] + [Text(str(target["pods"][-1]))]
        _pack(console, pods, indent=2, hangs=(8, 4), sep=" ", label=Text("pods: "))
    links = [
        Text(f"{link.get('object')} via {link.get('via')}", style="dim")
        for link in target.get("links") or ()
        if isinstance(link, Mapping)
    ]
    if links:
        links = [Text(f"{t.plain};", style="dim") for t in links[:-1]] + links[-1:]
        tied = Text("tied by: ", style="dim")
        _pack(console, links, indent=2, hangs=(11, 4), sep=" ", label=tied)
    source = doc.get("source") or {}
    src = [Text(f"{source.get('kind')}", style="dim")]
    if source.get("location"):
        src[0].append(f" {source['location']}")
    if source.get("context"):
        src.append(Text(f"(context {source['context']})", style="dim"))
    if source.get("collectedAt"):
        src[-1].append(",")
        src.append(Text(f"collected {source['collectedAt']}", style="dim"))
    _pack(console, src, indent=2, hangs=(10, 4), sep=" ", label=Text("source: ", style="dim"))
    console.print()
    phases = doc.get("phases") or ()
    for index, phase in enumerate(phases):
        status = str(phase.get("status"))
        mark, mstyle = MARKS.get(status, ("?", ""))
        row = Text()
        row.append(f"{mark} ", style=mstyle)
        row.append(f"{phase.get('id'):<12}", style="bold" if status == "broken" else "")
        row.append(f" {status:<12}", style=mstyle)
        atoms = [row]
        if phase.get("summary"):
            atoms.append(Text(f"{phase['summary']}", style="dim"))
        basis = phase.get("basis") or {}
        if basis.get("kind") == "inferred":
            atoms.append(
                Text(f" (inferred from {basis.get('detail') or 'later evidence'})", style="dim")
            )
        elif basis.get("kind") == "unknown" and status != "unknown" and basis.get("detail"):
            atoms.append(Text(f" (unknown: {basis['detail']})", style="dim"))
        _pack(console, atoms, indent=2, hangs=(30, 6), sep=" ")
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
            _hanging(console, Text(f"{i}. "), Text(str(step)), indent=4)


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


def render_scan(
    doc: Mapping[str, Any],
    *,
    color: bool = False,
    width: int | None = None,
    wide: bool = False,
    headers: bool = True,
) -> str:
    """A ``scan`` result as one table: phase, status, target, deciding rule, summary.

    ``wide`` (``-o wide``): every column, nothing folded, whatever the width;
    ``headers=False`` (``--no-headers``): the rows only, without header or summary line.
    """
    buffer = io.StringIO()
    console = _console(buffer, color=color, width=width)
    items: Sequence[Mapping[str, Any]] = doc.get("items") or ()
    unread: Sequence[Mapping[str, Any]] = (doc.get("collection") or {}).get("unread") or ()
    gaps = "; ".join(f"{u.get('kind')} ({u.get('reason') or u.get('coverage')})" for u in unread)
    if not items:
        if not headers:
            # --no-headers is for scripts: no rows is no output (stderr has any warning).
            return _finish(buffer)
        if unread:
            console.print(
                Text(
                    f"inconclusive: nothing unhealthy in what was read, but could not read {gaps}",
                    style="yellow",
                )
            )
        else:
            summary = doc.get("summary") or {}
            narrowed = int(summary.get("filteredOut") or 0) or int(summary.get("silenced") or 0)
            # Rows were left out by the user's own narrowing or silences: say "in the
            # selection", so an empty table never reads as a healthy cluster.
            found = "nothing unhealthy in the selection" if narrowed else "nothing unhealthy found"
            console.print(Text(found, style="green"))
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
    # Plain text is not wrapped at all. On a terminal the WHY prose folds first, the
    # target at the space between its kind and its name; then RULE, WHY and STATUS give
    # way in that order, and a line says so: no identifier is ever split or cut.
    table, layout = fitted_table(console, SCAN_COLUMNS, rows, wide=wide, headers=headers)
    print_table(console, table, layout)
    broken = sum(1 for i in items if (i.get("verdict") or {}).get("status") == "broken")
    unknown = sum(1 for i in items if (i.get("verdict") or {}).get("status") == "inconclusive")
    if headers:
        by_phase: Mapping[str, int] = (doc.get("summary") or {}).get("byPhase") or {}
        per_phase = "; " + ", ".join(f"{ph} {n}" for ph, n in by_phase.items()) if by_phase else ""
        console.print(
            Text(
                f"{len(items)} unhealthy: {broken} broken, {unknown} inconclusive{per_phase}",
                style="dim",
            )
        )
        note = hidden_note(layout, console.width)
        if note is not None:
            console.print(note)
    if unread and headers:
        console.print(Text(f"could not read {gaps}: the list may be incomplete", style="yellow"))
    return _finish(buffer)


def render_names(doc: Mapping[str, Any], **_: Any) -> str:
    """``scan -o name``: one line per row, ``NS/NAME`` for a claim or a pod (what
    ``dradiag claim`` and ``dradiag pod`` take), the bare name for a node.

    kubectl's ``resourceclaim.resource.k8s.io/NAME`` drops the namespace, and ``scan``
    looks across every namespace by default, so its lines would not name one object.
    """
    lines = []
    for item in doc.get("items") or ():
        target = item.get("target") or {}
        ns = target.get("namespace")
        lines.append(f"{ns}/{target.get('name')}" if ns else str(target.get("name")))
    return "".join(f"{line}\n" for line in lines)
