"""selector-check's inputs: claim manifests and workloads (with positions), and the device source.

Two things are read here, both for ``dradiag selector-check``:

- **The manifests to check** (:func:`load_manifests`): ResourceClaims and
  ResourceClaimTemplates of every resource.k8s.io version, Pods, and *any* object that
  embeds a pod template. Workloads are not recognised by kind: the object is walked for
  mappings shaped like a pod spec (a ``containers`` or ``resourceClaims`` list), so
  Deployments, Jobs, CronJobs (``spec.jobTemplate.spec.template.spec``), JobSets
  (``replicatedJobs[].template.spec.template.spec``), Kubeflow TrainJobs and
  (Cluster)TrainingRuntimes and CRDs nobody has listed yet all work the same way. A pod
  spec's claim references are resolved by name against the claims and templates of the
  same files first, then against the device source (the cluster or ``--from``).
  The files are *composed* with PyYAML rather than only loaded, so every CEL expression
  keeps the file, line and column it sits at: compile errors and SARIF results point at
  the expression in the file, not at the document.
- **The devices** (:func:`load_device_snapshot`): ``--slices``/``--from`` input. A large
  single JSON file (a fleet's ``kubectl get resourceslices -o json``) is decoded a slice
  of its ``items`` at a time with orjson and its devices' repeated values are shared
  (``sources.fleet``), because decoding 160k devices as one document costs about twelve
  times the file size in memory; everything else goes through
  ``sources.manifests.load_snapshot``.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from dradiag.errors import InputError
from dradiag.snapshot.model import Kind, Snapshot
from dradiag.snapshot.normalize import kind_of, normalize_claim_spec
from dradiag.sources.fleet import STREAM_THRESHOLD_BYTES, stream_slice_snapshot
from dradiag.sources.manifests import compose_documents, decode_text

logger = logging.getLogger(__name__)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

SelectorKey = tuple[str, str | None, int]
"""(request name, firstAvailable subrequest name or None, selector index)."""


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """A position in an input file; line and column are 1-based."""

    path: str
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        out = self.path
        if self.line is not None:
            out += f":{self.line}"
            if self.column is not None:
                out += f":{self.column}"
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpressionSite:
    """Where one CEL expression sits in a file, and how its text maps back onto the file.

    ``content_lines`` holds, for block scalars (``|``, ``>``), the (line, indent, length)
    of each file line of the scalar's content; a character offset in the expression is
    walked over them (a literal block keeps each line break, a folded one turns it into a
    space: one character either way). Quoted and plain scalars map onto their first line.
    """

    location: SourceLocation
    style: str = ""
    content_lines: tuple[tuple[int, int, int], ...] = ()

    def position_of(self, offset: int | None) -> SourceLocation:
        """The file position of character ``offset`` (0-based) of the expression."""
        loc = self.location
        if offset is None or loc.line is None or loc.column is None:
            return loc
        if self.content_lines:
            remaining = offset
            for line, indent, length in self.content_lines:
                if remaining <= length:
                    return SourceLocation(loc.path, line, indent + remaining + 1)
                remaining -= length + 1
            line, indent, length = self.content_lines[-1]
            return SourceLocation(loc.path, line, indent + length + 1)
        quote = 1 if self.style in ("'", '"') else 0
        return SourceLocation(loc.path, loc.line, loc.column + quote + offset)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimManifest:
    """A ResourceClaim or ResourceClaimTemplate to check, its claim spec in the v1 shape."""

    kind: Literal["ResourceClaim", "ResourceClaimTemplate"]
    namespace: str
    name: str
    spec: Mapping[str, Any]
    """The claim spec (``spec`` of a claim, ``spec.spec`` of a template), normalized."""
    api_version: str
    location: SourceLocation
    origin: Literal["file", "cluster"] = "file"
    selector_sites: Mapping[SelectorKey, ExpressionSite] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``Kind ns/name``, as reports name it."""
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodClaimUse:
    """One ``spec.resourceClaims[]`` entry of a pod spec and what it resolved to."""

    pod_claim_name: str
    resource_claim_name: str | None
    resource_claim_template_name: str | None
    resolved: ClaimManifest | None
    problem: str | None = None
    """Why the reference did not resolve (None when it did)."""
    location: SourceLocation


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadManifest:
    """A Pod or any object embedding pod specs, with the claims its pod specs use."""

    kind: str
    api_version: str
    namespace: str
    name: str
    location: SourceLocation
    pod_spec_paths: tuple[str, ...]
    claim_uses: tuple[PodClaimUse, ...]

    @property
    def ref(self) -> str:
        """``Kind ns/name``, as reports name it."""
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ManifestSet:
    """Everything read from selector-check's FILE arguments."""

    files: tuple[str, ...]
    claims: tuple[ClaimManifest, ...]
    """Claims and templates defined in the files, in file order."""
    workloads: tuple[WorkloadManifest, ...]
    """Objects with pod specs that reference claims, in file order."""
    cluster_claims: tuple[ClaimManifest, ...] = ()
    """Claims/templates the workloads use that were found only in the device source."""
    ignored: tuple[str, ...] = ()
    """``path:line: Kind name`` of documents with nothing to check."""


# -- reading YAML with positions ------------------------------------------------------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    """The value node under a mapping key or sequence index, or None."""
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value_node
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int):
        return node.value[key] if 0 <= key < len(node.value) else None
    return None


def _descend(node: yaml.Node | None, *keys: str | int) -> yaml.Node | None:
    for key in keys:
        node = _child(node, key)
        if node is None:
            return None
    return node


def _location(path: str, node: yaml.Node | None) -> SourceLocation:
    if node is None:
        return SourceLocation(path)
    return SourceLocation(path, node.start_mark.line + 1, node.start_mark.column + 1)


def _block_content_lines(
    lines: Sequence[str], node: yaml.ScalarNode
) -> tuple[tuple[int, int, int], ...]:
    """(1-based line, indent, length) of each content line of a block scalar."""
    out: list[tuple[int, int, int]] = []
    first = node.start_mark.line + 1  # the line after the `|`/`>` indicator (0-based)
    last = node.end_mark.line  # exclusive, 0-based
    if node.end_mark.column > 0:
        last += 1
    for index in range(first, min(last, len(lines))):
        text = lines[index]
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip(" "))
        length = len(text.rstrip()) - indent
        out.append((index + 1, indent, length))
    return tuple(out)


def _expression_site(path: str, lines: Sequence[str], node: yaml.Node) -> ExpressionSite:
    style = getattr(node, "style", None) or ""
    location = _location(path, node)
    if style in ("|", ">") and isinstance(node, yaml.ScalarNode):
        content = _block_content_lines(lines, node)
        if content:
            # Point at the expression's first character, not at the `|`/`>` indicator.
            location = SourceLocation(path, content[0][0], content[0][1] + 1)
        return ExpressionSite(location=location, style=style, content_lines=content)
    return ExpressionSite(location=location, style=style)


def _expand(obj: Any, node: yaml.Node | None) -> Iterator[tuple[dict[str, Any], yaml.Node | None]]:
    """Objects of a document, flattening ``List``/``<Kind>List`` with their nodes."""
    if isinstance(obj, list):
        for index, item in enumerate(obj):
            yield from _expand(item, _child(node, index))
        return
    if not isinstance(obj, dict):
        return
    kind = obj.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
        items_node = _child(node, "items")
        for index, item in enumerate(obj["items"]):
            yield from _expand(item, _child(items_node, index))
        return
    yield obj, node


# -- claims ---------------------------------------------------------------------------


def _selector_sites(
    path: str, lines: Sequence[str], spec_node: yaml.Node | None, spec: Mapping[str, Any]
) -> dict[SelectorKey, ExpressionSite]:
    """Locate every ``selectors[i].cel.expression`` of a raw claim spec, keyed by request.

    The raw (pre-normalization) layout is walked: v1 keeps selectors under ``exactly``,
    v1alpha3/v1beta1 at the request's top level; both land on the same key.
    """
    sites: dict[SelectorKey, ExpressionSite] = {}
    requests_node = _descend(spec_node, "devices", "requests")
    requests = ((spec.get("devices") or {}).get("requests")) or []
    for r_index, request in enumerate(requests):
        if not isinstance(request, Mapping):
            continue
        r_name = str(request.get("name") or "")
        r_node = _child(requests_node, r_index)
        holders: list[tuple[str | None, yaml.Node | None]] = [
            (None, _child(r_node, "exactly")),
            (None, r_node),
        ]
        subs = request.get("firstAvailable")
        if isinstance(subs, list):
            for s_index, sub in enumerate(subs):
                if isinstance(sub, Mapping):
                    holders.append(
                        (str(sub.get("name") or ""), _descend(r_node, "firstAvailable", s_index))
                    )
        for sub_name, holder in holders:
            selectors_node = _child(holder, "selectors")
            if not isinstance(selectors_node, yaml.SequenceNode):
                continue
            for s_index in range(len(selectors_node.value)):
                expr_node = _descend(selectors_node, s_index, "cel", "expression")
                if expr_node is not None:
                    sites.setdefault(
                        (r_name, sub_name, s_index), _expression_site(path, lines, expr_node)
                    )
    return sites


def claim_manifest_from_object(
    obj: Mapping[str, Any],
    *,
    location: SourceLocation,
    node: yaml.Node | None = None,
    lines: Sequence[str] = (),
    default_namespace: str = "default",
    origin: Literal["file", "cluster"] = "file",
) -> ClaimManifest | None:
    """A ClaimManifest from a raw (any version) or normalized claim/template object."""
    kind = kind_of(obj)
    if kind not in (Kind.RESOURCE_CLAIM, Kind.RESOURCE_CLAIM_TEMPLATE):
        return None
    meta = obj.get("metadata") or {}
    spec_raw = obj.get("spec") or {}
    spec_node = _child(node, "spec")
    if kind is Kind.RESOURCE_CLAIM_TEMPLATE:
        spec_raw = (spec_raw.get("spec") or {}) if isinstance(spec_raw, Mapping) else {}
        spec_node = _child(spec_node, "spec")
    if not isinstance(spec_raw, Mapping):
        spec_raw = {}
    return ClaimManifest(
        kind="ResourceClaim" if kind is Kind.RESOURCE_CLAIM else "ResourceClaimTemplate",
        namespace=str(meta.get("namespace") or default_namespace),
        name=str(meta.get("name") or ""),
        spec=normalize_claim_spec(spec_raw),
        api_version=str(obj.get("apiVersion") or ""),
        location=location,
        origin=origin,
        selector_sites=_selector_sites(location.path, lines, spec_node, spec_raw)
        if node is not None
        else {},
    )


# -- workloads ------------------------------------------------------------------------


def _is_pod_spec(value: Mapping[str, Any]) -> bool:
    return isinstance(value.get("containers"), list) or isinstance(
        value.get("resourceClaims"), list
    )


def find_pod_specs(obj: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(dotted path, pod spec) of every pod-spec-shaped mapping inside ``obj``.

    Generic on purpose: a pod template is recognised by shape, whatever kind embeds it
    and however deep (Deployment ``spec.template.spec``, CronJob
    ``spec.jobTemplate.spec.template.spec``, JobSet and TrainingRuntime
    ``...replicatedJobs[i].template.spec.template.spec``). A pod spec is not searched
    further: pod specs do not nest.
    """
    if isinstance(obj, Mapping):
        if path and _is_pod_spec(obj):
            yield path, obj
            return
        for key, value in obj.items():
            if key in ("metadata", "status"):
                continue
            yield from find_pod_specs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from find_pod_specs(value, f"{path}[{index}]")


def _node_at_path(node: yaml.Node | None, path: str) -> yaml.Node | None:
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        key: str | int = int(part[1:-1]) if part.startswith("[") else part
        node = _child(node, key)
        if node is None:
            return None
    return node


@dataclass(slots=True)
class _PendingWorkload:
    obj: Mapping[str, Any]
    node: yaml.Node | None
    location: SourceLocation
    namespace: str
    specs: list[tuple[str, Mapping[str, Any]]]
    namespaced: bool = True


def _resolve_use(
    ref: Mapping[str, Any],
    *,
    namespace: str,
    location: SourceLocation,
    claims: Mapping[tuple[str, str, str], ClaimManifest],
    snapshot: Snapshot | None,
    cluster: dict[tuple[str, str, str], ClaimManifest],
    any_namespace: bool = False,
) -> PodClaimUse:
    # Pre-1.31 pods nest the reference under `source:`.
    source = _mapping(ref.get("source"))
    claim_name = ref.get("resourceClaimName") or source.get("resourceClaimName")
    template_name = ref.get("resourceClaimTemplateName") or source.get("resourceClaimTemplateName")
    pod_claim_name = str(ref.get("name") or "")
    if claim_name:
        kind, name, snap_kind = "ResourceClaim", str(claim_name), Kind.RESOURCE_CLAIM
    elif template_name:
        kind, name = "ResourceClaimTemplate", str(template_name)
        snap_kind = Kind.RESOURCE_CLAIM_TEMPLATE
    else:
        return PodClaimUse(
            pod_claim_name=pod_claim_name,
            resource_claim_name=None,
            resource_claim_template_name=None,
            resolved=None,
            problem="names neither resourceClaimName nor resourceClaimTemplateName",
            location=location,
        )
    key = (kind, namespace, name)
    found = claims.get(key) or cluster.get(key)
    if found is None and any_namespace:
        # A cluster-scoped object (e.g. a ClusterTrainingRuntime) has its pods created in
        # the namespace of whatever uses it: accept a unique template of that name.
        same = [c for (k, _, n), c in claims.items() if k == kind and n == name]
        if len(same) == 1:
            found = same[0]
    problem = None
    if found is None and snapshot is not None:
        obj = (
            snapshot.claim(namespace, name)
            if snap_kind is Kind.RESOURCE_CLAIM
            else snapshot.claim_template(namespace, name)
        )
        if obj is not None:
            src = snapshot.source
            where = src.location or src.context or src.kind
            found = claim_manifest_from_object(
                obj,
                location=SourceLocation(f"{where} ({kind} {namespace}/{name})"),
                origin="cluster",
            )
            if found is not None:
                cluster[key] = found
    if found is None:
        searched = "the files given"
        if snapshot is not None:
            collected = snapshot.is_collected(snap_kind)
            searched += " or the device source" if collected else ""
            if not collected:
                searched += f" ({snap_kind.value} objects were not read from the device source)"
        problem = f"{kind} {namespace}/{name} not found in {searched}"
    return PodClaimUse(
        pod_claim_name=pod_claim_name,
        resource_claim_name=str(claim_name) if claim_name else None,
        resource_claim_template_name=str(template_name) if template_name else None,
        resolved=found,
        problem=problem,
        location=location,
    )


# -- entry points ---------------------------------------------------------------------


def _iter_manifest_files(path_arg: str) -> Iterator[Path]:
    root = Path(path_arg)
    if not root.exists():
        raise InputError("no such file or directory", path=path_arg)
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if (
            path.is_file()
            and path.suffix in MANIFEST_SUFFIXES
            and not any(p.startswith(".") for p in rel)
        ):
            yield path


def _read_text(path_arg: str, stdin: Any) -> Iterator[tuple[str, str]]:
    if path_arg == "-":
        stream = stdin if stdin is not None else sys.stdin.buffer
        yield "<stdin>", decode_text(stream.read(), "<stdin>")
        return
    for path in _iter_manifest_files(path_arg):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
        yield str(path), decode_text(data, str(path))


def load_manifests(
    paths: Sequence[str],
    *,
    snapshot: Snapshot | None = None,
    default_namespace: str = "default",
    stdin: Any = None,
) -> ManifestSet:
    """Read selector-check's FILE arguments (files, directories, ``-``).

    Claim references of pod specs are resolved against the claims/templates in the files
    first, then against ``snapshot`` (the device source). Objects without a namespace are
    taken to be in ``default_namespace`` (``-n``), as ``kubectl apply`` would place them.
    Raises InputError for unreadable or malformed files.
    """
    files: list[str] = []
    claims: list[ClaimManifest] = []
    pending: list[_PendingWorkload] = []
    ignored: list[str] = []
    for path_arg in paths:
        for path, text in _read_text(path_arg, stdin):
            files.append(path)
            lines = text.splitlines()
            for doc_node, doc in compose_documents(text, path):
                for obj, node in _expand(doc, doc_node):
                    location = _location(path, node)
                    kind = kind_of(obj)
                    if kind in (Kind.RESOURCE_CLAIM, Kind.RESOURCE_CLAIM_TEMPLATE):
                        claim = claim_manifest_from_object(
                            obj,
                            location=location,
                            node=node,
                            lines=lines,
                            default_namespace=default_namespace,
                        )
                        if claim is not None:
                            claims.append(claim)
                        continue
                    specs = [
                        (p, s)
                        for p, s in find_pod_specs(obj)
                        if isinstance(s.get("resourceClaims"), list) and s["resourceClaims"]
                    ]
                    meta = _mapping(obj.get("metadata"))
                    if specs:
                        pending.append(
                            _PendingWorkload(
                                obj=obj,
                                node=node,
                                location=location,
                                namespace=str(meta.get("namespace") or default_namespace),
                                specs=specs,
                                namespaced=bool(meta.get("namespace")),
                            )
                        )
                    else:
                        ignored.append(
                            f"{location}: {obj.get('kind') or 'document'} "
                            f"{meta.get('name') or ''}".rstrip()
                        )
    by_key: dict[tuple[str, str, str], ClaimManifest] = {
        (c.kind, c.namespace, c.name): c for c in claims
    }
    cluster: dict[tuple[str, str, str], ClaimManifest] = {}
    workloads: list[WorkloadManifest] = []
    for item in pending:
        uses: list[PodClaimUse] = []
        for spec_path, spec in item.specs:
            spec_node = _node_at_path(item.node, spec_path)
            for index, ref in enumerate(spec["resourceClaims"]):
                if not isinstance(ref, Mapping):
                    continue
                ref_node = _descend(spec_node, "resourceClaims", index)
                uses.append(
                    _resolve_use(
                        ref,
                        namespace=item.namespace,
                        location=_location(item.location.path, ref_node)
                        if ref_node is not None
                        else item.location,
                        claims=by_key,
                        snapshot=snapshot,
                        cluster=cluster,
                        any_namespace=not item.namespaced,
                    )
                )
        meta = _mapping(item.obj.get("metadata"))
        workloads.append(
            WorkloadManifest(
                kind=str(item.obj.get("kind") or ""),
                api_version=str(item.obj.get("apiVersion") or ""),
                namespace=item.namespace,
                name=str(meta.get("name") or ""),
                location=item.location,
                pod_spec_paths=tuple(p for p, _ in item.specs),
                claim_uses=tuple(uses),
            )
        )
    return ManifestSet(
        files=tuple(files),
        claims=tuple(claims),
        workloads=tuple(workloads),
        cluster_claims=tuple(cluster.values()),
        ignored=tuple(ignored),
    )


# -- the device source ----------------------------------------------------------------

# The streaming loader (stream_slice_snapshot, STREAM_THRESHOLD_BYTES) is sources.fleet's.


def load_device_snapshot(path: str, *, stdin: Any = None) -> Snapshot:
    """The device source for ``--slices``/``--from PATH``.

    A single large ``.json`` file is streamed (:func:`stream_slice_snapshot`); anything
    else (directories, bundles, YAML, stdin) is read by ``sources.manifests``.
    """
    candidate = Path(path)
    if (
        path != "-"
        and candidate.is_file()
        and candidate.suffix == ".json"
        and candidate.stat().st_size >= STREAM_THRESHOLD_BYTES
    ):
        return stream_slice_snapshot(path)
    from dradiag.sources.manifests import load_snapshot

    return load_snapshot(path, stdin=stdin)
