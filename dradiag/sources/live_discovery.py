"""API discovery for live collection: server version and the resource.k8s.io versions served.

Which version to read each DRA kind with follows k8s-dra-semantics §4.1: prefer ``v1``,
then ``v1beta2``, ``v1beta1``, ``v1alpha3``, per resource (DeviceTaintRule may be served
only in ``v1alpha3`` while everything else is ``v1``). Objects read in any version are
normalized to the v1 shape afterwards (``snapshot/normalize.py``).

Aggregated discovery (one ``/apis`` request listing every group, version and resource,
served since Kubernetes 1.26/1.30) is asked for first, as kubectl does; a server that
answers with the legacy ``APIGroupList`` gets the per-version resource lists instead.
The server version matters to the diagnosis: allocator behaviour differs by release.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dradiag.snapshot.model import RESOURCE_OF_KIND, CollectionError, Kind
from dradiag.snapshot.normalize import RESOURCE_GROUP, RESOURCE_VERSIONS
from dradiag.sources.live_transport import AGGREGATED_DISCOVERY, ApiError, Reader

DRA_PLURALS: dict[Kind, str] = {
    k: RESOURCE_OF_KIND[k]
    for k in (
        Kind.RESOURCE_SLICE,
        Kind.DEVICE_CLASS,
        Kind.DEVICE_TAINT_RULE,
        Kind.RESOURCE_CLAIM,
        Kind.RESOURCE_CLAIM_TEMPLATE,
    )
}
CORE_PLURALS: dict[Kind, str] = {k: RESOURCE_OF_KIND[k] for k in (Kind.POD, Kind.NODE, Kind.EVENT)}
APPS_PLURALS: dict[Kind, str] = {Kind.DEPLOYMENT: RESOURCE_OF_KIND[Kind.DEPLOYMENT]}
"""``apps/v1`` kinds: served by every cluster dradiag supports, so never discovered."""
APPS_GROUP_VERSION = "apps/v1"
NAMESPACED = frozenset(
    {Kind.RESOURCE_CLAIM, Kind.RESOURCE_CLAIM_TEMPLATE, Kind.POD, Kind.EVENT, Kind.DEPLOYMENT}
)


def plural_of(kind: Kind) -> str:
    """The REST resource name of a kind (``pods``, ``resourceslices``)."""
    return DRA_PLURALS.get(kind) or APPS_PLURALS.get(kind) or CORE_PLURALS[kind]


def qualified_plural(kind: Kind) -> str:
    """``resourceslices.resource.k8s.io``, ``deployments.apps``, ``pods``: as RBAC names it."""
    if kind in DRA_PLURALS:
        return f"{DRA_PLURALS[kind]}.{RESOURCE_GROUP}"
    if kind in APPS_PLURALS:
        return f"{APPS_PLURALS[kind]}.apps"
    return plural_of(kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Discovery:
    """What the server serves, as far as dradiag reads it."""

    server_version: str | None = None
    """``major.minor`` (e.g. ``1.34``)."""
    git_version: str | None = None
    served_versions: tuple[str, ...] = ()
    """resource.k8s.io versions served, in dradiag's order of preference."""
    resource_versions: Mapping[Kind, str | None] = field(default_factory=dict)
    """The version each DRA kind is read with; None when the server does not serve it."""
    errors: tuple[CollectionError, ...] = ()
    assumed: bool = False
    """True when discovery was refused and ``v1`` is assumed for every DRA kind."""

    def serves(self, kind: Kind) -> bool:
        """True when the kind can be read (core and apps/v1 kinds always)."""
        return (
            kind in CORE_PLURALS
            or kind in APPS_PLURALS
            or self.resource_versions.get(kind) is not None
        )

    def path(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The REST path for a collection or one object of ``kind``."""
        if kind in CORE_PLURALS:
            base = "/api/v1"
        elif kind in APPS_PLURALS:
            base = f"/apis/{APPS_GROUP_VERSION}"
        else:
            version = self.resource_versions.get(kind)
            if version is None:
                raise KeyError(f"{kind.value} is not served")
            base = f"/apis/{RESOURCE_GROUP}/{version}"
        if namespace and kind in NAMESPACED:
            base += f"/namespaces/{namespace}"
        path = f"{base}/{plural_of(kind)}"
        if name:
            path += f"/{name}"
            if subresource:
                path += f"/{subresource}"
        return path


def _server_version(info: Mapping[str, Any]) -> str | None:
    major = re.sub(r"\D", "", str(info.get("major") or ""))
    minor = re.sub(r"\D", "", str(info.get("minor") or ""))
    if major and minor:
        return f"{major}.{minor}"
    git = re.match(r"v?(\d+)\.(\d+)", str(info.get("gitVersion") or ""))
    return f"{git.group(1)}.{git.group(2)}" if git else None


def _pick(resources_by_version: Mapping[str, set[str]]) -> dict[Kind, str | None]:
    picked: dict[Kind, str | None] = {}
    for kind, plural in DRA_PLURALS.items():
        picked[kind] = next(
            (v for v in RESOURCE_VERSIONS if plural in resources_by_version.get(v, set())), None
        )
    return picked


def _from_aggregated(doc: Mapping[str, Any]) -> dict[str, set[str]]:
    by_version: dict[str, set[str]] = {}
    for group in doc.get("items") or []:
        if ((group or {}).get("metadata") or {}).get("name") != RESOURCE_GROUP:
            continue
        for version in group.get("versions") or []:
            names = {
                str(r.get("resource"))
                for r in version.get("resources") or []
                if isinstance(r, Mapping)
            }
            by_version[str(version.get("version"))] = names
    return by_version


def _legacy_group_versions(doc: Mapping[str, Any]) -> list[str]:
    for group in doc.get("groups") or []:
        if isinstance(group, Mapping) and group.get("name") == RESOURCE_GROUP:
            return [str(v.get("version")) for v in group.get("versions") or []]
    return []


def discover(reader: Reader) -> Discovery:
    """Read ``/version`` and ``/apis``; ApiError from ``/version`` propagates to the caller.

    The caller decides what an unreachable server means (ClusterUnreachable: nothing
    was read yet). A refused ``/apis`` is not fatal: ``v1`` is assumed, and the reads
    that follow show whether it was right.
    """
    info = reader.get_json("/version")
    server_version = _server_version(info)
    git_version = str(info.get("gitVersion") or "") or None
    try:
        apis = reader.get_json("/apis", accept=AGGREGATED_DISCOVERY)
    except ApiError as exc:
        if exc.unreachable or exc.status == 401:
            raise
        error = CollectionError(
            resource="discovery",
            verb="get",
            reason=f"{exc.reason}: {exc.message}",
            status=exc.status,
        )
        assumed: dict[Kind, str | None] = {kind: "v1" for kind in DRA_PLURALS}
        assumed[Kind.DEVICE_TAINT_RULE] = None
        return Discovery(
            server_version=server_version,
            git_version=git_version,
            served_versions=("v1",),
            resource_versions=assumed,
            errors=(error,),
            assumed=True,
        )
    if apis.get("kind") == "APIGroupDiscoveryList":
        by_version = _from_aggregated(apis)
    else:
        by_version = {}
        served = _legacy_group_versions(apis)
        for version in (v for v in RESOURCE_VERSIONS if v in served):
            doc = reader.get_json(f"/apis/{RESOURCE_GROUP}/{version}")
            by_version[version] = {
                str(r.get("name"))
                for r in doc.get("resources") or []
                if isinstance(r, Mapping) and "/" not in str(r.get("name"))
            }
            if all(v is not None for v in _pick(by_version).values()):
                break
        for version in served:
            by_version.setdefault(version, set())
    return Discovery(
        server_version=server_version,
        git_version=git_version,
        served_versions=tuple(v for v in RESOURCE_VERSIONS if v in by_version),
        resource_versions=_pick(by_version),
    )
