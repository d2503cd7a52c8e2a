"""``dradiag selector-check``: will these manifests' claims find devices, and if not, why not.

Two forms. ``selector-check FILE...`` checks every ResourceClaim, ResourceClaimTemplate
and pod template (of any workload kind) in the files against the devices of the cluster,
``--from`` or ``--slices``; ``selector-check --expr EXPR`` evaluates one expression on
every device (the CEL engine's ad-hoc face, issue #3). Output: text, json (schema in
``docs/schema/selector-check.schema.json``), yaml, or sarif (one result per problem,
located at the expression in the file). Exit 1 when a request can match no device or a
selector errors, 2 on unreadable input or an expression that does not compile.

The work is ``analyses.selector_check``'s; the document and its text form are
``render.selector_report``'s; the devices and manifests come from ``cli.inputs``.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TIMEOUT,
    As,
    AsGroup,
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    NoColor,
    OutputFormat,
    RequestTimeout,
    Timeout,
    output_option,
)

Files = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="FILE...",
        help="Manifests to check: ResourceClaim(Template)s, Pods, or any workload with a pod "
        "template (files, directories, or '-' for stdin).",
        show_default=False,
    ),
]
ManifestNamespace = Annotated[
    str | None,
    typer.Option(
        "-n",
        "--namespace",
        metavar="NS",
        help="The namespace of manifests that name none (as kubectl apply -n); there is no "
        "-A: the manifests are what is checked.",
    ),
]
Expr = Annotated[
    str | None,
    typer.Option("--expr", metavar="EXPR", help="Evaluate one CEL selector on every device."),
]
PerDevice = Annotated[
    bool, typer.Option("--per-device", help="With --expr: list the result for every device.")
]
Slices = Annotated[
    str | None,
    typer.Option(
        "--slices",
        metavar="PATH",
        help="Read devices (ResourceSlices, and DeviceClasses if present) from PATH.",
    ),
]
Nodes = Annotated[
    list[str] | None,
    typer.Option("--node", metavar="NODE", help="Only devices visible from NODE (repeatable)."),
]
Free = Annotated[
    bool,
    typer.Option(
        "--free",
        help="Also account for current allocations (allocation simulator): how many matching "
        "devices are free now.",
    ),
]
SelectorOutput = Annotated[
    OutputFormat,
    output_option(OutputFormat.TEXT, OutputFormat.JSON, OutputFormat.YAML, OutputFormat.SARIF),
]


def selector_check(
    files: Files = None,
    expr: Expr = None,
    per_device: PerDevice = False,
    from_path: FromPath = None,
    slices: Slices = None,
    node: Nodes = None,
    free: Free = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: ManifestNamespace = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: SelectorOutput = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
) -> int:
    """Check CEL selectors of claims, templates and workloads against the devices.

    \b
    Examples:
      dradiag selector-check claim-template.yaml --from slices.yaml
      dradiag selector-check --expr "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"
    """
    import sys

    from dradiag.analyses.selector_check import (
        check_manifests,
        expression_error,
        sweep_expression,
    )
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.inputs import load_checked_manifests, obtain_device_snapshot
    from dradiag.cli.options import CommonOptions
    from dradiag.render.selector_report import expression_document, manifests_document

    files = list(files or [])
    options = CommonOptions(
        from_path=_device_path(files, expr, per_device, from_path, slices),
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    if expr is not None:
        error = expression_error(expr)
        if error is not None:
            sys.stderr.write(error)
            return ExitCode.USAGE
        snapshot = obtain_device_snapshot(options, node)
        sweep = sweep_expression(snapshot, expr, nodes=node)
        doc = expression_document(snapshot, sweep, expr, per_device=per_device)
        broken = sweep.matched == 0 or sweep.errors > 0
    else:
        snapshot = obtain_device_snapshot(options, node)
        manifests = load_checked_manifests(files, snapshot, namespace=namespace or "default")
        check = check_manifests(snapshot, manifests, nodes=node, now=free)
        doc = manifests_document(snapshot, check)
        broken = any(f["severity"] == "error" for f in doc["findings"])
    from dradiag.render.document import collection_of

    doc["collection"] = collection_of(snapshot)
    _emit(doc, output, no_color)
    if exit_zero:
        return ExitCode.OK
    return ExitCode.BROKEN if broken else ExitCode.OK


def _device_path(
    files: list[str], expr: str | None, per_device: bool, from_path: str | None, slices: str | None
) -> str | None:
    """``--slices`` or ``--from``, after the checks of how this command's flags combine."""
    from dradiag.errors import UsageError

    if expr is None and not files:
        raise UsageError("give manifests to check (FILE...) or an expression (--expr)")
    if expr is not None and files:
        raise UsageError("--expr and FILE arguments cannot be combined")
    if from_path and slices:
        raise UsageError("--from and --slices name the same thing; give one")
    if per_device and expr is None:
        raise UsageError("--per-device goes with --expr")
    device_path = slices or from_path
    if device_path == "-" and "-" in files:
        raise UsageError("stdin cannot hold both the manifests and the devices")
    return device_path


def _emit(doc: dict[str, Any], output: OutputFormat, no_color: bool) -> None:
    if output is OutputFormat.SARIF:
        import json

        from dradiag.render.sarif import selector_check_sarif

        typer.echo(json.dumps(selector_check_sarif(doc), indent=2, ensure_ascii=False))
        return
    if output in (OutputFormat.JSON, OutputFormat.YAML):
        from dradiag.render.document import dump_document

        typer.echo(dump_document(doc, output.value), nl=False)
        return
    from dradiag.render.selector_report import render_text

    render_text(doc, no_color)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("selector-check")(selector_check)
