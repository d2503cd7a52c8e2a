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
``count``, ``evidence_contains``.

Code-backed rules (no ``match``) name the module that emits them (``emitted_by:``) and prove
themselves with *engine cases*: the real command on a ``--from`` directory, the rule looked
for among the findings of its JSON document (``test_code_backed_cases.py``). An engine case
names its command and target with one of

- ``claim: NS/NAME`` or ``pod: NS/NAME`` (``dradiag claim|pod NS/NAME --from DIR``);
- ``scan: NS`` (``dradiag scan -n NS``; ``scan: all`` for ``-A``);
- ``selector-check: [FILE, ...]`` (manifests, relative to ``tests/fixtures/``);
- ``node: NODE`` (``dradiag node --node NODE --from DIR``: the node state saved under
  ``DIR/node/NODE/``, cross-checked with the cluster objects beside it);

with ``from:`` (relative to ``tests/fixtures/``: a scenario, or a directory under
``rule_cases/<RULE-ID>/``), optional ``args:`` (more flags; ``{fixtures}`` stands for
``tests/fixtures``) and ``hide_modules:`` (modules the
run must do without, for a rule about a degraded build), and ``expect:`` ``fires``,
``detail_contains``, ``verdict`` (the rule decides the verdict). A firing engine case also
proves the severity: the rule is emitted with its catalogue severity.
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

ENGINE_COMMANDS = ("claim", "pod", "scan", "selector-check", "node")
"""The commands an engine case may run (the key that names it in the case)."""

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

    @property
    def command(self) -> str | None:
        """The CLI command of an engine case; None for an evidence case."""
        return next((c for c in ENGINE_COMMANDS if c in self.body), None)

    def argv(self) -> list[str]:
        """The command line an engine case runs (``-o json``, offline)."""
        body = self.body
        command = self.command
        assert command is not None, f"{self.test_id}: not an engine case"
        target = body[command]
        argv = [command]
        if command in ("claim", "pod"):
            argv.append(str(target))
        elif command == "scan":
            argv += ["-A"] if target == "all" else ["-n", str(target)]
        elif command == "node":
            argv += ["--node", str(target)]
        else:
            argv += [str(FIXTURES_DIR / str(f)) for f in _listed(target)]
        if "from" in body:
            argv += ["--from", str(FIXTURES_DIR / str(body["from"]))]
        argv += [str(a).replace("{fixtures}", str(FIXTURES_DIR)) for a in body.get("args") or ()]
        return [*argv, "-o", "json"]

    @property
    def hidden_modules(self) -> tuple[str, ...]:
        return tuple(str(m) for m in self.body.get("hide_modules") or ())


def _listed(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or ())


def read_case_file(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path}: a case file is a mapping"
    return data


def iter_cases() -> Iterator[RuleCase]:
    for path in sorted(CASES_DIR.glob("*.yaml")):
        data = read_case_file(path)
        rule = data.get("rule")
        for name, body in data.items():
            if name in ("rule", "emitted_by", "notes", "pending"):
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


@dataclass(frozen=True)
class EngineRun:
    """One CLI run: exit code, the JSON document, stderr."""

    argv: tuple[str, ...]
    code: int
    doc: Any
    stderr: str

    def findings(self) -> list[dict[str, Any]]:
        """Every finding of the document, wherever it sits (phases, items, findings)."""
        out: list[dict[str, Any]] = []
        stack = [self.doc]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if isinstance(node.get("rule"), str) and "severity" in node:
                    out.append(node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(reversed(node))
        return out

    def verdict_rules(self) -> list[str]:
        """The deciding rule of each diagnosis in the document."""
        docs = self.doc.get("items", [self.doc]) if isinstance(self.doc, dict) else []
        return [d["verdict"]["rule"] for d in docs if (d.get("verdict") or {}).get("rule")]


_ENGINE_RUNS: dict[tuple[tuple[str, ...], tuple[str, ...]], EngineRun] = {}
"""One run per distinct command line in a test process: the runs are pure (same input,
same document), and several cases and the severity checks read the same directories."""


def run_engine(argv: list[str], hidden_modules: tuple[str, ...] = ()) -> EngineRun:
    """Run ``dradiag ARGV`` in-process (cached) and parse its JSON document."""
    import contextlib
    import io
    import json
    import sys

    key = (tuple(argv), hidden_modules)
    if key in _ENGINE_RUNS:
        return _ENGINE_RUNS[key]
    from dradiag.cli.app import run

    out, err = io.StringIO(), io.StringIO()
    saved = {m: sys.modules.get(m) for m in hidden_modules}
    try:
        for module in hidden_modules:
            sys.modules[module] = None  # type: ignore[assignment]  # the import then fails
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(argv)
    finally:
        for module, was in saved.items():
            if was is None:
                sys.modules.pop(module, None)
            else:
                sys.modules[module] = was
    try:
        doc = json.loads(out.getvalue())
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"dradiag {' '.join(argv)}: stdout is not one JSON document ({exc}); exit {code}; "
            f"stderr:\n{err.getvalue()[-2000:]}"
        ) from None
    result = EngineRun(argv=tuple(argv), code=code, doc=doc, stderr=err.getvalue())
    _ENGINE_RUNS[key] = result
    return result


def pytest_generate_tests(metafunc: Any) -> None:
    """One test per case, named ``RULE-ID::case_name`` (sqlfluff's yaml_test_cases_test)."""
    if "rule_case" in metafunc.fixturenames:
        cases = [c for c in iter_cases() if "expect" in c.body and c.command is None]
        metafunc.parametrize("rule_case", cases, ids=[c.test_id for c in cases])
    if "engine_case" in metafunc.fixturenames:
        cases = [c for c in iter_cases() if "expect" in c.body and c.command is not None]
        metafunc.parametrize("engine_case", cases, ids=[c.test_id for c in cases])


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


@pytest.fixture(scope="session")
def engine() -> Any:
    """``run_engine``: the CLI run of an engine case, cached per command line."""
    return run_engine


@pytest.fixture(scope="session")
def engine_cases() -> list[RuleCase]:
    """Every engine case of every case file."""
    return [c for c in iter_cases() if "expect" in c.body and c.command is not None]
