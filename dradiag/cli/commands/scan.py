"""``dradiag scan [-n NS | -A]``: every claim and node that is not healthy, in one table."""

from __future__ import annotations

import logging

import typer

from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STUCK_AFTER,
    DEFAULT_TIMEOUT,
    AllNamespaces,
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


def scan(
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
    all_namespaces: AllNamespaces = False,
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
    """Diagnose every claim that is not healthy, plus node-level publication problems.

    \b
    Examples:
      dradiag scan -A
      dradiag scan -n ml --from bundle.tar.gz -o json

    One row per unhealthy claim (or pod whose claim is not created yet) and per node
    with a problem that belongs to no claim (a GPU node publishing nothing, a
    crash-looping kubelet plugin, an incomplete or invalid pool), sorted by phase.
    Without -n, every namespace in the snapshot is scanned. Exit 0 nothing broken,
    1 something broken, 2 usage/input error, 3 runtime error, 4 inconclusive.
    """
    from dradiag.cli.diagnosis_run import (
        check_output,
        diagnoses_document,
        final_code,
        read_snapshot,
        report,
        stream_diagnoses_json,
        walk_options,
    )
    from dradiag.cli.inputs import Target
    from dradiag.diagnosis.build import scan as scan_snapshot
    from dradiag.errors import UsageError
    from dradiag.render.text import render_scan
    from dradiag.snapshot import coverage

    check_output(output)
    if namespace and all_namespaces:
        raise UsageError("-n/--namespace and -A/--all-namespaces are mutually exclusive")
    options = walk_options(now, stuck_after)
    snapshot = read_snapshot(
        Target(kind="cluster", namespace=namespace),
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=all_namespaces or not namespace,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=as_groups,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    diagnoses = scan_snapshot(snapshot, namespace=namespace or None, options=options)
    unread = coverage.unread(snapshot, coverage.SCAN_NEEDS)
    if unread:
        logging.getLogger("dradiag.scan").warning(
            "could not read: %s; scan will not call the cluster healthy", coverage.describe(unread)
        )
    if output is OutputFormat.JSON:
        # Streamed: 60,000 rows never exist as one document (or one string) in memory.
        code = final_code(diagnoses, exit_zero=exit_zero, inconclusive=bool(unread))
        stream_diagnoses_json(snapshot, diagnoses, unread)
        return code
    return report(
        diagnoses_document(snapshot, diagnoses, unread),
        diagnoses,
        render=render_scan,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
        inconclusive=bool(unread),
    )


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("scan")(scan)
