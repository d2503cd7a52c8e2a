"""Snapshot: the one in-memory, version-normalized, indexed view of cluster state.

Every source (live API, ``--from`` files, bundles, node probes) ends in a Snapshot and
every analysis reads only a Snapshot (DESIGN §1), so an offline run gives exactly the
answer a live run gave. Objects stay raw dicts in the resource.k8s.io/v1 shape (see
``normalize.py``): typed models would drop newer fields and are slow to build.

The Snapshot also records *what was collected*: per kind, whether it was read in full
(``collected``), cannot exist on this cluster (``absent``, e.g. an API the server does not
serve), or was not read (``unknown``, with the reason). Analyses use that to answer
``unknown`` instead of a false ``ok`` (DESIGN §4, §8).
"""

from __future__ import annotations

import gc
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dradiag.snapshot.shape_check import ShapeProblem

K8sObject = Mapping[str, Any]
"""A Kubernetes object as a raw (normalized) dict; the one place the ``Any`` lives."""


class Kind(StrEnum):
    """The kinds a Snapshot holds; values are the Kubernetes ``kind`` spellings."""

    RESOURCE_SLICE = "ResourceSlice"
    DEVICE_CLASS = "DeviceClass"
    DEVICE_TAINT_RULE = "DeviceTaintRule"
    RESOURCE_CLAIM = "ResourceClaim"
    RESOURCE_CLAIM_TEMPLATE = "ResourceClaimTemplate"
    POD = "Pod"
    NODE = "Node"
    EVENT = "Event"
    LOG = "Log"
    """Container logs (kubelet-plugin and workload containers)."""
    DEPLOYMENT = "Deployment"
    """``apps/v1`` Deployments the driver creates per claim (the MPS control daemon,
    ``mps-control-daemon-<claim UID>-<hash>`` in the driver's namespace): their status
    says why a daemon Prepare waits for never came up. Read only in the driver's
    namespaces; indexed by the claim UID their name carries."""


RESOURCE_OF_KIND: Mapping[Kind, str] = {
    Kind.RESOURCE_SLICE: "resourceslices",
    Kind.DEVICE_CLASS: "deviceclasses",
    Kind.DEVICE_TAINT_RULE: "devicetaintrules",
    Kind.RESOURCE_CLAIM: "resourceclaims",
    Kind.RESOURCE_CLAIM_TEMPLATE: "resourceclaimtemplates",
    Kind.POD: "pods",
    Kind.NODE: "nodes",
    Kind.EVENT: "events",
    Kind.LOG: "pods/log",
    Kind.DEPLOYMENT: "deployments",
}
"""Each kind's REST resource (the plural in API paths, RBAC rules and ``kubectl get``)."""


class Coverage(StrEnum):
    """How completely one kind was read into the Snapshot."""

    COLLECTED = "collected"
    """Read in full (within ``scope``): an empty result means none exist."""
    ABSENT = "absent"
    """Cannot exist here (e.g. the cluster serves no API for the kind)."""
    UNKNOWN = "unknown"
    """Not read, or not readable: emptiness proves nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KindRecord:
    """What the Snapshot knows about the completeness of one kind."""

    kind: Kind
    coverage: Coverage
    reason: str | None = None
    scope: str | None = None
    """Set when only part of the kind was read (e.g. ``namespace gpu-jobs``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectionError:
    """One read that failed: the JSON document's ``collection.errors[]`` entry."""

    resource: str
    verb: str
    reason: str
    namespace: str | None = None
    name: str | None = None
    status: int | None = None
    """HTTP status where there was one (403, 404, 500); None for timeouts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerLog:
    """The captured log of one container (current or previous instance)."""

    namespace: str | None
    pod: str
    container: str
    text: str
    previous: bool = False
    truncated: bool = False
    source: str | None = None
    """Where the text came from (file path or API path), for evidence references."""
    component: str | None = None
    """For a component's log without a pod (``kubelet.log``, ``kube-scheduler.log``,
    ``kubelet-plugin.log``): which component; ``pod`` is then empty."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceInfo:
    """Where a Snapshot came from: the JSON document's ``source`` block."""

    kind: str = "files"
    """``live``, ``bundle`` or ``files``."""
    location: str | None = None
    context: str | None = None
    collected_at: str | None = None
    server_version: str | None = None
    """``major.minor`` of the API server when known; the allocator depends on it."""
    server_git_version: str | None = None
    """The API server's full ``gitVersion`` (``v1.34.2-eks-…``) when known: known-issue
    rules compare patch releases."""
    served_versions: tuple[str, ...] = ()
    """resource.k8s.io versions the server serves, newest first, when known."""


DeviceRef = tuple[str, str, str]
"""(driver, pool, slice device name): how an allocation result names a device."""


class DeferredObjects(Protocol):
    """Objects of one kind that were read but not decoded yet (``sources.json_lists``).

    A ``claim`` run on a 100,000-claim input needs a handful of objects; decoding,
    normalizing and indexing all of them costs seconds. The Snapshot decodes an item of a
    deferred store only when a look-up may need it, and everything the first time an
    analysis asks for a whole kind.
    """

    kind: Kind

    def __len__(self) -> int: ...

    def candidates(self, value: str, *, within: bool = False) -> list[int] | None:
        """Ascending indexes of the items that may hold the string ``value`` anywhere:
        every item that does is among them. None when this store cannot narrow it.
        ``within``: also where ``value`` is only part of a longer string (a message)."""
        ...

    def field_values(self, path: Sequence[str]) -> list[Any] | None:
        """The value at ``path`` (object keys) in every item as read, None where absent,
        in order; None when this store cannot tell without decoding."""
        ...

    def decode(self, index: int) -> dict[str, Any]:
        """Item ``index`` as read (not normalized)."""
        ...

    def decode_all(self) -> list[dict[str, Any]]:
        """Every item as read, in order."""
        ...


_NO_META: Mapping[str, Any] = {}
_logger = logging.getLogger(__name__)
_SHAPE_WARNINGS = 20
"""Shape problems warned about on stderr one by one; the rest are counted."""
_SHAPE_ERRORS = 100
"""Shape problems listed as collection errors per kind; the rest are counted in one."""
_SKIPPED: Mapping[str, Any] = {"skipped": "by the shape check"}
"""Stands in ``_Pending.decoded`` for an item the shape check skipped."""


def _meta(obj: K8sObject) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    # `type(...) is dict` first: this runs millions of times while a large snapshot
    # is indexed, and isinstance against an ABC is several times slower.
    if type(meta) is dict or isinstance(meta, Mapping):
        return meta
    return _NO_META


def name_of(obj: K8sObject) -> str:
    """``metadata.name`` or ``""``."""
    name = _meta(obj).get("name")
    return name if type(name) is str else str(name or "")


def namespace_of(obj: K8sObject) -> str:
    """``metadata.namespace`` or ``""`` (cluster-scoped)."""
    namespace = _meta(obj).get("namespace")
    return namespace if type(namespace) is str else str(namespace or "")


def uid_of(obj: K8sObject) -> str:
    """``metadata.uid`` or ``""``."""
    return str(_meta(obj).get("uid") or "")


def _identity(obj: K8sObject) -> tuple[str, str, str]:
    """(namespace, name, uid) in one metadata look-up: the index builders' hot path."""
    meta = _meta(obj)
    ns, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    return (
        ns if type(ns) is str else str(ns or ""),
        name if type(name) is str else str(name or ""),
        uid if type(uid) is str else str(uid or ""),
    )


def key_of(obj: K8sObject) -> str:
    """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    ns = namespace_of(obj)
    return f"{ns}/{name_of(obj)}" if ns else name_of(obj)


def allocated_devices(claim: K8sObject) -> list[Mapping[str, Any]]:
    """The ``status.allocation.devices.results`` entries of a claim (empty when unallocated)."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    devices = allocation.get("devices") or {}
    results = devices.get("results") or []
    return [r for r in results if isinstance(r, Mapping)]


NODE_NAME_KEYS = ("metadata.name", "kubernetes.io/hostname")
"""The node-selector keys that name one node: the allocator's ``matchFields
metadata.name`` and the hostname label."""


def node_selector_names(selector: object) -> list[str]:
    """Node names a NodeSelector pins with ``In`` on a :data:`NODE_NAME_KEYS` key (in
    ``matchFields`` or ``matchExpressions``), first seen first; [] for anything else."""
    if not isinstance(selector, Mapping):
        return []
    names: list[str] = []
    for term in selector.get("nodeSelectorTerms") or ():
        if not isinstance(term, Mapping):
            continue
        for req in (*(term.get("matchFields") or ()), *(term.get("matchExpressions") or ())):
            if (
                isinstance(req, Mapping)
                and req.get("operator") == "In"
                and req.get("key") in NODE_NAME_KEYS
            ):
                names.extend(str(v) for v in req.get("values") or ())
    return list(dict.fromkeys(names))


def allocation_nodes(claim: K8sObject) -> list[str]:
    """Node names a claim's allocation is restricted to (its ``nodeSelector``)."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    if not isinstance(allocation, Mapping):
        return []
    return node_selector_names(allocation.get("nodeSelector"))


def pod_claim_references(pod: K8sObject) -> list[tuple[str, str | None, str | None]]:
    """(pod-level claim name, resourceClaimName, resourceClaimTemplateName) per pod claim."""
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if isinstance(ref, Mapping):
            out.append(
                (
                    str(ref.get("name") or ""),
                    ref.get("resourceClaimName"),
                    ref.get("resourceClaimTemplateName"),
                )
            )
    return out


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while Snapshot objects are read or decoded.

    Loading builds millions of small acyclic dicts, and every allocation burst would
    start a collection that walks all of them again (a 5,000-node snapshot: about 3x the
    CPU). The loaded objects are then frozen into the permanent generation, so later
    collections skip them. They live as long as the Snapshot, and a CLI process is
    short-lived; nothing accumulates.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class _Indexes:
    """Look-up tables over a Snapshot's objects, each group built on first use.

    A ``claim`` run on a 100,000-claim snapshot touches a handful of objects; building
    every table up front would cost more than the diagnosis. Each group is built once,
    all at a time, the first time a look-up needs it.
    """

    __slots__ = (
        "claims_by_key",
        "claims_by_uid",
        "claims_by_device",
        "templates_by_key",
        "pods_by_key",
        "pods_by_uid",
        "pods_by_node",
        "pods_by_name",
        "pods_by_namespace",
        "claim_refs_by_namespace",
        "classes_by_name",
        "nodes_by_name",
        "slices_by_driver",
        "slices_by_node",
        "slices_by_pool",
        "events_by_object",
        "events_by_uid",
        "events_by_mention",
        "logs_by_pod",
        "deployments_by_claim_uid",
        "built",
    )

    claims_by_key: dict[tuple[str, str], K8sObject]
    claims_by_uid: dict[str, K8sObject]
    claims_by_device: dict[DeviceRef, list[K8sObject]]
    templates_by_key: dict[tuple[str, str], K8sObject]
    pods_by_key: dict[tuple[str, str], K8sObject]
    pods_by_uid: dict[str, K8sObject]
    pods_by_node: dict[str, list[K8sObject]]
    pods_by_name: dict[str, list[K8sObject]]
    pods_by_namespace: dict[str, list[K8sObject]]
    claim_refs_by_namespace: dict[str, dict[str, set[tuple[str, str]]]]
    classes_by_name: dict[str, K8sObject]
    nodes_by_name: dict[str, K8sObject]
    slices_by_driver: dict[str, list[K8sObject]]
    slices_by_node: dict[str, list[K8sObject]]
    slices_by_pool: dict[tuple[str, str], list[K8sObject]]
    events_by_object: dict[tuple[str, str, str], list[K8sObject]]
    events_by_uid: dict[str, list[K8sObject]]
    events_by_mention: dict[str, list[K8sObject]]
    logs_by_pod: dict[tuple[str, str], list[ContainerLog]]
    deployments_by_claim_uid: dict[str, list[K8sObject]]

    def __init__(self) -> None:
        self.built: set[str] = set()


_GROUP_KINDS: dict[str, tuple[Kind, ...]] = {
    "claims": (Kind.RESOURCE_CLAIM,),
    "devices": (Kind.RESOURCE_CLAIM,),
    "templates": (Kind.RESOURCE_CLAIM_TEMPLATE,),
    "pods": (Kind.POD,),
    "cluster": (Kind.DEVICE_CLASS, Kind.NODE),
    "slices": (Kind.RESOURCE_SLICE,),
    "events": (Kind.EVENT,),
    "mentions": (Kind.EVENT,),
    "logs": (),
    "deployments": (Kind.DEPLOYMENT,),
}
"""The kinds each index group is built from."""

ObjectsOf = Callable[[Kind], Sequence[K8sObject]]
"""What an index builder reads: the objects of a kind (all, or a look-up's candidates)."""


@dataclass(slots=True)
class _Pending:
    """A deferred store, where its objects stand among the kind's others, what is decoded."""

    position: int
    """How many of the kind's directly given objects come before this store's."""
    store: DeferredObjects
    decoded: dict[int, K8sObject] = field(default_factory=dict)
    originals: dict[int, K8sObject] = field(default_factory=dict)
    """The items as read, of those decoded items that normalization changed."""


class Snapshot:
    """Normalized objects of every kind, their indexes, and what was (not) collected.

    Build one with :func:`Snapshot.build` (or ``sources.manifests.load_snapshot``); treat
    it as immutable afterwards: analyses share it and cache on it.

    Objects of a kind may arrive undecoded (``deferred``, :class:`DeferredObjects`).
    Look-ups by a name, UID or node then build their index over the items that can hold
    that string only (:meth:`_index`); the kind's attribute (``snapshot.pods``) decodes
    the rest. Either way an item is decoded and normalized once, so the same object is
    returned whichever way it is reached.
    """

    __slots__ = (
        "logs",
        "coverage",
        "_errors",
        "_problems",
        "_skipped",
        "_first_skip",
        "_shape_errors",
        "source",
        "raw",
        "extras",
        "_objects",
        "_deferred",
        "_scoped",
        "_ix",
    )

    def __init__(
        self,
        *,
        objects: Mapping[Kind, Iterable[K8sObject]],
        logs: Iterable[ContainerLog] = (),
        coverage: Mapping[Kind, KindRecord] | None = None,
        errors: Iterable[CollectionError] = (),
        source: SourceInfo | None = None,
        raw: Mapping[tuple[str, str, str], K8sObject] | None = None,
        extras: Mapping[str, Any] | None = None,
        deferred: Iterable[tuple[int, DeferredObjects]] = (),
        problems: Iterable[ShapeProblem] = (),
    ) -> None:
        self._objects: dict[Kind, tuple[K8sObject, ...]] = {
            kind: tuple(objects.get(kind, ())) for kind in Kind if kind is not Kind.LOG
        }
        self._deferred: dict[Kind, list[_Pending]] = {}
        for position, store in deferred:
            if len(store):
                self._deferred.setdefault(store.kind, []).append(_Pending(position, store))
        for pending in self._deferred.values():
            pending.sort(key=lambda p: p.position)
        self._scoped: dict[tuple[str, str], _Indexes] = {}
        self.logs: tuple[ContainerLog, ...] = tuple(logs)
        self._errors: list[CollectionError] = list(errors)
        self._problems: list[ShapeProblem] = []
        self._skipped: dict[Kind, int] = {}
        self._shape_errors: dict[Kind, int] = {}
        self._first_skip: dict[Kind, ShapeProblem] = {}
        self.source: SourceInfo = source or SourceInfo()
        self.raw: dict[tuple[str, str, str], K8sObject] = dict(raw or {})
        """Objects as read, before normalization, by (kind, namespace, name), for those
        normalization changed; an object already in the v1 shape is its own raw form
        (see :meth:`raw_object`)."""
        self.extras: Mapping[str, Any] = dict(extras or {})
        """Node-local state (CDI specs, checkpoint, NVML) when a node probe added it."""
        cov = dict(coverage or {})
        for kind in Kind:
            cov.setdefault(
                kind, KindRecord(kind=kind, coverage=Coverage.UNKNOWN, reason="not collected")
            )
        self.coverage: Mapping[Kind, KindRecord] = cov
        self._ix = _Indexes()
        self.record_problems(problems)

    # -- what the shape check dropped ------------------------------------------------

    @property
    def errors(self) -> tuple[CollectionError, ...]:
        """Failed reads, and the objects and fields the shape check dropped."""
        return tuple(self._errors)

    @property
    def shape_problems(self) -> tuple[ShapeProblem, ...]:
        """Every field of the wrong shape found so far (deferred objects as decoded)."""
        return tuple(self._problems)

    def record_problems(self, problems: Iterable[ShapeProblem]) -> None:
        """Enter shape problems: a collection error each (the document's
        ``collection.errors``), and a kind with a skipped object no longer counts as
        read in full, so what needed it is ``unknown``, never ``ok`` (DESIGN §8)."""
        from dradiag.snapshot.shape_check import skipped_reason

        cov = self.coverage
        assert isinstance(cov, dict)
        for problem in problems:
            self._problems.append(problem)
            self._record_error(problem)
            if len(self._problems) <= _SHAPE_WARNINGS:
                _logger.warning("%s", problem.describe())
            elif len(self._problems) == _SHAPE_WARNINGS + 1:
                _logger.warning(
                    "more malformed fields; the rest are listed in -o json's collection.errors"
                )
            if problem.skipped:
                skipped = self._skipped[problem.kind] = self._skipped.get(problem.kind, 0) + 1
                first = self._first_skip.setdefault(problem.kind, problem)
                cov[problem.kind] = KindRecord(
                    kind=problem.kind,
                    coverage=Coverage.UNKNOWN,
                    reason=skipped_reason(first, skipped),
                    scope=cov[problem.kind].scope,
                )

    def _record_error(self, problem: ShapeProblem) -> None:
        """One collection error per problem, up to :data:`_SHAPE_ERRORS` per kind; then
        one entry per kind counts the rest (a file of 200,000 junk events stays
        readable as a document)."""
        from dradiag.snapshot.shape_check import as_collection_error

        seen = self._shape_errors[problem.kind] = self._shape_errors.get(problem.kind, 0) + 1
        if seen <= _SHAPE_ERRORS:
            self._errors.append(as_collection_error(problem))
            return
        more = as_collection_error(problem)
        summary = CollectionError(
            resource=more.resource,
            verb=more.verb,
            reason=f"malformed: {seen - _SHAPE_ERRORS} more field(s) or object(s) not listed",
        )
        if seen == _SHAPE_ERRORS + 1:
            self._errors.append(summary)
        else:
            at = next(
                i
                for i, e in enumerate(self._errors)
                if e.resource == summary.resource
                and e.reason.startswith("malformed: ")
                and e.reason.endswith("not listed")
            )
            self._errors[at] = summary

    # -- objects by kind (deferred stores decoded on first use) ---------------------

    @property
    def slices(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.RESOURCE_SLICE)

    @property
    def device_classes(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.DEVICE_CLASS)

    @property
    def taint_rules(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.DEVICE_TAINT_RULE)

    @property
    def claims(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.RESOURCE_CLAIM)

    @property
    def claim_templates(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.RESOURCE_CLAIM_TEMPLATE)

    @property
    def pods(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.POD)

    @property
    def nodes(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.NODE)

    @property
    def deployments(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.DEPLOYMENT)

    @property
    def events(self) -> tuple[K8sObject, ...]:
        return self._all(Kind.EVENT)

    @property
    def undecoded(self) -> dict[Kind, tuple[int, int]]:
        """Kinds with deferred objects not all decoded yet: (decoded, deferred) counts."""
        return {
            kind: (sum(len(p.decoded) for p in pending), sum(len(p.store) for p in pending))
            for kind, pending in self._deferred.items()
        }

    def _all(self, kind: Kind) -> tuple[K8sObject, ...]:
        pending = self._deferred.pop(kind, None)
        if pending:
            with paused_gc():
                self._objects[kind] = self._merged(kind, pending)
        return self._objects[kind]

    def _merged(self, kind: Kind, pending: list[_Pending]) -> tuple[K8sObject, ...]:
        """The kind's given objects with every deferred store decoded in its place."""
        given = self._objects[kind]
        merged: list[K8sObject] = []
        at = 0
        for p in pending:
            merged += given[at : p.position]
            at = p.position
            decoded = p.decoded
            where = getattr(p.store, "path", None)
            for i, obj in enumerate(p.store.decode_all()):
                # An item decoded before is that object still, whoever holds it.
                found = (
                    self._decoded(kind, p, i)
                    if i in decoded
                    else self._normalized(kind, obj, where)
                )
                if found is not None:
                    merged.append(found)
        merged += given[at:]
        return tuple(merged)

    def _decoded(self, kind: Kind, p: _Pending, index: int) -> K8sObject | None:
        """Item ``index`` of a deferred store, decoded, checked and normalized once;
        None when the shape check skipped it.

        Its original is (re)entered in :attr:`raw` on every call: callers go through
        items in input order, so of duplicates the last one's stays, as in a full load.
        """
        obj = p.decoded.get(index)
        if obj is None:
            read = p.store.decode(index)
            found = self._normalized(kind, read, getattr(p.store, "path", None))
            obj = p.decoded[index] = _SKIPPED if found is None else found
            if obj is not read and found is not None:
                p.originals[index] = read
        elif (original := p.originals.get(index)) is not None:
            self.raw[(kind.value, namespace_of(original), name_of(original))] = original
        return None if obj is _SKIPPED else obj

    def _normalized(
        self, kind: Kind, obj: dict[str, Any], where: str | None = None
    ) -> K8sObject | None:
        """A deferred item as the Snapshot holds it: shape-checked (None: skipped), then
        normalized; the item as read is kept in :attr:`raw` when either changed it."""
        from dradiag.snapshot.normalize import normalize
        from dradiag.snapshot.shape_check import check_object

        checked = check_object(kind, obj, where)
        if checked.problems:
            self.record_problems(checked.problems)
        if checked.obj is None:
            return None
        out = normalize(kind, checked.obj)
        if out is not obj:
            self.raw[(kind.value, namespace_of(obj), name_of(obj))] = obj
        return out

    def _candidates(self, kind: Kind, value: str, *, within: bool = False) -> Sequence[K8sObject]:
        """The kind's objects that may hold the string ``value`` (a superset), in order."""
        pending = self._deferred.get(kind)
        if not pending:
            return self._objects[kind]
        given = self._objects[kind]
        out: list[K8sObject] = []
        at = 0
        for p in pending:
            indexes = p.store.candidates(value, within=within)
            if indexes is None:
                return self._all(kind)
            out += given[at : p.position]
            at = p.position
            with paused_gc():
                for i in indexes:
                    found = self._decoded(kind, p, i)
                    if found is not None:
                        out.append(found)
        out += given[at:]
        return out

    # -- construction -------------------------------------------------------------

    def _need(self, group: str) -> _Indexes:
        """The index tables, with ``group`` built (once) over every object."""
        ix = self._ix
        if group not in ix.built:
            getattr(self, f"_build_{group}")(ix, self._all)
            ix.built.add(group)
        return ix

    def _index(self, group: str, value: str) -> _Indexes:
        """Tables of ``group`` that answer every look-up *by* ``value`` exactly.

        While a kind of the group is still deferred, they are built over the objects
        that may hold ``value`` only: each table maps an object's own key to it (in
        input order), so restricted to a superset of the objects with that key, it gives
        the answer the whole table would. Built once per (group, value).
        """
        if group in self._ix.built or not any(k in self._deferred for k in _GROUP_KINDS[group]):
            return self._need(group)
        key = (group, value)
        ix = self._scoped.get(key)
        if ix is None:
            kinds = _GROUP_KINDS[group]
            chosen = {kind: self._candidates(kind, value) for kind in kinds}
            if not any(k in self._deferred for k in kinds):
                return self._need(group)  # the candidates were most of it: all is decoded
            ix = self._scoped[key] = _Indexes()
            getattr(self, f"_build_{group}")(ix, chosen.__getitem__)
        return ix

    def _build_claims(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.claims_by_key = {}
        ix.claims_by_uid = {}
        for claim in of(Kind.RESOURCE_CLAIM):
            ns, name, uid = _identity(claim)
            ix.claims_by_key[(ns, name)] = claim
            if uid:
                ix.claims_by_uid[uid] = claim

    def _build_devices(self, ix: _Indexes, of: ObjectsOf) -> None:
        by_device: dict[DeviceRef, list[K8sObject]] = defaultdict(list)
        for claim in of(Kind.RESOURCE_CLAIM):
            for result in allocated_devices(claim):
                ref = (
                    str(result.get("driver") or ""),
                    str(result.get("pool") or ""),
                    str(result.get("device") or ""),
                )
                by_device[ref].append(claim)
        ix.claims_by_device = by_device

    def _build_templates(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.templates_by_key = {
            (namespace_of(t), name_of(t)): t for t in of(Kind.RESOURCE_CLAIM_TEMPLATE)
        }

    def _build_pods(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.pods_by_key = {}
        ix.pods_by_uid = {}
        ix.pods_by_node = defaultdict(list)
        ix.pods_by_name = defaultdict(list)
        ix.pods_by_namespace = defaultdict(list)
        ix.claim_refs_by_namespace = {}
        for pod in of(Kind.POD):
            ns, name, uid = _identity(pod)
            ix.pods_by_key[(ns, name)] = pod
            ix.pods_by_name[name].append(pod)
            ix.pods_by_namespace[ns].append(pod)
            if uid:
                ix.pods_by_uid[uid] = pod
            spec = pod.get("spec")
            if spec and (node := spec.get("nodeName")):
                ix.pods_by_node[str(node)].append(pod)

    def _build_cluster(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.classes_by_name = {name_of(c): c for c in of(Kind.DEVICE_CLASS)}
        ix.nodes_by_name = {name_of(n): n for n in of(Kind.NODE)}

    def _build_slices(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.slices_by_driver = defaultdict(list)
        ix.slices_by_node = defaultdict(list)
        ix.slices_by_pool = defaultdict(list)
        for sl in of(Kind.RESOURCE_SLICE):
            spec = sl.get("spec") or {}
            driver = str(spec.get("driver") or "")
            ix.slices_by_driver[driver].append(sl)
            if spec.get("nodeName"):
                ix.slices_by_node[str(spec["nodeName"])].append(sl)
            pool = (spec.get("pool") or {}).get("name")
            ix.slices_by_pool[(driver, str(pool or ""))].append(sl)

    def _build_events(self, ix: _Indexes, of: ObjectsOf) -> None:
        by_object: dict[tuple[str, str, str], list[K8sObject]] = defaultdict(list)
        by_uid: dict[str, list[K8sObject]] = defaultdict(list)
        for ev in of(Kind.EVENT):
            io = ev.get("involvedObject")
            if not io:
                by_object[("", "", "")].append(ev)
                continue
            by_object[
                (io.get("kind") or "", io.get("namespace") or "", io.get("name") or "")
            ].append(ev)
            if uid := io.get("uid"):
                by_uid[uid].append(ev)
        ix.events_by_object = by_object
        ix.events_by_uid = by_uid

    def _build_mentions(self, ix: _Indexes, of: ObjectsOf) -> None:
        by_token: dict[str, list[K8sObject]] = defaultdict(list)
        for ev in of(Kind.EVENT):
            message = ev.get("message")
            if not isinstance(message, str):
                continue
            for token in dict.fromkeys(mentioned_names(message)):
                by_token[token].append(ev)
        ix.events_by_mention = by_token

    def _build_deployments(self, ix: _Indexes, of: ObjectsOf) -> None:
        by_uid: dict[str, list[K8sObject]] = defaultdict(list)
        for deployment in of(Kind.DEPLOYMENT):
            for uid in dict.fromkeys(_UID_IN_NAME.findall(name_of(deployment))):
                by_uid[uid].append(deployment)
        ix.deployments_by_claim_uid = by_uid

    def _build_logs(self, ix: _Indexes, of: ObjectsOf) -> None:
        ix.logs_by_pod = defaultdict(list)
        for log in self.logs:
            ns = log.namespace or ""
            if log.namespace is None:
                # `<pod>_<container>.log` carries no namespace: take the pod's if unique.
                candidates = self._index("pods", log.pod).pods_by_name.get(log.pod, [])
                ns = namespace_of(candidates[0]) if len(candidates) == 1 else ""
            ix.logs_by_pod[(ns, log.pod)].append(log)

    # -- look-ups -----------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> K8sObject | None:
        """The claim ``namespace/name``, or None."""
        return self._index("claims", name).claims_by_key.get((namespace, name))

    def claim_by_uid(self, uid: str) -> K8sObject | None:
        """The claim with this UID, or None."""
        return self._index("claims", uid).claims_by_uid.get(uid)

    def claim_template(self, namespace: str, name: str) -> K8sObject | None:
        """The ResourceClaimTemplate ``namespace/name``, or None."""
        return self._index("templates", name).templates_by_key.get((namespace, name))

    def pod(self, namespace: str, name: str) -> K8sObject | None:
        """The pod ``namespace/name``, or None."""
        return self._index("pods", name).pods_by_key.get((namespace, name))

    def pod_by_uid(self, uid: str) -> K8sObject | None:
        """The pod with this UID, or None."""
        return self._index("pods", uid).pods_by_uid.get(uid)

    def pods_on_node(self, node: str) -> list[K8sObject]:
        """Pods bound to ``node`` (``spec.nodeName``)."""
        return list(self._index("pods", node).pods_by_node.get(node, ()))

    def pods_for_claim(self, claim: K8sObject) -> list[K8sObject]:
        """Pods that use the claim: by spec, by status, by reservation or as its owner.

        Pods name a claim in ``spec.resourceClaims`` or, when it was generated from a
        template, in ``status.resourceClaimStatuses``; the claim names them in
        ``status.reservedFor`` and, when generated, in its owner reference
        (k8s-dra-semantics §6). Computed per call from the pods of the claim's
        namespace, once per namespace: a whole-cluster table would cost a ``claim``
        run more than its diagnosis.
        """
        ns, name = namespace_of(claim), name_of(claim)
        keys = set(self._claim_references_in(self._index("pods", name), ns).get(name, ()))
        uids = [
            str(r.get("uid") or "")
            for r in (claim.get("status") or {}).get("reservedFor") or []
            if isinstance(r, Mapping) and (r.get("resource") or "pods") == "pods"
        ]
        uids += [
            str(o.get("uid") or "")
            for o in _meta(claim).get("ownerReferences") or []
            if isinstance(o, Mapping) and o.get("kind") == "Pod"
        ]
        for uid in uids:
            owner = self.pod_by_uid(uid) if uid else None
            if owner is not None:
                keys.add((namespace_of(owner), name_of(owner)))
        return [found for k in sorted(keys) if (found := self.pod(*k)) is not None]

    @staticmethod
    def _claim_references_in(ix: _Indexes, namespace: str) -> dict[str, set[tuple[str, str]]]:
        """Claim name → pods of ``namespace`` naming it (spec or status), once per namespace."""
        cached = ix.claim_refs_by_namespace.get(namespace)
        if cached is not None:
            return cached
        refs: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for pod in ix.pods_by_namespace.get(namespace, ()):
            key = (namespace, name_of(pod))
            for _, claim_name, _tpl in pod_claim_references(pod):
                if claim_name:
                    refs[str(claim_name)].add(key)
            for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
                if isinstance(st, Mapping) and st.get("resourceClaimName"):
                    refs[str(st["resourceClaimName"])].add(key)
            # DRAExtendedResource: the claim generated for extended-resource requests.
            ext = (pod.get("status") or {}).get("extendedResourceClaimStatus")
            if isinstance(ext, Mapping) and ext.get("resourceClaimName"):
                refs[str(ext["resourceClaimName"])].add(key)
        ix.claim_refs_by_namespace[namespace] = refs
        return refs

    def mentioning(self, kind: Kind, value: str) -> Sequence[K8sObject]:
        """Objects of ``kind`` that may hold the string ``value`` anywhere, in input order.

        A superset: the caller keeps those that do where it looks. It decodes only those
        of a deferred kind, where a look-up by a field no index covers would otherwise
        decode every object (a claim's owner, found by the pod's UID).
        """
        return self._candidates(kind, value) if kind is not Kind.LOG else ()

    def device_class(self, name: str) -> K8sObject | None:
        """The DeviceClass ``name``, or None."""
        return self._index("cluster", name).classes_by_name.get(name)

    def node(self, name: str) -> K8sObject | None:
        """The Node ``name``, or None."""
        return self._index("cluster", name).nodes_by_name.get(name)

    def node_names(self, *, slice_nodes: Iterable[str] | None = None) -> list[str]:
        """Every node named by a Node object, a node-local slice or a bound pod, sorted.

        ``slice_nodes``: the ``spec.nodeName`` of every slice, when the caller has read
        them already (a fleet's slice indexes then need not be built for this alone).
        """
        if slice_nodes is None:
            slice_nodes = self._need("slices").slices_by_node
        names = set(self._need("cluster").nodes_by_name) | set(slice_nodes)
        names |= {str(node) for node in self._bound_nodes() if node}
        return sorted(n for n in names if n)

    def _bound_nodes(self) -> Iterable[Any]:
        """``spec.nodeName`` of every pod (normalization leaves it as read), decoding no
        deferred pod when its store can read the field alone."""
        if Kind.POD not in self._deferred:
            return self._need("pods").pods_by_node
        found: list[Any] = [(p.get("spec") or {}).get("nodeName") for p in self._objects[Kind.POD]]
        for pending in self._deferred[Kind.POD]:
            values = pending.store.field_values(("spec", "nodeName"))
            if values is None:
                return self._need("pods").pods_by_node
            found += values
        return found

    def slices_for(self, *, driver: str | None = None, node: str | None = None) -> list[K8sObject]:
        """Slices filtered by driver and/or ``spec.nodeName`` (node-local slices only)."""
        if node is not None:
            found: Iterable[K8sObject] = self._index("slices", node).slices_by_node.get(node, ())
            if driver is not None:
                found = (s for s in found if (s.get("spec") or {}).get("driver") == driver)
            return list(found)
        if driver is not None:
            return list(self._index("slices", driver).slices_by_driver.get(driver, ()))
        return list(self.slices)

    def pool_slices(self, driver: str, pool: str) -> list[K8sObject]:
        """Every slice of one pool, all generations."""
        return list(self._index("slices", pool).slices_by_pool.get((driver, pool), ()))

    def pools(self) -> list[tuple[str, str]]:
        """(driver, pool name) of every pool, sorted."""
        return sorted(self._need("slices").slices_by_pool)

    def drivers(self) -> list[str]:
        """Driver names that publish at least one slice, sorted."""
        return sorted(d for d in self._need("slices").slices_by_driver if d)

    def events_for(
        self, kind: str, namespace: str, name: str, uid: str | None = None
    ) -> list[K8sObject]:
        """Events whose involvedObject is this object, oldest first.

        Matches by kind/namespace/name and, when given, by UID as well, so events of a
        deleted and recreated object with the same name are told apart where possible.
        """
        by_name = self._index("events", name).events_by_object
        found = list(by_name.get((kind, namespace, name), ()))
        if uid:
            found = [
                e for e in found if (e.get("involvedObject") or {}).get("uid") in (None, "", uid)
            ]
            seen = {id(e) for e in found}
            found += [
                e
                for e in self._index("events", uid).events_by_uid.get(uid, ())
                if id(e) not in seen
            ]
        return sorted(found, key=event_time)

    def events_mentioning(self, name: str) -> list[K8sObject]:
        """Events whose message names ``name`` (a UID, ``ns/name`` or a quoted or
        claim-labelled name; see :func:`mentioned_names`), oldest first.

        The kubelet's prepare errors and the scheduler's messages name a claim in the
        text of an event about its pod; the claim is tied to them by this. Deferred
        events are narrowed by a substring search, so a ``claim`` run decodes only the
        events that can hold the name.
        """
        if not name:
            return []
        if Kind.EVENT in self._deferred and "mentions" not in self._ix.built:
            # One substring search per needle: ``ns/name`` and ``name`` share theirs.
            needle = name.rsplit("/", 1)[-1]
            key = ("mentions", needle)
            ix = self._scoped.get(key)
            if ix is None:
                chosen = self._candidates(Kind.EVENT, needle, within=True)
                if Kind.EVENT not in self._deferred:
                    ix = self._need("mentions")
                else:
                    ix = self._scoped[key] = _Indexes()
                    self._build_mentions(ix, lambda _kind: chosen)
        else:
            ix = self._need("mentions")
        return sorted(ix.events_by_mention.get(name, ()), key=event_time)

    def claims_reserving_device(self, driver: str, pool: str, device: str) -> list[K8sObject]:
        """Claims whose allocation includes the device (any request, adminAccess included)."""
        by_device = self._index("devices", pool).claims_by_device
        return list(by_device.get((driver, pool, device), ()))

    def deployments_for_claim(self, claim_uid: str) -> list[K8sObject]:
        """Deployments whose name carries ``claim_uid`` (the driver's per-claim workloads,
        e.g. ``mps-control-daemon-<claim UID>-<hash>``), in input order."""
        if not claim_uid:
            return []
        by_uid = self._index("deployments", claim_uid).deployments_by_claim_uid
        return list(by_uid.get(claim_uid.lower(), ()))

    def component_logs(self) -> list[ContainerLog]:
        """Logs of components given without a pod (kubelet, scheduler, plugin files)."""
        return [log for log in self.logs if log.component]

    def logs_for(
        self, namespace: str, pod: str, container: str | None = None
    ) -> list[ContainerLog]:
        """Captured logs of a pod (optionally one container), current before previous."""
        logs = self._need("logs").logs_by_pod.get((namespace, pod), [])
        if container is not None:
            logs = [lg for lg in logs if lg.container == container]
        return sorted(logs, key=lambda lg: (lg.container, lg.previous))

    def raw_object(self, kind: Kind, namespace: str, name: str) -> K8sObject | None:
        """The object as it was read (its original apiVersion and layout), or None."""
        if kind is Kind.LOG:
            return None
        # Decodes (and enters in `raw`, in input order) every deferred object of that name.
        objects = self._candidates(kind, name)
        found = self.raw.get((kind.value, namespace, name))
        if found is not None:
            return found
        return next(
            (o for o in objects if namespace_of(o) == namespace and name_of(o) == name), None
        )

    def coverage_of(self, kind: Kind) -> KindRecord:
        """How completely ``kind`` was read."""
        return self.coverage[kind]

    def is_collected(self, kind: Kind) -> bool:
        """True when emptiness of ``kind`` means none exist (collected or absent)."""
        return self.coverage[kind].coverage is not Coverage.UNKNOWN

    def objects(self) -> Iterator[tuple[Kind, K8sObject]]:
        """Every object with its kind (logs excluded), in a stable order."""
        for kind, objs in (
            (Kind.RESOURCE_SLICE, self.slices),
            (Kind.DEVICE_CLASS, self.device_classes),
            (Kind.DEVICE_TAINT_RULE, self.taint_rules),
            (Kind.RESOURCE_CLAIM, self.claims),
            (Kind.RESOURCE_CLAIM_TEMPLATE, self.claim_templates),
            (Kind.POD, self.pods),
            (Kind.NODE, self.nodes),
            (Kind.EVENT, self.events),
            (Kind.DEPLOYMENT, self.deployments),
        ):
            for obj in objs:
                yield kind, obj

    @property
    def partial(self) -> bool:
        """True when a read failed or a kind was not collected."""
        return bool(self.errors)


_MENTION = re.compile(
    r"(?P<uid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"|(?P<key>\b[a-z0-9][a-z0-9-]{0,62}/[a-z0-9][a-z0-9.-]{0,252}[a-z0-9]\b)"
    r"|(?:[Cc]laims?|ResourceClaim)[\s:=]+[\"'`]?"
    r"(?P<labelled>[a-z0-9][a-z0-9.-]*[a-z0-9](?:/[a-z0-9][a-z0-9.-]*[a-z0-9])?)"
    r"|[\"'`](?P<quoted>[a-z0-9][a-z0-9.-]*[a-z0-9])[\"'`]"
)
"""What a message can name an object by: a UID, ``ns/name``, a name after "claim", or a
quoted name. The kubelet writes ``claim ns/name`` or the UID; the scheduler quotes names."""


_UID_IN_NAME = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""A UID inside an object name: how the driver names a claim's per-claim Deployment."""


def mentioned_names(text: str) -> Iterator[str]:
    """Every UID, ``ns/name`` and labelled or quoted name ``text`` mentions."""
    for m in _MENTION.finditer(text):
        for group in ("uid", "key", "labelled", "quoted"):
            value = m.group(group)
            if value:
                yield value
                if "/" in value:
                    yield value.rsplit("/", 1)[1]
                break


def event_time(event: K8sObject) -> str:
    """The latest timestamp an Event carries, as an RFC 3339 string (sortable)."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if value:
            return str(value)
    return str(_meta(event).get("creationTimestamp") or "")
