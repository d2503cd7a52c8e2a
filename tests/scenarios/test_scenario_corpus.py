"""The scenario corpus itself: every scenario loads cleanly, is consistent, and the corpus covers
every phase, several Kubernetes API versions and several driver versions.

These checks run without the diagnosis engine; ``test_scenarios.py`` runs the engine on them.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dradiag.snapshot.model import Coverage, Kind, allocated_devices, name_of
from dradiag.sources.manifests import load_snapshot
from dradiag.vocabulary import Phase

PHASE_CODES = {
    "publication": "PUB",
    "selection": "SEL",
    "allocation": "ALLOC",
    "prepare": "PREP",
    "injection": "INJ",
    "workload": "WORK",
    "unprepare": "UNPREP",
}
EXIT_FOR_STATUS = {"ok": 0, "broken": 1, "inconclusive": 4}
RULE_ID = re.compile(r"^DRA-(PUB|SEL|ALLOC|PREP|INJ|WORK|UNPREP)-[A-Z0-9]+(-[A-Z0-9]+)*$")
# Slice device names the gpu.nvidia.com driver can produce (nvidia-driver-facts §1.3).
DEVICE_NAME = re.compile(
    r"^gpu-\d+$"  # full GPU
    r"|^gpu-\d+-mig-[a-z0-9-]+-\d+-\d+$"  # MIG, v25.12+: gpu-<m>-mig-<profile>-<gi>-<start>
    r"|^gpu-\d+-mig-\d+-\d+-\d+$"  # MIG, v25.3-v25.8: gpu-<m>-mig-<gi>-<start>-<size>
    r"|^gpu-vfio-\d+$"
)
GPU_DRIVER = "gpu.nvidia.com"


def _load_quietly(path: Path, caplog: pytest.LogCaptureFixture) -> Any:
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snapshot = load_snapshot(str(path))
    # expected.json sits beside the input (kubectl-validate's expectation-next-to-input);
    # the loader reports it as a non-Kubernetes file, which is right for any other input.
    problems = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING
        and not r.getMessage().startswith(str(path / "expected.json"))
    ]
    assert not problems, f"{path.name}: loader warnings: {problems}"
    return snapshot


# -- per scenario -------------------------------------------------------------------------


def test_expected_is_well_formed(scenario: Any) -> None:
    exp = scenario.expected
    assert set(exp) >= {"claim", "status", "phase", "rule", "exit_code", "source"}, exp
    assert re.fullmatch(r"[a-z0-9-]+/[a-z0-9.-]+", exp["claim"]), exp["claim"]
    assert exp["status"] in EXIT_FOR_STATUS
    assert exp["exit_code"] == EXIT_FOR_STATUS[exp["status"]]
    assert exp["source"].strip(), "every scenario names where in the reference it comes from"
    if exp["status"] == "ok":
        assert exp["phase"] is None and exp["rule"] is None
    else:
        assert exp["phase"] in {p.value for p in Phase}
    if exp["status"] == "broken":
        assert exp["rule"], "a broken verdict names its deciding rule"
    if exp["rule"] is not None:
        match = RULE_ID.match(exp["rule"])
        assert match, f"rule id {exp['rule']!r} is not DRA-<PHASE>-<NAME>"
        assert match.group(1) == PHASE_CODES[exp["phase"]], "rule id prefix must name the phase"


def test_scenario_loads_without_warnings(scenario: Any, caplog: pytest.LogCaptureFixture) -> None:
    snapshot = _load_quietly(scenario.path, caplog)
    assert snapshot.claim(scenario.namespace, scenario.claim_name) is not None, (
        f"{scenario.name}: claim {scenario.expected['claim']} is not in the scenario"
    )
    assert snapshot.source.collected_at, "collection.json gives collectedAt (deterministic time)"
    assert re.fullmatch(r"2026-\d\d-\d\dT\d\d:\d\d:\d\dZ", snapshot.source.collected_at)


def test_objects_are_consistent(scenario: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The fixture tells one coherent story: names, pools, pods and logs line up."""
    snapshot = _load_quietly(scenario.path, caplog)
    published: dict[tuple[str, str], set[str]] = {}
    for sl in snapshot.slices:
        spec = sl["spec"]
        if spec.get("driver") != GPU_DRIVER:
            continue
        # One pool per node, named after it (nvidia-driver-facts §1.1).
        assert spec["pool"]["name"] == spec["nodeName"], name_of(sl)
        assert snapshot.node(spec["nodeName"]) is not None, (
            f"slice {name_of(sl)} on an unknown node"
        )
        for device in spec.get("devices") or []:
            assert DEVICE_NAME.match(device["name"]), f"unrealistic device name {device['name']}"
            published.setdefault((spec["driver"], spec["pool"]["name"]), set()).add(device["name"])
    for claim in snapshot.claims:
        for result in allocated_devices(claim):
            pool = (result["driver"], result["pool"])
            if pool in published:
                assert result["device"] in published[pool], (
                    f"{name_of(claim)} is allocated {result['device']}, which pool {pool} does not publish"
                )
        for reserved in claim.get("status", {}).get("reservedFor") or []:
            pod = snapshot.pod_by_uid(reserved["uid"])
            if pod is not None:
                assert name_of(pod) == reserved["name"]
    for pod in snapshot.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            assert snapshot.node(node) is not None, (
                f"pod {name_of(pod)} bound to unknown node {node}"
            )
    for log in snapshot.logs:
        assert log.namespace and snapshot.pod(log.namespace, log.pod) is not None, (
            f"log {log.source} belongs to no pod in the scenario"
        )
    for event in snapshot.events:
        involved = event["involvedObject"]
        if involved.get("kind") == "Pod" and snapshot.is_collected(Kind.POD):
            assert snapshot.pod(involved["namespace"], involved["name"]) is not None, event[
                "metadata"
            ]


def test_unknown_kinds_are_explained(scenario: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A kind marked unknown carries its reason; an inconclusive scenario has one."""
    snapshot = _load_quietly(scenario.path, caplog)
    unknown = [r for r in snapshot.coverage.values() if r.coverage is Coverage.UNKNOWN]
    for record in unknown:
        assert record.reason, record
    if scenario.expected["status"] == "inconclusive":
        assert unknown, "an inconclusive scenario must leave some evidence unread"
        assert snapshot.errors, "and record the failed read (collection.errors)"


def test_rule_exists_in_rulebook(scenario: Any) -> None:
    rule = scenario.expected["rule"]
    if rule is None:
        pytest.skip("no deciding rule for this verdict")
    from dradiag.rulebook import load_rulebook

    rulebook = load_rulebook()
    found = rulebook.get(rule)
    assert found is not None, f"{scenario.name}: rule {rule} is not in rules/*.yaml"
    assert str(getattr(found.phase, "value", found.phase)) == scenario.expected["phase"]


# -- the corpus as a whole ----------------------------------------------------------------


def test_corpus_size_and_phase_coverage(corpus: list[Any]) -> None:
    assert len(corpus) >= 30
    broken = Counter(s.expected["phase"] for s in corpus if s.expected["status"] == "broken")
    for phase in Phase:
        assert broken[phase.value] >= 2, (
            f"phase {phase.value}: only {broken[phase.value]} scenario(s)"
        )
    statuses = Counter(s.expected["status"] for s in corpus)
    assert statuses["ok"] >= 4, "healthy scenarios guard against false alarms"
    assert statuses["inconclusive"] >= 2, "unreadable evidence must be exercised"


def test_corpus_spans_api_and_driver_versions(corpus: list[Any]) -> None:
    api_versions: set[str] = set()
    plugin_images: set[str] = set()
    event_apis: set[str] = set()
    for scenario in corpus:
        for path in scenario.path.rglob("*.yaml"):
            text = path.read_text()
            api_versions.update(re.findall(r"apiVersion: resource\.k8s\.io/(v1\w*)", text))
            plugin_images.update(re.findall(r"image: (\S*dra-driver\S*)", text))
            event_apis.update(
                re.findall(r"apiVersion: (events\.k8s\.io/v1|v1)\n\s*kind: Event\b", text)
            )
    assert {"v1beta1", "v1beta2", "v1"} <= api_versions
    tags = {image.rpartition(":")[2] for image in plugin_images}
    assert len(tags) >= 5, f"driver versions in the corpus: {sorted(tags)}"
    assert {"v25.3.2", "v25.8.1", "v25.12.0", "v0.4.0"} <= tags
    assert event_apis == {"events.k8s.io/v1", "v1"}


def test_corpus_covers_the_required_situations(corpus: list[Any]) -> None:
    """The situations the issue names, each present at least once."""
    by_name = {s.name: s for s in corpus}

    def has(prefix: str) -> bool:
        return any(name.startswith(prefix) for name in by_name)

    # Later symptoms that must not outrank an earlier broken phase.
    assert sum("outranks" in name for name in by_name) >= 3
    # DESIGN §2: a Prepare failure caused by a gone claim's leaked state is that claim's unprepare.
    leaked = [s for s in corpus if s.name.startswith("unprep-leaked")]
    assert leaked and leaked[0].expected["phase"] == "unprepare"
    # Template-generated claims resolved through the pod (owner reference + pod-claim-name).
    generated = 0
    for scenario in corpus:
        for path in scenario.path.glob("*.yaml"):
            generated += "resource.kubernetes.io/pod-claim-name" in path.read_text()
    assert generated >= 3
    assert (
        has("ok-shared-claim")
        and has("ok-dynamic-mig")
        and has("ok-static-mig")
        and has("ok-full-gpu")
    )


def test_scenario_names_are_unique_and_tidy(corpus: list[Any]) -> None:
    names = [s.name for s in corpus]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name), name
    for scenario in corpus:
        json.loads((scenario.path / "collection.json").read_text())
