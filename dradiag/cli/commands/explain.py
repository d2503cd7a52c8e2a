"""``dradiag explain "<message>"``: the rules behind a pasted error message, no cluster.

Reads only the rule files (no kubernetes client, no CEL engine): it starts as fast as
``rules``. Exit 0 when a rule matched, 1 when none did, 2 for a usage error.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from dradiag.cli.options import Output, OutputFormat

Message = Annotated[
    str,
    typer.Argument(
        metavar="MESSAGE",
        help="The event message or log line, quoted; '-' reads it from stdin.",
    ),
]


def explain(message: Message, output: Output = OutputFormat.TEXT) -> int:
    """Explain a pasted event message or log line: matching rules, meaning, next steps.

    \b
    Examples:
      dradiag explain "Failed to prepare dynamic resources: ... error creating MIG device"
      kubectl logs -n nvidia-dra-driver-gpu POD -c gpus | tail -1 | dradiag explain - -o json
    """
    from dradiag.analyses.message_explain import explain_message
    from dradiag.cli.diagnosis_run import emit
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.invocation import prog
    from dradiag.errors import UsageError
    from dradiag.render.explain import explain_document, render_explain
    from dradiag.rulebook import load_rulebook

    text = sys.stdin.read() if message == "-" else message
    if not text.strip():
        raise UsageError("nothing to explain: give the message text (or '-' and pipe it in)")
    matches = explain_message(load_rulebook(), text)
    doc = explain_document(text.strip(), matches)
    emit(doc, output, render_explain(doc, prog=prog()))
    return ExitCode.OK if matches else ExitCode.BROKEN


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("explain")(explain)
