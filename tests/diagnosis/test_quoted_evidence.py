"""Quoted evidence keeps the innermost cause: a long kubelet message is clipped in the
middle, never at the end, in the JSON document and in the text view."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
import yaml

from dradiag.analyses.error_chain import clip_middle
from dradiag.cli.app import run

SAMPLE = (
    Path(__file__).resolve().parents[2] / "dradiag" / "samples" / "mig-create-failed-at-prepare"
)
CLAIM = "default/pod-memsat-0004-mig-070gb-8g9dwhd-gpu-tpghv"
UID = "3c8337ad-f366-4541-883d-30b9e99fd6be"


def _chain(claim: str, uid: str, device: str) -> str:
    # nvidia-driver-facts §12 #12: the v25.12+ DynamicMIG Prepare failure, as kubelet wraps it.
    return (
        f"NodePrepareResources failed for ResourceClaim {claim.split('/')[1]}: error preparing "
        f"devices for claim {claim}:{uid}: prepare devices failed: error creating MIG device: "
        f"error creating GPU instance for '{device}': Insufficient Resources"
    )


# A kubelet that prepares three claims of one pod reports every failed one; the claim of
# interest comes last, so its cause ends the message.
LONG_MESSAGE = "Failed to prepare dynamic resources: prepare dynamic resources: " + "; ".join(
    [
        "NodePrepareResources failed for ResourceClaim pod-memsat-0004-mig-070gb-8g9dwhd-"
        "scratch-7x2kd: rpc error: code = DeadlineExceeded desc = context deadline exceeded "
        "while waiting for the plugin socket /var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock",
        "NodePrepareResources failed for ResourceClaim pod-memsat-0004-mig-070gb-8g9dwhd-"
        'aux-q9z8w: rpc error: code = Unavailable desc = connection error: desc = "transport:'
        " Error while dialing: dial unix /var/lib/kubelet/plugins/gpu.nvidia.com/dra.sock: "
        'connect: connection refused"',
        _chain(CLAIM, UID, "gpu-2-mig-4g95gb-5-0"),
    ]
)


@pytest.fixture
def long_message_input(tmp_path: Path) -> Path:
    root = tmp_path / "input"
    shutil.copytree(SAMPLE, root)
    path = root / "events.yaml"
    events = list(yaml.safe_load_all(path.read_text()))
    failed = [e for e in events if e and e.get("reason") == "FailedPrepareDynamicResources"]
    assert failed
    for event in failed:
        event["message"] = LONG_MESSAGE
    path.write_text(yaml.safe_dump_all(events))
    (root / "sample.yaml").unlink()
    return root


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run(list(argv))
    return out.getvalue()


def test_the_message_is_long_enough_to_be_clipped() -> None:
    assert len(LONG_MESSAGE) > 800


def test_json_evidence_keeps_the_innermost_cause(long_message_input: Path) -> None:
    doc = json.loads(_cli("claim", CLAIM, "--from", str(long_message_input), "-o", "json"))
    assert doc["verdict"]["phase"] == "prepare"
    excerpts = [
        e["excerpt"]
        for p in doc["phases"]
        for f in p["findings"]
        for e in f["evidence"]
        if "FailedPrepareDynamicResources" in e["excerpt"]
    ]
    assert excerpts
    for excerpt in excerpts:
        assert " … " in excerpt  # clipped, in the middle
        assert "Failed to prepare dynamic resources" in excerpt  # the head stays
        assert "error creating GPU instance for 'gpu-2-mig-4g95gb-5-0': Insufficient Resources" in (
            excerpt
        )


def test_text_view_keeps_the_innermost_cause(long_message_input: Path) -> None:
    text = _cli("claim", CLAIM, "--from", str(long_message_input), "--no-color")
    quoted = [line for line in text.splitlines() if "Warning FailedPrepareDynamicResources" in line]
    assert quoted
    for line in quoted:
        assert " … " in line
        assert "Insufficient Resources" in line
        assert "Failed to prepare dynamic resources" in line


def test_clip_middle_keeps_head_and_tail() -> None:
    clipped = clip_middle(LONG_MESSAGE, 300)
    assert len(clipped) <= 300
    head, tail = clipped.split(" … ")
    assert LONG_MESSAGE.startswith(head)
    assert LONG_MESSAGE.endswith(tail)
    assert tail.endswith("Insufficient Resources")
