"""``dradiag pod NS/NAME``: resolve the pod's ResourceClaims and diagnose each.

Template-generated claims are found the way the kubelet finds them
(``status.resourceClaimStatuses``, then the owner reference and the
``resource.kubernetes.io/pod-claim-name`` annotation); a claim not created yet is
diagnosed from its template and marked as such (``diagnosis/resolve.py``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dradiag.cli.completion import pod_names
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


def pod(
    target: Annotated[
        str,
        typer.Argument(
            metavar="NS/NAME",
            autocompletion=pod_names,
            help="The pod: NS/NAME, NAME (with -n or the context's namespace) or pod/NAME.",
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
    """Diagnose every ResourceClaim a pod uses (template-generated ones included).

    \b
    Examples:
      dradiag pod ml/trainer-0
      dradiag pod -n ml pod/trainer-0 --from bundle/ -o json

    Exit 0 nothing broken, 1 a broken phase, 2 usage/input error, 3 runtime error,
    4 inconclusive.
    """
    import logging

    from dradiag.cli.diagnosis_run import (
        common_options,
        diagnoses_document,
        existing_names,
        report,
        walk_options,
    )
    from dradiag.cli.inputs import Target, default_namespace, obtain_snapshot
    from dradiag.cli.targets import parse_target, with_suggestions
    from dradiag.diagnosis.build import diagnose_pod, unresolved_pod_claims
    from dradiag.errors import UsageError
    from dradiag.render.text import render_diagnoses
    from dradiag.snapshot.model import Kind

    options = walk_options(now, stuck_after)
    ns, name = parse_target(
        target,
        "pod",
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
    snapshot = obtain_snapshot(common, Target(kind="pod", namespace=ns, name=name))
    try:
        diagnoses = diagnose_pod(snapshot, ns, name, options=options)
    except UsageError as exc:
        if snapshot.pod(ns, name) is not None:
            raise
        raise with_suggestions(
            exc, existing_names(snapshot, Kind.POD, ns, common), ns, name
        ) from None
    log = logging.getLogger("dradiag.cli.pod")
    for note in unresolved_pod_claims(snapshot, ns, name):
        log.warning("pod %s/%s: %s", ns, name, note)
    if not diagnoses:
        log.warning("pod %s/%s uses no ResourceClaim dradiag can diagnose", ns, name)
    return report(
        diagnoses_document(snapshot, diagnoses),
        diagnoses,
        render=render_diagnoses,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("pod")(pod)
