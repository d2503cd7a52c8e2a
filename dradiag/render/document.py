"""The canonical output documents (DESIGN §5) and their serialisation to JSON / YAML.

``diagnosis_document`` is *the* form of a diagnosis: JSON and YAML are dumps of it, and
the text view (``render/text.py``) is drawn from it, so the three cannot disagree. Its
shape is published as ``docs/schema/diagnosis.schema.json`` (``diagnoses.schema.json``
for ``pod`` and ``scan``), and every test output is validated against those schemas.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.diagnosis.model import Diagnosis, PhaseResult
    from dradiag.snapshot.model import CollectionError, KindRecord, Snapshot, SourceInfo
    from dradiag.vocabulary import Evidence, Finding

DIAGNOSIS_SCHEMA_VERSION = "dradiag.diagnosis/v1"
DIAGNOSES_SCHEMA_VERSION = "dradiag.diagnoses/v1"


def dump_document(doc: Mapping[str, Any], output: str) -> str:
    """``doc`` as JSON (indented, stable key order as built) or YAML, newline-terminated.

    JSON is written by orjson: a ``scan`` of 60,000 claims is a 100 MB document, which
    the standard library takes seconds to write. The standard library stays the fallback
    for what orjson refuses (integers beyond 64 bits, non-string keys).
    """
    if str(output) == "yaml":
        import yaml

        return str(yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=120))
    try:
        import orjson

        return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE).decode()
    except (ImportError, TypeError):  # orjson.JSONEncodeError is a TypeError
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_diagnoses_json(
    items: Iterable[Mapping[str, Any]],
    collection: Mapping[str, Any],
    write: Callable[[str], Any],
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write the ``dradiag.diagnoses/v1`` document of ``items`` as JSON, one item at a time.

    The bytes are those ``dump_document(doc, "json")`` writes for ``doc =
    diagnoses_document(items, collection)`` with ``extra``'s keys added after
    ``collection`` (``scan``'s ``summary``), but no item waits for the others: a ``scan``
    of 60,000 claims would otherwise hold every item's dict, the whole 100 MB document
    and its decoded copy at once. Each item is indented as orjson indents it at the
    depth ``items`` puts it.
    """
    import orjson

    option = orjson.OPT_INDENT_2
    head = orjson.dumps({"schemaVersion": DIAGNOSES_SCHEMA_VERSION}, option=option)
    write(head[:-2].decode() + ',\n  "items": [')
    first = True
    for item in items:
        try:
            body = orjson.dumps(item, option=option)
        except TypeError:  # what orjson refuses (dump_document's fallback), as it indents
            body = json.dumps(item, indent=2, ensure_ascii=False).encode()
        write(("\n    " if first else ",\n    ") + body.replace(b"\n", b"\n    ").decode())
        first = False
    tail = {"collection": dict(collection), **(extra or {})}
    blocks = orjson.dumps(tail, option=option)[1:-2].decode()  # its keys, without the braces
    write(("]" if first else "\n  ]") + "," + blocks + "\n}\n")


def tool_block() -> dict[str, str]:
    """``{"name": "dradiag", "version": ...}``."""
    from dradiag import __version__

    return {"name": "dradiag", "version": __version__}


def source_block(source: SourceInfo) -> dict[str, Any]:
    """The ``source`` block: where the snapshot came from."""
    out: dict[str, Any] = {"kind": source.kind}
    if source.context:
        out["context"] = source.context
    if source.collected_at:
        out["collectedAt"] = source.collected_at
    if source.location:
        out["location"] = source.location
    if source.server_version:
        out["serverVersion"] = source.server_version
    return out


def collection_block(
    errors: Iterable[CollectionError],
    *,
    partial: bool | None = None,
    unread: Sequence[KindRecord] = (),
) -> dict[str, Any]:
    """The ``collection`` block: failed reads, kinds a whole-cluster answer needed but
    could not read (``unread``), and whether the evidence is partial."""
    entries = []
    for err in errors:
        entry: dict[str, Any] = {"resource": err.resource, "verb": err.verb, "reason": err.reason}
        if err.namespace:
            entry["namespace"] = err.namespace
        if err.name:
            entry["name"] = err.name
        if err.status is not None:
            entry["status"] = err.status
        entries.append(entry)
    out: dict[str, Any] = {
        "partial": bool(entries or unread) if partial is None else partial or bool(unread),
        "errors": entries,
    }
    if unread:
        out["unread"] = [
            {"kind": r.kind.value, "coverage": r.coverage.value, "reason": r.reason or ""}
            for r in unread
        ]
    return out


def collection_of(snapshot: Snapshot, unread: Sequence[KindRecord] = ()) -> dict[str, Any]:
    """The ``collection`` block of a snapshot (partial when a read failed, or when a kind
    the command needed is in ``unread``)."""
    return collection_block(snapshot.errors, partial=snapshot.partial, unread=unread)


def _evidence(ev: Evidence) -> dict[str, Any]:
    return {"source": ev.source.value, "ref": ev.ref, "excerpt": ev.excerpt}


def _finding(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "rule": f.rule,
        "severity": f.severity.value,
        "title": f.title,
        "detail": f.detail,
        "evidence": [_evidence(e) for e in f.evidence],
        "next": list(f.next),
    }
    if f.cause:
        out["cause"] = f.cause
    if f.identifiers:
        out["identifiers"] = [{"layer": layer, "value": value} for layer, value in f.identifiers]
    return out


def _phase(p: PhaseResult) -> dict[str, Any]:
    out: dict[str, Any] = {"id": p.phase.value, "status": p.status.value}
    out["basis"] = {"kind": p.basis.value, "detail": p.basis_detail}
    if p.summary:
        out["summary"] = p.summary
    out["findings"] = [_finding(f) for f in p.findings]
    return out


def diagnosis_document(
    diagnosis: Diagnosis, snapshot_source: SourceInfo, collection: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``dradiag.diagnosis/v1`` document of one diagnosis (DESIGN §5)."""
    target = diagnosis.target
    target_block: dict[str, Any] = {"kind": target.kind}
    if target.namespace:
        target_block["namespace"] = target.namespace
    target_block["name"] = target.name
    target_block["uid"] = target.uid
    target_block["pods"] = list(target.pods)
    if target.synthesized:
        target_block["synthesized"] = True
    if target.links:
        target_block["links"] = [{"object": obj, "via": via} for obj, via in target.links]
    verdict = diagnosis.verdict
    return {
        "schemaVersion": DIAGNOSIS_SCHEMA_VERSION,
        "tool": tool_block(),
        "source": source_block(snapshot_source),
        "target": target_block,
        "verdict": {
            "status": verdict.status.value,
            "phase": verdict.phase.value if verdict.phase else None,
            "rule": verdict.rule,
            "summary": verdict.summary,
            "next": list(verdict.next),
        },
        "phases": [_phase(p) for p in diagnosis.phases],
        "collection": dict(collection),
    }


def diagnoses_document(
    items: Sequence[Mapping[str, Any]], collection: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``dradiag.diagnoses/v1`` document for ``pod`` and ``scan``: a list of diagnoses,
    and the ``collection`` block of the snapshot they come from, which says what could not
    be read even when the list is empty."""
    return {
        "schemaVersion": DIAGNOSES_SCHEMA_VERSION,
        "items": list(items),
        "collection": dict(collection),
    }
