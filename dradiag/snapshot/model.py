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

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

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
    served_versions: tuple[str, ...] = ()
    """resource.k8s.io versions the server serves, newest first, when known."""


DeviceRef = tuple[str, str, str]
"""(driver, pool, slice device name): how an allocation result names a device."""


def _meta(obj: K8sObject) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def name_of(obj: K8sObject) -> str:
    """``metadata.name`` or ``""``."""
    return str(_meta(obj).get("name") or "")


def namespace_of(obj: K8sObject) -> str:
    """``metadata.namespace`` or ``""`` (cluster-scoped)."""
    return str(_meta(obj).get("namespace") or "")


def uid_of(obj: K8sObject) -> str:
    """``metadata.uid`` or ``""``."""
    return str(_meta(obj).get("uid") or "")


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


@dataclass(slots=True)
class _Indexes:
    claims_by_key: dict[tuple[str, str], K8sObject] = field(default_factory=dict)
    claims_by_uid: dict[str, K8sObject] = field(default_factory=dict)
    templates_by_key: dict[tuple[str, str], K8sObject] = field(default_factory=dict)
    pods_by_key: dict[tuple[str, str], K8sObject] = field(default_factory=dict)
    pods_by_uid: dict[str, K8sObject] = field(default_factory=dict)
    pods_by_node: dict[str, list[K8sObject]] = field(default_factory=lambda: defaultdict(list))
    pods_by_name: dict[str, list[K8sObject]] = field(default_factory=lambda: defaultdict(list))
    pod_keys_by_claim: dict[tuple[str, str], set[tuple[str, str]]] = field(
        default_factory=lambda: defaultdict(set)
    )
    classes_by_name: dict[str, K8sObject] = field(default_factory=dict)
    nodes_by_name: dict[str, K8sObject] = field(default_factory=dict)
    slices_by_driver: dict[str, list[K8sObject]] = field(default_factory=lambda: defaultdict(list))
    slices_by_node: dict[str, list[K8sObject]] = field(default_factory=lambda: defaultdict(list))
    slices_by_pool: dict[tuple[str, str], list[K8sObject]] = field(
        default_factory=lambda: defaultdict(list)
    )
    events_by_object: dict[tuple[str, str, str], list[K8sObject]] = field(
        default_factory=lambda: defaultdict(list)
    )
    events_by_uid: dict[str, list[K8sObject]] = field(default_factory=lambda: defaultdict(list))
    claims_by_device: dict[DeviceRef, list[K8sObject]] = field(
        default_factory=lambda: defaultdict(list)
    )
    logs_by_pod: dict[tuple[str, str], list[ContainerLog]] = field(
        default_factory=lambda: defaultdict(list)
    )


class Snapshot:
    """Normalized objects of every kind, their indexes, and what was (not) collected.

    Build one with :func:`Snapshot.build` (or ``sources.manifests.load_snapshot``); treat
    it as immutable afterwards: analyses share it and cache on it.
    """

    __slots__ = (
        "slices",
        "device_classes",
        "taint_rules",
        "claims",
        "claim_templates",
        "pods",
        "nodes",
        "events",
        "logs",
        "coverage",
        "errors",
        "source",
        "raw",
        "extras",
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
    ) -> None:
        self.slices: tuple[K8sObject, ...] = tuple(objects.get(Kind.RESOURCE_SLICE, ()))
        self.device_classes: tuple[K8sObject, ...] = tuple(objects.get(Kind.DEVICE_CLASS, ()))
        self.taint_rules: tuple[K8sObject, ...] = tuple(objects.get(Kind.DEVICE_TAINT_RULE, ()))
        self.claims: tuple[K8sObject, ...] = tuple(objects.get(Kind.RESOURCE_CLAIM, ()))
        self.claim_templates: tuple[K8sObject, ...] = tuple(
            objects.get(Kind.RESOURCE_CLAIM_TEMPLATE, ())
        )
        self.pods: tuple[K8sObject, ...] = tuple(objects.get(Kind.POD, ()))
        self.nodes: tuple[K8sObject, ...] = tuple(objects.get(Kind.NODE, ()))
        self.events: tuple[K8sObject, ...] = tuple(objects.get(Kind.EVENT, ()))
        self.logs: tuple[ContainerLog, ...] = tuple(logs)
        self.errors: tuple[CollectionError, ...] = tuple(errors)
        self.source: SourceInfo = source or SourceInfo()
        self.raw: Mapping[tuple[str, str, str], K8sObject] = dict(raw or {})
        """Objects as read, before normalization, by (kind, namespace, name)."""
        self.extras: Mapping[str, Any] = dict(extras or {})
        """Node-local state (CDI specs, checkpoint, NVML) when a node probe added it."""
        cov = dict(coverage or {})
        for kind in Kind:
            cov.setdefault(
                kind, KindRecord(kind=kind, coverage=Coverage.UNKNOWN, reason="not collected")
            )
        self.coverage: Mapping[Kind, KindRecord] = cov
        self._ix = self._index()

    # -- construction -------------------------------------------------------------

    def _index(self) -> _Indexes:
        ix = _Indexes()
        for claim in self.claims:
            ns, name = namespace_of(claim), name_of(claim)
            ix.claims_by_key[(ns, name)] = claim
            if uid := uid_of(claim):
                ix.claims_by_uid[uid] = claim
            for result in allocated_devices(claim):
                ref = (
                    str(result.get("driver") or ""),
                    str(result.get("pool") or ""),
                    str(result.get("device") or ""),
                )
                ix.claims_by_device[ref].append(claim)
        for tpl in self.claim_templates:
            ix.templates_by_key[(namespace_of(tpl), name_of(tpl))] = tpl
        for pod in self.pods:
            ns, name = namespace_of(pod), name_of(pod)
            ix.pods_by_key[(ns, name)] = pod
            ix.pods_by_name[name].append(pod)
            if uid := uid_of(pod):
                ix.pods_by_uid[uid] = pod
            if node := (pod.get("spec") or {}).get("nodeName"):
                ix.pods_by_node[str(node)].append(pod)
            for _, claim_name, _tpl in pod_claim_references(pod):
                if claim_name:
                    ix.pod_keys_by_claim[(ns, str(claim_name))].add((ns, name))
            for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
                if isinstance(st, Mapping) and st.get("resourceClaimName"):
                    ix.pod_keys_by_claim[(ns, str(st["resourceClaimName"]))].add((ns, name))
        # Claims name their pods too: reservedFor (uid) and the owner reference a
        # template-generated claim carries (k8s-dra-semantics §6).
        for claim in self.claims:
            ckey = (namespace_of(claim), name_of(claim))
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
                owner = ix.pods_by_uid.get(uid)
                if owner is not None:
                    ix.pod_keys_by_claim[ckey].add((namespace_of(owner), name_of(owner)))
        for cls in self.device_classes:
            ix.classes_by_name[name_of(cls)] = cls
        for node in self.nodes:
            ix.nodes_by_name[name_of(node)] = node
        for sl in self.slices:
            spec = sl.get("spec") or {}
            driver = str(spec.get("driver") or "")
            ix.slices_by_driver[driver].append(sl)
            if spec.get("nodeName"):
                ix.slices_by_node[str(spec["nodeName"])].append(sl)
            pool = (spec.get("pool") or {}).get("name")
            ix.slices_by_pool[(driver, str(pool or ""))].append(sl)
        for ev in self.events:
            io = ev.get("involvedObject") or {}
            ix.events_by_object[
                (
                    str(io.get("kind") or ""),
                    str(io.get("namespace") or ""),
                    str(io.get("name") or ""),
                )
            ].append(ev)
            if io.get("uid"):
                ix.events_by_uid[str(io["uid"])].append(ev)
        for log in self.logs:
            ns = log.namespace or ""
            if log.namespace is None:
                # `<pod>_<container>.log` carries no namespace: take the pod's if unique.
                candidates = ix.pods_by_name.get(log.pod, [])
                ns = namespace_of(candidates[0]) if len(candidates) == 1 else ""
            ix.logs_by_pod[(ns, log.pod)].append(log)
        return ix

    # -- look-ups -----------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> K8sObject | None:
        """The claim ``namespace/name``, or None."""
        return self._ix.claims_by_key.get((namespace, name))

    def claim_by_uid(self, uid: str) -> K8sObject | None:
        """The claim with this UID, or None."""
        return self._ix.claims_by_uid.get(uid)

    def claim_template(self, namespace: str, name: str) -> K8sObject | None:
        """The ResourceClaimTemplate ``namespace/name``, or None."""
        return self._ix.templates_by_key.get((namespace, name))

    def pod(self, namespace: str, name: str) -> K8sObject | None:
        """The pod ``namespace/name``, or None."""
        return self._ix.pods_by_key.get((namespace, name))

    def pod_by_uid(self, uid: str) -> K8sObject | None:
        """The pod with this UID, or None."""
        return self._ix.pods_by_uid.get(uid)

    def pods_on_node(self, node: str) -> list[K8sObject]:
        """Pods bound to ``node`` (``spec.nodeName``)."""
        return list(self._ix.pods_by_node.get(node, ()))

    def pods_for_claim(self, claim: K8sObject) -> list[K8sObject]:
        """Pods that use the claim: by spec, by status, by reservation or as its owner."""
        keys = self._ix.pod_keys_by_claim.get((namespace_of(claim), name_of(claim)), set())
        return [self._ix.pods_by_key[k] for k in sorted(keys)]

    def device_class(self, name: str) -> K8sObject | None:
        """The DeviceClass ``name``, or None."""
        return self._ix.classes_by_name.get(name)

    def node(self, name: str) -> K8sObject | None:
        """The Node ``name``, or None."""
        return self._ix.nodes_by_name.get(name)

    def node_names(self) -> list[str]:
        """Every node named by a Node object, a node-local slice or a bound pod, sorted."""
        names = set(self._ix.nodes_by_name) | set(self._ix.slices_by_node)
        names |= set(self._ix.pods_by_node)
        return sorted(n for n in names if n)

    def slices_for(self, *, driver: str | None = None, node: str | None = None) -> list[K8sObject]:
        """Slices filtered by driver and/or ``spec.nodeName`` (node-local slices only)."""
        if node is not None:
            found: Iterable[K8sObject] = self._ix.slices_by_node.get(node, ())
            if driver is not None:
                found = (s for s in found if (s.get("spec") or {}).get("driver") == driver)
            return list(found)
        if driver is not None:
            return list(self._ix.slices_by_driver.get(driver, ()))
        return list(self.slices)

    def pool_slices(self, driver: str, pool: str) -> list[K8sObject]:
        """Every slice of one pool, all generations."""
        return list(self._ix.slices_by_pool.get((driver, pool), ()))

    def pools(self) -> list[tuple[str, str]]:
        """(driver, pool name) of every pool, sorted."""
        return sorted(self._ix.slices_by_pool)

    def drivers(self) -> list[str]:
        """Driver names that publish at least one slice, sorted."""
        return sorted(d for d in self._ix.slices_by_driver if d)

    def events_for(
        self, kind: str, namespace: str, name: str, uid: str | None = None
    ) -> list[K8sObject]:
        """Events whose involvedObject is this object, oldest first.

        Matches by kind/namespace/name and, when given, by UID as well, so events of a
        deleted and recreated object with the same name are told apart where possible.
        """
        found = list(self._ix.events_by_object.get((kind, namespace, name), ()))
        if uid:
            found = [
                e for e in found if (e.get("involvedObject") or {}).get("uid") in (None, "", uid)
            ]
            seen = {id(e) for e in found}
            found += [e for e in self._ix.events_by_uid.get(uid, ()) if id(e) not in seen]
        return sorted(found, key=event_time)

    def claims_reserving_device(self, driver: str, pool: str, device: str) -> list[K8sObject]:
        """Claims whose allocation includes the device (any request, adminAccess included)."""
        return list(self._ix.claims_by_device.get((driver, pool, device), ()))

    def allocated_device_refs(self) -> dict[DeviceRef, list[K8sObject]]:
        """Every allocated device and the claims holding it."""
        return {k: list(v) for k, v in self._ix.claims_by_device.items()}

    def logs_for(
        self, namespace: str, pod: str, container: str | None = None
    ) -> list[ContainerLog]:
        """Captured logs of a pod (optionally one container), current before previous."""
        logs = self._ix.logs_by_pod.get((namespace, pod), [])
        if container is not None:
            logs = [lg for lg in logs if lg.container == container]
        return sorted(logs, key=lambda lg: (lg.container, lg.previous))

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
        ):
            for obj in objs:
                yield kind, obj

    @property
    def partial(self) -> bool:
        """True when a read failed or a kind was not collected."""
        return bool(self.errors)


def event_time(event: K8sObject) -> str:
    """The latest timestamp an Event carries, as an RFC 3339 string (sortable)."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        value = event.get(key)
        if value:
            return str(value)
    return str(_meta(event).get("creationTimestamp") or "")
