"""The demo samples shipped in the package (``dradiag/samples/<name>/``): each is a small, valid
``--from`` cluster (nothing else in the folder) whose entry in ``index.yaml`` names a claim that exists, and (once the ``claim``
command is present) gives the verdict the sample was built to show.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.sources.manifests import load_snapshot

SAMPLES_ROOT = Path(__file__).resolve().parents[2] / "dradiag" / "samples"
REQUIRED = {
    "healthy-mig-claim",
    "selector-matches-nothing",
    "dynamic-mig-counters-exhausted",
    "mig-create-failed-at-prepare",
    "cdi-device-unresolvable",
}
MAX_SAMPLE_BYTES = 64 * 1024


INDEX = yaml.safe_load((SAMPLES_ROOT / "index.yaml").read_text())["samples"]


def _samples() -> list[Path]:
    return sorted(SAMPLES_ROOT / name for name in INDEX)


def _meta(path: Path) -> dict[str, Any]:
    data = INDEX[path.name]
    assert isinstance(data, dict)
    return data


def test_every_sample_folder_is_in_the_index() -> None:
    folders = {p.name for p in SAMPLES_ROOT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(INDEX)


def test_the_required_samples_are_shipped() -> None:
    assert {p.name for p in _samples()} >= REQUIRED


@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.name)
def test_sample_is_a_small_valid_cluster(sample: Path, caplog: pytest.LogCaptureFixture) -> None:
    meta = _meta(sample)
    assert isinstance(meta.get("claim"), str) and "/" in meta["claim"]
    assert meta.get("description", "").strip()
    expected = meta["expected"]
    assert expected["status"] in {"ok", "broken", "inconclusive"}
    assert (expected["phase"] is None) == (expected["status"] == "ok")
    size = sum(p.stat().st_size for p in sample.rglob("*") if p.is_file())
    assert size <= MAX_SAMPLE_BYTES, f"{sample.name} is {size} bytes; keep samples small"
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snapshot = load_snapshot(str(sample))
    noise = [r.getMessage() for r in caplog.records]
    assert not noise, noise
    namespace, _, name = meta["claim"].partition("/")
    assert snapshot.claim(namespace, name) is not None
    assert snapshot.source.collected_at, "collection.json fixes the time the sample was taken"


@pytest.mark.parametrize("sample", _samples(), ids=lambda p: p.name)
def test_sample_gives_its_verdict(sample: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dradiag.cli.app import run

    meta = _meta(sample)
    expected = meta["expected"]
    capsys.readouterr()
    code = run(["claim", meta["claim"], "--from", str(sample), "-o", "json"])
    verdict = json.loads(capsys.readouterr().out)["verdict"]
    assert verdict["status"] == expected["status"]
    assert verdict.get("phase") == expected["phase"]
    assert verdict.get("rule") == expected["rule"]
    assert code == {"ok": 0, "broken": 1, "inconclusive": 4}[expected["status"]]
