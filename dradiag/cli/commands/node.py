"""``dradiag node``: NVML, CDI and checkpoint state on a GPU node, cross-checked with the cluster.

Runs on the node, or from a debug pod with the host mounted
(``kubectl debug node/N -it --image=<image with dradiag> -- dradiag node --host-root /host``).
The node state comes from the host (under ``--host-root``), or from a saved copy
(``node/<node>/`` under ``--from``, written by ``--save``) when ``--from`` has one for the
node and no host path option is given.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.completion import node_names
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
    Output,
    OutputFormat,
    RequestTimeout,
    Timeout,
)

if TYPE_CHECKING:
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Snapshot
    from dradiag.snapshot.node_state import NodeState
    from dradiag.vocabulary import Finding

logger = logging.getLogger(__name__)

NodeName = Annotated[
    str | None,
    typer.Option(
        "--node",
        metavar="NAME",
        help="The node's name (default: $NODE_NAME, else the hostname).",
        autocompletion=node_names,
    ),
]
CdiDir = Annotated[
    list[str] | None,
    typer.Option(
        "--cdi-dir",
        metavar="DIR",
        help="A CDI spec directory on the host (repeatable; default /var/run/cdi and /etc/cdi).",
    ),
]
CheckpointFile = Annotated[
    str | None,
    typer.Option(
        "--checkpoint",
        metavar="FILE",
        help="The plugin checkpoint on the host "
        "(default /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json).",
    ),
]
HostRoot = Annotated[
    str | None,
    typer.Option(
        "--host-root",
        metavar="DIR",
        help="Where the host's filesystem is mounted (/host in `kubectl debug node/N`); "
        "every host path is read under it.",
    ),
]
NoNvml = Annotated[bool, typer.Option("--no-nvml", help="Do not read the GPUs through NVML.")]
NoCluster = Annotated[
    bool, typer.Option("--no-cluster", help="Node-local checks only; read no cluster state.")
]
Save = Annotated[
    str | None,
    typer.Option(
        "--save",
        metavar="DIR",
        help="Also write the node state to DIR/node/<node>/, for `--from DIR` next to the "
        "cluster's objects.",
    ),
]


def _default_node() -> str:
    import os
    import socket

    return os.environ.get("NODE_NAME") or socket.gethostname()


def _cluster(
    options: CommonOptions, node: str, *, no_cluster: bool, saved: bool
) -> tuple[Snapshot | None, dict[str, Any]]:
    """The cluster snapshot to cross-check with, or None (and why) — never fatal live."""
    from dradiag.cli.inputs import Target, obtain_snapshot
    from dradiag.errors import ClusterUnreachable, DradiagError, InputError

    if no_cluster:
        return None, {"kind": "none", "reason": "--no-cluster"}
    try:
        snapshot = obtain_snapshot(options, Target(kind="cluster", nodes=(node,)))
    except InputError as exc:
        if saved and "no Kubernetes objects" in str(exc):
            return None, {"kind": "none", "reason": str(exc)}
        raise
    except (ClusterUnreachable, DradiagError) as exc:
        if options.from_path:
            raise
        logger.warning("cluster unavailable: %s; cross-checks with the cluster skipped", exc)
        return None, {"kind": "none", "reason": str(exc)}
    block: dict[str, Any] = {"kind": snapshot.source.kind}
    if snapshot.source.location:
        block["location"] = snapshot.source.location
    if snapshot.source.context:
        block["context"] = snapshot.source.context
    return snapshot, block


def _catalogued(
    findings: list[Finding], snapshot: Snapshot | None = None, node: str = ""
) -> list[Finding]:
    """Titles and generic next steps from the rule catalogue, as the diagnosis does, with
    the node, its plugin pod and namespace filled in (``diagnosis/next_steps.py``)."""
    from dataclasses import replace

    from dradiag.diagnosis.next_context import NextContext, node_context
    from dradiag.diagnosis.next_steps import with_concrete_next
    from dradiag.rulebook import load_rulebook

    ctx = NextContext(node=node)
    if snapshot is not None:
        from dradiag.analyses.plugin_health import plugin_health

        ctx = node_context(snapshot, node, plugin_health(snapshot, node).pod if node else None)
    ctx = replace(ctx, own_commands=frozenset({"node"}))

    rulebook = load_rulebook()
    out = []
    for f in findings:
        rule = rulebook.get(f.rule)
        if rule is None:
            out.append(f)
            continue
        # A catalogue step pointing at `dradiag node` is this very command: left out here.
        extra = tuple(
            n for n in rule.next if n not in f.next and "{" not in n and "dradiag node" not in n
        )
        out.append(replace(f, title=rule.title or f.title, next=f.next + extra))
    return [with_concrete_next(f, ctx) for f in out]


def node(
    node_name: NodeName = None,
    cdi_dir: CdiDir = None,
    checkpoint: CheckpointFile = None,
    host_root: HostRoot = None,
    no_nvml: NoNvml = False,
    no_cluster: NoCluster = False,
    save: Save = None,
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
) -> int:
    """On a GPU node: NVML, CDI specs and the plugin checkpoint, cross-checked with the cluster.

    \b
    Examples:
      dradiag node --host-root /host --save /tmp/out
      dradiag node --node gpu-node-1 --from out/
    """
    from datetime import UTC, datetime

    from dradiag.analyses.node_checks import check_node
    from dradiag.cli.options import CommonOptions
    from dradiag.errors import UsageError
    from dradiag.render.document import dump_document
    from dradiag.render.node import node_document, render_node_text
    from dradiag.sources import node_state as ns

    if no_cluster and from_path:
        raise UsageError("--no-cluster and --from exclude each other")
    name = node_name or _default_node()
    state: NodeState | None = None
    host_given = host_root is not None or cdi_dir or checkpoint is not None
    if from_path and not host_given:
        saved = ns.load_saved_node_states(from_path)
        state = saved.get(name)
        if state is None and saved:
            logger.warning(
                "no saved state for node %s under %s (it has %s); reading this host",
                name,
                from_path,
                ", ".join(sorted(saved)),
            )
    if state is None:
        state, raw = ns.collect_node_state(
            name,
            host_root=host_root or "/",
            cdi_dirs=tuple(cdi_dir or ns.DEFAULT_CDI_DIRS),
            checkpoint_path=checkpoint or ns.DEFAULT_CHECKPOINT,
            use_nvml=not no_nvml,
            collected_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        if save:
            folder = ns.save_node_state(state, raw, save)
            logger.info("node state saved to %s", folder)
            from dradiag.cli.invocation import prog

            typer.echo(f"{prog()}: node state saved to {folder}", err=True)
    elif save:
        raise UsageError(f"node {name}'s state was read from {state.source}: nothing to --save")
    if state.nvml is None and not no_nvml and state.nvml_unavailable:
        logger.warning("NVML unavailable: %s", state.nvml_unavailable)
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
    snapshot, cluster = _cluster(options, name, no_cluster=no_cluster, saved=state.source != "live")
    findings = _catalogued(check_node(state, snapshot), snapshot, name)
    doc = node_document(state, findings, cluster=cluster)
    if output is OutputFormat.TEXT:
        render_node_text(doc, no_color=no_color)
    else:
        typer.echo(dump_document(doc, output), nl=False)
    broken = doc["summary"]["errors"] > 0
    return 1 if broken and not exit_zero else 0


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("node")(node)
