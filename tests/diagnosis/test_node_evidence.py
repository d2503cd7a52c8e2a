"""Saved node state as claim evidence: the phase it decides, and none without it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dradiag.diagnosis.build import diagnose_claim
from dradiag.sources.manifests import load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node"


def _verdict(root: Path, ns: str, name: str) -> tuple[str | None, str | None]:
    diagnosis = diagnose_claim(load_snapshot(str(root)), ns, name)
    return (
        diagnosis.verdict.phase.value if diagnosis.verdict.phase else None,
        diagnosis.verdict.rule,
    )


@pytest.mark.parametrize(
    ("claim", "with_node", "without_node"),
    [
        # a gone claim's checkpoint entry and MIG instance on this claim's placement
        (
            "ml/trainer-gpu",
            ("unprepare", "DRA-UNPREP-LEAKED-STATE"),
            ("prepare", "DRA-PREP-STALLED"),
        ),
        # prepared per the checkpoint, the CDI spec gone
        (
            "serving/server-gpu",
            ("injection", "DRA-INJ-NODE-CDI-SPEC-MISSING"),
            ("prepare", "DRA-PREP-STALLED"),
        ),
        # the Prepare never finished
        (
            "ml/mig-starter",
            ("prepare", "DRA-PREP-CHECKPOINT-PREPARE-STARTED"),
            ("prepare", "DRA-PREP-STALLED"),
        ),
        # a device node the claim's spec injects is missing
        (
            "ml/caps-gpu",
            ("injection", "DRA-INJ-CDI-DEVICE-NODE-MISSING"),
            ("prepare", "DRA-PREP-STALLED"),
        ),
    ],
)
def test_node_state_decides_the_phase(
    claim: str, with_node: tuple[str, str], without_node: tuple[str, str], tmp_path: Path
) -> None:
    ns, name = claim.split("/")
    assert _verdict(FIXTURES / "leaky", ns, name) == with_node
    bare = tmp_path / "bare"
    shutil.copytree(FIXTURES / "leaky", bare, ignore=shutil.ignore_patterns("node"))
    assert _verdict(bare, ns, name) == without_node


def test_the_cause_names_the_gone_claim() -> None:
    diagnosis = diagnose_claim(load_snapshot(str(FIXTURES / "leaky")), "ml", "trainer-gpu")
    assert "3c8337ad-f366-4541-883d-30b9e99fd6be" in diagnosis.verdict.summary
    unprepare = next(p for p in diagnosis.phases if p.phase.value == "unprepare")
    assert (
        unprepare.basis.value == "checked" and "node state of gpu-node-1" in unprepare.basis_detail
    )
    prepare = next(p for p in diagnosis.phases if p.phase.value == "prepare")
    assert prepare.status.value == "warn"  # the symptom, pointing at unprepare


def test_a_healthy_node_adds_nothing_but_the_prepare_proof() -> None:
    diagnosis = diagnose_claim(load_snapshot(str(FIXTURES / "healthy")), "serving", "server-gpu")
    prepare = next(p for p in diagnosis.phases if p.phase.value == "prepare")
    assert prepare.status.value == "ok" and "PrepareCompleted" in prepare.basis_detail
    rules = {f.rule for p in diagnosis.phases for f in p.findings}
    assert not {r for r in rules if "NODE" in r or "CHECKPOINT" in r or "LEAK" in r}
