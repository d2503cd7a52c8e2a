"""``dradiag claim NS/NAME``: the seven-phase diagnosis of one ResourceClaim.

Also holds what ``pod``, ``scan`` and ``demo`` share with it (time options, colour,
emitting a document, the exit code of a verdict); they import it inside their bodies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import (
    DEFAULT_TIMEOUT,
    As,
    AsGroup,
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    Namespace,
    NoColor,
    Output,
    OutputFormat,
    RequestTimeout,
    Timeout,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from dradiag.diagnosis.build import WalkOptions
    from dradiag.diagnosis.model import Diagnosis

DEFAULT_REQUEST_TIMEOUT = 10.0

Now = Annotated[
    str | None,
    typer.Option(
        "--now",
        metavar="TIME",
        help="Judge ages against this RFC 3339 time instead of the snapshot's collection time "
        "(or, without one, its newest timestamp).",
    ),
]
StuckAfter = Annotated[
    str,
    typer.Option(
        "--stuck-after",
        metavar="DURATION",
        help="How long a scheduled pod may wait for Prepare (or termination) without any event "
        "before dradiag calls it stuck: 300, 90s, 5m, 1h.",
    ),
]
DEFAULT_STUCK_AFTER = "5m"


def walk_options(now: str | None, stuck_after: str) -> WalkOptions:
    """``--now`` and ``--stuck-after`` as WalkOptions; UsageError when unreadable."""
    from dradiag.analyses.timeline import parse_duration, parse_time
    from dradiag.diagnosis.build import WalkOptions
    from dradiag.errors import UsageError

    parsed_now = None
    if now is not None:
        parsed_now = parse_time(now)
        if parsed_now is None:
            raise UsageError(f"--now: not an RFC 3339 time: {now!r} (e.g. 2026-05-01T10:00:00Z)")
    try:
        threshold = parse_duration(stuck_after)
    except ValueError as exc:
        raise UsageError(f"--stuck-after: {exc}") from None
    return WalkOptions(now=parsed_now, stuck_after=threshold)


def use_color(no_color: bool) -> bool:
    """Colour only on a TTY, never with ``--no-color`` or ``NO_COLOR`` (DESIGN §3)."""
    import os
    import sys

    if no_color or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def exit_code_for(diagnoses: Iterable[Diagnosis], exit_zero: bool) -> int:
    """1 when anything is broken, else 4 when anything is inconclusive, else 0."""
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.diagnosis.model import VerdictStatus

    if exit_zero:
        return ExitCode.OK
    statuses = {d.verdict.status for d in diagnoses}
    if VerdictStatus.BROKEN in statuses:
        return ExitCode.BROKEN
    if VerdictStatus.INCONCLUSIVE in statuses:
        return ExitCode.INCONCLUSIVE
    return ExitCode.OK


def check_output(output: OutputFormat) -> None:
    """``sarif`` belongs to selector-check; reject it here with a usage error."""
    from dradiag.errors import UsageError

    if output is OutputFormat.SARIF:
        raise UsageError("-o sarif is only available for selector-check; use text, json or yaml")


def emit(doc: Mapping[str, Any], output: OutputFormat, text: str | None) -> None:
    """Write the document (or its text view) to stdout, and nothing else."""
    import sys

    from dradiag.render.document import dump_document

    if output is OutputFormat.TEXT and text is not None:
        sys.stdout.write(text)
    else:
        sys.stdout.write(dump_document(doc, output.value))
    sys.stdout.flush()


def claim(
    target: Annotated[str, typer.Argument(metavar="NS/NAME", help="The ResourceClaim.")],
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
    now: Now = None,
    stuck_after: StuckAfter = DEFAULT_STUCK_AFTER,
) -> int:
    """Diagnose one ResourceClaim: the first broken phase of its life, with evidence.

    Exit 0 nothing broken, 1 a broken phase, 2 usage/input error, 3 runtime error,
    4 inconclusive (evidence a phase needs was not readable).
    """
    from dradiag.cli.inputs import Target, obtain_snapshot, parse_namespaced_name
    from dradiag.cli.options import CommonOptions
    from dradiag.diagnosis.build import diagnose_claim
    from dradiag.render.document import collection_of, diagnosis_document
    from dradiag.render.text import render_diagnosis

    check_output(output)
    options = walk_options(now, stuck_after)
    ns, name = parse_namespaced_name(target, default_namespace=namespace)
    common = CommonOptions(
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=ns,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    snapshot = obtain_snapshot(common, Target(kind="claim", namespace=ns, name=name))
    diagnosis = diagnose_claim(snapshot, ns, name, options=options)
    doc = diagnosis_document(diagnosis, snapshot.source, collection_of(snapshot))
    text = render_diagnosis(doc, color=use_color(no_color)) if output is OutputFormat.TEXT else None
    emit(doc, output, text)
    return exit_code_for([diagnosis], exit_zero)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("claim")(claim)
