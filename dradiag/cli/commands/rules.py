"""``dradiag rules list|show``: the rule catalogue, from the same files as docs/rules.md.

Reads only the rule files: no cluster, no kubernetes client, no CEL engine (start-up
time, STYLE "Start-up time"). ``show`` accepts retired ids (aliases) and says so; an
unknown id is a usage error (exit 2) that names the closest ids.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.completion import rule_ids
from dradiag.cli.options import NoColor, Output, OutputFormat

if TYPE_CHECKING:
    from dradiag.rulebook.schema import Rule

rules_app = typer.Typer(
    name="rules",
    help="The rule catalogue: every finding id dradiag can report, with its docs.",
    no_args_is_help=True,
    # Plain click help, as kubectl's: no boxes, no fixed width, the same on a pipe.
    rich_markup_mode=None,
    add_completion=False,
)

PhaseOption = Annotated[
    str | None,
    typer.Option(
        "--phase",
        metavar="PHASE",
        help="Only rules of this phase (publication, selection, allocation, prepare, "
        "injection, workload, unprepare; or PUB, SEL, ALLOC, PREP, INJ, WORK, UNPREP).",
    ),
]
RuleId = Annotated[
    str,
    typer.Argument(metavar="ID", help="A rule id, e.g. DRA-PREP-FAILED.", autocompletion=rule_ids),
]


def _parse_phase(value: str) -> Any:
    from dradiag.errors import UsageError
    from dradiag.rulebook.schema import PHASE_CODES
    from dradiag.vocabulary import Phase

    key = value.strip()
    if key.upper() in PHASE_CODES:
        return PHASE_CODES[key.upper()]
    try:
        return Phase(key.lower())
    except ValueError:
        choices = ", ".join(p.value for p in Phase)
        raise UsageError(f"unknown phase {value!r} (choose from: {choices})") from None


_SEVERITY_STYLE = {"error": "red", "warning": "yellow", "info": "cyan"}


@rules_app.command("list")
def list_rules(
    phase: PhaseOption = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
) -> int:
    """List the rules: id, phase, severity, the evidence each reads, and its title.

    \b
    Examples:
      dradiag rules list
      dradiag rules list --phase prepare -o json
    """
    from dradiag.rulebook import load_rulebook
    from dradiag.rulebook.docs import rule_row

    book = load_rulebook()
    rules = book.by_phase(_parse_phase(phase)) if phase else book.rules
    rows = [rule_row(r) for r in rules]
    if output is not OutputFormat.TEXT:
        from dradiag.render.document import dump_document

        doc = {"schemaVersion": "dradiag.rules/v1", "count": len(rows), "rules": rows}
        typer.echo(dump_document(doc, output), nl=False)
        return 0
    from rich.text import Text

    from dradiag.render.columns import Column, fitted_table, hidden_note, print_table
    from dradiag.render.console import write_drawn

    # Titles fold as a block; EVIDENCE, then PHASE (the id names it too), then
    # SEVERITY give way before a title would fold to a word a line.
    columns = (
        Column("ID"),
        Column("PHASE", drop=2),
        Column("SEVERITY", drop=1),
        Column("EVIDENCE", fold="tokens", drop=3),
        Column("TITLE", fold="words"),
    )
    cells = [
        (
            row["id"],
            row["phase"],
            Text(row["severity"], style=_SEVERITY_STYLE[row["severity"]]),
            ", ".join(row["evidence"]),
            row["title"],
        )
        for row in rows
    ]

    def draw(console: Any) -> None:
        table, layout = fitted_table(console, columns, cells)
        print_table(console, table, layout)
        note = hidden_note(layout, console.width, wide_flag=False)
        if note is not None:
            console.print(note)

    write_drawn(no_color, draw)
    return 0


def _show_text(rule: Rule) -> str:
    from dradiag.rulebook.docs import evidence_kinds, match_summary, template_slots

    lines = [f"{rule.id}: {rule.title}", ""]
    lines.append(f"phase:     {rule.phase.value}")
    lines.append(f"severity:  {rule.severity.value}")
    lines.append(f"evidence:  {', '.join(evidence_kinds(rule))}")
    if rule.aliases:
        lines.append(f"aliases:   {', '.join(rule.aliases)}")
    explain = template_slots(rule.explain)
    lines += ["", rule.docs.strip(), "", "## Explain (<slots> filled from the evidence)", explain]
    lines += ["", "## Next observations"]
    lines += [f"- {template_slots(n)}" for n in rule.next]
    if rule.versions:
        lines += ["", "## Versions"] + [f"- {v}" for v in rule.versions]
    if rule.match is not None:
        lines += ["", "## Match"]
        for kind, spec in match_summary(rule).items():
            for key, value in spec.items():
                for v in value if isinstance(value, list) else [value]:
                    lines.append(f"- {kind}.{key}: {v}")
    return "\n".join(lines) + "\n"


@rules_app.command("show")
def show_rule(
    rule_id: RuleId,
    output: Output = OutputFormat.TEXT,
) -> int:
    """Show one rule in full: what it detects, why it breaks the claim, evidence, next steps.

    \b
    Examples:
      dradiag rules show DRA-PREP-MIG-CREATE-FAILED
      dradiag rules show DRA-ALLOC-ALL-IN-USE -o yaml
    """
    from dradiag.errors import UsageError
    from dradiag.rulebook import load_rulebook
    from dradiag.rulebook.docs import rule_document

    book = load_rulebook()
    rule = book.get(rule_id)
    if rule is None:
        close = book.closest(rule_id)
        from dradiag.cli.invocation import prog

        hint = f"; did you mean {', '.join(close)}?" if close else f"; see '{prog()} rules list'"
        raise UsageError(f"unknown rule id {rule_id!r}{hint}")
    if rule.id != rule_id.strip().upper():
        from dradiag.cli.invocation import prog

        sys.stderr.write(f"{prog()}: note: {rule_id.strip().upper()} is now {rule.id}\n")
    if output is OutputFormat.TEXT:
        typer.echo(_show_text(rule), nl=False)
    else:
        from dradiag.render.document import dump_document

        doc = {"schemaVersion": "dradiag.rule/v1", "rule": rule_document(rule)}
        typer.echo(dump_document(doc, output), nl=False)
    return 0


def register(app: typer.Typer) -> None:
    """Add ``rules list`` and ``rules show`` to ``app``."""
    app.add_typer(rules_app, name="rules")
