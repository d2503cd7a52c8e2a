"""``dradiag bundle``: collect a support bundle through the live layer and lay it out.

Collection reuses the live read plans (``live_plan``): the targeted ones for
``--claim``/``--pod``, the whole-cluster one per namespace (or across all of them), plus
what a maintainer needs offline that a single diagnosis does not read: every DRA driver
pod (both NVIDIA chart generations, by owner, labels and image) with every container's
current and previous log, those pods' events, and — opt-in — the kubelet journal of the
claims' nodes through the API server's node log query. Everything is a GET.

The bundle is laid out as DESIGN §4 and issue 12 say (``resources/<group>/<version>/
<plural>[/<namespace>].json``, ``logs/<ns>/<pod>/<container>[.previous].log``,
``node/<node>/…``, ``manifest.json``, ``redactions.json``), redacted by
:mod:`dradiag.sources.redact`, and written deterministically: members sorted, JSON with
sorted keys, fixed mtimes and owners, no gzip timestamp. Two bundles of the same cluster
differ only in the manifest's clock readings.

``analysis.json`` (the ``scan`` result over the bundle) is made by the CLI, which may
import the diagnosis layer; this module stays in the sources layer.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import logging
import tarfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dradiag.snapshot.model import (
    CollectionError,
    ContainerLog,
    Coverage,
    K8sObject,
    Kind,
    allocation_nodes,
    name_of,
    namespace_of,
)
from dradiag.snapshot.normalize import RESOURCE_GROUP
from dradiag.sources.live_discovery import APPS_PLURALS, DRA_PLURALS, Discovery, plural_of
from dradiag.sources.live_plan import (
    LOG_LIMIT_BYTES,
    LOG_TAIL_LINES,
    PLUGIN_LABEL_SELECTORS,
    Collector,
    Read,
    _Outcome,
    collect_claim,
    collect_cluster,
    collect_pod,
    is_kubelet_plugin_pod,
    now_rfc3339,
    statuses_by_container,
)
from dradiag.sources.live_transport import ApiError, Reader
from dradiag.sources.redact import Redactor

if TYPE_CHECKING:
    from dradiag.snapshot.model import Snapshot
    from dradiag.sources.progress import Progress

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "dradiag.bundle/v1"
MANIFEST = "manifest.json"
REDACTIONS = "redactions.json"
ANALYSIS = "analysis.json"
FIXED_MTIME = 0
"""Every member's mtime: the collection time lives in the manifest, not in the tar headers."""
KUBELET_LOG_TAIL_LINES = 20000
DRIVER_NAME_HINTS = ("dra-driver", "k8s-dra-driver", "dra-plugin", "kubelet-plugin")
"""Words in an image, owner or ``app.kubernetes.io/name`` that mark a DRA driver's pod."""


# -- scope ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BundleScope:
    """What ``dradiag bundle`` was asked to collect."""

    namespaces: tuple[str, ...] = ()
    all_namespaces: bool = False
    claims: tuple[tuple[str, str], ...] = ()
    pods: tuple[tuple[str, str], ...] = ()
    since_seconds: int | None = None
    kubelet_logs: bool = False

    @property
    def whole_cluster(self) -> bool:
        """Every namespace: ``-A``, or no scope given at all."""
        return self.all_namespaces or not (self.namespaces or self.claims or self.pods)

    def document(self) -> dict[str, Any]:
        return {
            "allNamespaces": self.whole_cluster,
            "namespaces": list(self.namespaces),
            "claims": [f"{ns}/{n}" for ns, n in self.claims],
            "pods": [f"{ns}/{n}" for ns, n in self.pods],
            "sinceSeconds": self.since_seconds,
            "kubeletLogs": self.kubelet_logs,
        }


# -- driver pods ----------------------------------------------------------------------


def is_dra_driver_pod(pod: K8sObject) -> bool:
    """A pod of an installed DRA driver: kubelet plugin or controller, either chart generation.

    By the kubelet-plugin rules of ``live_plan`` (component label of either chart, or
    the ``gpus`` container running ``gpu-kubelet-plugin``), else by a ``*-component``
    label of a ``*dra-driver*`` chart, an owner, ``app.kubernetes.io/name`` or an image
    naming a DRA driver (nvidia-driver-facts §5.1, §10).
    """
    if is_kubelet_plugin_pod(pod):
        return True
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for key, value in labels.items():
        if key.endswith("-component") and "dra-driver" in key and value:
            return True
    names = [str(labels.get("app.kubernetes.io/name") or "")]
    names += [str(o.get("name") or "") for o in meta.get("ownerReferences") or []]
    spec = pod.get("spec") or {}
    names += [
        str(c.get("image") or "")
        for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
    ]
    return any(hint in n for n in names for hint in DRIVER_NAME_HINTS)


# -- collection -----------------------------------------------------------------------


class _TimedCollector(Collector):
    """A Collector that also records, per kind, how long its reads took and how many."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds: dict[Kind, float] = {}
        self.requests: dict[Kind, int] = {}
        self._timing = threading.Lock()
        self.extra_logs: list[tuple[str, bytes]] = []
        """Bundle members read outside the Snapshot model (node journals)."""
        self.extra_status: dict[str, dict[str, Any]] = {}

    def _execute(self, read: Read) -> _Outcome:
        started = time.perf_counter()
        try:
            return super()._execute(read)
        finally:
            kind = Kind.LOG if read.verb == "log" else read.kind
            with self._timing:
                self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - started
                self.requests[kind] = self.requests.get(kind, 0) + 1


def _driver_log_reads(c: Collector, pods: Iterable[K8sObject], since: int | None) -> list[Read]:
    """Every container's log of every driver pod, and the previous instance's where one ran."""
    reads = []
    for pod in pods:
        spec = pod.get("spec") or {}
        statuses = statuses_by_container(pod)
        names = [str(x.get("name")) for x in spec.get("initContainers") or []]
        names += [str(x.get("name")) for x in spec.get("containers") or []]
        for container in names:
            st = statuses.get(container) or {}
            state = st.get("state") or {}
            if st and state.get("waiting") and not st.get("restartCount"):
                continue  # never ran: no log to read
            reads.append(_log_read(c, pod, container, previous=False, since=since))
            if st.get("restartCount") or (st.get("lastState") or {}).get("terminated"):
                reads.append(_log_read(c, pod, container, previous=True, since=since))
    return reads


def _log_read(
    c: Collector, pod: K8sObject, container: str, *, previous: bool, since: int | None
) -> Read:
    namespace, name = namespace_of(pod), name_of(pod)
    query = {
        "container": container,
        "tailLines": str(LOG_TAIL_LINES),
        "limitBytes": str(LOG_LIMIT_BYTES),
        "timestamps": "true",
    }
    if previous:
        query["previous"] = "true"
    if since is not None:
        query["sinceSeconds"] = str(since)
    path = c.discovery.path(Kind.POD, namespace=namespace, name=name, subresource="log")
    return Read(
        Kind.POD,
        "log",
        path,
        query,
        namespace=namespace,
        name=name,
        scope="DRA driver pod logs",
        container=container,
        previous=previous,
    )


def _claim_nodes(c: Collector) -> list[str]:
    """Nodes the collected claims are allocated to or their pods run on."""
    nodes = {n for cl in c.all(Kind.RESOURCE_CLAIM) for n in allocation_nodes(cl)}
    nodes |= {
        str(p["spec"]["nodeName"])
        for p in c.all(Kind.POD)
        if (p.get("spec") or {}).get("nodeName") and not is_dra_driver_pod(p)
    }
    return sorted(nodes)


def _kubelet_logs(c: _TimedCollector, nodes: Sequence[str], since: int | None) -> None:
    """The kubelet journal of ``nodes`` via ``/api/v1/nodes/<n>/proxy/logs/?query=kubelet``.

    Needs ``get`` on ``nodes/proxy`` (not in docs/rbac.yaml: opt-in). A refusal, or a
    server or node that does not serve the node log query, is recorded in the
    manifest, never fatal.
    """
    status: dict[str, Any] = {"status": "collected", "objects": 0, "errors": []}
    started = time.perf_counter()
    for node in nodes:
        query = {"query": "kubelet", "tailLines": str(KUBELET_LOG_TAIL_LINES)}
        if since is not None:
            query["sinceTime"] = _rfc3339(time.time() - since)
        try:
            text = c.reader.get_text(f"/api/v1/nodes/{node}/proxy/logs/", query)
        except ApiError as exc:
            reason = f"{exc.reason}: {exc.message}" if exc.status != 403 else exc.message
            status["errors"].append({"node": node, "status": exc.status, "reason": reason})
            logger.warning("kubelet log of node %s not collected: %s", node, reason)
            continue
        c.extra_logs.append((f"node/{node}/kubelet.log", text.encode()))
        status["objects"] += 1
    if status["errors"]:
        status["status"] = "partial" if status["objects"] else "failed"
    status["durationMs"] = round((time.perf_counter() - started) * 1000)
    c.extra_status["kubeletLogs"] = status


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Collected:
    """What collection found, before it is laid out as files."""

    collector: _TimedCollector
    discovery: Discovery
    snapshot: Snapshot
    started: str
    seconds: float
    requests: int
    context: str | None
    host: str | None


def collect(
    reader: Reader,
    discovery: Discovery,
    scope: BundleScope,
    *,
    progress: Progress | None = None,
    context: str | None = None,
    host: str | None = None,
) -> Collected:
    """Run the bundle's read plan; failures become collection errors, never exceptions."""
    from dradiag.snapshot.model import SourceInfo

    started_at = now_rfc3339()
    started = time.perf_counter()
    c = _TimedCollector(reader, discovery, progress=progress)
    try:
        for namespace, name in scope.claims:
            collect_claim(c, namespace, name)
        for namespace, name in scope.pods:
            collect_pod(c, namespace, name)
        if scope.whole_cluster:
            collect_cluster(c, None)
        for namespace in scope.namespaces:
            collect_cluster(c, namespace)
        # Every DRA driver's pods, wherever they run, and their events and logs.
        c.run(
            [c.list(Kind.POD, scope="DRA driver pods", keep=is_dra_driver_pod)]
            + [
                c.list(Kind.POD, label_selector=s, scope=f"kubelet-plugin pods ({s})")
                for s in PLUGIN_LABEL_SELECTORS
            ]
        )
        drivers = sorted(
            (p for p in c.all(Kind.POD) if is_dra_driver_pod(p)),
            key=lambda p: (namespace_of(p), name_of(p)),
        )
        driver_keys = {(namespace_of(p), name_of(p)) for p in drivers}

        def about_driver_pod(event: K8sObject) -> bool:
            return _involves(event, driver_keys)

        reads = [
            c.list(
                Kind.EVENT,
                namespace=ns,
                scope=f"events of DRA driver pods in {ns}",
                keep=about_driver_pod,
            )
            for ns in sorted({ns for ns, _ in driver_keys})
        ]
        reads += _driver_log_reads(c, drivers, scope.since_seconds)
        c.run(reads)
        if scope.kubelet_logs:
            _kubelet_logs(c, _claim_nodes(c), scope.since_seconds)
    finally:
        c.close()
    source = SourceInfo(
        kind="live",
        location=host,
        context=context,
        collected_at=started_at,
        server_version=discovery.server_version,
        served_versions=discovery.served_versions,
    )
    snapshot = c.snapshot(source, targeted=not scope.whole_cluster)
    return Collected(
        collector=c,
        discovery=discovery,
        snapshot=snapshot,
        started=started_at,
        seconds=time.perf_counter() - started,
        requests=reader.stats.requests,
        context=context,
        host=host,
    )


def _involves(event: K8sObject, keys: set[tuple[str, str]]) -> bool:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return (
        involved.get("kind") == "Pod"
        and (
            str(involved.get("namespace") or ""),
            str(involved.get("name") or ""),
        )
        in keys
    )


# -- layout ---------------------------------------------------------------------------


NODE_STATUS_FIELDS = ("capacity", "allocatable", "conditions", "nodeInfo")


def trim_node(node: K8sObject) -> dict[str, Any]:
    """A Node as the bundle keeps it: labels, taints, capacity, allocatable, conditions,
    nodeInfo. Annotations (which may hold secrets) and addresses are left out."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    kept_meta = {k: meta[k] for k in ("name", "uid", "labels", "creationTimestamp") if k in meta}
    kept_spec = {k: spec[k] for k in ("taints", "unschedulable", "providerID") if k in spec}
    kept_status = {k: status[k] for k in NODE_STATUS_FIELDS if k in status}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": kept_meta,
        "spec": kept_spec,
        "status": kept_status,
    }


def _group_version(kind: Kind, discovery: Discovery) -> tuple[str, str]:
    if kind in DRA_PLURALS:
        return RESOURCE_GROUP, discovery.resource_versions.get(kind) or "v1"
    if kind in APPS_PLURALS:
        return "apps", "v1"
    return "core", "v1"


def _api_version(group: str, version: str) -> str:
    return version if group == "core" else f"{group}/{version}"


def dumps(doc: Any) -> bytes:
    """JSON with sorted keys and a final newline: byte-identical for the same content."""
    import orjson

    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"


def _clean(obj: Mapping[str, Any], kind: Kind, api_version: str) -> dict[str, Any]:
    """A deep copy with apiVersion and kind set and managedFields dropped."""
    import orjson

    copy: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    copy["apiVersion"] = api_version
    copy["kind"] = kind.value
    meta = copy.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return copy


def _log_member(log: ContainerLog) -> str:
    suffix = ".previous.log" if log.previous else ".log"
    return f"logs/{log.namespace or '_'}/{log.pod}/{log.container}{suffix}"


@dataclass(slots=True)
class Layout:
    """The bundle's members (path → bytes) and the per-collector statuses of the manifest."""

    members: dict[str, bytes] = field(default_factory=dict)
    collectors: list[dict[str, Any]] = field(default_factory=list)


def lay_out(collected: Collected, redactor: Redactor) -> Layout:
    """Every collected object and log as bundle members, redacted."""
    c = collected.collector
    snapshot = collected.snapshot
    layout = Layout()
    for kind in Kind:
        if kind is Kind.LOG:
            continue
        group, version = _group_version(kind, collected.discovery)
        api_version = _api_version(group, version)
        files: dict[str, list[dict[str, Any]]] = {}
        for key in sorted(c.objects[kind]):
            obj = _clean(c.objects[kind][key], kind, api_version)
            where = f"{kind.value} {'/'.join(p for p in key if p)}"
            if kind is Kind.NODE:
                obj = trim_node(obj)
            elif kind is Kind.POD:
                redactor.pod(obj, where)
            elif kind is Kind.DEPLOYMENT:
                # Its conditions' messages, and its pod template as a pod's (env, commands).
                redactor.pod(obj, where)
                template = (obj.get("spec") or {}).get("template")
                if isinstance(template, dict):
                    redactor.pod(template, f"{where} pod template")
            else:
                redactor.annotations(obj, where)
            if kind is Kind.EVENT:
                for text_field in ("message", "note"):
                    if isinstance(obj.get(text_field), str):
                        obj[text_field] = redactor.text(obj[text_field], where)
            base = f"resources/{group}/{version}/{plural_of(kind)}"
            path = f"{base}/{key[0]}.json" if key[0] else f"{base}.json"
            files.setdefault(path, []).append(obj)
        size = 0
        for path, items in sorted(files.items()):
            data = dumps({"apiVersion": api_version, "kind": f"{kind.value}List", "items": items})
            layout.members[path] = data
            size += len(data)
        layout.collectors.append(
            _collector_entry(c, snapshot, kind, sum(map(len, files.values())), size)
        )
    size = 0
    for log in snapshot.logs:
        path = _log_member(log)
        data = redactor.text(log.text, path).encode()
        layout.members[path] = data
        size += len(data)
    layout.collectors.append(_collector_entry(c, snapshot, Kind.LOG, len(snapshot.logs), size))
    for path, data in c.extra_logs:
        layout.members[path] = redactor.text(data.decode("utf-8", "replace"), path).encode()
    return layout


def _collector_entry(
    c: _TimedCollector, snapshot: Snapshot, kind: Kind, objects: int, size: int
) -> dict[str, Any]:
    record = snapshot.coverage.get(kind)
    coverage = record.coverage if record else Coverage.UNKNOWN
    status = {
        Coverage.COLLECTED: "collected",
        Coverage.ABSENT: "absent",
    }.get(coverage, "failed" if kind in c.failed else "skipped")
    errors = [_error_doc(e) for e in snapshot.errors if _error_kind(e) is kind]
    return {
        "name": kind.value,
        "kind": kind.value,
        "status": status,
        "coverage": coverage.value,
        "scope": record.scope if record else None,
        "reason": record.reason if record else None,
        "objects": objects,
        "bytes": size,
        "requests": c.requests.get(kind, 0),
        "durationMs": round(c.seconds.get(kind, 0.0) * 1000),
        "error": errors[0]["reason"] if errors else None,
    }


def _error_kind(error: CollectionError) -> Kind | None:
    if error.resource == "pods/log":
        return Kind.LOG
    return next((k for k in Kind if k is not Kind.LOG and plural_of(k) == error.resource), None)


def _error_doc(error: CollectionError) -> dict[str, Any]:
    return {
        "resource": error.resource,
        "verb": error.verb,
        "reason": error.reason,
        "namespace": error.namespace,
        "name": error.name,
        "status": error.status,
    }


def manifest(
    collected: Collected,
    layout: Layout,
    scope: BundleScope,
    redactor: Redactor,
    *,
    tool_version: str,
) -> dict[str, Any]:
    """The ``manifest.json`` document (schema: docs/schema/bundle-manifest.schema.json)."""
    discovery = collected.discovery
    context = collected.context
    extra = dict(sorted(collected.collector.extra_status.items()))
    return {
        "schemaVersion": SCHEMA_VERSION,
        "tool": {"name": "dradiag", "version": tool_version},
        "collectedAt": collected.started,
        "durationMs": round(collected.seconds * 1000),
        "requests": collected.requests,
        "server": {
            "version": discovery.server_version,
            "gitVersion": discovery.git_version,
            "servedVersions": list(discovery.served_versions),
            "resourceVersions": {
                k.value: v for k, v in sorted(discovery.resource_versions.items())
            },
            "discoveryAssumed": discovery.assumed,
        },
        "contextHash": (
            "sha256:" + hashlib.sha256(context.encode()).hexdigest() if context else None
        ),
        "scope": scope.document(),
        "logs": {"timestamps": True, "tailLines": LOG_TAIL_LINES, "limitBytes": LOG_LIMIT_BYTES},
        "redaction": {
            "enabled": redactor.enabled,
            "library": redactor.report()["library"],
        },
        "collectors": layout.collectors,
        "extraCollectors": extra,
        "errors": [_error_doc(e) for e in collected.snapshot.errors],
    }


def write_archive(members: Mapping[str, bytes], path: str) -> int:
    """Write ``members`` as a deterministic ``.tar.gz`` at ``path``; returns its size.

    Sorted members, mtime 0, uid/gid 0 with no names, mode 0644, GNU format, and a
    gzip header with neither a timestamp nor a file name.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in sorted(members):
            data = members[name]
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = FIXED_MTIME
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    with open(path, "wb") as out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=FIXED_MTIME) as gz:
            gz.write(raw)
        return out.tell()
