"""Shared helpers for the scenario corpus: where the scenarios live and what each expects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SCENARIOS_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
EXPECTED_FILE = "expected.json"

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


@dataclass(frozen=True)
class Scenario:
    """One ``--from`` directory and the verdict it must produce."""

    name: str
    path: Path
    expected: dict[str, Any]

    @property
    def namespace(self) -> str:
        return str(self.expected["claim"]).partition("/")[0]

    @property
    def claim_name(self) -> str:
        return str(self.expected["claim"]).partition("/")[2]


def scenario_dirs() -> list[Path]:
    """Every scenario directory, sorted (a directory is a scenario when it holds expected.json)."""
    return sorted(p.parent for p in SCENARIOS_ROOT.glob(f"*/{EXPECTED_FILE}"))


def load_scenario(path: Path) -> Scenario:
    return Scenario(path.name, path, json.loads((path / EXPECTED_FILE).read_text()))


def all_scenarios() -> list[Scenario]:
    return [load_scenario(p) for p in scenario_dirs()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise every test taking ``scenario`` over the corpus, one readable id each."""
    if "scenario" in metafunc.fixturenames:
        scenarios = all_scenarios()
        metafunc.parametrize("scenario", scenarios, ids=[s.name for s in scenarios])


@pytest.fixture(scope="session")
def corpus() -> list[Scenario]:
    """The whole corpus, for tests about its coverage."""
    return all_scenarios()
