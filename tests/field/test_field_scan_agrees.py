"""``scan`` never calls healthy a claim ``claim`` finds broken: over every field case
whose command is ``claim``, the scan of the same input has a row for that claim at the
same phase and status. scan skips the walk of claims that look healthy from their
objects alone; this pins that shortcut to evidence it cannot see (container and
component logs) as well as to what it can."""

from __future__ import annotations

import json

import pytest

from tests.field.corpus import FieldCase, all_cases, run_cli

CASES = [c for c in all_cases() if c.spec["command"] == "claim" and c.expected["status"] != "ok"]


def test_the_corpus_has_broken_claim_cases() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_scan_has_the_claims_row(case: FieldCase) -> None:
    now = ["--now", str(case.spec["now"])] if case.spec.get("now") else []
    _, out, err = run_cli(["scan", "--from", str(case.input), "-o", "json", *now])
    doc = json.loads(out)
    ns, _, name = str(case.spec["target"]).partition("/")
    rows = [
        item
        for item in doc["items"]
        if item["target"]["kind"] == "ResourceClaim"
        and (item["target"].get("namespace"), item["target"]["name"]) == (ns, name)
    ]
    assert rows, f"scan has no row for {ns}/{name}; stderr: {err[-400:]}"
    verdict = rows[0]["verdict"]
    expected = case.expected
    assert (verdict["status"], verdict["phase"]) == (expected["status"], expected["phase"])
