"""``dradiag explain "<message>"``: the rules behind a pasted error message, no cluster.

Reads only the rule files (no kubernetes client, no CEL engine): it starts as fast as
``rules``. Exit 0 when a rule matched, 1 when none did, 2 for a usage error.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from dradiag.cli.options import Output, OutputFormat

if TYPE_CHECKING:
    from dradiag.diagnosis.next_context import NextContext

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
    from dataclasses import replace

    from dradiag.analyses.message_explain import explain_message
    from dradiag.cli.diagnosis_run import emit
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.invocation import prog
    from dradiag.diagnosis.next_steps import concrete_steps
    from dradiag.errors import UsageError
    from dradiag.render.explain import explain_document, render_explain
    from dradiag.rulebook import load_rulebook

    text = sys.stdin.read() if message == "-" else message
    if not text.strip():
        raise UsageError("nothing to explain: give the message text (or '-' and pipe it in)")
    matches = explain_message(load_rulebook(), text)
    matches = [replace(m, next=concrete_steps(m.next, _pasted_context(text))) for m in matches]
    doc = explain_document(text.strip(), matches)
    emit(doc, output, render_explain(doc, prog=prog()))
    return ExitCode.OK if matches else ExitCode.BROKEN


def _pasted_context(text: str) -> NextContext:
    """What a pasted message says that next steps can name: the CDI device IDs it quotes,
    the claim UID inside them, and the node of a kubelet ``source.host``-style mention."""
    import re

    from dradiag.diagnosis.next_context import NextContext, cdi_device_ids

    ids = cdi_device_ids([text])
    uid = re.search(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", " ".join(ids) or text
    )
    return NextContext(
        claim_uid=uid.group(0) if uid else "",
        cdi_device_ids=ids,
        nvidia=not ids or any("nvidia" in i for i in ids),
    )


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("explain")(explain)
