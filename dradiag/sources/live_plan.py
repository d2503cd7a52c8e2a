"""The read plan of live collection: what to GET for a claim, a pod, or the whole cluster.

A targeted run (``claim``, ``pod``) reads what the claim's life touched and nothing else
(issue #7): the claim and its pods (reservations, owners, spec references), the events
of each, the DeviceClasses, the ResourceSlices of the nodes that matter (or of the
driver across nodes while the claim is unallocated, since selection and allocation then
range over every node), the claims holding devices (the allocator's in-use set, only
while allocation is still at stake), the driver's kubelet-plugin pods on those nodes and
their logs, and the Node objects. Reads run in dependent stages, each stage's reads in
parallel on a small pool.

A whole-cluster run (``scan``, ``inventory``, ``selector-check``, ``bundle``) pages
through every kind, keeping only what an analysis can use (pods that use claims or run
a kubelet plugin, events about claims, those pods and GPU nodes), so memory holds the
kept objects plus one page.

Every failed read becomes a ``CollectionError`` and turns its kind ``unknown`` (DESIGN
§8): a forbidden or timed-out read must never read as "none exist". The user gets one
warning line per missing permission, naming it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from dradiag.snapshot.driver_workloads import is_mps_daemon, mps_requests, other_driver_workload
from dradiag.snapshot.model import (
    CollectionError,
    ContainerLog,
    Coverage,
    K8sObject,
    Kind,
    KindRecord,
    Snapshot,
    SourceInfo,
    allocated_devices,
    allocation_nodes,
    name_of,
    namespace_of,
    pod_claim_references,
)
from dradiag.snapshot.normalize import RESOURCE_GROUP, normalize
from dradiag.snapshot.shape_check import ShapeProblem, check_object
from dradiag.sources.live_discovery import DRA_PLURALS, Discovery, plural_of, qualified_plural
from dradiag.sources.live_transport import ApiError, Reader

if TYPE_CHECKING:
    from dradiag.sources.progress import Progress

logger = logging.getLogger(__name__)

MAX_WORKERS = 6
"""Parallel reads at most: enough to hide latency, few enough not to load the server."""
MAX_PODS_PER_CLAIM = 16
LOG_TAIL_LINES = 5000
LOG_LIMIT_BYTES = 4 * 1024 * 1024
LOG_SINCE_MARGIN = timedelta(minutes=10)
"""Plugin logs are read from this long before the claim was created..."""
LOG_HEAD_BYTES = 256 * 1024
"""...plus, for a plugin started before that, the head of its log: its start-up lines
(feature gates, devices found, slices published or refused) are publication evidence."""
MAX_CLUSTER_PLUGIN_LOGS = 10
"""Whole-cluster runs read logs only of kubelet-plugin pods that restarted or are not ready."""
PLUGIN_CONTAINER = "gpus"
PLUGIN_LABEL_SELECTORS = (
    "dra-driver-nvidia-gpu-component=kubelet-plugin",
    "nvidia-dra-driver-gpu-component=kubelet-plugin",
)
"""Both chart generations' kubelet-plugin pod labels (nvidia-driver-facts §5.1, §10)."""
PLUGIN_IMAGE_REPOSITORIES = frozenset({"k8s-dra-driver-gpu", "dra-driver-nvidia-gpu"})
"""The driver image's repository name in both generations (nvidia-driver-facts §10)."""

_DRIVER_IN_CEL = re.compile(r"""device\.driver\s*==\s*['"]([^'"]+)['"]""")


# -- object predicates ----------------------------------------------------------------


def is_kubelet_plugin_pod(pod: K8sObject) -> bool:
    """A DRA driver's kubelet-plugin pod, recognised as nvidia-driver-facts §10 advises.

    By component label of either chart generation (or any ``*-component:
    kubelet-plugin`` label, for renamed installs), else by a ``gpus`` container running
    ``gpu-kubelet-plugin`` — never by namespace or DaemonSet name.
    """
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if any(k.endswith("component") and v == "kubelet-plugin" for k, v in labels.items()):
        return True
    daemonset = any(
        isinstance(ref, Mapping) and ref.get("kind") == "DaemonSet"
        for ref in meta.get("ownerReferences") or ()
    )
    for container in (pod.get("spec") or {}).get("containers") or []:
        words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
        if container.get("name") == PLUGIN_CONTAINER and any(
            "gpu-kubelet-plugin" in w for w in words
        ):
            return True
        # The driver image run by a DaemonSet (selectorLabelsOverride, renamed chart);
        # analyses/plugin_health.plugin_chart_name accepts the same pods.
        repo = str(container.get("image") or "").split("@", 1)[0].rsplit("/", 1)[-1]
        if (
            daemonset
            and repo.split(":", 1)[0] in PLUGIN_IMAGE_REPOSITORIES
            and not other_driver_workload(pod, " ".join(words))
        ):
            return True
    return False


def pod_uses_claims(pod: K8sObject) -> bool:
    """True when the pod references any ResourceClaim (spec or status), including the one
    generated for its extended resources (``status.extendedResourceClaimStatus``, which no
    ``spec.resourceClaims`` entry names)."""
    status = pod.get("status") or {}
    return (
        bool((pod.get("spec") or {}).get("resourceClaims"))
        or bool(status.get("resourceClaimStatuses"))
        or bool(_extended_claim_name(pod))
    )


def _extended_claim_name(pod: K8sObject) -> str | None:
    extended = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    if isinstance(extended, Mapping) and extended.get("resourceClaimName"):
        return str(extended["resourceClaimName"])
    return None


def pod_claim_names(pod: K8sObject) -> set[str]:
    """Names of the claims a pod uses: direct references and generated ones from status."""
    names = {str(c) for _, c, _ in pod_claim_references(pod) if c}
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if isinstance(st, Mapping) and st.get("resourceClaimName"):
            names.add(str(st["resourceClaimName"]))
    if extended := _extended_claim_name(pod):
        names.add(extended)
    return names


def claim_pod_names(claim: K8sObject) -> list[str]:
    """Pods named by the claim: ``reservedFor`` entries and a Pod owner reference."""
    names: list[str] = []
    for ref in (claim.get("status") or {}).get("reservedFor") or []:
        if (
            isinstance(ref, Mapping)
            and (ref.get("resource") or "pods") == "pods"
            and ref.get("name")
        ):
            names.append(str(ref["name"]))
    for owner in (claim.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == "Pod" and owner.get("name"):
            names.append(str(owner["name"]))
    return list(dict.fromkeys(names))


def _offered_by_selection(slc: K8sObject) -> bool:
    """True for a slice that offers devices by ``nodeSelector``/``allNodes`` (not one node)."""
    spec = slc.get("spec") or {}
    return bool(
        spec.get("nodeSelector") or spec.get("allNodes") or spec.get("perDeviceNodeSelection")
    )


def statuses_by_container(pod: K8sObject) -> dict[str, Mapping[str, Any]]:
    """A pod's container and init-container statuses by container name (what a log read
    needs: whether it started, whether it restarted)."""
    status = pod.get("status") or {}
    return {
        str(st.get("name")): st
        for st in (status.get("containerStatuses") or [])
        + (status.get("initContainerStatuses") or [])
        if isinstance(st, Mapping)
    }


def is_allocated(claim: K8sObject) -> bool:
    """True when the claim carries an allocation result."""
    return bool((claim.get("status") or {}).get("allocation"))


def drivers_named(claims: Iterable[K8sObject], classes: Iterable[K8sObject]) -> set[str]:
    """Drivers a claim can end up on, as far as its text says so.

    From allocation results and ``device.driver == '...'`` in the class and request
    selectors; empty when nothing names one (then every driver's slices are read).
    """
    drivers: set[str] = set()
    texts: list[str] = []
    for claim in claims:
        drivers |= {str(r.get("driver")) for r in allocated_devices(claim) if r.get("driver")}
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            for sub in [request.get("exactly") or {}] + list(request.get("firstAvailable") or []):
                texts += [
                    str((s.get("cel") or {}).get("expression") or "")
                    for s in sub.get("selectors") or []
                ]
    for cls in classes:
        texts += [
            str((s.get("cel") or {}).get("expression") or "")
            for s in (cls.get("spec") or {}).get("selectors") or []
        ]
    for text in texts:
        drivers |= set(_DRIVER_IN_CEL.findall(text))
    return drivers


def claim_class_names(claim: K8sObject) -> set[str]:
    """DeviceClass names a claim's requests use."""
    names = set()
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        for sub in [request.get("exactly") or {}] + list(request.get("firstAvailable") or []):
            if sub.get("deviceClassName"):
                names.add(str(sub["deviceClassName"]))
    return names


def _container_status(pod: K8sObject, container: str) -> Mapping[str, Any]:
    for st in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(st, Mapping) and st.get("name") == container:
            return st
    return {}


def _restarted(status: Mapping[str, Any]) -> bool:
    """True when a container status shows an earlier instance (one with a previous log)."""
    return bool(status.get("restartCount")) or bool(
        (status.get("lastState") or {}).get("terminated")
    )


def _unhealthy(pod: K8sObject) -> bool:
    st = _container_status(pod, PLUGIN_CONTAINER)
    return not st.get("ready") or _restarted(st)


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- reads and their outcomes ---------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Read:
    """One planned GET: an object, a list (all pages) or a container log."""

    kind: Kind
    verb: str
    """``get``, ``list`` or ``log``."""
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    namespace: str | None = None
    name: str | None = None
    scope: str | None = None
    """What this read covers, for the kind's coverage record (None: the whole kind)."""
    keep: Callable[[K8sObject], bool] | None = None
    container: str | None = None
    previous: bool = False
    part: str = "full"
    """For logs: ``full``, or ``head``/``window`` when a long-running log is read in two."""

    @property
    def resource(self) -> str:
        return "pods/log" if self.verb == "log" else plural_of(self.kind)

    def describe(self) -> str:
        """``list events in namespace ml``: the words of warnings and progress."""
        verb = "get" if self.verb == "log" else self.verb
        what = self.resource
        if self.name:
            what += f" {self.namespace + '/' if self.namespace else ''}{self.name}"
            return f"{verb} {what}"
        where = f"in namespace {self.namespace}" if self.namespace else "at cluster scope"
        return f"{verb} {what} {where}"


@dataclass(slots=True)
class _Outcome:
    read: Read
    items: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None
    error: ApiError | None = None


class Collector:
    """Runs reads in stages and accumulates what they found into a Snapshot."""

    def __init__(
        self,
        reader: Reader,
        discovery: Discovery,
        *,
        progress: Progress | None = None,
        max_workers: int | None = None,
    ) -> None:
        self.reader = reader
        self.discovery = discovery
        self.progress = progress
        self._pool = ThreadPoolExecutor(
            max_workers=max_workers or MAX_WORKERS, thread_name_prefix="dradiag-read"
        )
        self.objects: dict[Kind, dict[tuple[str, str], dict[str, Any]]] = {
            k: {} for k in Kind if k is not Kind.LOG
        }
        self.errors: list[CollectionError] = list(discovery.errors)
        self.failed: dict[Kind, str] = {}
        self.scopes: dict[Kind, list[str | None]] = {}
        self._log_parts: dict[tuple[str, str, str, bool], dict[str, tuple[str, Read]]] = {}
        self._warned: set[str] = set()
        self.problems: list[ShapeProblem] = []

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    # -- running ------------------------------------------------------------------

    def run(self, reads: Sequence[Read]) -> list[_Outcome]:
        """Run reads in parallel; absorb their results in plan order (deterministic)."""
        reads = [r for r in reads if r.verb == "log" or self.discovery.serves(r.kind)]
        if not reads:
            return []
        if self.progress is not None:
            self.progress.update(
                ", ".join(r.describe() for r in reads[:3]) + (" …" if len(reads) > 3 else "")
            )
        futures = [self._pool.submit(self._execute, r) for r in reads]
        outcomes = [f.result() for f in futures]
        for outcome in outcomes:
            self._absorb(outcome)
        return outcomes

    def _execute(self, read: Read) -> _Outcome:
        try:
            if read.verb == "get":
                return _Outcome(read, items=[self.reader.get_json(read.path, read.query)])
            if read.verb == "list":
                return _Outcome(
                    read, items=self.reader.list_items(read.path, read.query, keep=read.keep)
                )
            return _Outcome(read, text=self.reader.get_text(read.path, read.query))
        except ApiError as exc:
            return _Outcome(read, error=exc)

    def _absorb(self, outcome: _Outcome) -> None:
        read = outcome.read
        kind = Kind.LOG if read.verb == "log" else read.kind
        self.scopes.setdefault(kind, []).append(read.scope)
        if outcome.error is not None:
            self._record_error(read, kind, outcome.error)
            return
        if read.verb == "log":
            log_key = (read.namespace or "", read.name or "", read.container or "", read.previous)
            self._log_parts.setdefault(log_key, {})[read.part] = (outcome.text or "", read)
            return
        for item in outcome.items:
            if not isinstance(item, dict):
                self._warn(f"{read.describe()}: skipped an item that is not an object")
                continue
            item.setdefault("kind", read.kind.value)
            # The one shape check at the Snapshot boundary, before the plan reads it.
            checked = check_object(read.kind, item, f"live: {read.describe()}")
            self.problems += checked.problems
            if checked.obj is None:
                continue
            key = (namespace_of(item), name_of(item))
            self.objects[read.kind][key] = dict(checked.obj)

    def _record_error(self, read: Read, kind: Kind, error: ApiError) -> None:
        if read.verb == "get" and error.status == 404:
            return  # the object does not exist: a finding for the analyses, not a gap
        if read.verb == "log" and error.status == 400:
            # "previous terminated container ... not found", "waiting to start": no log
            # exists for that instance; nothing was hidden from us.
            logger.debug("%s: %s", read.describe(), error.message)
            return
        if read.verb == "list" and error.status == 404:
            self.failed.setdefault(kind, f"not served: {read.describe()} answered 404")
        elif error.status == 403:
            self.failed.setdefault(kind, f"forbidden: {read.describe()}")
            self._warn(f"forbidden: {read.describe()} (needs {_needed(read)})")
        elif error.timed_out:
            self.failed.setdefault(kind, f"timed out: {read.describe()}")
            self._warn(f"timed out: {read.describe()} ({error.message})")
        else:
            self.failed.setdefault(kind, f"{error.reason}: {read.describe()}")
            self._warn(f"could not {read.describe()}: {error.reason}: {error.message}")
        self.errors.append(
            CollectionError(
                resource=read.resource,
                verb="get" if read.verb == "log" else read.verb,
                reason=error.message if error.status == 403 else f"{error.reason}: {error.message}",
                namespace=read.namespace,
                name=read.name,
                status=error.status,
            )
        )

    def _warn(self, line: str) -> None:
        if line not in self._warned:
            self._warned.add(line)
            logger.warning("%s", line)

    # -- reading objects back -----------------------------------------------------

    def obj(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects[kind].get((namespace, name))

    def all(self, kind: Kind) -> list[dict[str, Any]]:
        return list(self.objects[kind].values())

    # -- planned reads --------------------------------------------------------------

    def get(self, kind: Kind, namespace: str | None, name: str, scope: str | None) -> Read:
        path = (
            self.discovery.path(kind, namespace=namespace, name=name)
            if self.discovery.serves(kind)
            else ""
        )
        return Read(kind, "get", path, namespace=namespace, name=name, scope=scope)

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        field_selector: str | None = None,
        label_selector: str | None = None,
        scope: str | None = None,
        keep: Callable[[K8sObject], bool] | None = None,
    ) -> Read:
        query: dict[str, str] = {}
        if field_selector:
            query["fieldSelector"] = field_selector
        if label_selector:
            query["labelSelector"] = label_selector
        path = self.discovery.path(kind, namespace=namespace) if self.discovery.serves(kind) else ""
        return Read(
            kind, "list", path, query, namespace=namespace, scope=scope, keep=_shaped(kind, keep)
        )

    def events_of(self, kind: str, namespace: str, name: str) -> Read:
        selector = (
            f"involvedObject.kind={kind},involvedObject.name={name},"
            f"involvedObject.namespace={namespace}"
        )
        return self.list(
            Kind.EVENT,
            namespace=namespace,
            field_selector=selector,
            scope=f"events of {kind} {namespace}/{name}",
        )

    def log(
        self,
        pod: K8sObject,
        container: str,
        *,
        previous: bool = False,
        part: str = "full",
        since: datetime | None = None,
    ) -> Read:
        """One read of a container log: ``full`` (tail-capped), ``head`` or ``window``."""
        namespace, name = namespace_of(pod), name_of(pod)
        query = {"container": container}
        if part == "head":
            query["limitBytes"] = str(LOG_HEAD_BYTES)
        else:
            query["tailLines"] = str(LOG_TAIL_LINES)
            query["limitBytes"] = str(LOG_LIMIT_BYTES)
        if previous:
            query["previous"] = "true"
        if part == "window" and since is not None:
            query["sinceTime"] = _rfc3339(since)
        path = self.discovery.path(Kind.POD, namespace=namespace, name=name, subresource="log")
        return Read(
            Kind.POD,
            "log",
            path,
            query,
            namespace=namespace,
            name=name,
            scope=f"kubelet-plugin logs of {namespace}/{name}",
            container=container,
            previous=previous,
            part=part,
        )

    # -- the Snapshot ---------------------------------------------------------------

    def snapshot(self, source: SourceInfo, *, targeted: bool) -> Snapshot:
        objects: dict[Kind, list[K8sObject]] = {}
        raw: dict[tuple[str, str, str], K8sObject] = {}
        for kind, found in self.objects.items():
            ordered = [found[k] for k in sorted(found)]
            objects[kind] = [normalize(kind, obj) for obj in ordered]
            for obj in ordered:
                raw[(kind.value, namespace_of(obj), name_of(obj))] = obj
        coverage: dict[Kind, KindRecord] = {}
        for kind in Kind:
            if kind in self.failed:
                coverage[kind] = KindRecord(
                    kind=kind, coverage=Coverage.UNKNOWN, reason=self.failed[kind]
                )
            elif kind in DRA_PLURALS and not self.discovery.serves(kind):
                coverage[kind] = KindRecord(
                    kind=kind,
                    coverage=Coverage.ABSENT,
                    reason=f"the API server does not serve {plural_of(kind)}.{RESOURCE_GROUP}",
                )
            elif kind in self.scopes:
                scopes = [s for s in dict.fromkeys(self.scopes[kind]) if s]
                whole = any(s is None for s in self.scopes[kind])
                scope = None if whole and not targeted else ("; ".join(scopes) or None)
                coverage[kind] = KindRecord(kind=kind, coverage=Coverage.COLLECTED, scope=scope)
            else:
                coverage[kind] = KindRecord(
                    kind=kind, coverage=Coverage.UNKNOWN, reason="not read for this target"
                )
        logs = [_merge_log_parts(parts) for _, parts in sorted(self._log_parts.items())]
        return Snapshot(
            objects=objects,
            logs=logs,
            coverage=coverage,
            errors=self.errors,
            source=source,
            raw=raw,
            problems=self.problems,
        )


def _shaped(
    kind: Kind, keep: Callable[[K8sObject], bool] | None
) -> Callable[[K8sObject], bool] | None:
    """``keep`` run on the shape-checked item: a filter must not read a malformed field.
    An item the check would skip is kept, so that ``_absorb`` reports it."""
    if keep is None:
        return None

    def checked_keep(item: K8sObject) -> bool:
        checked = check_object(kind, item)
        return checked.obj is None or keep(checked.obj)

    return checked_keep


def _needed(read: Read) -> str:
    if read.verb == "log":
        return "get on pods/log"
    return f"get/list on {qualified_plural(read.kind)}"


# -- targeted plans -------------------------------------------------------------------


def collect_claim(c: Collector, namespace: str, name: str) -> None:
    """Everything the life of claim ``namespace/name`` touched."""
    c.run(
        [
            c.get(Kind.RESOURCE_CLAIM, namespace, name, scope=f"claim {namespace}/{name}"),
            c.events_of("ResourceClaim", namespace, name),
            c.list(Kind.DEVICE_CLASS),
            c.list(Kind.DEVICE_TAINT_RULE),
        ]
    )
    claim = c.obj(Kind.RESOURCE_CLAIM, namespace, name)
    _follow_claims(c, namespace, [claim] if claim else [], wanted=[name], target_pods=[])


def collect_pod(c: Collector, namespace: str, name: str) -> None:
    """The pod, each of its claims (generated ones included) and what they touched."""
    c.run(
        [
            c.get(Kind.POD, namespace, name, scope=f"pod {namespace}/{name}"),
            c.events_of("Pod", namespace, name),
            c.list(Kind.DEVICE_CLASS),
            c.list(Kind.DEVICE_TAINT_RULE),
        ]
    )
    pod = c.obj(Kind.POD, namespace, name)
    if pod is None:
        return
    claim_names = sorted(pod_claim_names(pod))
    generated = {
        str(st.get("name"))
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(st, Mapping)
    }
    templates = sorted(
        {str(t) for ref, _, t in pod_claim_references(pod) if t and ref not in generated}
    )
    reads = [
        c.get(Kind.RESOURCE_CLAIM, namespace, n, scope=f"claims of pod {namespace}/{name}")
        for n in claim_names
    ]
    reads += [c.events_of("ResourceClaim", namespace, n) for n in claim_names]
    reads += [
        c.get(
            Kind.RESOURCE_CLAIM_TEMPLATE, namespace, t, scope=f"templates of pod {namespace}/{name}"
        )
        for t in templates
    ]
    c.run(reads)
    claims = [cl for n in claim_names if (cl := c.obj(Kind.RESOURCE_CLAIM, namespace, n))]
    _follow_claims(c, namespace, claims, wanted=claim_names, target_pods=[pod])


def _follow_claims(
    c: Collector,
    namespace: str,
    claims: list[dict[str, Any]],
    *,
    wanted: list[str],
    target_pods: list[dict[str, Any]],
) -> None:
    """From claims to their pods, nodes, slices, plugin pods and logs."""
    label = ", ".join(f"{namespace}/{n}" for n in wanted)
    # Stage: the pods. For a claim, every pod of its namespace that references it or
    # holds it (one filtered list): a pod can wait on a claim that reserves nothing for
    # it (a pending claim, a pod bound past the scheduler), and only its spec says so.
    # For a pod, the other pods the claims are reserved for, by name.
    known = {name_of(p) for p in target_pods}
    if target_pods:
        pod_names = [n for cl in claims for n in claim_pod_names(cl) if n not in known]
        pod_names = list(dict.fromkeys(pod_names))[:MAX_PODS_PER_CLAIM]
        reads = [c.get(Kind.POD, namespace, n, scope=f"pods of claim {label}") for n in pod_names]
    else:
        claim_names = set(wanted)
        holders = {n for cl in claims for n in claim_pod_names(cl)}
        reads = [
            c.list(
                Kind.POD,
                namespace=namespace,
                scope=f"pods using claim {label}",
                keep=lambda pod: (
                    bool(pod_claim_names(pod) & claim_names) or name_of(pod) in holders
                ),
            )
        ]
    c.run(reads)
    pods = list(target_pods) + [
        p for p in c.all(Kind.POD) if name_of(p) not in known and namespace_of(p) == namespace
    ]
    if not claims and not pods:
        return  # no such claim and nothing waits for it: nothing further to explain

    nodes = list(dict.fromkeys([n for cl in claims for n in allocation_nodes(cl)]))
    nodes += [
        str(n) for p in pods if (n := (p.get("spec") or {}).get("nodeName")) and n not in nodes
    ]
    unallocated = not claims or any(not is_allocated(cl) for cl in claims)
    classes = [
        cls
        for cls in c.all(Kind.DEVICE_CLASS)
        if name_of(cls) in {n for cl in claims for n in claim_class_names(cl)}
    ]
    drivers = sorted(drivers_named(claims, classes))

    # Stage: events of the pods, what is on the nodes, and — while allocation is still
    # at stake — the driver's slices everywhere and the devices other claims hold.
    reads = [c.events_of("Pod", namespace_of(p), name_of(p)) for p in pods if p not in target_pods]
    for node in nodes:
        if not unallocated:
            reads.append(
                c.list(
                    Kind.RESOURCE_SLICE,
                    field_selector=f"spec.nodeName={node}",
                    scope=f"slices on node {node}",
                )
            )
        reads.append(
            c.list(
                Kind.POD,
                field_selector=f"spec.nodeName={node}",
                scope=f"kubelet-plugin pods on node {node}",
                keep=is_kubelet_plugin_pod,
            )
        )
        reads.append(c.get(Kind.NODE, None, node, scope=f"node {node}"))
    if unallocated:
        if drivers:
            reads += [
                c.list(
                    Kind.RESOURCE_SLICE,
                    field_selector=f"spec.driver={d}",
                    scope=f"slices of driver {d}",
                )
                for d in drivers
            ]
        else:
            reads.append(c.list(Kind.RESOURCE_SLICE, scope="all slices"))
        reads.append(
            c.list(
                Kind.RESOURCE_CLAIM, scope="allocated claims in all namespaces", keep=is_allocated
            )
        )
    c.run(reads)
    if unallocated and any(_offered_by_selection(s) for s in c.all(Kind.RESOURCE_SLICE)):
        # Devices offered by node selector or to all nodes: the allocator's candidate nodes
        # and their labels are the Node objects (k8s-dra-semantics §3.2).
        c.run([c.list(Kind.NODE, scope="nodes (slices select nodes by label)")])

    plugin_pods = [p for p in c.all(Kind.POD) if is_kubelet_plugin_pod(p)]
    if unallocated and not c.all(Kind.RESOURCE_SLICE) and Kind.RESOURCE_SLICE not in c.failed:
        # Nothing published: the plugin pods anywhere show why (missing, crashing).
        c.run(
            [
                c.list(
                    Kind.POD,
                    label_selector=selector,
                    scope=f"kubelet-plugin pods ({selector})",
                    keep=is_kubelet_plugin_pod,
                )
                for selector in PLUGIN_LABEL_SELECTORS
            ]
        )
        plugin_pods = [p for p in c.all(Kind.POD) if is_kubelet_plugin_pod(p)]
        plugin_pods = [p for p in plugin_pods if _unhealthy(p)][:MAX_CLUSTER_PLUGIN_LOGS]

    # Stage: the plugin logs, from a little before the claim was created.
    created = [
        t
        for cl in claims
        if (t := _parse_time((cl.get("metadata") or {}).get("creationTimestamp")))
    ]
    since = min(created) - LOG_SINCE_MARGIN if created else None
    c.run(_plugin_log_reads(c, plugin_pods, since) + mps_daemon_reads(c, claims, plugin_pods))


def mps_daemon_reads(
    c: Collector, claims: Iterable[K8sObject], plugin_pods: Iterable[K8sObject]
) -> list[Read]:
    """For claims with MPS sharing: the MPS control-daemon Deployments, listed in the
    namespaces of the driver's kubelet-plugin pods (where the driver creates them) and
    nowhere else. None without an MPS claim, or with no plugin pod to say where the
    driver runs: Deployments then stay ``unknown`` and the prepare phase says so."""
    if not any(mps_requests(cl) for cl in claims):
        return []
    namespaces = sorted({namespace_of(p) for p in plugin_pods if namespace_of(p)})
    return [
        c.list(
            Kind.DEPLOYMENT,
            namespace=ns,
            scope=f"MPS control daemons in namespace {ns}",
            keep=is_mps_daemon,
        )
        for ns in namespaces
    ]


def _started_at(status: Mapping[str, Any]) -> datetime | None:
    state = status.get("state") or {}
    for phase in ("running", "terminated"):
        if isinstance(state.get(phase), Mapping):
            return _parse_time(state[phase].get("startedAt"))
    return None


def _plugin_log_reads(
    c: Collector, plugin_pods: Iterable[K8sObject], since: datetime | None
) -> list[Read]:
    """Log reads for plugin pods: the ``gpus`` container and init containers that failed.

    A container that never started has no log (skipped, instead of a 400). One that
    restarted also gets its previous instance's log. A current instance started before
    ``since`` is read as its head plus the window from ``since``, so neither its start-up
    lines nor the lines around the claim are lost to the tail cap.
    """
    reads = []
    for pod in plugin_pods:
        spec = pod.get("spec") or {}
        statuses = statuses_by_container(pod)
        names = [str(x.get("name")) for x in spec.get("containers") or []]
        main = PLUGIN_CONTAINER if PLUGIN_CONTAINER in names else (names[0] if names else None)
        wanted = [main] if main else []
        for init in spec.get("initContainers") or []:
            st = statuses.get(str(init.get("name"))) or {}
            state = st.get("state") or {}
            failed = (state.get("terminated") or {}).get("exitCode") not in (None, 0)
            if state.get("running") or failed or st.get("restartCount"):
                wanted.append(str(init.get("name")))
        for container in wanted:
            st = statuses.get(container) or {}
            restarted = _restarted(st)
            started = _started_at(st)
            if st and started is None and not (st.get("state") or {}).get("terminated"):
                pass  # waiting, never ran: no current log to read
            elif since is not None and started is not None and started < since:
                reads.append(c.log(pod, container, part="head"))
                reads.append(c.log(pod, container, part="window", since=since))
            else:
                reads.append(c.log(pod, container))
            if restarted:
                reads.append(c.log(pod, container, previous=True))
    return reads


_GAP = "[dradiag: log lines between the head and {since} were not read]\n"


def _merge_log_parts(parts: Mapping[str, tuple[str, Read]]) -> ContainerLog:
    """One ContainerLog from a full read, or from a head and a window read."""
    text, read = parts.get("full") or parts.get("window") or parts["head"]
    truncated = len(text.encode()) >= LOG_LIMIT_BYTES or text.count("\n") >= LOG_TAIL_LINES
    if "head" in parts and "window" in parts:
        head, window = parts["head"][0], parts["window"][0]
        first = window.splitlines(keepends=True)[:1]
        if first and first[0] in head:
            text = head[: head.index(first[0])] + window  # the window overlaps the head
        elif not window:
            text = head  # nothing was logged since the window began
            truncated = len(head.encode()) >= LOG_HEAD_BYTES
        else:
            since = read.query.get("sinceTime", "the claim's window")
            text = (
                head
                + ("" if head.endswith("\n") or not head else "\n")
                + _GAP.format(since=since)
                + window
            )
            truncated = True
    source = f"{read.path}?container={read.container}" + ("&previous=true" if read.previous else "")
    return ContainerLog(
        namespace=read.namespace,
        pod=read.name or "",
        container=read.container or "",
        text=text,
        previous=read.previous,
        truncated=truncated,
        source=source,
    )


# -- whole cluster --------------------------------------------------------------------


def collect_cluster(
    c: Collector,
    namespace: str | None,
    nodes: Sequence[str] = (),
    *,
    label_selector: str = "",
    field_selector: str = "",
) -> None:
    """Every kind, paginated; namespaced kinds limited to ``namespace`` when given.

    ``label_selector``/``field_selector`` (``scan -l``/``--field-selector``, canonical) go
    to the API server with the pod list, and with the claim list as far as a claim can
    match (labels, ``metadata.*`` fields); the claims of the selected pods and the pods
    of the selected claims are then read by name, so each row the scan keeps is judged
    with all of its objects, as offline (``diagnosis.scan_scope``).
    """
    from dradiag.snapshot.selectors import METADATA_FIELDS, parse_field_selector

    ns_scope = f"namespace {namespace}" if namespace else None
    fields = parse_field_selector(field_selector)
    claim_fields = fields.restricted_to(METADATA_FIELDS)
    claims_can_match = claim_fields == fields
    selecting = bool(label_selector or field_selector)
    claim_reads = [
        c.list(
            Kind.RESOURCE_CLAIM,
            namespace=namespace,
            label_selector=label_selector or None,
            field_selector=claim_fields.text() or None,
            scope=ns_scope,
        )
    ]
    if selecting and not claims_can_match:
        claim_reads = []  # a claim has no spec.nodeName or status.phase: found via its pods
    reads = [
        c.list(Kind.RESOURCE_SLICE),
        c.list(Kind.DEVICE_CLASS),
        c.list(Kind.DEVICE_TAINT_RULE),
        *claim_reads,
        c.list(Kind.RESOURCE_CLAIM_TEMPLATE, namespace=namespace, scope=ns_scope),
        c.list(
            Kind.POD,
            namespace=namespace,
            label_selector=label_selector or None,
            field_selector=field_selector or None,
            scope=(f"pods using claims in {ns_scope}" if ns_scope else "pods using claims")
            + " and kubelet-plugin pods",
            keep=lambda p: pod_uses_claims(p) or is_kubelet_plugin_pod(p),
        ),
    ]
    if nodes:
        reads += [c.get(Kind.NODE, None, n, scope=f"node {n}") for n in nodes]
    else:
        reads.append(c.list(Kind.NODE))
    if namespace or selecting:
        # The plugin pods live in the driver's namespace, not the workload's.
        reads += [
            c.list(
                Kind.POD,
                label_selector=s,
                scope=f"kubelet-plugin pods ({s})",
                keep=is_kubelet_plugin_pod,
            )
            for s in PLUGIN_LABEL_SELECTORS
        ]
    c.run(reads)
    if selecting:
        _complete_selected(c)

    pod_keys = {(namespace_of(p), name_of(p)) for p in c.all(Kind.POD)}
    slice_nodes = {
        str(n) for s in c.all(Kind.RESOURCE_SLICE) if (n := (s.get("spec") or {}).get("nodeName"))
    }

    def relevant_event(event: K8sObject) -> bool:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        kind = involved.get("kind")
        if kind == "ResourceClaim":
            return True
        if kind == "Pod":
            return (
                str(involved.get("namespace") or ""),
                str(involved.get("name") or ""),
            ) in pod_keys
        return kind == "Node" and str(involved.get("name") or "") in slice_nodes

    all_plugin_pods = [p for p in c.all(Kind.POD) if is_kubelet_plugin_pod(p)]
    plugin_pods = [p for p in all_plugin_pods if _unhealthy(p)]
    reads = mps_daemon_reads(c, c.all(Kind.RESOURCE_CLAIM), all_plugin_pods)
    reads += [
        c.list(
            Kind.EVENT,
            namespace=namespace,
            scope=None if not namespace else ns_scope,
            keep=relevant_event,
        )
    ]
    reads += _plugin_log_reads(c, plugin_pods[:MAX_CLUSTER_PLUGIN_LOGS], None)
    c.run(reads)


def _waiting_on(names: frozenset[str]) -> Callable[[K8sObject], bool]:
    """A pod-list filter: pods that use any of the claims ``names``."""
    return lambda pod: bool(pod_claim_names(pod) & names)


def _complete_selected(c: Collector) -> None:
    """After selected lists: the claims the selected pods use and the pods the selected
    claims are reserved for, by name, so no kept row is judged on half its objects;
    then, for claims no pod holds, the pods waiting on them (one filtered list per
    namespace), and, while any claim is unallocated, the devices other claims hold
    (every allocated claim): what the offline scan sees of the same rows."""
    claims = {(namespace_of(cl), name_of(cl)) for cl in c.all(Kind.RESOURCE_CLAIM)}
    pods = {(namespace_of(p), name_of(p)) for p in c.all(Kind.POD)}
    wanted_claims = sorted(
        {
            (namespace_of(p), n)
            for p in c.all(Kind.POD)
            if not is_kubelet_plugin_pod(p)
            for n in pod_claim_names(p)
        }
        - claims
    )
    wanted_pods = sorted(
        {(namespace_of(cl), n) for cl in c.all(Kind.RESOURCE_CLAIM) for n in claim_pod_names(cl)}
        - pods
    )
    reads = [
        c.get(Kind.RESOURCE_CLAIM, ns, n, scope="claims of the selected pods")
        for ns, n in wanted_claims
    ]
    reads += [c.get(Kind.POD, ns, n, scope="pods of the selected claims") for ns, n in wanted_pods]
    if reads:
        c.run(reads)
    unheld: dict[str, set[str]] = {}
    for cl in c.all(Kind.RESOURCE_CLAIM):
        if not claim_pod_names(cl):
            unheld.setdefault(namespace_of(cl), set()).add(name_of(cl))
    reads = [
        c.list(
            Kind.POD,
            namespace=ns,
            scope=f"pods waiting on the selected claims in namespace {ns}",
            keep=_waiting_on(frozenset(names)),
        )
        for ns, names in sorted(unheld.items())
    ]
    if any(not is_allocated(cl) for cl in c.all(Kind.RESOURCE_CLAIM)) or wanted_claims:
        reads.append(
            c.list(
                Kind.RESOURCE_CLAIM, scope="allocated claims in all namespaces", keep=is_allocated
            )
        )
    if reads:
        c.run(reads)


def now_rfc3339() -> str:
    """The collection time stamped into SourceInfo."""
    return _rfc3339(datetime.now(UTC))
