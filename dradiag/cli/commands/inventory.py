"""``dradiag inventory``: devices per node, type and MIG profile — published, allocated, free."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

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
    OutputFormat,
    RequestTimeout,
    Timeout,
    output_option,
)

InventoryOutput = Annotated[
    OutputFormat,
    output_option(OutputFormat.TEXT, OutputFormat.WIDE, OutputFormat.JSON, OutputFormat.YAML),
]

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


NoHeaders = Annotated[
    bool,
    typer.Option("--no-headers", help="Text table without its header row and legend."),
]

LEGEND = (
    ("ALLOC", "allocated to a claim (CLAIMS names them)"),
    ("HELD", "not allocated, but an allocated partition of the same GPU uses its counters"),
    ("FREE", "not allocated nor held: each could be allocated now, on its own"),
    ("FITS", "how many more fit together, with the counters left"),
)
"""What the count columns mean; printed under the table."""


def _render_text(inventory: Inventory, no_color: bool, *, wide: bool, headers: bool) -> None:
    from rich.text import Text

    from dradiag.render.columns import Column, fitted_table, hidden_note, print_table
    from dradiag.render.console import write_drawn

    groups = [(node.node, g) for node in inventory.nodes for g in node.groups]
    columns = [
        Column("NODE"),
        Column("TYPE"),
        Column("PROFILE"),
        Column("PRODUCT", fold="words", drop=4),
        Column("DEVICES", justify="right"),
        Column("ALLOC", justify="right"),
        Column("HELD", justify="right", drop=1),
        Column("FREE", justify="right"),
        Column("FITS", justify="right"),
        Column("UNHEALTHY", justify="right", drop=2),
        Column("CLAIMS", fold="tokens", drop=3),
    ]
    rows = [
        [
            node,
            g.type,
            g.profile or "",
            g.product or "",
            str(g.published),
            str(g.allocated),
            str(g.held) if g.held else "",
            str(g.free),
            "" if g.fits is None else str(g.fits),
            str(g.tainted) if g.tainted else "",
            ", ".join(sorted(g.holders)[:3]) + (" …" if len(g.holders) > 3 else ""),
        ]
        for node, g in groups
    ]
    # A column empty in every row says nothing: leave it out (not "hidden").
    used = [
        i for i, c in enumerate(columns) if c.header in ("NODE", "TYPE") or any(r[i] for r in rows)
    ]
    columns = [columns[i] for i in used]
    rows = [[r[i] for i in used] for r in rows]

    def draw(console: Any) -> None:
        if rows:
            table, layout = fitted_table(console, columns, rows, wide=wide, headers=headers)
            print_table(console, table, layout)
            if headers:
                shown = {columns[i].header for i in layout.kept}
                for name, meaning in LEGEND:
                    if name in shown:
                        console.print(Text(f"{name}: {meaning}", style="dim"))
                note = hidden_note(layout, console.width)
                if note is not None:
                    console.print(note)
        else:
            console.print(Text("no devices published on these nodes"))
        for node in inventory.nodes:
            for bad in node.tainted:
                line = Text("unhealthy", style="red")
                line.append(f" {node.node} {bad['device']}: {', '.join(bad['taints'])}")
                console.print(line)
        for p in inventory.problems:
            line = Text(f"pool {p['driver']}/{p['pool']} {p['kind']}", style="yellow")
            line.append(f": {p['reason']}")
            console.print(line)

    write_drawn(no_color, draw)


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
    output: InventoryOutput = OutputFormat.TEXT,
    no_color: NoColor = False,
    no_headers: NoHeaders = False,
) -> int:
    """Devices per node, type and MIG profile: published, allocated (by whom), free, still fitting.

    \b
    Examples:
      dradiag inventory --node gpu-node-1
      dradiag inventory --from bundle.tar.gz -o json

    ALLOC: allocated to a claim. HELD: not allocated, but an allocated partition of the
    same GPU uses its counters. FREE: neither. FITS (partitionable devices): how many
    more fit together with the counters left. -o wide: every column, nothing folded.
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
    if output in (OutputFormat.TEXT, OutputFormat.WIDE):
        _render_text(result, no_color, wide=output is OutputFormat.WIDE, headers=not no_headers)
        if unread and not no_headers:
            from rich.text import Text

            from dradiag.render.console import write_drawn

            line = Text("inconclusive", style="yellow")
            line.append(f": could not read {coverage.describe(unread)}")
            write_drawn(no_color, lambda console: console.print(line))
    else:
        from dradiag.render.document import collection_of, dump_document

        doc = result.to_dict()
        doc["collection"] = collection_of(snapshot, unread)
        typer.echo(dump_document(doc, output), nl=False)
    return ExitCode.INCONCLUSIVE if unread else ExitCode.OK


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("inventory")(inventory)
