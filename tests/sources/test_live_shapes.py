"""A misbehaving API server: wrong-shaped objects are checked at the Snapshot boundary."""

from __future__ import annotations

import copy
from pathlib import Path

from dradiag.cli.inputs import Target
from dradiag.cli.options import CommonOptions
from dradiag.diagnosis.build import diagnose_claim
from dradiag.snapshot.model import Kind
from dradiag.sources.live import collect_snapshot
from dradiag.sources.manifests import load_snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "kube_api" / "fixtures" / "cluster"
CLAIM = Target(kind="claim", namespace="ml", name="train-gpu")


def test_wrong_shaped_live_objects_are_trimmed_or_skipped_never_a_crash(kube_api_factory, tmp_path):
    objects = [copy.deepcopy(dict(o)) for _, o in load_snapshot(str(FIXTURE)).objects()]
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    slices[0]["spec"]["devices"][0]["attributes"] = ["not", "a", "map"]
    events = [o for o in objects if o["kind"] == "Event"]
    for event in events:
        event["reason"] = ["FailedPrepareDynamicResources"]  # skips the event
    server = kube_api_factory(objects=objects)
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")

    snap = collect_snapshot(CommonOptions(kubeconfig=str(kubeconfig)), CLAIM)

    problems = {(p.kind, p.field, p.skipped) for p in snap.shape_problems}
    assert (Kind.RESOURCE_SLICE, "spec.devices[0].attributes", False) in problems
    assert (Kind.EVENT, "reason", True) in problems
    assert all(str(p.where).startswith("live: list ") for p in snap.shape_problems)
    assert not snap.is_collected(Kind.EVENT)  # a skipped event: events are not complete
    diagnosis = diagnose_claim(snap, "ml", "train-gpu")
    assert diagnosis.verdict.status.value in ("ok", "broken", "inconclusive")
