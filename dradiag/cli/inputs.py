"""Where a command's Snapshot comes from: ``--from PATH`` offline, or the live cluster.

Commands describe *what* they need as a :class:`Target`; live collection uses it to read
only that (targeted reads for ``claim``/``pod``, whole-cluster lists for ``scan``,
``inventory``, ``selector-check``). Offline input is read whole either way, but for a
claim or a pod large JSON lists are decoded only where the diagnosis looks
(``sources.json_lists``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dradiag.errors import UsageError

if TYPE_CHECKING:
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Snapshot
    from dradiag.sources.workloads import ManifestSet

TargetKind = Literal["claim", "pod", "cluster"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What a command is about, so collection can stay targeted."""

    kind: TargetKind
    namespace: str | None = None
    name: str | None = None
    nodes: tuple[str, ...] = ()
    """Nodes the command is restricted to (``--node``), when any."""
    label_selector: str = ""
    """``scan -l``, canonical: sent to the API server with the pod and claim lists."""
    field_selector: str = ""
    """``scan --field-selector``, canonical: sent with the pod list (claims get only its
    ``metadata.*`` terms, the only fields a claim can be selected by)."""


def parse_namespaced_name(value: str, *, default_namespace: str | None = None) -> tuple[str, str]:
    """``NS/NAME`` (or ``NAME`` with ``-n NS``) → (namespace, name); UsageError otherwise."""
    if "/" in value:
        namespace, _, name = value.partition("/")
        if not namespace or not name or "/" in name:
            raise UsageError(f"expected NAMESPACE/NAME, got {value!r}")
        return namespace, name
    if not value:
        raise UsageError("expected NAMESPACE/NAME, got an empty string")
    return (default_namespace or "default"), value


def default_namespace(
    namespace: str | None, *, from_path: str | None, kubeconfig: str | None, context: str | None
) -> str:
    """The namespace a bare NAME means, as in kubectl: ``-n``, else (live) the kubeconfig
    context's namespace, else ``default``."""
    if namespace:
        return namespace
    if not from_path:
        from dradiag.sources.live import context_namespace

        found = context_namespace(kubeconfig, context)
        if found:
            return found
    return "default"


KEEP_ALIVE: list[object] | None = None
"""Set to a list by the console-script entry point, which exits without teardown: the
snapshots a run loads are kept here so the command's return does not free a large one
object by object (about a second on a 100,000-claim input) just before the exit."""


def obtain_snapshot(options: CommonOptions, target: Target) -> Snapshot:
    """The Snapshot for this run: offline from ``--from``, else collected live."""
    from dradiag.snapshot.model import paused_gc
    from dradiag.sources.manifests import load_snapshot

    if options.from_path:
        snapshot = load_snapshot(options.from_path, defer=target.kind in ("claim", "pod"))
    else:
        from dradiag.sources.live import collect_snapshot

        with paused_gc():
            snapshot = collect_snapshot(options, target)
    if KEEP_ALIVE is not None:
        KEEP_ALIVE.append(snapshot)
    return snapshot


def obtain_device_snapshot(options: CommonOptions, nodes: list[str] | None) -> Snapshot:
    """The devices of ``selector-check``: ``--slices``/``--from`` (a large JSON file
    streamed), else the live cluster's, restricted to ``nodes`` when given.

    Every loader pauses the cyclic GC and freezes what it loaded
    (``snapshot.model.paused_gc``).
    """
    if not options.from_path:
        return obtain_snapshot(options, Target(kind="cluster", nodes=tuple(nodes or ())))
    from dradiag.sources.workloads import load_device_snapshot

    snapshot = load_device_snapshot(options.from_path)
    if KEEP_ALIVE is not None:
        KEEP_ALIVE.append(snapshot)
    return snapshot


def load_checked_manifests(files: list[str], snapshot: Snapshot, *, namespace: str) -> ManifestSet:
    """The manifests of ``selector-check FILE...``, claims resolved against ``snapshot``.

    InputError (exit 2) when they hold nothing to check.
    """
    from dradiag.errors import InputError
    from dradiag.sources.workloads import load_manifests

    manifests = load_manifests(files, snapshot=snapshot, default_namespace=namespace)
    if not manifests.claims and not manifests.workloads:
        raise InputError(
            "nothing to check: no ResourceClaim, ResourceClaimTemplate or pod spec with "
            "resourceClaims",
            path=", ".join(files),
        )
    return manifests
