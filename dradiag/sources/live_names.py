"""The names of the claims or pods the cluster has, for "did you mean" after a miss.

Read only after the target was not found: one list of object metadata across the
namespaces the user may read (``PartialObjectMetadataList``: names, no specs), capped,
with a short time limit. Any failure yields no names: a suggestion is a courtesy and
must never turn a clear "not found" into another error.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from dradiag.sources.live_transport import ApiError, Reader, Send, TransportError

if TYPE_CHECKING:
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Kind

logger = logging.getLogger(__name__)

METADATA_ONLY = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json"
NAME_LIMIT = 5000
"""Names read at most: enough for any namespace a person types, bounded for a fleet."""
TIME_LIMIT = 10.0


def object_names_with(
    send: Send, options: CommonOptions, kind: Kind, namespace: str
) -> list[tuple[str, str]]:
    """(namespace, name) of up to NAME_LIMIT objects of ``kind`` in every namespace, or,
    when that list is refused, in ``namespace``; over ``send``."""
    from dradiag.sources.live_discovery import discover

    reader = Reader(
        send,
        request_timeout=min(options.request_timeout, TIME_LIMIT),
        overall_timeout=min(options.timeout, TIME_LIMIT),
    )
    try:
        discovery = discover(reader)
        if not discovery.serves(kind):
            return []
        query = {"limit": str(NAME_LIMIT)}
        try:
            page = reader.get_json(discovery.path(kind), query, accept=METADATA_ONLY)
        except ApiError as exc:
            if exc.status != 403:
                raise
            path = discovery.path(kind, namespace=namespace)
            page = reader.get_json(path, query, accept=METADATA_ONLY)
    except (ApiError, TransportError, KeyError) as exc:
        logger.debug("no names of %s for suggestions: %s", kind.value, exc)
        return []
    out = []
    for item in page.get("items") or ():
        meta = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(meta, dict) and meta.get("name"):
            out.append((str(meta.get("namespace") or ""), str(meta["name"])))
    return out


def object_names(options: CommonOptions, kind: Kind, namespace: str) -> list[tuple[str, str]]:
    """:func:`object_names_with` over a connection configured like the collection's."""
    from dradiag.errors import DradiagError
    from dradiag.sources.live import connect

    try:
        connection = connect(options)
    except DradiagError:
        return []
    try:
        return object_names_with(connection.send, options, kind, namespace)
    finally:
        connection.close()
