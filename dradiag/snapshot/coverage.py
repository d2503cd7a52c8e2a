"""Which kinds a whole-cluster command needs, and which of them the Snapshot could not read.

``scan`` and ``inventory`` answer for the whole cluster: an empty table means "nothing
there" only when the lists it is drawn from were read. When every list is forbidden, or
the cluster serves no ``resource.k8s.io`` at all, the honest answer is "could not read
X", exit 4 (DESIGN §3), never "nothing unhealthy" (issue 11 §7).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot

SCAN_NEEDS: tuple[Kind, ...] = (
    Kind.RESOURCE_CLAIM,
    Kind.POD,
    Kind.RESOURCE_SLICE,
    Kind.DEVICE_CLASS,
)
"""What ``scan`` reads every claim and node from: claims, the pods using them (and the
kubelet-plugin pods), what is published, and the classes that select from it."""

INVENTORY_NEEDS: tuple[Kind, ...] = (Kind.RESOURCE_SLICE, Kind.RESOURCE_CLAIM)
"""What ``inventory`` counts: published devices, and the allocations that use them."""

DRA_KINDS = frozenset(
    {
        Kind.RESOURCE_SLICE,
        Kind.DEVICE_CLASS,
        Kind.RESOURCE_CLAIM,
        Kind.RESOURCE_CLAIM_TEMPLATE,
        Kind.DEVICE_TAINT_RULE,
    }
)


def unread(snapshot: Snapshot, kinds: Iterable[Kind]) -> list[KindRecord]:
    """The records of ``kinds`` whose emptiness proves nothing for a whole-cluster answer:
    not read (forbidden, timed out, not in the input), or a DRA kind the server does not
    serve (no DRA on the cluster: there is nothing to call healthy)."""
    out = []
    for kind in kinds:
        record = snapshot.coverage[kind]
        if record.coverage is Coverage.UNKNOWN or (
            record.coverage is Coverage.ABSENT and kind in DRA_KINDS
        ):
            out.append(record)
    return out


def describe(records: Sequence[KindRecord]) -> str:
    """``ResourceClaim (forbidden ...); Pod (...)``: one line for stderr or the text view."""
    return "; ".join(
        f"{r.kind.value} ({r.reason or ('not served' if r.coverage is Coverage.ABSENT else 'not read')})"
        for r in records
    )
