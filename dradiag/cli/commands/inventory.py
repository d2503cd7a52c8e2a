"""``dradiag inventory``: devices per node, type and MIG profile — published, allocated, free."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TIMEOUT,
    As,
    AsGroup,
    Context,
    FromPath,
    Kubeconfig,
    NoColor,
    Output,
    OutputFormat,
    RequestTimeout,
    Timeout,
)

if TYPE_CHECKING:
    from dradiag.analyses.inventory import Inventory

NodeFilter = Annotated[
    list[str] | None,
    typer.Option(
        "--node",
        metavar="NODE",
        help="Only this node (repeatable). Long form only: -n means namespace everywhere, "
        "and devices belong to no namespace, so inventory takes no -n.",
    ),
]
FeatureGatesOption = Annotated[
    str | None,
    typer.Option(
        "--feature-gates",
        metavar="GATE=BOOL,...",
        help="DRA feature gates as on kube-scheduler (see `dradiag simulate --help`).",
    ),
]


def _render_text(inventory: Inventory, no_color: bool) -> None:
    from rich.table import Table

    from dradiag.render.console import box_for, stdout_console

    console = stdout_console(no_color)
    table = Table(
        "node",
        "type",
        "profile",
        "product",
        "published",
        "allocated",
        "free",
        "fits",
        "unhealthy",
        "held by",
    )
    for node in inventory.nodes:
        for g in node.groups:
            table.add_row(
                node.node,
                g.type,
                g.profile or "",
                g.product or "",
                str(g.published),
                str(g.allocated),
                str(g.free),
                "" if g.fits is None else str(g.fits),
                str(g.tainted) if g.tainted else "",
                ", ".join(sorted(g.holders)[:3]) + (" …" if len(g.holders) > 3 else ""),
            )
    table.box = box_for(console)
    console.print(table)
    for node in inventory.nodes:
        for bad in node.tainted:
            console.print(
                f"[red]unhealthy[/] {node.node} {bad['device']}: {', '.join(bad['taints'])}"
            )
    for p in inventory.problems:
        console.print(
            f"[yellow]pool {p['driver']}/{p['pool']} {p['kind']}[/]: {p['reason']}", markup=True
        )


def inventory(
    node: NodeFilter = None,
    feature_gates: FeatureGatesOption = None,
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
) -> int:
    """Devices per node, type and MIG profile: published, allocated (by whom), free, still fitting.

    \b
    Examples:
      dradiag inventory --node gpu-node-1
      dradiag inventory --from bundle.tar.gz -o json
    """
    from dradiag.analyses.allocation import FeatureGates
    from dradiag.analyses.inventory import build_inventory
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.inputs import Target, obtain_snapshot
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot import coverage

    options = CommonOptions(
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        output=output,
        no_color=no_color,
    )
    snapshot = obtain_snapshot(options, Target(kind="cluster", nodes=tuple(node or ())))
    gates = FeatureGates.for_snapshot(snapshot)
    if feature_gates:
        gates = FeatureGates.parse(feature_gates, base=gates)
    result = build_inventory(snapshot, nodes=list(node) if node else None, features=gates)
    unread = coverage.unread(snapshot, coverage.INVENTORY_NEEDS)
    if unread:
        logging.getLogger("dradiag.inventory").warning(
            "could not read: %s; the counts below are not the cluster's", coverage.describe(unread)
        )
    if output is OutputFormat.TEXT:
        _render_text(result, no_color)
        if unread:
            from rich.console import Console

            Console(no_color=no_color, highlight=False, soft_wrap=True).print(
                f"[yellow]inconclusive[/]: could not read {coverage.describe(unread)}"
            )
    else:
        from dradiag.render.document import collection_of, dump_document

        doc = result.to_dict()
        doc["collection"] = collection_of(snapshot, unread)
        typer.echo(dump_document(doc, output), nl=False)
    return ExitCode.INCONCLUSIVE if unread else ExitCode.OK


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("inventory")(inventory)
