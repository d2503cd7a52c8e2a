"""A local Kubernetes API server for tests: the REST protocol, served from fixture objects.

It speaks enough of the real API for dradiag's live source and for ``kubectl get`` to talk
to it over real HTTP: discovery (``/version``, ``/api``, ``/api/v1``, ``/apis``,
``/apis/<group>[/<version>]``, legacy and aggregated), get and list for pods, events,
nodes, every resource.k8s.io kind (namespaced and cluster-wide) and ``apps/v1``
Deployments, ``limit``/``continue``
pagination with opaque tokens, ``fieldSelector`` on the fields the real server registers
(400 on any other), ``labelSelector`` (equality and set-based), ``resourceVersion`` on
lists, Table responses for ``kubectl get``'s default printing, pod logs (``container``,
``previous``, ``tailLines``, ``limitBytes``, ``sinceTime``/``sinceSeconds``), and Status
objects with the real wording for 401/403/404/400.

Objects are stored in the v1 shape (read through ``dradiag.sources.manifests``) and
converted to the version a request names, as a real server converts from storage
(``versions.py``). What the server does for tests:

- an RBAC model: a ClusterRole's rules (default: ``docs/rbac.yaml``) decide every
  resource request; anything outside gets the real 403 message;
- injectable faults per path pattern: any status (403/404/429/500/503...), a
  ``Retry-After``, a delay, for N requests or forever;
- a request log (method, path, query, headers) so tests assert verbs and counts.

It never changes state: a method other than GET is logged and refused (403 under RBAC,
else 405), so the read-only proof fails loudly on it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import ssl
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from kube_api.query_selectors import (
    SelectorError,
    fields_match,
    labels_match,
    parse_field_selector,
    parse_label_selector,
)
from kube_api.versions import to_version

from dradiag.snapshot.model import ContainerLog, Snapshot, name_of, namespace_of

REPO_ROOT = Path(__file__).resolve().parents[2]
RBAC_FILE = REPO_ROOT / "docs" / "rbac.yaml"
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
DEFAULT_TOKEN = "dradiag-test-token"
DEFAULT_USER = "system:serviceaccount:dradiag:dradiag"


@dataclass(frozen=True)
class ResourceType:
    """One REST resource the server serves."""

    group: str
    plural: str
    kind: str
    namespaced: bool
    singular: str
    short_names: tuple[str, ...] = ()


CORE_TYPES = (
    ResourceType("", "pods", "Pod", True, "pod", ("po",)),
    ResourceType("", "events", "Event", True, "event", ("ev",)),
    ResourceType("", "nodes", "Node", False, "node", ("no",)),
    ResourceType("", "namespaces", "Namespace", False, "namespace", ("ns",)),
)
DRA_TYPES = (
    ResourceType(DRA_GROUP, "resourceslices", "ResourceSlice", False, "resourceslice"),
    ResourceType(DRA_GROUP, "deviceclasses", "DeviceClass", False, "deviceclass"),
    ResourceType(DRA_GROUP, "devicetaintrules", "DeviceTaintRule", False, "devicetaintrule"),
    ResourceType(DRA_GROUP, "resourceclaims", "ResourceClaim", True, "resourceclaim"),
    ResourceType(
        DRA_GROUP, "resourceclaimtemplates", "ResourceClaimTemplate", True, "resourceclaimtemplate"
    ),
)
APPS_GROUP = "apps"
APPS_TYPES = (
    ResourceType(APPS_GROUP, "deployments", "Deployment", True, "deployment", ("deploy",)),
)
"""``apps/v1``: only Deployments (the NVIDIA driver's per-claim MPS control daemons)."""
_TYPE_BY_KIND = {t.kind: t for t in CORE_TYPES + DRA_TYPES + APPS_TYPES}


@dataclass
class Fault:
    """Make requests whose ``path?query`` matches ``pattern`` fail or slow down.

    ``status`` 0 only delays. ``times`` None means every matching request; otherwise the
    fault fires that many times and then lets requests through (a transient error).
    """

    pattern: str
    status: int = 500
    times: int | None = None
    delay: float = 0.0
    retry_after: float | None = None
    message: str | None = None
    fired: int = 0

    def applies(self, target: str) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        return re.search(self.pattern, target) is not None


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    status: int
    size: int = 0
    """Bytes of the response body."""

    @property
    def target(self) -> str:
        from urllib.parse import urlencode

        return self.path + ("?" + urlencode(sorted(self.query.items())) if self.query else "")


class ApiStatus(Exception):
    """A non-2xx answer carried as a metav1.Status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        plain: bool = False,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details
        self.headers = dict(headers or {})
        self.plain = plain

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            out["details"] = dict(self.details)
        return out


def load_rbac_rules(path: Path = RBAC_FILE) -> list[dict[str, Any]]:
    """The rules of the ClusterRole in ``path`` (docs/rbac.yaml by default)."""
    with path.open() as fh:
        for doc in yaml.safe_load_all(fh):
            if isinstance(doc, dict) and doc.get("kind") == "ClusterRole":
                return list(doc.get("rules") or [])
    raise ValueError(f"{path}: no ClusterRole")


@dataclass(frozen=True)
class _Request:
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


class KubeAPIServer:
    """The server; use as a context manager or call ``start()``/``stop()``."""

    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]] = (),
        logs: Iterable[ContainerLog] = (),
        *,
        versions: Sequence[str] = ("v1",),
        taint_rule_versions: Sequence[str] = (),
        server_version: str = "1.34",
        aggregated_discovery: bool = True,
        rbac: Sequence[Mapping[str, Any]] | None | str = "default",
        bound_namespaces: Sequence[str] | None = None,
        token: str | None = DEFAULT_TOKEN,
        user: str = DEFAULT_USER,
        latency: float = 0.0,
        tls: bool = False,
    ) -> None:
        self.versions = tuple(v for v in DRA_VERSIONS if v in versions)
        self.taint_rule_versions = tuple(v for v in DRA_VERSIONS if v in taint_rule_versions)
        self.server_version = server_version
        self.aggregated_discovery = aggregated_discovery
        self.rbac: list[Mapping[str, Any]] | None = (
            load_rbac_rules() if rbac == "default" else (list(rbac) if rbac else None)  # type: ignore[arg-type]
        )
        self.bound_namespaces = tuple(bound_namespaces) if bound_namespaces is not None else None
        self.token = token
        self.user = user
        self.latency = latency
        self.tls = tls
        self._cert_pem: bytes | None = None
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self.faults: list[Fault] = []
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._resource_version = 1000
        self._store: dict[str, list[tuple[tuple[str, str], dict[str, Any]]]] = defaultdict(list)
        self._by_key: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._logs: dict[tuple[str, str, str, bool], str] = {}
        self.node_logs: dict[str, str] = {}
        """Node log query answers (``/api/v1/nodes/<n>/proxy/logs/?query=kubelet``) by node;
        a node not listed answers 404, as a kubelet without the NodeLogQuery gate does."""
        self._unsorted: set[str] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        for obj in objects:
            self.add_object(obj)
        for log in logs:
            self.add_log(log)

    # -- content ------------------------------------------------------------------

    @classmethod
    def from_path(cls, path: str | Path, **kwargs: Any) -> KubeAPIServer:
        """Serve a ``--from`` fixture (directory or file), read as dradiag reads it."""
        from dradiag.sources.manifests import load_snapshot

        snapshot = load_snapshot(str(path))
        return cls.from_snapshot(snapshot, **kwargs)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, **kwargs: Any) -> KubeAPIServer:
        """Serve the objects and logs of a Snapshot."""
        objects = [obj for _, obj in snapshot.objects()]
        server = cls(objects, **kwargs)
        pods_by_name: dict[str, list[str]] = defaultdict(list)
        for pod in snapshot.pods:
            pods_by_name[name_of(pod)].append(namespace_of(pod))
        for log in snapshot.logs:
            if log.namespace is None and len(pods_by_name.get(log.pod, [])) == 1:
                log = ContainerLog(
                    namespace=pods_by_name[log.pod][0],
                    pod=log.pod,
                    container=log.container,
                    text=log.text,
                    previous=log.previous,
                )
            server.add_log(log)
        return server

    def add_object(self, obj: Mapping[str, Any]) -> None:
        """Store one object (any served shape is accepted; stored as given)."""
        rt = _TYPE_BY_KIND.get(str(obj.get("kind")))
        if rt is None:
            raise ValueError(f"the local API server does not serve kind {obj.get('kind')!r}")
        stored = json.loads(json.dumps(obj))
        meta = stored.setdefault("metadata", {})
        with self._lock:
            self._resource_version += 1
            meta.setdefault("resourceVersion", str(self._resource_version))
            key = (meta.get("namespace", "") if rt.namespaced else "", meta.get("name", ""))
            if (rt.plural, *key) in self._by_key:
                raise ValueError(f"duplicate {rt.kind} {key}")
            self._by_key[(rt.plural, *key)] = stored
            self._store[rt.plural].append((key, stored))
            self._unsorted.add(rt.plural)

    def add_log(self, log: ContainerLog) -> None:
        """Serve a container log (current, or previous instance)."""
        self._logs[(log.namespace or "", log.pod, log.container, log.previous)] = log.text

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> KubeAPIServer:
        handler = type("_BoundHandler", (_Handler,), {"api": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        if self.tls:
            self._httpd.socket = self._tls_context().wrap_socket(
                self._httpd.socket, server_side=True
            )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._tmpdir is not None:
            self._tmpdir.cleanup()
            self._tmpdir = None

    def _tls_context(self) -> ssl.SSLContext:
        """A self-signed serving certificate for 127.0.0.1 (clients get it as their CA).

        Real API servers speak only HTTPS, and kubectl sends bearer tokens only over
        TLS; the certificate is made with the ``openssl`` CLI for each server.
        """
        self._tmpdir = tempfile.TemporaryDirectory(prefix="kube-api-tls-")
        cert = Path(self._tmpdir.name) / "tls.crt"
        key = Path(self._tmpdir.name) / "tls.key"
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=kube-api-test", "-keyout", str(key), "-out", str(cert),
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        self._cert_pem = cert.read_bytes()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        return context

    def __enter__(self) -> KubeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def write_kubeconfig(
        self,
        path: str | Path,
        *,
        context: str = "kube-api-test",
        namespace: str | None = None,
        token: str | None = None,
    ) -> Path:
        """A kubeconfig pointing at this server (used by dradiag and kubectl alike)."""
        ctx: dict[str, Any] = {"cluster": "local", "user": "dradiag"}
        cluster: dict[str, Any] = {"server": self.url}
        if self._cert_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self._cert_pem).decode()
        if namespace:
            ctx["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": cluster}],
            "users": [{"name": "dradiag", "user": {"token": token or self.token or "none"}}],
            "contexts": [{"name": context, "context": ctx}],
            "current-context": context,
        }
        path = Path(path)
        path.write_text(yaml.safe_dump(config))
        return path

    # -- request log --------------------------------------------------------------

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def methods(self) -> set[str]:
        """Every HTTP method the server has received."""
        return {r.method for r in self.requests}

    def requests_to(self, pattern: str) -> list[RecordedRequest]:
        """Recorded requests whose path matches ``pattern`` (a regex)."""
        return [r for r in self.requests if re.search(pattern, r.path)]

    def add_fault(self, pattern: str, status: int = 500, **kwargs: Any) -> Fault:
        fault = Fault(pattern, status, **kwargs)
        self.faults.append(fault)
        return fault

    # -- dispatch -----------------------------------------------------------------

    def handle(
        self, method: str, raw_path: str, headers: Mapping[str, str], impersonate_groups: list[str]
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        target = parts.path + ("?" + parts.query if parts.query else "")
        recorded = {
            k: headers[k]
            for k in ("Accept", "User-Agent", "Impersonate-User", "Content-Type")
            if k in headers
        }
        if impersonate_groups:
            recorded["Impersonate-Group"] = ",".join(impersonate_groups)
        status, out_headers, body = 500, {}, b""
        try:
            if self.latency:
                time.sleep(self.latency)
            self._apply_faults(method, parts.path, target, query, headers)
            status, out_headers, body = self._route(method, parts.path, query, headers)
        except ApiStatus as exc:
            status = exc.code
            out_headers = dict(exc.headers)
            if exc.plain:
                out_headers["Content-Type"] = "text/plain; charset=utf-8"
                body = (exc.message + "\n").encode()
            else:
                out_headers["Content-Type"] = "application/json"
                body = json.dumps(exc.body()).encode()
        finally:
            with self._lock:
                self.requests.append(
                    RecordedRequest(method, parts.path, query, recorded, status, len(body))
                )
        return status, out_headers, body

    def _apply_faults(
        self,
        method: str,
        path: str,
        target: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
    ) -> None:
        for fault in list(self.faults):
            with self._lock:
                if not fault.applies(target):
                    continue
                fault.fired += 1
            if fault.delay:
                time.sleep(fault.delay)
            if fault.status == 0:
                continue
            extra = (
                {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            )
            if fault.status == 403:
                req = self._parse_resource(method, path, query)
                if req is not None:
                    raise self._forbidden(req, headers, extra)
            reason = {
                400: "BadRequest",
                404: "NotFound",
                409: "Conflict",
                410: "Expired",
                429: "TooManyRequests",
                500: "InternalError",
                503: "ServiceUnavailable",
                504: "Timeout",
            }.get(fault.status, "Unknown")
            raise ApiStatus(
                fault.status,
                reason,
                fault.message or f"injected fault {fault.status}",
                headers=extra,
            )

    def _user(self, headers: Mapping[str, str]) -> str:
        return headers.get("Impersonate-User") or self.user

    def _authenticate(self, headers: Mapping[str, str]) -> None:
        if self.token is None:
            return
        if headers.get("Authorization") != f"Bearer {self.token}":
            raise ApiStatus(401, "Unauthorized", "Unauthorized")

    def _route(
        self, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        self._authenticate(headers)
        segs = [s for s in path.split("/") if s]
        accept = headers.get("Accept", "")
        if method == "GET":
            discovery = self._discovery(segs, accept)
            if discovery is not None:
                return discovery
        req = self._parse_resource(method, path, query)
        if req is None:
            raise ApiStatus(404, "NotFound", "404 page not found", plain=True)
        if not self._authorized(req):
            raise self._forbidden(req, headers)
        if method != "GET":
            raise ApiStatus(
                405, "MethodNotAllowed", f"the local API server is read-only: {method} refused"
            )
        if req.verb == "watch":
            raise ApiStatus(405, "MethodNotAllowed", "watch is not served by the local API server")
        version = segs[2] if segs[0] == "apis" else "v1"
        rt = self._resource_type(req.group, version, req.resource)
        if req.subresource == "log":
            return self._pod_log(req, query)
        if req.resource == "nodes" and req.subresource == "proxy":
            return self._node_log(req, path, query)
        if req.subresource:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if req.name:
            return _json(200, self._get(rt, version, req))
        if "as=Table" in accept:
            return _json(200, self._table(rt, version, req.namespace, query))
        return _json(200, self._list(rt, version, req.namespace, query))

    # -- discovery ----------------------------------------------------------------

    def _served(self, rt: ResourceType) -> tuple[str, ...]:
        if rt.group in ("", APPS_GROUP):
            return ("v1",)
        if rt.plural == "devicetaintrules":
            return self.taint_rule_versions
        return self.versions

    def _group_versions(self) -> list[str]:
        return [v for v in DRA_VERSIONS if any(v in self._served(rt) for rt in DRA_TYPES)]

    def _resource_type(self, group: str, version: str, plural: str) -> ResourceType:
        for rt in CORE_TYPES + DRA_TYPES + APPS_TYPES:
            if rt.group == group and rt.plural == plural and version in self._served(rt):
                return rt
        raise ApiStatus(404, "NotFound", "the server could not find the requested resource")

    def _api_resources(self, group: str, version: str) -> list[dict[str, Any]]:
        out = []
        types = {"": CORE_TYPES, APPS_GROUP: APPS_TYPES}.get(group, DRA_TYPES)
        for rt in types:
            if version not in self._served(rt):
                continue
            out.append(
                {
                    "name": rt.plural,
                    "singularName": rt.singular,
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": ALL_VERBS,
                    **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
                }
            )
            if rt.plural == "pods":
                out.append(
                    {
                        "name": "pods/log",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Pod",
                        "verbs": ["get"],
                    }
                )
        return out

    def _aggregated_versions(self, group: str) -> list[dict[str, Any]]:
        versions = ["v1"] if group == "" else self._group_versions()
        out = []
        for version in versions:
            resources = []
            for res in self._api_resources(group, version):
                if "/" in res["name"]:
                    continue
                entry: dict[str, Any] = {
                    "resource": res["name"],
                    "responseKind": {"group": group, "version": version, "kind": res["kind"]},
                    "scope": "Namespaced" if res["namespaced"] else "Cluster",
                    "singularResource": res["singularName"],
                    "verbs": res["verbs"],
                }
                if res.get("shortNames"):
                    entry["shortNames"] = res["shortNames"]
                if res["name"] == "pods":
                    entry["subresources"] = [
                        {
                            "subresource": "log",
                            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                            "verbs": ["get"],
                        }
                    ]
                resources.append(entry)
            out.append({"version": version, "resources": resources, "freshness": "Current"})
        return out

    def _discovery(self, segs: list[str], accept: str) -> tuple[int, dict[str, str], bytes] | None:
        aggregated = self.aggregated_discovery and "as=APIGroupDiscoveryList" in accept
        agg_type = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        if segs == ["version"]:
            major, minor = self.server_version.split(".")[:2]
            return _json(
                200,
                {
                    "major": major,
                    "minor": minor,
                    "gitVersion": f"v{major}.{minor}.0",
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.24.0",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                },
            )
        if segs == ["api"]:
            if aggregated:
                body = {
                    "kind": "APIGroupDiscoveryList",
                    "apiVersion": "apidiscovery.k8s.io/v2",
                    "metadata": {},
                    "items": [
                        {
                            "metadata": {"creationTimestamp": None},
                            "versions": self._aggregated_versions(""),
                        }
                    ],
                }
                return _json(200, body, content_type=agg_type)
            return _json(
                200,
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:443"}
                    ],
                },
            )
        if segs == ["api", "v1"]:
            return _json(
                200,
                {
                    "kind": "APIResourceList",
                    "groupVersion": "v1",
                    "resources": self._api_resources("", "v1"),
                },
            )
        group_versions = self._group_versions()
        if segs == ["apis"]:
            if aggregated:
                items = []
                if group_versions:
                    items.append(
                        {
                            "metadata": {"name": DRA_GROUP, "creationTimestamp": None},
                            "versions": self._aggregated_versions(DRA_GROUP),
                        }
                    )
                body = {
                    "kind": "APIGroupDiscoveryList",
                    "apiVersion": "apidiscovery.k8s.io/v2",
                    "metadata": {},
                    "items": items,
                }
                return _json(200, body, content_type=agg_type)
            groups = [self._api_group()] if group_versions else []
            return _json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        if segs == ["apis", DRA_GROUP] and group_versions:
            return _json(200, {"kind": "APIGroup", "apiVersion": "v1", **self._api_group()})
        if segs == ["apis", APPS_GROUP, "v1"]:
            return _json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{APPS_GROUP}/v1",
                    "resources": self._api_resources(APPS_GROUP, "v1"),
                },
            )
        if len(segs) == 3 and segs[:2] == ["apis", DRA_GROUP] and segs[2] in group_versions:
            return _json(
                200,
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{DRA_GROUP}/{segs[2]}",
                    "resources": self._api_resources(DRA_GROUP, segs[2]),
                },
            )
        return None

    def _api_group(self) -> dict[str, Any]:
        versions = [
            {"groupVersion": f"{DRA_GROUP}/{v}", "version": v} for v in self._group_versions()
        ]
        return {"name": DRA_GROUP, "versions": versions, "preferredVersion": versions[0]}

    # -- authorization ------------------------------------------------------------

    def _parse_resource(self, method: str, path: str, query: Mapping[str, str]) -> _Request | None:
        segs = [s for s in path.split("/") if s]
        if len(segs) >= 2 and segs[0] == "api" and segs[1] == "v1":
            group, rest = "", segs[2:]
        elif len(segs) >= 3 and segs[0] == "apis":
            group, rest = segs[1], segs[3:]
        else:
            return None
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif len(rest) == 2 and rest[0] == "namespaces":
            rest = ["namespaces", rest[1]]
        if not rest:
            return None
        resource = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        verb = {
            "GET": "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list"),
            "POST": "create",
            "PUT": "update",
            "PATCH": "patch",
            "DELETE": "delete" if name else "deletecollection",
        }.get(method, method.lower())
        return _Request(verb, group, resource, subresource, namespace, name)

    def _authorized(self, req: _Request) -> bool:
        if self.rbac is None:
            return True
        if self.bound_namespaces is not None and (
            not req.namespace or req.namespace not in self.bound_namespaces
        ):
            return False
        resource = req.resource + (f"/{req.subresource}" if req.subresource else "")
        for rule in self.rbac:
            groups = rule.get("apiGroups") or []
            resources = rule.get("resources") or []
            verbs = rule.get("verbs") or []
            names = rule.get("resourceNames") or []
            if (
                ("*" in groups or req.group in groups)
                and ("*" in resources or resource in resources)
                and ("*" in verbs or req.verb in verbs)
            ):
                if names and req.name not in names:
                    continue
                return True
        return False

    def _forbidden(
        self, req: _Request, headers: Mapping[str, str], extra: Mapping[str, str] | None = None
    ) -> ApiStatus:
        resource = req.resource + (f"/{req.subresource}" if req.subresource else "")
        # The real wording qualifies non-core resources with their group.
        qualified = f"{req.resource}.{req.group}" if req.group else req.resource
        subject = f'{qualified} "{req.name}"' if req.name else qualified
        where = f'in the namespace "{req.namespace}"' if req.namespace else "at the cluster scope"
        message = (
            f'{subject} is forbidden: User "{self._user(headers)}" cannot {req.verb} '
            f'resource "{resource}" in API group "{req.group}" {where}'
        )
        details: dict[str, Any] = {"kind": req.resource}
        if req.name:
            details["name"] = req.name
        if req.group:
            details["group"] = req.group
        return ApiStatus(403, "Forbidden", message, details, headers=extra)

    # -- reads --------------------------------------------------------------------

    def _present(self, rt: ResourceType, version: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        if rt.group == DRA_GROUP:
            return to_version(rt.kind, obj, version)
        out = json.loads(json.dumps(obj))
        out["apiVersion"] = f"{rt.group}/v1" if rt.group else "v1"
        return out

    def _not_found(self, rt: ResourceType, name: str) -> ApiStatus:
        details: dict[str, Any] = {"name": name, "kind": rt.plural}
        if rt.group:
            details["group"] = rt.group
        label = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
        return ApiStatus(404, "NotFound", f'{label} "{name}" not found', details)

    def _get(self, rt: ResourceType, version: str, req: _Request) -> dict[str, Any]:
        if rt.plural == "namespaces":
            if req.name in self._namespaces():
                return self._namespace_obj(req.name)
            raise self._not_found(rt, req.name)
        obj = self._by_key.get((rt.plural, req.namespace if rt.namespaced else "", req.name))
        if obj is None:
            raise self._not_found(rt, req.name)
        out = self._present(rt, version, obj)
        out["kind"] = rt.kind
        return out

    def _namespaces(self) -> list[str]:
        names = {key[1] for key in self._by_key if key[1]}
        return sorted(names)

    def _namespace_obj(self, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
            "status": {"phase": "Active"},
        }

    def _select(
        self, rt: ResourceType, namespace: str, query: Mapping[str, str]
    ) -> tuple[list[tuple[tuple[str, str], dict[str, Any]]], str | None, int]:
        try:
            fsel = parse_field_selector(rt.plural, query.get("fieldSelector", ""))
            lsel = parse_label_selector(query.get("labelSelector", ""))
        except SelectorError as exc:
            raise ApiStatus(400, "BadRequest", str(exc)) from None
        if rt.plural == "namespaces":
            entries = [(("", n), self._namespace_obj(n)) for n in self._namespaces()]
        else:
            with self._lock:
                if rt.plural in self._unsorted:
                    # etcd order: by key, i.e. namespace then name.
                    self._store[rt.plural].sort(key=lambda kv: kv[0])
                    self._unsorted.discard(rt.plural)
                entries = list(self._store.get(rt.plural, ()))
        start_after: tuple[str, str] | None = None
        if token := query.get("continue"):
            try:
                decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
                start_after = (decoded["start"][0], decoded["start"][1])
            except (ValueError, KeyError, TypeError, IndexError):
                raise ApiStatus(400, "BadRequest", f"continue key is not valid: {token}") from None
        matched = [
            (key, obj)
            for key, obj in entries
            if (not namespace or key[0] == namespace)
            and (start_after is None or key > start_after)
            and fields_match(rt.plural, fsel, obj)
            and labels_match(lsel, obj)
        ]
        limit = int(query.get("limit") or 0)
        next_token = None
        remaining = 0
        if limit and len(matched) > limit:
            remaining = len(matched) - limit
            matched = matched[:limit]
            last = matched[-1][0]
            next_token = base64.urlsafe_b64encode(
                json.dumps(
                    {"v": "meta.k8s.io/v1", "rv": self._resource_version, "start": list(last)}
                ).encode()
            ).decode()
        return matched, next_token, remaining

    def _list(
        self, rt: ResourceType, version: str, namespace: str, query: Mapping[str, str]
    ) -> dict[str, Any]:
        matched, token, remaining = self._select(rt, namespace, query)
        items = []
        for _, obj in matched:
            item = self._present(rt, version, obj) if rt.plural != "namespaces" else dict(obj)
            # Items of a typed list carry no kind/apiVersion on the wire.
            item.pop("kind", None)
            item.pop("apiVersion", None)
            items.append(item)
        meta: dict[str, Any] = {"resourceVersion": str(self._resource_version)}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        api_version = f"{rt.group}/{version}" if rt.group else "v1"
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": api_version,
            "metadata": meta,
            "items": items,
        }

    def _table(
        self, rt: ResourceType, version: str, namespace: str, query: Mapping[str, str]
    ) -> dict[str, Any]:
        matched, token, remaining = self._select(rt, namespace, query)
        columns = [("Name", "string", "name")]
        if rt.plural == "resourceslices":
            columns += [("Node", "string", ""), ("Driver", "string", ""), ("Pool", "string", "")]
        columns.append(("Age", "string", ""))
        rows = []
        for _, obj in matched:
            spec = obj.get("spec") or {}
            cells: list[Any] = [name_of(obj)]
            if rt.plural == "resourceslices":
                cells += [
                    spec.get("nodeName") or "<none>",
                    spec.get("driver") or "",
                    (spec.get("pool") or {}).get("name") or "",
                ]
            cells.append(_age((obj.get("metadata") or {}).get("creationTimestamp")))
            rows.append(
                {
                    "cells": cells,
                    "object": {
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": obj.get("metadata") or {},
                    },
                }
            )
        meta: dict[str, Any] = {"resourceVersion": str(self._resource_version)}
        if token:
            meta["continue"] = token
            meta["remainingItemCount"] = remaining
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": [
                {"name": n, "type": t, "format": f, "description": "", "priority": 0}
                for n, t, f in columns
            ],
            "rows": rows,
        }

    def _pod_log(
        self, req: _Request, query: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        pod = self._by_key.get(("pods", req.namespace, req.name))
        if pod is None:
            raise self._not_found(_TYPE_BY_KIND["Pod"], req.name)
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = query.get("container")
        if not container:
            if len(containers) != 1:
                raise ApiStatus(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod {req.name}, "
                    f"choose one of: [{' '.join(str(c) for c in containers)}]",
                )
            container = str(containers[0])
        init = [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []]
        if container not in containers and container not in init:
            raise ApiStatus(
                400, "BadRequest", f"container {container} is not valid for pod {req.name}"
            )
        previous = query.get("previous") in ("true", "1")
        text = self._logs.get((req.namespace, req.name, container, previous))
        if text is None:
            if previous:
                raise ApiStatus(
                    400,
                    "BadRequest",
                    f'previous terminated container "{container}" in pod "{req.name}" not found',
                )
            for st in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = (st.get("state") or {}).get("waiting")
                if st.get("name") == container and waiting:
                    raise ApiStatus(
                        400,
                        "BadRequest",
                        f'container "{container}" in pod "{req.name}" is waiting to start: '
                        f"{waiting.get('reason') or 'ContainerCreating'}",
                    )
            text = ""
        lines = text.splitlines(keepends=True)
        since = _since(query)
        if since is not None:
            lines = _lines_since(lines, since)
        if query.get("tailLines"):
            tail = int(query["tailLines"])
            lines = lines[-tail:] if tail > 0 else []
        if query.get("timestamps") in ("true", "1"):
            lines = _with_timestamps(lines, pod)
        data = "".join(lines).encode()
        if query.get("limitBytes"):
            data = data[: int(query["limitBytes"])]
        return 200, {"Content-Type": "text/plain"}, data

    def _node_log(
        self, req: _Request, path: str, query: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """The node log query: ``query=kubelet`` served from :attr:`node_logs`."""
        if ("nodes", "", req.name) not in self._by_key:
            raise self._not_found(_TYPE_BY_KIND["Node"], req.name)
        if not path.rstrip("/").endswith("/proxy/logs") or req.name not in self.node_logs:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if query.get("query") != "kubelet":
            raise ApiStatus(400, "BadRequest", "only query=kubelet is served here")
        lines = self.node_logs[req.name].splitlines(keepends=True)
        if query.get("tailLines"):
            lines = lines[-int(query["tailLines"]) :]
        return 200, {"Content-Type": "text/plain"}, "".join(lines).encode()


# -- helpers --------------------------------------------------------------------------


def _with_timestamps(lines: list[str], pod: Mapping[str, Any]) -> list[str]:
    """``timestamps=true``: each line prefixed with its RFC 3339 time, as the kubelet does.

    The time is the line's own (klog or RFC 3339 header) or, for lines without one, the
    previous line's, else the pod's creation time.
    """
    created = str((pod.get("metadata") or {}).get("creationTimestamp") or "2026-01-01T00:00:00Z")
    fallback = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    current = fallback
    out = []
    for line in lines:
        current = _line_time(line, fallback.year) or current
        stamp = current.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out.append(f"{stamp} {line}")
    return out


def _json(
    status: int, body: Any, content_type: str = "application/json"
) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": content_type}, json.dumps(body).encode()


def _age(timestamp: Any) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        created = dt.datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    seconds = max(0, int((dt.datetime.now(dt.UTC) - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _since(query: Mapping[str, str]) -> dt.datetime | None:
    if query.get("sinceTime"):
        return dt.datetime.fromisoformat(query["sinceTime"].replace("Z", "+00:00"))
    if query.get("sinceSeconds"):
        return dt.datetime.now(dt.UTC) - dt.timedelta(seconds=int(query["sinceSeconds"]))
    return None


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))")
_KLOG = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")


def _line_time(line: str, year: int) -> dt.datetime | None:
    """The time a log line was written, from its RFC 3339 or klog header.

    The kubelet filters ``sinceTime`` on the CRI timestamps it stores beside each line;
    fixture logs carry their time in the text instead, so it is read from there.
    """
    if m := _RFC3339.match(line):
        stamp = m.group(1).replace("Z", "+00:00")
        stamp = re.sub(r"\.(\d{6})\d+", r".\1", stamp)
        return dt.datetime.fromisoformat(stamp)
    if m := _KLOG.match(line):
        month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 6))
        micro = int((m.group(6) or "0").ljust(6, "0"))
        return dt.datetime(year, month, day, hour, minute, second, micro, tzinfo=dt.UTC)
    return None


def _lines_since(lines: list[str], since: dt.datetime) -> list[str]:
    out = []
    current: dt.datetime | None = None
    for line in lines:
        stamp = _line_time(line, since.year)
        if stamp is not None:
            current = stamp
        if current is None or current >= since:
            out.append(line)
    return out


class _Handler(BaseHTTPRequestHandler):
    api: KubeAPIServer
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY each answer
    # waits out the client's delayed ACK (~40 ms), which no real server does.
    disable_nagle_algorithm = True
    server_version = "kube-apiserver-local"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        # Header names are case-insensitive on the wire; keep one spelling.
        headers = {k.title(): v for k, v in self.headers.items()}
        groups = self.headers.get_all("Impersonate-Group") or []
        status, out_headers, body = self.api.handle(self.command, self.path, headers, groups)
        self.send_response(status)
        for key, value in out_headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve
