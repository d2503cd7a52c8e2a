"""``dradiag pod NS/NAME``: resolve the pod's ResourceClaims and diagnose each.

Template-generated claims are found the way the kubelet finds them
(``status.resourceClaimStatuses``, then the owner reference and the
``resource.kubernetes.io/pod-claim-name`` annotation); a claim not created yet is
diagnosed from its template and marked as such (``diagnosis/resolve.py``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from dradiag.cli.commands.claim import DEFAULT_STUCK_AFTER, Now, StuckAfter
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

DEFAULT_REQUEST_TIMEOUT = 10.0


def pod(
    target: Annotated[str, typer.Argument(metavar="NS/NAME", help="The pod.")],
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

    Exit 0 nothing broken, 1 a broken phase, 2 usage/input error, 3 runtime error,
    4 inconclusive.
    """
    import logging

    from dradiag.cli.commands.claim import (
        check_output,
        emit,
        exit_code_for,
        use_color,
        walk_options,
    )
    from dradiag.cli.inputs import Target, obtain_snapshot, parse_namespaced_name
    from dradiag.cli.options import CommonOptions
    from dradiag.diagnosis.build import diagnose_pod, unresolved_pod_claims
    from dradiag.render.document import collection_of, diagnoses_document, diagnosis_document
    from dradiag.render.text import render_diagnoses

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
    snapshot = obtain_snapshot(common, Target(kind="pod", namespace=ns, name=name))
    diagnoses = diagnose_pod(snapshot, ns, name, options=options)
    log = logging.getLogger("dradiag.cli.pod")
    for note in unresolved_pod_claims(snapshot, ns, name):
        log.warning("pod %s/%s: %s", ns, name, note)
    if not diagnoses:
        log.warning("pod %s/%s uses no ResourceClaim dradiag can diagnose", ns, name)
    collection = collection_of(snapshot)
    doc = diagnoses_document(
        [diagnosis_document(d, snapshot.source, collection) for d in diagnoses]
    )
    text = render_diagnoses(doc, color=use_color(no_color)) if output is OutputFormat.TEXT else None
    emit(doc, output, text)
    return exit_code_for(diagnoses, exit_zero)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("pod")(pod)
