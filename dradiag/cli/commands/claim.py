"""``dradiag claim NS/NAME``: the seven-phase diagnosis of one ResourceClaim."""

from __future__ import annotations

from typing import Annotated

import typer

from dradiag.cli.completion import claim_names
from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STUCK_AFTER,
    DEFAULT_TIMEOUT,
    As,
    AsGroup,
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    Namespace,
    NoColor,
    Now,
    Output,
    OutputFormat,
    RequestTimeout,
    StuckAfter,
    Timeout,
)


def claim(
    target: Annotated[
        str,
        typer.Argument(
            metavar="NS/NAME",
            autocompletion=claim_names,
            help="The ResourceClaim: NS/NAME, NAME (with -n or the context's namespace) "
            "or resourceclaim/NAME.",
        ),
    ],
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

    \b
    Examples:
      dradiag claim ml/train-mig
      dradiag claim -n ml resourceclaim/train-mig --from bundle.tar.gz -o json

    Exit 0 nothing broken, 1 a broken phase, 2 usage/input error, 3 runtime error,
    4 inconclusive (evidence a phase needs was not readable).
    """
    from dradiag.cli.diagnosis_run import (
        common_options,
        existing_names,
        report,
        walk_options,
    )
    from dradiag.cli.inputs import Target, default_namespace, obtain_snapshot
    from dradiag.cli.targets import parse_target, with_suggestions
    from dradiag.diagnosis.build import diagnose_claim
    from dradiag.errors import UsageError
    from dradiag.render.document import collection_of, diagnosis_document
    from dradiag.render.text import render_diagnosis
    from dradiag.snapshot.model import Kind

    options = walk_options(now, stuck_after)
    ns, name = parse_target(
        target,
        "claim",
        namespace=namespace,
        default_namespace=default_namespace(
            namespace, from_path=from_path, kubeconfig=kubeconfig, context=context
        ),
    )
    common = common_options(
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=ns,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=as_groups,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    snapshot = obtain_snapshot(common, Target(kind="claim", namespace=ns, name=name))
    try:
        diagnosis = diagnose_claim(snapshot, ns, name, options=options)
    except UsageError as exc:
        if snapshot.claim(ns, name) is not None:
            raise
        raise with_suggestions(
            exc, existing_names(snapshot, Kind.RESOURCE_CLAIM, ns, common), ns, name
        ) from None
    doc = diagnosis_document(diagnosis, snapshot.source, collection_of(snapshot))
    return report(
        doc,
        [diagnosis],
        render=render_diagnosis,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("claim")(claim)
