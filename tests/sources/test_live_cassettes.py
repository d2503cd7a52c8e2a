"""Recorded collections (vcrpy cassettes): live collection replayed with no server at all.

The cassettes in ``tests/sources/cassettes/`` hold the HTTP exchanges of collecting a
few scenarios from the local API server. Replaying them checks the client side alone
(parsing, normalization, the plan's decisions) against fixed wire data, and every
recorded request must be a GET. Regenerate them after a change to the read plan with
``DRADIAG_RECORD_CASSETTES=1 pytest tests/sources/test_live_cassettes.py`` (then review
the diff like a golden file); without that variable no server is started.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import vcr
import yaml

from dradiag.cli.app import run
from dradiag.cli.inputs import Target
from dradiag.cli.options import CommonOptions
from dradiag.snapshot.model import Snapshot, name_of, namespace_of
from dradiag.sources.live import collect_snapshot
from dradiag.sources.manifests import load_snapshot

HERE = Path(__file__).resolve().parent
CASSETTES = HERE / "cassettes"
TESTS = HERE.parent
CLUSTER = TESTS / "kube_api" / "fixtures" / "cluster"
SCENARIOS = TESTS / "fixtures" / "scenarios"
RECORD = os.environ.get("DRADIAG_RECORD_CASSETTES") == "1"
REPLAY_SERVER = "http://127.0.0.1:9"
"""Where replayed runs point: nothing listens there, so any unrecorded request fails."""

CASES = {
    "claim-allocated": (CLUSTER, Target(kind="claim", namespace="ml", name="train-gpu"), {}),
    "claim-pending": (CLUSTER, Target(kind="claim", namespace="ml", name="pending-h100"), {}),
    "pod-template-claim": (CLUSTER, Target(kind="pod", namespace="ml", name="infer-0"), {}),
    "cluster": (CLUSTER, Target(kind="cluster"), {}),
    "claim-v1beta1-all-in-use": (
        SCENARIOS / "alloc-all-gpus-in-use-v1beta1",
        Target(kind="claim", namespace="studio", name="render-carol-gpu"),
        {"versions": ("v1beta2", "v1beta1"), "server_version": "1.33"},
    ),
}


def _vcr() -> vcr.VCR:
    return vcr.VCR(
        cassette_library_dir=str(CASSETTES),
        record_mode="all" if RECORD else "none",
        match_on=["method", "path", "query"],
        filter_headers=["authorization", "user-agent"],
        decode_compressed_response=True,
    )


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "dradiag-test-token"}}],
        "contexts": [{"name": "recorded", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "recorded",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _collect(case: str, tmp_path: Path, kube_api_factory) -> Snapshot:
    fixture, target, server_options = CASES[case]
    if RECORD:
        server = kube_api_factory(fixture, **server_options)
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    else:
        if not (CASSETTES / f"{case}.yaml").exists():
            pytest.fail(f"cassette {case}.yaml missing: record with DRADIAG_RECORD_CASSETTES=1")
        kubeconfig = _kubeconfig(tmp_path, REPLAY_SERVER)
    with _vcr().use_cassette(f"{case}.yaml"):
        return collect_snapshot(
            CommonOptions(kubeconfig=str(kubeconfig), request_timeout=2.0), target
        )


@pytest.fixture(autouse=True)
def _sequential_reads(monkeypatch):
    """One read at a time: vcrpy records and replays a cassette from one thread only."""
    monkeypatch.setattr("dradiag.sources.live_plan.MAX_WORKERS", 1)


def _keys(objects) -> set[tuple[str, str]]:
    return {(namespace_of(o), name_of(o)) for o in objects}


@pytest.mark.parametrize("case", sorted(CASES))
def test_replayed_collection_matches_the_fixture(case, tmp_path, kube_api_factory):
    snap = _collect(case, tmp_path, kube_api_factory)
    fixture, target, _ = CASES[case]
    expected = load_snapshot(str(fixture))

    assert snap.errors == ()
    assert snap.source.kind == "live"
    if target.kind == "claim":
        got, want = (
            snap.claim(target.namespace, target.name),
            expected.claim(target.namespace, target.name),
        )
        assert got is not None and want is not None
        assert (got["spec"], got.get("status")) == (want["spec"], want.get("status"))
    # Whatever was read equals the fixture object, normalized from the wire version.
    for got, want in (
        (snap.slices, expected.slices),
        (snap.claims, expected.claims),
        (snap.nodes, expected.nodes),
    ):
        by_key = {(namespace_of(o), name_of(o)): o for o in want}
        for obj in got:
            assert obj.get("spec") == by_key[(namespace_of(obj), name_of(obj))].get("spec")
    assert _keys(snap.slices) and _keys(snap.slices) <= _keys(expected.slices)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cassettes_hold_only_gets(case):
    path = CASSETTES / f"{case}.yaml"
    if not path.exists():
        pytest.fail(f"cassette {case}.yaml missing: record with DRADIAG_RECORD_CASSETTES=1")
    interactions = yaml.safe_load(path.read_text())["interactions"]

    assert interactions
    assert {i["request"]["method"] for i in interactions} == {"GET"}
    assert all(
        "authorization" not in {k.lower() for k in i["request"]["headers"]} for i in interactions
    )


@pytest.mark.skipif(RECORD, reason="replay only")
def test_replayed_claim_gives_the_from_verdict(tmp_path, capsys, monkeypatch):
    """The v1beta1 scenario diagnosed from its cassette and from its directory: one verdict."""
    monkeypatch.setenv("HOME", str(tmp_path))
    scenario = SCENARIOS / "alloc-all-gpus-in-use-v1beta1"
    claim = json.loads((scenario / "expected.json").read_text())["claim"]
    now = ["--now", "2026-01-14T20:30:00Z"]

    def verdict(argv: list[str]) -> tuple[int, tuple[str, str, str]]:
        code = run(["claim", claim, "-o", "json", *now, *argv])
        doc = json.loads(capsys.readouterr().out)["verdict"]
        return code, (doc["status"], doc["phase"], doc["rule"])

    kubeconfig = _kubeconfig(tmp_path, REPLAY_SERVER)
    with _vcr().use_cassette("claim-v1beta1-all-in-use.yaml"):
        replayed = verdict(["--kubeconfig", str(kubeconfig)])
    offline = verdict(["--from", str(scenario)])

    assert replayed == offline
    assert replayed[1][:2] == ("broken", "allocation")
