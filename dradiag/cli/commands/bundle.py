"""``dradiag bundle``: a redacted support bundle a maintainer can diagnose offline.

The collection and the layout are ``sources.bundle_write``; this command adds what needs
the layers above the sources: ``analysis.json``, the ``scan`` result over the bundle as
it will be read back (``--from`` on the same files), so what the maintainer sees first is
what the customer's cluster showed. stdout carries only the path written; progress and
warnings go to stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STUCK_AFTER,
    AllNamespaces,
    As,
    AsGroup,
    Context,
    Kubeconfig,
    NoColor,
    RequestTimeout,
    Timeout,
)

BUNDLE_TIMEOUT = 300.0
"""The overall read limit of a bundle (``--timeout``): every driver pod's logs of a large
cluster take longer than one diagnosis's reads (5,000 plugin pods: about a minute)."""

if TYPE_CHECKING:
    from dradiag.sources.bundle_node_state import NodeStateMembers
    from dradiag.sources.bundle_write import BundleScope
    from dradiag.sources.redact import Redactor


def bundle(
    namespaces: Annotated[
        list[str] | None,
        typer.Option(
            "-n",
            "--namespace",
            metavar="NS",
            help="Collect claims, templates, pods and events of this namespace; repeat for more.",
        ),
    ] = None,
    all_namespaces: AllNamespaces = False,
    claims: Annotated[
        list[str] | None,
        typer.Option("--claim", metavar="NS/NAME", help="Collect what this claim's life touched."),
    ] = None,
    pods: Annotated[
        list[str] | None,
        typer.Option("--pod", metavar="NS/NAME", help="Collect what this pod's claims touched."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="DURATION",
            help="Container and kubelet logs only this far back (2h, 30m, 90s).",
        ),
    ] = None,
    output_file: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE.tar.gz",
            help="Where to write the bundle (default: dradiag-bundle-<UTC timestamp>.tar.gz).",
        ),
    ] = None,
    no_redact: Annotated[
        bool,
        typer.Option(
            "--no-redact",
            help="Keep credential-looking values (the manifest records that the bundle is unredacted).",
        ),
    ] = False,
    kubelet_logs: Annotated[
        bool,
        typer.Option(
            "--kubelet-logs",
            help="Add the kubelet journal of the claims' nodes through the API server's node "
            "log query (needs get on nodes/proxy; refused or absent is recorded, not fatal).",
        ),
    ] = False,
    node_state: Annotated[
        list[str] | None,
        typer.Option(
            "--node-state",
            metavar="DIR",
            help="Add the node state `dradiag node --save DIR` saved (DIR/node/<node>/) as "
            "node/<node>/; repeat for more. Not redacted: it holds no credentials.",
        ),
    ] = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = BUNDLE_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    no_color: NoColor = False,
) -> int:
    """Collect a support bundle (read-only, redacted) for offline diagnosis.

    \b
    Examples:
      dradiag bundle -n ml -o ml-bundle.tar.gz
      dradiag bundle --claim ml/train-mig --since 2h --kubelet-logs
      dradiag bundle --claim ml/train-mig --node-state saved/   # after dradiag node --save saved/

    Reads, with GETs only, what the diagnosis and selector-check need for the chosen
    scope (every namespace unless -n/--claim/--pod narrow it), redacts credentials, and
    writes one deterministic .tar.gz; `dradiag claim NS/NAME --from BUNDLE` then gives
    the live verdict. No Secret is ever read. Exit 0 written, 2 usage error, 3 cluster
    unreachable.
    """
    from dradiag.cli.inputs import parse_namespaced_name
    from dradiag.errors import UsageError
    from dradiag.sources.bundle_write import BundleScope
    from dradiag.sources.redact import Redactor

    if all_namespaces and namespaces:
        raise UsageError("-n/--namespace and -A/--all-namespaces are mutually exclusive")
    scope = BundleScope(
        namespaces=tuple(dict.fromkeys(namespaces or ())),
        all_namespaces=all_namespaces,
        claims=tuple(parse_namespaced_name(c) for c in claims or ()),
        pods=tuple(parse_namespaced_name(p) for p in pods or ()),
        since_seconds=_since_seconds(since),
        kubelet_logs=kubelet_logs,
    )
    redactor = Redactor(enabled=not no_redact)
    path = output_file or _default_name()
    if not path.endswith((".tar.gz", ".tgz")):
        raise UsageError(f"-o {path}: the bundle is a .tar.gz (name it FILE.tar.gz)")
    from dradiag.sources.bundle_node_state import gather

    saved = gather(node_state or ())  # checked before any cluster read
    _collect_and_write(
        scope,
        redactor,
        path,
        saved,
        kubeconfig=kubeconfig,
        context=context,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        no_color=no_color,
    )
    typer.echo(path)
    return 0


def _since_seconds(since: str | None) -> int | None:
    if since is None:
        return None
    from dradiag.analyses.timeline import parse_duration
    from dradiag.errors import UsageError

    try:
        seconds = parse_duration(since)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from None
    return max(1, int(seconds.total_seconds()))


def _default_name() -> str:
    from datetime import UTC, datetime

    return f"dradiag-bundle-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.tar.gz"


def _collect_and_write(
    scope: BundleScope,
    redactor: Redactor,
    path: str,
    saved: NodeStateMembers,
    *,
    kubeconfig: str | None,
    context: str | None,
    request_timeout: float,
    timeout: float,
    as_user: str | None,
    as_groups: tuple[str, ...],
    no_color: bool,
) -> None:
    from dradiag import __version__
    from dradiag.cli.options import CommonOptions
    from dradiag.errors import ClusterUnreachable, UsageError
    from dradiag.sources import bundle_write
    from dradiag.sources.live import connect
    from dradiag.sources.live_discovery import discover
    from dradiag.sources.live_transport import ApiError, Reader
    from dradiag.sources.progress import Progress

    options = CommonOptions(
        kubeconfig=kubeconfig,
        context=context,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=as_groups,
        no_color=no_color,
    )
    connection = connect(options)
    progress = Progress.for_output(output="text", no_color=no_color)
    try:
        with progress:
            progress.update(f"discovery at {connection.host}")
            reader = Reader(
                connection.send, request_timeout=request_timeout, overall_timeout=timeout
            )
            try:
                discovery = discover(reader)
            except ApiError as exc:
                raise ClusterUnreachable(
                    f"cannot reach the Kubernetes API at {connection.host}: {exc.message}"
                ) from None
            collected = bundle_write.collect(
                reader,
                discovery,
                scope,
                progress=progress,
                context=connection.context,
                host=connection.host,
            )
            progress.update("redacting and laying out the bundle")
            layout = bundle_write.lay_out(collected, redactor)
            layout.members.update(saved.members)  # not redacted (bundle_node_state)
            layout.collectors += saved.collectors
            manifest = bundle_write.manifest(
                collected, layout, scope, redactor, tool_version=__version__
            )
            del collected  # the raw objects and their Snapshot: the members hold it all now
            layout.members[bundle_write.MANIFEST] = bundle_write.dumps(manifest)
            progress.update("scanning the bundle (analysis.json)")
            analysis, status = _analysis(layout.members)
            manifest["analysis"] = status
            if analysis is not None:
                layout.members[bundle_write.ANALYSIS] = redactor.text(
                    analysis, bundle_write.ANALYSIS
                ).encode()
            layout.members[bundle_write.REDACTIONS] = bundle_write.dumps(redactor.report())
            layout.members[bundle_write.MANIFEST] = bundle_write.dumps(manifest)
            try:
                bundle_write.write_archive(layout.members, path)
            except OSError as exc:
                raise UsageError(f"-o {path}: cannot write: {exc.strerror}") from None
    finally:
        connection.close()


def _analysis(members: dict[str, bytes]) -> tuple[str | None, dict[str, Any]]:
    """``scan -o json`` over the bundle as ``--from`` reads it, and how that went."""
    from dradiag.cli.diagnosis_run import diagnoses_document, walk_options
    from dradiag.diagnosis.build import scan
    from dradiag.diagnosis.next_steps import without_command
    from dradiag.errors import DradiagError
    from dradiag.render.document import dump_document
    from dradiag.sources.manifests import load_members

    try:
        snapshot = load_members(members, "bundle")
    except DradiagError as exc:
        return None, {"status": "failed", "error": str(exc)}
    diagnoses = without_command(
        scan(snapshot, namespace=None, options=walk_options(None, DEFAULT_STUCK_AFTER)), "scan"
    )
    doc = diagnoses_document(snapshot, diagnoses)
    return dump_document(doc, "json"), {"status": "collected", "diagnoses": len(diagnoses)}


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("bundle")(bundle)
