"""Where a command's Snapshot comes from: ``--from PATH`` offline, or the live cluster.

Commands describe *what* they need as a :class:`Target`; live collection uses it to read
only that (targeted reads for ``claim``/``pod``, whole-cluster lists for ``scan``,
``inventory``, ``selector-check``). Offline input is read whole either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dradiag.errors import UsageError

if TYPE_CHECKING:
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Snapshot

TargetKind = Literal["claim", "pod", "cluster"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What a command is about, so collection can stay targeted."""

    kind: TargetKind
    namespace: str | None = None
    name: str | None = None
    nodes: tuple[str, ...] = ()
    """Nodes the command is restricted to (``--node``), when any."""


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


KEEP_ALIVE: list[object] | None = None
"""Set to a list by the console-script entry point, which exits without teardown: the
snapshots a run loads are kept here so the command's return does not free a large one
object by object (about a second on a 100,000-claim input) just before the exit."""


def obtain_snapshot(options: CommonOptions, target: Target) -> Snapshot:
    """The Snapshot for this run: offline from ``--from``, else collected live."""
    from dradiag.sources.manifests import load_snapshot, paused_gc

    if options.from_path:
        snapshot = load_snapshot(options.from_path)
    else:
        from dradiag.sources.live import collect_snapshot

        with paused_gc():
            snapshot = collect_snapshot(options, target)
    if KEEP_ALIVE is not None:
        KEEP_ALIVE.append(snapshot)
    return snapshot
