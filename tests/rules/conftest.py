"""Shared helpers of the rule tests: reading case files and turning them into evidence.

A case file (``tests/rules/cases/<RULE-ID>.yaml``) has sqlfluff's ``std_rule_cases`` shape:
a ``rule:`` header, then named cases. A case gives evidence in one or more of

- ``events:`` Events, either full objects (core/v1 or events.k8s.io/v1) or the short form
  ``{on: "Pod ns/name", reason, message, type, count, lastTimestamp}``, expanded here into a
  core/v1 Event as kubelet or the scheduler writes it;
- ``logs:`` ``{pod: ns/name, container, text, previous?}`` container logs;
- ``objects:`` Kubernetes objects (Pods, ResourceClaims, ...);
- ``from:`` a ``--from`` directory under ``tests/fixtures/``;

and an ``expect:`` block: ``fires`` (required), ``explain_contains``, ``captures``,
``count``, ``evidence_contains``. Code-backed rules name the module that emits them
(``emitted_by:``) instead of evidence cases.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path(__file__).resolve().parent / "cases"
FIXTURES_DIR = REPO_ROOT / "tests" / "fixtures"

_SOURCE_BY_REASON = {
    "FailedScheduling": "default-scheduler",
    "FailedResourceClaimCreation": "resource_claim",
}


@dataclass(frozen=True)
class RuleCase:
    """One named case of one rule's case file."""

    rule: str
    name: str
    body: Mapping[str, Any]
    path: Path

    @property
    def expect(self) -> Mapping[str, Any]:
        return self.body.get("expect") or {}

    @property
    def test_id(self) -> str:
        return f"{self.rule}::{self.name}"


def read_case_file(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: a case file is a mapping"
    return data


def iter_cases() -> Iterator[RuleCase]:
    for path in sorted(CASES_DIR.glob("*.yaml")):
        data = read_case_file(path)
        rule = data.get("rule")
        for name, body in data.items():
            if name in ("rule", "emitted_by", "notes"):
                continue
            yield RuleCase(rule=str(rule), name=name, body=body, path=path)


def expand_event(short: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A core/v1 Event from the short ``on:`` form; full objects pass through unchanged."""
    if "on" not in short:
        return dict(short)
    kind, _, ref = str(short["on"]).partition(" ")
    ns, _, name = ref.rpartition("/")
    reason = str(short["reason"])
    digest = hashlib.sha1(f"{ref}{reason}{index}".encode()).hexdigest()[:16]
    last = short.get("lastTimestamp", "2026-06-01T10:10:00Z")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{digest}", "namespace": ns or "default"},
        "involvedObject": {
            "apiVersion": "v1" if kind in ("Pod", "Node") else "resource.k8s.io/v1",
            "kind": kind,
            "name": name,
            "namespace": ns or None,
            "uid": short.get("uid", "0b5d3a1e-3f7c-4a52-9d1e-6c2b8f4a7e10"),
        },
        "reason": reason,
        "message": short["message"],
        "type": short.get("type", "Warning"),
        "count": short.get("count", 1),
        "firstTimestamp": short.get("firstTimestamp", last),
        "lastTimestamp": last,
        "source": {"component": short.get("source", _SOURCE_BY_REASON.get(reason, "kubelet"))},
    }
    if event["source"]["component"] == "kubelet" and short.get("host"):
        event["source"]["host"] = short["host"]
    if ns == "":
        del event["involvedObject"]["namespace"]
    return event


def case_snapshot(case: RuleCase) -> Any:
    """The Snapshot a case's evidence describes (normalized, as a --from run would see it)."""
    from dradiag.snapshot.model import ContainerLog, Coverage, Kind, KindRecord, Snapshot
    from dradiag.snapshot.normalize import kind_of, normalize
    from dradiag.sources.manifests import load_snapshot

    body = case.body
    if "from" in body:
        return load_snapshot(str(FIXTURES_DIR / str(body["from"])))
    objects: dict[Kind, list[Any]] = {}
    raw = [expand_event(e, i) for i, e in enumerate(body.get("events") or [])]
    raw += list(body.get("objects") or [])
    for obj in raw:
        kind = kind_of(obj)
        assert kind is not None, f"{case.path}: {case.name}: not a kind dradiag reads: {obj}"
        objects.setdefault(kind, []).append(normalize(kind, obj))
    logs = []
    for entry in body.get("logs") or []:
        ns, _, pod = str(entry["pod"]).rpartition("/")
        logs.append(
            ContainerLog(
                namespace=ns or None,
                pod=pod,
                container=str(entry["container"]),
                text=str(entry["text"]),
                previous=bool(entry.get("previous", False)),
                source=f"{case.path.name}:{case.name}",
            )
        )
    coverage = {k: KindRecord(kind=k, coverage=Coverage.COLLECTED) for k in (*objects, Kind.LOG)}
    return Snapshot(objects=objects, logs=logs, coverage=coverage)


def pytest_generate_tests(metafunc: Any) -> None:
    """One test per case, named ``RULE-ID::case_name`` (sqlfluff's yaml_test_cases_test)."""
    if "rule_case" in metafunc.fixturenames:
        cases = [c for c in iter_cases() if "expect" in c.body]
        metafunc.parametrize("rule_case", cases, ids=[c.test_id for c in cases])


import pytest  # noqa: E402 - fixtures below need it; the helpers above do not


@pytest.fixture(scope="session")
def rulebook() -> Any:
    from dradiag.rulebook import load_rulebook

    return load_rulebook()


@pytest.fixture(scope="session")
def case_files() -> dict[str, dict[str, Any]]:
    """Every case file's content by file stem (which must be the rule id)."""
    return {p.stem: read_case_file(p) for p in sorted(CASES_DIR.glob("*.yaml"))}


@pytest.fixture(scope="session")
def snapshot_of() -> Any:
    return case_snapshot
