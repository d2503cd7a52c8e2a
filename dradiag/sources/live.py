"""Live collection: a Snapshot read from the Kubernetes API (the one module that imports kubernetes).

Configuration, authentication and transport come from the ``kubernetes`` package, as
kubectl users expect (peers.md §3): ``--kubeconfig``, ``KUBECONFIG`` with several files,
``--context``, the in-cluster service account as a fallback, exec/OIDC token refresh,
client certificates, proxies, and ``--as``/``--as-group`` impersonation headers.
Objects are kept as raw JSON dicts from the connection pool (no typed models: they drop
newer fields and are slow, DESIGN §1); nothing is ever written back, not even a
refreshed token into the kubeconfig (``persist_config=False``).

``kubernetes`` is imported inside functions only, so ``dradiag --help`` and ``--from``
runs never load it (STYLE "Start-up time"). The request policy (timeouts, retries,
pagination) is ``live_transport.py``; what is read is ``live_plan.py``.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from dradiag.errors import ClusterUnreachable, UsageError
from dradiag.sources.live_transport import ApiError, RawResponse, Reader, Send, TransportError

if TYPE_CHECKING:
    from dradiag.cli.inputs import Target
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Snapshot

logger = logging.getLogger(__name__)

DEFAULT_KUBECONFIG = "~/.kube/config"


@dataclass(frozen=True, slots=True)
class Connection:
    """A configured way to send GETs to one cluster."""

    send: Send
    host: str
    context: str | None
    close: Any


def _kubeconfig_paths(options: CommonOptions) -> str | None:
    """The kubeconfig file list kubectl would use, or None (then: in-cluster)."""
    return _kubeconfig_files(options.kubeconfig)


def _kubeconfig_files(kubeconfig: str | None) -> str | None:
    if kubeconfig:
        path = os.path.expanduser(kubeconfig)
        if not os.path.exists(path):
            raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
        return path
    env = os.environ.get("KUBECONFIG")
    if env:
        # Read at call time: the kubernetes package reads KUBECONFIG once, at import.
        paths = [p for p in env.split(os.pathsep) if p and os.path.exists(os.path.expanduser(p))]
        if paths:
            return os.pathsep.join(paths)
    default = os.path.expanduser(DEFAULT_KUBECONFIG)
    return default if os.path.exists(default) else None


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def context_namespace(kubeconfig: str | None, context: str | None) -> str | None:
    """The namespace kubectl would default to: the kubeconfig context's ``namespace``
    (``--context``, else the current context), in a pod the service account's; None when
    neither names one. Never raises: a bad kubeconfig is reported by :func:`connect`."""
    try:
        from kubernetes import config

        paths = _kubeconfig_files(kubeconfig)
        if paths is None:
            with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as handle:
                return handle.read().strip() or None
        contexts, current = config.list_kube_config_contexts(config_file=paths)
        chosen = next((c for c in contexts or () if c.get("name") == context), None)
        chosen = chosen if context else current
        namespace = ((chosen or {}).get("context") or {}).get("namespace")
        return str(namespace) if namespace else None
    except Exception:  # noqa: BLE001 - any failure means "no default"; connect() reports it
        return None


def connect(options: CommonOptions) -> Connection:
    """Configure the client like kubectl; UsageError for a bad context, else ClusterUnreachable."""
    import urllib3
    from kubernetes import client, config
    from kubernetes.client.rest import RESTClientObject
    from kubernetes.config.config_exception import ConfigException

    configuration = client.Configuration()
    paths = _kubeconfig_paths(options)
    context_name: str | None = options.context
    try:
        if paths is not None:
            config.load_kube_config(
                config_file=paths,
                context=options.context,
                client_configuration=configuration,
                persist_config=False,
            )
            if context_name is None:
                _, current = config.list_kube_config_contexts(config_file=paths)
                context_name = (current or {}).get("name")
        else:
            if options.context:
                raise UsageError(f"--context {options.context}: no kubeconfig found")
            config.load_incluster_config(client_configuration=configuration)
            context_name = "in-cluster"
    except ConfigException as exc:
        text = str(exc)
        if options.context and options.context in text:
            raise UsageError(f"--context {options.context}: not found in the kubeconfig") from None
        if paths is None:
            raise ClusterUnreachable(
                "no kubeconfig found (KUBECONFIG, ~/.kube/config) and not running in a cluster; "
                "use --kubeconfig, or --from PATH to read saved state"
            ) from None
        raise ClusterUnreachable(f"cannot use the kubeconfig: {text}") from None

    configuration.retries = False  # retries are live_transport's policy, GET-only
    rest = RESTClientObject(configuration)
    host = configuration.host.rstrip("/")
    base_headers: dict[str, str] = {"User-Agent": _user_agent()}
    if options.as_user:
        base_headers["Impersonate-User"] = options.as_user
    groups = tuple(options.as_groups)

    def send(path: str, query: Mapping[str, str], accept: str, timeout: float) -> RawResponse:
        headers = urllib3.HTTPHeaderDict(base_headers)
        headers["Accept"] = accept
        auth: Mapping[str, Any] = configuration.auth_settings()
        for setting in auth.values():
            # Bearer tokens, refreshed by the loader's hook for exec and OIDC users.
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        for group in groups:
            headers.add("Impersonate-Group", group)
        url = host + path + ("?" + urlencode(list(query.items())) if query else "")
        try:
            response = rest.pool_manager.request(
                "GET",
                url,
                headers=headers,
                # inf: --request-timeout 0 and --timeout 0, kubectl's "no timeout".
                timeout=urllib3.Timeout(total=None if math.isinf(timeout) else timeout),
                retries=False,
                preload_content=True,
                redirect=False,
            )
        except urllib3.exceptions.NewConnectionError as exc:
            # Before the timeout clause: urllib3 2 makes NewConnectionError a subclass of
            # ConnectTimeoutError, so a refused connection would read as a timeout.
            raise TransportError(connection_failure(exc)) from None
        except (urllib3.exceptions.TimeoutError, TimeoutError) as exc:
            raise TransportError(f"timed out: {exc}", timed_out=True) from None
        except urllib3.exceptions.MaxRetryError as exc:
            # Not raised with retries=False, but a proxy or pool may wrap the cause in it.
            if isinstance(exc.reason, urllib3.exceptions.NewConnectionError):
                raise TransportError(connection_failure(exc.reason)) from None
            raise TransportError(f"{type(exc).__name__}: {exc.reason or exc}") from None
        except urllib3.exceptions.HTTPError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from None
        except OSError as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from None
        return RawResponse(
            status=response.status,
            headers={k.lower(): v for k, v in response.headers.items()},
            body=response.data,
        )

    return Connection(send=send, host=host, context=context_name, close=rest.close)


def connection_failure(exc: BaseException) -> str:
    """The words for a connection that could not be made: ``connection refused`` when the
    OS refused it (nothing listens at that address and port), else the OS's reason.

    kubectl says "The connection to the server HOST was refused"; the caller puts the
    address in front, since a wrong context or port is the usual cause.
    """
    import errno

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or (
            isinstance(cause, OSError) and cause.errno == errno.ECONNREFUSED
        ):
            return "connection refused (is the server address and port right?)"
        if isinstance(cause, OSError) and cause.strerror and cause is not exc:
            return f"cannot connect: {cause.strerror.lower()}"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "refused" in text.lower():
        return "connection refused (is the server address and port right?)"
    return f"cannot connect: {text.split(': ', 1)[-1]}"


def _user_agent() -> str:
    from dradiag import __version__

    return f"dradiag/{__version__} (read-only)"


def collect_snapshot(options: CommonOptions, target: Target) -> Snapshot:
    """Read what ``target`` needs from the cluster ``options`` point at."""
    connection = connect(options)
    try:
        return collect_with(
            connection.send, options, target, host=connection.host, context=connection.context
        )
    finally:
        connection.close()


def collect_with(
    send: Send,
    options: CommonOptions,
    target: Target,
    *,
    host: str | None = None,
    context: str | None = None,
) -> Snapshot:
    """Collection over any ``send`` function (the kubernetes pool, or a test's)."""
    from dradiag.snapshot.model import SourceInfo
    from dradiag.sources.live_discovery import discover
    from dradiag.sources.live_plan import (
        Collector,
        collect_claim,
        collect_cluster,
        collect_pod,
        now_rfc3339,
    )
    from dradiag.sources.progress import Progress

    reader = Reader(send, request_timeout=options.request_timeout, overall_timeout=options.timeout)
    progress = Progress.for_output(output=str(options.output.value), no_color=options.no_color)
    with progress:
        progress.update(f"discovery at {host or 'the API server'}")
        try:
            discovery = discover(reader)
        except ApiError as exc:
            where = host or "the API server"
            if exc.status == 401:
                raise ClusterUnreachable(f"{where}: unauthorized: {exc.message}") from None
            raise ClusterUnreachable(
                f"cannot reach the Kubernetes API at {where}: {exc.message}"
            ) from None
        collector = Collector(reader, discovery, progress=progress)
        try:
            if target.kind == "claim" and target.name:
                collect_claim(collector, target.namespace or "default", target.name)
            elif target.kind == "pod" and target.name:
                collect_pod(collector, target.namespace or "default", target.name)
            else:
                collect_cluster(
                    collector,
                    target.namespace,
                    target.nodes,
                    label_selector=target.label_selector,
                    field_selector=target.field_selector,
                )
        finally:
            collector.close()
        logger.debug(
            "collection: %d requests, %d retries", reader.stats.requests, reader.stats.retries
        )
        source = SourceInfo(
            kind="live",
            location=host,
            context=context,
            collected_at=now_rfc3339(),
            server_version=discovery.server_version,
            server_git_version=discovery.git_version,
            served_versions=discovery.served_versions,
        )
        return collector.snapshot(source, targeted=target.kind != "cluster")
