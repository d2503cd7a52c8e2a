"""The canonical documents (DESIGN §5) against the published JSON Schemas."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

from dradiag import __version__
from dradiag.diagnosis.model import Diagnosis, PhaseResult, Target, Verdict, VerdictStatus
from dradiag.render.document import (
    collection_block,
    diagnoses_document,
    diagnosis_document,
    dump_document,
    write_diagnoses_json,
)
from dradiag.snapshot.model import CollectionError, SourceInfo
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, PhaseStatus, Severity

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schema"
ITEM = json.loads((SCHEMAS / "diagnosis.schema.json").read_text())
ITEMS = json.loads((SCHEMAS / "diagnoses.schema.json").read_text())
REGISTRY = Registry().with_resource(ITEM["$id"], Resource.from_contents(ITEM))


def _diagnosis(status=VerdictStatus.BROKEN):
    finding = Finding(
        rule="DRA-PREP-MIG-CREATE-FAILED",
        phase=Phase.PREPARE,
        severity=Severity.ERROR,
        title="the plugin could not create the MIG device for the claim",
        detail="error creating GPU instance for 'gpu-2-mig-4g95gb-5-0': Insufficient Resources",
        evidence=(
            Evidence(source=EvidenceSource.EVENT, ref="Event default/pod.17f", excerpt="x8"),
        ),
        next=("kubectl get events -n default",),
        identifiers=(("slice device name", "gpu-2-mig-4g95gb-5-0"), ("claim UID", "3c83")),
    )
    phases = tuple(
        PhaseResult(
            phase=p,
            status=PhaseStatus.BROKEN if p is Phase.PREPARE else PhaseStatus.OK,
            findings=(finding,) if p is Phase.PREPARE else (),
            summary="allocated n/gpu-0" if p is Phase.ALLOCATION else "",
        )
        for p in Phase
    )
    broken = status is VerdictStatus.BROKEN
    return Diagnosis(
        target=Target(
            kind="ResourceClaim", namespace="default", name="c", uid="3c83", pods=("default/p",)
        ),
        verdict=Verdict(
            status=status,
            summary="ResourceClaim default/c is broken at prepare: MIG.",
            phase=Phase.PREPARE if broken else None,
            rule=finding.rule if broken else None,
            next=finding.next if broken else (),
        ),
        phases=phases,
    )


SOURCE = SourceInfo(kind="live", context="prod", collected_at="2026-05-01T12:00:00Z")


def test_document_shape_is_design_section_5():
    doc = diagnosis_document(_diagnosis(), SOURCE, collection_block([]))
    jsonschema.validate(doc, ITEM)
    assert list(doc) == [
        "schemaVersion",
        "tool",
        "source",
        "target",
        "verdict",
        "phases",
        "collection",
    ]
    assert doc["schemaVersion"] == "dradiag.diagnosis/v1"
    assert doc["tool"] == {"name": "dradiag", "version": __version__}
    assert doc["source"] == {
        "kind": "live",
        "context": "prod",
        "collectedAt": "2026-05-01T12:00:00Z",
    }
    assert doc["target"] == {
        "kind": "ResourceClaim",
        "namespace": "default",
        "name": "c",
        "uid": "3c83",
        "pods": ["default/p"],
    }
    assert doc["verdict"]["phase"] == "prepare"
    prepare = doc["phases"][3]
    assert prepare["id"] == "prepare" and prepare["status"] == "broken"
    finding = prepare["findings"][0]
    assert finding["evidence"] == [
        {"source": "event", "ref": "Event default/pod.17f", "excerpt": "x8"}
    ]
    assert finding["identifiers"][0] == {
        "layer": "slice device name",
        "value": "gpu-2-mig-4g95gb-5-0",
    }
    assert doc["phases"][2]["summary"] == "allocated n/gpu-0"
    assert doc["collection"] == {"partial": False, "errors": []}


def test_collection_errors_make_it_partial():
    errors = [
        CollectionError(
            resource="events", verb="list", reason="Forbidden", status=403, namespace="ml"
        )
    ]
    block = collection_block(errors)
    assert block == {
        "partial": True,
        "errors": [
            {
                "resource": "events",
                "verb": "list",
                "reason": "Forbidden",
                "namespace": "ml",
                "status": 403,
            }
        ],
    }
    jsonschema.validate(diagnosis_document(_diagnosis(), SOURCE, block), ITEM)


def test_schema_rejects_what_design_forbids():
    doc = diagnosis_document(_diagnosis(), SOURCE, collection_block([]))
    bad_phase = json.loads(json.dumps(doc))
    bad_phase["phases"][0]["status"] = "fail"
    bad_rule = json.loads(json.dumps(doc))
    bad_rule["verdict"]["rule"] = "PREP-1"
    ok_with_phase = json.loads(json.dumps(doc))
    ok_with_phase["verdict"]["status"] = "ok"
    extra = json.loads(json.dumps(doc))
    extra["firstBrokenPhase"] = "prepare"
    for broken in (bad_phase, bad_rule, ok_with_phase, extra):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, ITEM)


def test_diagnoses_document_and_yaml_round_trip():
    items = [
        diagnosis_document(_diagnosis(), SOURCE, collection_block([])),
        diagnosis_document(_diagnosis(VerdictStatus.OK), SOURCE, collection_block([])),
    ]
    doc = diagnoses_document(items, collection_block([]))
    jsonschema.Draft202012Validator(ITEMS, registry=REGISTRY).validate(doc)
    assert doc["schemaVersion"] == "dradiag.diagnoses/v1"
    assert doc["collection"] == {"partial": False, "errors": []}
    assert yaml.safe_load(dump_document(doc, "yaml")) == doc
    assert json.loads(dump_document(doc, "json")) == doc


@pytest.mark.parametrize("count", [0, 1, 3])
@pytest.mark.parametrize("unread", [False, True], ids=["read", "unread"])
def test_streamed_json_is_the_dumped_document_byte_for_byte(count, unread):
    """scan writes its document item by item; the bytes are the whole document's dump."""
    from dradiag.snapshot.model import Coverage, Kind, KindRecord

    items = [
        diagnosis_document(_diagnosis(s), SOURCE, collection_block([]))
        for s in [VerdictStatus.BROKEN, VerdictStatus.OK, VerdictStatus.BROKEN][:count]
    ]
    gaps = [KindRecord(kind=Kind.EVENT, coverage=Coverage.UNKNOWN, reason="403")] if unread else []
    collection = collection_block(
        [CollectionError(resource="events", verb="list", reason="forbidden")], unread=gaps
    )
    parts: list[str] = []
    write_diagnoses_json(iter(items), collection, parts.append)
    assert "".join(parts) == dump_document(diagnoses_document(items, collection), "json")
    assert len(parts) == count + 2  # one write per item: none waits for the others
    # scan's document carries a summary block after the collection.
    summary = {"rows": count, "byPhase": {"prepare": count}, "silenced": 0}
    whole = diagnoses_document(items, collection) | {"summary": summary}
    parts = []
    write_diagnoses_json(iter(items), collection, parts.append, {"summary": summary})
    assert "".join(parts) == dump_document(whole, "json")


def test_synthesized_target_is_marked():
    d = _diagnosis()
    d = Diagnosis(
        target=Target(kind="ResourceClaim", namespace="ml", name="train-0-gpu-", synthesized=True),
        verdict=d.verdict,
        phases=d.phases,
    )
    doc = diagnosis_document(d, SOURCE, collection_block([]))
    jsonschema.validate(doc, ITEM)
    assert doc["target"]["synthesized"] is True and doc["target"]["uid"] is None


def test_collection_names_the_unread_kinds_and_is_partial():
    from dradiag.snapshot.model import Coverage, Kind, KindRecord

    unread = [
        KindRecord(kind=Kind.RESOURCE_CLAIM, coverage=Coverage.UNKNOWN, reason="forbidden (403)"),
        KindRecord(kind=Kind.RESOURCE_SLICE, coverage=Coverage.ABSENT, reason="not served"),
    ]
    block = collection_block([], unread=unread)
    assert block["partial"] is True
    assert block["unread"] == [
        {"kind": "ResourceClaim", "coverage": "unknown", "reason": "forbidden (403)"},
        {"kind": "ResourceSlice", "coverage": "absent", "reason": "not served"},
    ]
    doc = diagnoses_document([], block)
    jsonschema.Draft202012Validator(ITEMS, registry=REGISTRY).validate(doc)
    assert "unread" not in collection_block([])
