"""Offline input (``--from PATH``): files, directories and stdin into documents and a Snapshot.

Accepts what DESIGN §4 lists: a directory tree or a single file of ``*.yaml``/``*.yml``/
``*.json``, single or multi-document YAML, ``kind: List`` and ``<Kind>List`` (including
raw API list responses whose items carry no ``kind``), ``kubectl get -o yaml|json``
output, ``*.log`` container logs, and ``-`` for stdin. A ``collection.json`` at the top
of a directory states what was and was not collected; so does the ``manifest.json`` of a
``dradiag bundle``, read as a ``.tar.gz`` (in memory, by ``bundle_read``) or unpacked.

Malformed input is an :class:`InputError` naming file, line and column (exit 2): a
corrupt file must not silently drop evidence. Documents that are not Kubernetes objects,
and kinds dradiag does not read, are reported on stderr and skipped.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from dradiag.errors import InputError
from dradiag.snapshot.component_logs import component_of
from dradiag.snapshot.model import (
    RESOURCE_OF_KIND,
    CollectionError,
    ContainerLog,
    Coverage,
    DeferredObjects,
    K8sObject,
    Kind,
    KindRecord,
    Snapshot,
    SourceInfo,
    name_of,
    namespace_of,
    paused_gc,
)
from dradiag.snapshot.normalize import kind_of, normalize
from dradiag.snapshot.shape_check import ShapeProblem, check_object
from dradiag.sources import json_lists

logger = logging.getLogger(__name__)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
LOG_SUFFIX = ".log"
COLLECTION_FILE = "collection.json"

# Lower-case plural spellings, used to tell which kind an *empty* list file held
# (`kubectl get events -o yaml` with no events prints a bare `kind: List`).
_KIND_BY_PLURAL: dict[str, Kind] = {
    plural: kind for kind, plural in RESOURCE_OF_KIND.items() if kind is not Kind.LOG
}


class Document(NamedTuple):
    """One Kubernetes-looking object read from input, with where it came from.

    A NamedTuple, not a frozen dataclass: a large snapshot makes hundreds of thousands
    of these, and a frozen dataclass's ``__init__`` costs several times more.
    """

    obj: dict[str, Any]
    path: str
    line: int | None = None
    """1-based line of the document's start in a YAML stream, when known."""


@dataclass(slots=True)
class _Loaded:
    documents: list[Document]
    logs: list[ContainerLog]
    empty_list_kinds: set[Kind]
    collection: Mapping[str, Any] | None
    deferred: list[tuple[int, DeferredObjects]] = field(default_factory=list)
    """Undecoded stores, each with how many documents came before it."""
    skipped: dict[str, int] = field(default_factory=dict)
    """``apiVersion/kind`` → items of unread kinds inside deferred files."""
    node_states: dict[str, Any] | None = None
    """Saved node state read from a bundle archive's ``node/<node>/`` members (None: the
    input was not an archive, so a directory's ``node/`` is read by its path)."""

    def add(self, data: bytes, path: str, *, defer: bool) -> None:
        """One manifest file's objects: split undecoded when deferring a large JSON list."""
        if defer and len(data) >= json_lists.DEFER_MIN_BYTES and data[:8192].lstrip()[:1] == b"{":
            split = json_lists.split_json_list(data, path)
            if split is not None:
                self.deferred += [(len(self.documents), store) for store in split.stores]
                for label, count in split.skipped.items():
                    self.skipped[label] = self.skipped.get(label, 0) + count
                return
        found, kinds = read_documents(data, path)
        self.documents.extend(found)
        self.empty_list_kinds |= kinds


# -- decoding -------------------------------------------------------------------------


def _loads_json(text: str | bytes, path: str) -> Any:
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a declared dependency
        orjson = None  # type: ignore[assignment]
    try:
        if orjson is not None:
            return orjson.loads(text)
        return json.loads(text)
    except json.JSONDecodeError as exc:  # orjson's error subclasses it
        raise InputError(
            f"malformed JSON: {exc.msg}", path=path, line=exc.lineno, column=exc.colno
        ) from None


@functools.cache
def _yaml_loader() -> type[yaml.SafeLoader]:
    """The C safe loader where there is one, with timestamps that do not parse kept as text.

    YAML 1.1 reads an unquoted ``2025-13-45T99:99:99Z`` as a timestamp and PyYAML's
    constructor then raises ValueError for the month: the whole file would be lost for
    one junk value (Kubernetes' own YAML-to-JSON step keeps such a value as a string).
    Kept as the string it is, the shape check reports it as a junk timestamp and drops
    that field alone.
    """
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def timestamp(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
        try:
            return base.construct_yaml_timestamp(loader, node)  # type: ignore[arg-type]
        except (ValueError, OverflowError):
            return loader.construct_scalar(node)  # type: ignore[arg-type]

    loader: type[yaml.SafeLoader] = type("ManifestLoader", (base,), {})
    loader.add_constructor("tag:yaml.org,2002:timestamp", timestamp)
    return loader


def decode_text(data: bytes, path: str) -> str:
    """Input bytes as text; InputError for binary or non-UTF-8 content."""
    if b"\x00" in data[:8192]:
        raise InputError("binary file, not YAML or JSON", path=path)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=path, line=line) from None


def compose_documents(text: str, path: str) -> Iterator[tuple[yaml.Node, Any]]:
    """(node, constructed object) per YAML document; malformed input is an InputError.

    The node keeps the marks (line, column) of everything in the document, which
    ``selector-check`` needs to point at an expression inside a manifest.
    """
    try:
        loader = _yaml_loader()(text)
        try:
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                yield node, loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        reason = (exc.problem or exc.context or "malformed YAML").strip()
        raise InputError(
            f"malformed YAML: {reason}",
            path=path,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", path=path) from None
    except RecursionError:
        raise InputError("YAML nested too deeply", path=path) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # A constructor's own failure on an explicitly tagged scalar (`!!int abc`,
        # `!!float x`): PyYAML raises it unmarked.
        raise InputError(f"malformed YAML: {exc}", path=path) from None


def parse_stream(data: bytes, path: str) -> Iterator[tuple[Any, int | None]]:
    """Yield (document, 1-based start line) from a YAML or JSON byte stream."""
    head = data[:8192].lstrip()
    if head[:1] in (b"{", b"[") and b"\x00" not in head:
        # JSON straight from the bytes: no decoded copy of a file that may be
        # hundreds of megabytes (orjson validates the UTF-8 itself).
        try:
            yield _loads_json(data.removeprefix(b"\xef\xbb\xbf"), path), 1
            return
        except InputError:
            # JSON is YAML, but YAML flow style is not always JSON: let YAML decide.
            if Path(path).suffix == ".json":
                raise
    text = decode_text(data, path)
    if not text.strip():
        return
    for node, doc in compose_documents(text, path):
        yield doc, node.start_mark.line + 1


def _expand(
    doc: Any, path: str, line: int | None, empty_kinds: set[Kind], out: list[Document]
) -> None:
    """Flatten Lists and top-level arrays into objects; report and skip non-objects."""
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            _expand(item, path, line, empty_kinds, out)
        return
    if not isinstance(doc, dict):
        logger.warning("%s%s: skipped: not a Kubernetes object", path, f":{line}" if line else "")
        return
    kind = doc.get("kind")
    items = doc.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        item_kind = kind[: -len("List")] or None
        api_version = doc.get("apiVersion")
        if not items:
            hinted = _KIND_BY_PLURAL.get(Path(path).stem.lower()) if item_kind is None else None
            hinted = hinted or next((k for k in Kind if k.value == item_kind), None)
            if hinted is not None:
                empty_kinds.add(hinted)
        append = out.append
        for item in items:
            if type(item) is dict:
                if "kind" not in item and item_kind:
                    # Raw API list responses omit kind/apiVersion on items.
                    item = {"apiVersion": api_version, "kind": item_kind, **item}
                item_kind_name = item.get("kind")
                if (
                    type(item_kind_name) is str
                    and type(item.get("apiVersion")) is str
                    and not item_kind_name.endswith("List")
                ):
                    # The common case, without a call per item.
                    append(Document(item, path, line))
                    continue
            _expand(item, path, line, empty_kinds, out)
        return
    if not isinstance(kind, str) or not isinstance(doc.get("apiVersion"), str):
        logger.warning(
            "%s%s: skipped: not a Kubernetes object (no apiVersion/kind)",
            path,
            f":{line}" if line else "",
        )
        return
    out.append(Document(doc, path, line))


def read_documents(data: bytes, path: str) -> tuple[list[Document], set[Kind]]:
    """Every object in one YAML/JSON stream, and kinds proven empty by empty list files."""
    empty: set[Kind] = set()
    docs: list[Document] = []
    for doc, line in parse_stream(data, path):
        _expand(doc, path, line, empty, docs)
    return docs, empty


# -- logs -----------------------------------------------------------------------------


def _log_identity(
    path: Path, root: Path | None
) -> tuple[str | None, str, str, bool, str | None] | None:
    """(namespace, pod, container, previous) from a log file's path, or None.

    ``logs/<ns>/<pod>/<container>[.previous].log`` (bundle layout) or
    ``[<ns>_]<pod>_<container>[.previous].log`` anywhere. Pod and container names are
    DNS labels/subdomains and cannot contain ``_``, so the split is unambiguous.
    """
    stem = path.name[: -len(LOG_SUFFIX)]
    previous = stem.endswith(".previous")
    if previous:
        stem = stem[: -len(".previous")]
    rel = path.relative_to(root).parts if root is not None and path.is_relative_to(root) else ()
    if len(rel) >= 4 and rel[-4] == "logs":
        return rel[-3], rel[-2], stem, previous, None
    parts = stem.split("_")
    if len(parts) == 2 and all(parts):
        return None, parts[0], parts[1], previous, None
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2], previous, None
    spec = component_of(stem)
    if spec is not None:
        return None, "", spec.container, previous, spec.component
    return None


def read_log(path: Path, root: Path | None) -> ContainerLog | None:
    """A container log file as a ContainerLog; None (with a warning) when unattributable."""
    return log_from_bytes(None, path, root)


def log_from_bytes(data: bytes | None, path: Path, root: Path | None) -> ContainerLog | None:
    """A container log (read from ``path`` when ``data`` is None) as a ContainerLog."""
    ident = _log_identity(path, root)
    if ident is None:
        logger.warning(
            "%s: skipped: cannot tell which pod/container this log is "
            "(name it <pod>_<container>.log, logs/<ns>/<pod>/<container>.log, or after "
            "its component: kubelet.log, kube-scheduler.log, kubelet-plugin.log)",
            path,
        )
        return None
    if data is None:
        data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Container output may hold stray bytes; keep the evidence, flag the file.
        line = data.count(b"\n", 0, exc.start) + 1
        logger.warning(
            "%s:%d: not UTF-8 (byte %d); undecodable bytes replaced", path, line, exc.start
        )
        text = data.decode("utf-8", errors="replace")
    namespace, pod, container, previous, component = ident
    return ContainerLog(
        namespace=namespace,
        pod=pod,
        container=container,
        previous=previous,
        text=text,
        source=str(path),
        component=component,
    )


# -- walking input --------------------------------------------------------------------


def _iter_files(root: Path) -> Iterator[Path]:
    from dradiag.sources.node_state import saved_node_folders

    # Saved node state (``node/<node>/``, sources.node_state) is not Kubernetes objects.
    node_folders = saved_node_folders(root)
    for path in sorted(root.rglob("*")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if any(path.is_relative_to(folder) for folder in node_folders):
            continue
        if path.is_file():
            yield path


def _read_path(
    path_arg: str, stdin: Any = None, exclude: Collection[str] = (), *, defer: bool = False
) -> _Loaded:
    loaded = _Loaded([], [], set(), None)
    if path_arg == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        loaded.add(stream.read(), "<stdin>", defer=defer)
        return loaded
    root = Path(path_arg)
    if not root.exists():
        raise InputError("no such file or directory", path=path_arg)
    if root.is_file() and root.suffix not in MANIFEST_SUFFIXES + (LOG_SUFFIX,):
        from dradiag.sources import bundle_read

        if bundle_read.is_archive(root):
            if root.suffix == ".gz" and Path(root.stem).suffix in MANIFEST_SUFFIXES:
                # One compressed manifest (`kubectl get pods -o yaml | gzip`), not a bundle.
                loaded.add(bundle_read.read_gzip_file(root), str(root), defer=defer)
                return loaded
            return read_members(bundle_read.read_archive(root), path_arg, exclude, defer=defer)
    if root.is_file():
        if root.suffix == LOG_SUFFIX:
            log = read_log(root, None)
            loaded.logs += [log] if log else []
        else:
            loaded.add(_read_bytes(root), str(root), defer=defer)
        return loaded
    from dradiag.sources import bundle_read

    bundle = bundle_read.read_manifest(root)
    for path in _iter_files(root):
        if path.name in exclude:
            continue
        if bundle is not None:
            if path.is_symlink():
                logger.warning("%s: skipped: a symbolic link inside a bundle", path)
                continue
            if not bundle_read.holds_objects(path.relative_to(root).parts):
                continue
        _add_file(loaded, path, root, _read_bytes(path) if _wanted(path) else b"", defer)
    if bundle is not None:
        _apply_bundle(loaded, bundle)
    return loaded


def read_members(
    members: Mapping[str, bytes], label: str, exclude: Collection[str] = (), *, defer: bool = False
) -> _Loaded:
    """A bundle's files held in memory (an archive read by ``bundle_read``), as a directory
    of them would be read; ``label`` names them in messages (``bundle.tar.gz/logs/...``)."""
    from dradiag.sources import bundle_read

    loaded = _Loaded([], [], set(), None)
    root = Path(label)
    from dradiag.sources.node_state import saved_member_prefixes

    bundle = bundle_read.parse_manifest(members.get(bundle_read.MANIFEST), label)
    # Saved node state is not Kubernetes objects, in any archive (as in a directory).
    node_prefixes = tuple(f"{prefix}/" for prefix in saved_member_prefixes(members))
    for name in sorted(members):
        parts = tuple(name.split("/"))
        if parts[-1] in exclude or any(part.startswith(".") for part in parts):
            continue
        if node_prefixes and name.startswith(node_prefixes):
            continue
        if bundle is not None and not bundle_read.holds_objects(parts):
            continue
        _add_file(loaded, root.joinpath(*parts), root, members[name], defer)
    if bundle is not None:
        _apply_bundle(loaded, bundle)
    from dradiag.sources.node_state import load_saved_node_members

    loaded.node_states = load_saved_node_members(members, label)
    return loaded


def _wanted(path: Path) -> bool:
    return path.suffix in MANIFEST_SUFFIXES or path.suffix == LOG_SUFFIX


def _add_file(loaded: _Loaded, path: Path, root: Path, data: bytes, defer: bool) -> None:
    """One file of a directory (or archive) tree: the collection record, objects or a log."""
    if path.name == COLLECTION_FILE and path.parent == root:
        loaded.collection = _read_collection(data, str(path))
    elif path.suffix in MANIFEST_SUFFIXES:
        loaded.add(data, str(path), defer=defer)
    elif path.suffix == LOG_SUFFIX:
        log = log_from_bytes(data, path, root)
        if log is not None:
            loaded.logs.append(log)
    else:
        logger.debug("%s: ignored (not .yaml/.yml/.json/.log)", path)


def _apply_bundle(loaded: _Loaded, manifest: Mapping[str, Any]) -> None:
    """Coverage from the bundle's manifest; logs as the containers wrote them."""
    from dataclasses import replace

    from dradiag.sources import bundle_read

    loaded.collection = bundle_read.collection_record(manifest, [k.value for k in Kind])
    if (manifest.get("logs") or {}).get("timestamps"):
        loaded.logs = [
            replace(log, text=bundle_read.strip_log_timestamps(log.text)) for log in loaded.logs
        ]


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None


def _read_collection(raw: bytes, path: str) -> Mapping[str, Any]:
    data = _loads_json(raw, path)
    if not isinstance(data, Mapping):
        raise InputError("collection record must be a JSON object", path=path)
    return data


# -- Snapshot -------------------------------------------------------------------------


def snapshot_from_documents(
    documents: Iterable[Document],
    *,
    logs: Iterable[ContainerLog] = (),
    empty_kinds: Iterable[Kind] = (),
    collection: Mapping[str, Any] | None = None,
    source: SourceInfo | None = None,
    location: str | None = None,
    deferred: Iterable[tuple[int, DeferredObjects]] = (),
    skipped: Mapping[str, int] | None = None,
) -> Snapshot:
    """Normalize documents into a Snapshot and work out what the input covered.

    ``deferred`` stores stand after the number of documents each is paired with; they
    are placed among their kind's objects accordingly (the Snapshot decodes them).
    ``skipped`` counts items of unread kinds the stores passed over.
    """
    objects: dict[Kind, list[K8sObject]] = {k: [] for k in Kind if k is not Kind.LOG}
    raw: dict[tuple[str, str, str], K8sObject] = {}
    skipped_kinds: dict[str, int] = dict(skipped or {})
    waiting = sorted(deferred, key=lambda entry: entry[0])
    placed: list[tuple[int, DeferredObjects]] = []
    problems: list[ShapeProblem] = []
    for index, doc in enumerate(documents):
        while waiting and waiting[0][0] <= index:
            store = waiting.pop(0)[1]
            placed.append((len(objects[store.kind]), store))
        kind = kind_of(doc.obj)
        if kind is None:
            label = f"{doc.obj.get('apiVersion')}/{doc.obj.get('kind')}"
            skipped_kinds[label] = skipped_kinds.get(label, 0) + 1
            continue
        checked = check_object(kind, doc.obj, f"{doc.path}:{doc.line}" if doc.line else doc.path)
        problems += checked.problems
        if checked.obj is None:
            continue
        normalized = normalize(kind, checked.obj)
        objects[kind].append(normalized)
        if normalized is not doc.obj:
            raw[(kind.value, namespace_of(doc.obj), name_of(doc.obj))] = doc.obj
    placed += [(len(objects[store.kind]), store) for _, store in waiting]
    for label, count in sorted(skipped_kinds.items()):
        logger.warning("skipped %d object(s) of kind %s: not read by dradiag", count, label)
    logs = list(logs)
    deferred_kinds = {store.kind for _, store in placed if len(store)}
    coverage: dict[Kind, KindRecord] = {}
    where = location or "the input"
    for kind in Kind:
        present = bool(logs) if kind is Kind.LOG else bool(objects.get(kind))
        present = present or kind in deferred_kinds
        if present or kind in empty_kinds:
            coverage[kind] = KindRecord(kind=kind, coverage=Coverage.COLLECTED, scope="files")
        else:
            coverage[kind] = KindRecord(
                kind=kind, coverage=Coverage.UNKNOWN, reason=f"no {kind.value} objects in {where}"
            )
    errors: list[CollectionError] = []
    if collection is not None:
        coverage.update(_coverage_from_record(collection))
        errors = _errors_from_record(collection)
        source = source or _source_from_record(collection, location)
    if not any(objects.values()) and not logs and not deferred_kinds:
        dropped = sum(1 for p in problems if p.skipped)
        why = (
            f" ({dropped} malformed object(s) skipped: {problems[-1].describe()})"
            if dropped
            else ""
        )
        raise InputError(f"no Kubernetes objects dradiag can read{why}", path=location)
    return Snapshot(
        objects=objects,
        logs=logs,
        coverage=coverage,
        errors=errors,
        source=source or SourceInfo(kind="files", location=location),
        raw=raw,
        deferred=placed,
        problems=problems,
    )


def _coverage_from_record(record: Mapping[str, Any]) -> dict[Kind, KindRecord]:
    out: dict[Kind, KindRecord] = {}
    kinds = record.get("kinds") or {}
    if not isinstance(kinds, Mapping):
        raise InputError("collection.json: 'kinds' must be an object", path=COLLECTION_FILE)
    for name, entry in kinds.items():
        kind = next((k for k in Kind if k.value == name), None)
        if kind is None or not isinstance(entry, Mapping):
            continue
        try:
            cov = Coverage(str(entry.get("coverage")))
        except ValueError:
            raise InputError(
                f"collection.json: kinds.{name}.coverage must be one of "
                + ", ".join(c.value for c in Coverage),
                path=COLLECTION_FILE,
            ) from None
        out[kind] = KindRecord(
            kind=kind, coverage=cov, reason=entry.get("reason"), scope=entry.get("scope")
        )
    return out


def _errors_from_record(record: Mapping[str, Any]) -> list[CollectionError]:
    out = []
    for entry in record.get("errors") or []:
        if isinstance(entry, Mapping):
            out.append(
                CollectionError(
                    resource=str(entry.get("resource") or ""),
                    verb=str(entry.get("verb") or "get"),
                    reason=str(entry.get("reason") or ""),
                    namespace=entry.get("namespace"),
                    name=entry.get("name"),
                    status=entry.get("status"),
                )
            )
    return out


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _source_from_record(record: Mapping[str, Any], location: str | None) -> SourceInfo:
    src = record.get("source") or {}
    if not isinstance(src, Mapping):
        src = {}
    return SourceInfo(
        kind=str(src.get("kind") or "bundle"),
        location=location,
        context=src.get("context"),
        collected_at=src.get("collectedAt"),
        server_version=src.get("serverVersion"),
        server_git_version=_text_or_none(src.get("serverGitVersion")),
        served_versions=tuple(src.get("servedVersions") or ()),
    )


def load_snapshot(
    path: str,
    *,
    stdin: Any = None,
    exclude: Collection[str] = (),
    location: str | None = None,
    defer: bool = False,
) -> Snapshot:
    """Read ``--from PATH`` (file, directory or ``-``) into a Snapshot.

    ``exclude`` names files to pass over in a directory (a sample's or a test
    scenario's own description files); ``location`` labels the source in output.
    ``defer``: large JSON list files are split, not decoded, and the Snapshot decodes
    what its look-ups need (``sources.json_lists``); for runs about one claim or pod.
    Raises InputError for unreadable or malformed input, or when nothing usable remains.
    """
    with paused_gc():
        loaded = _read_path(path, stdin, exclude, defer=defer)
        snapshot = snapshot_from_documents(
            loaded.documents,
            logs=loaded.logs,
            empty_kinds=loaded.empty_list_kinds,
            collection=loaded.collection,
            location=location or path,
            deferred=loaded.deferred,
            skipped=loaded.skipped,
        )
    if loaded.node_states is not None:
        _add_node_states(snapshot, loaded.node_states)
    elif path != "-":
        from dradiag.sources.node_state import load_saved_node_states

        _add_node_states(snapshot, load_saved_node_states(path))
    return snapshot


def _add_node_states(snapshot: Snapshot, states: Mapping[str, Any]) -> None:
    """Saved node state (``dradiag node --save``) as the Snapshot's node evidence."""
    from dradiag.snapshot.node_state import NODE_STATES_KEY

    if states:
        snapshot.extras = {**snapshot.extras, NODE_STATES_KEY: dict(states)}


def load_members(members: Mapping[str, bytes], label: str) -> Snapshot:
    """A Snapshot of a bundle's files held in memory (``dradiag bundle``'s own analysis)."""
    with paused_gc():
        loaded = read_members(members, label)
        snapshot = snapshot_from_documents(
            loaded.documents,
            logs=loaded.logs,
            empty_kinds=loaded.empty_list_kinds,
            collection=loaded.collection,
            location=label,
            deferred=loaded.deferred,
            skipped=loaded.skipped,
        )
    _add_node_states(snapshot, loaded.node_states or {})
    return snapshot


def load_documents(path: str, *, stdin: Any = None) -> list[Document]:
    """Every Kubernetes-looking document under ``path`` (no normalization, no Snapshot)."""
    return _read_path(path, stdin).documents
