"""Seeded mutation fuzzing: no malformed input makes claim, pod or scan crash (issue 15 §1).

3,000 mutations of every scenario fixture, embedded sample and field case, in chunks so
pytest-xdist spreads them. A failure prints each crash with the line that replays it.
``DRADIAG_FUZZ_SEED`` / ``DRADIAG_FUZZ_MUTATIONS`` change the run; ``bench/fuzz.py`` runs
longer ones.
"""

from __future__ import annotations

import functools
import os
import random

import pytest
from robustness import mutator

SEED = int(os.environ.get("DRADIAG_FUZZ_SEED", "20261201"))
MUTATIONS = int(os.environ.get("DRADIAG_FUZZ_MUTATIONS", "3000"))
CHUNKS = 6


@functools.cache
def _cases() -> list[mutator.Case]:
    return [mutator.load_case(root) for root in mutator.corpus_roots()]


def test_the_corpus_holds_every_scenario_and_sample_with_a_target() -> None:
    names = [c.name for c in _cases()]
    assert sum(n.startswith("tests/fixtures/scenarios/") for n in names) >= 40
    assert sum(n.startswith("dradiag/samples/") for n in names) >= 5
    # Every input has a target: its claim, or (a field case whose claim is only a
    # template) its pod.
    assert all(c.claim or c.pod for c in _cases()), [c.name for c in _cases() if not c.claim]
    assert sum(n.startswith("tests/field/") for n in names) >= 40
    assert sum(1 for c in _cases() if c.pod) >= 40


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_no_mutation_makes_a_command_crash(chunk: int) -> None:
    per = MUTATIONS // CHUNKS
    first = SEED + chunk * per
    cases = _cases()
    # Each chunk starts at another case, so every chunk covers the corpus evenly.
    rotated = cases[chunk * 7 % len(cases) :] + cases[: chunk * 7 % len(cases)]
    runs, crashes = mutator.fuzz(rotated, seed=first, mutations=per)
    assert runs >= 2 * per
    assert not crashes, f"{len(crashes)} crashing run(s) (seed {first}):\n" + "\n".join(
        f"{c}\n  replay: python bench/fuzz.py --case {c.case} --replay {c.seed}"
        for c in crashes[:5]
    )


def test_a_mutation_replays_from_its_seed() -> None:
    case = _cases()[0]
    one, again = mutator.mutate_case(case, 1234), mutator.mutate_case(case, 1234)
    assert one.described and one.described == again.described
    assert one.manifests == again.manifests
    assert one.manifests != case.manifests or one.others != case.others


def test_the_mutations_reach_every_kind_of_change() -> None:
    rng = random.Random(7)
    seen = set()
    doc = {"metadata": {"creationTimestamp": "2026-05-01T10:00:00Z"}, "spec": {"a": [1, 2]}}
    for _ in range(400):
        _, what = mutator.mutate_value(rng, doc)
        seen.add(what.split(" ")[0])
    assert {"null", "number", "string", "list", "map", "remove", "truncate", "nest"} <= seen
    assert "junk" in seen  # typed junk: timestamps, quantities, versions, scalars


def test_an_internal_error_is_caught_as_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    from dradiag.diagnosis import build

    def broken(*_args: object, **_kwargs: object) -> object:
        raise AttributeError("'str' object has no attribute 'get'")

    monkeypatch.setattr(build, "diagnose_claim", broken)
    case = next(c for c in _cases() if c.name.endswith("healthy-mig-claim"))
    crashes = mutator.fuzz([case], seed=5, mutations=1)[1]
    assert [c.argv[0] for c in crashes] == ["claim"]
    assert "internal error: AttributeError" in crashes[0].stderr
    assert mutator.is_crash(3, "") and mutator.is_crash(0, "Traceback (most recent call last)")
    assert not mutator.is_crash(4, "dradiag: warning: x.yaml: Pod a/b: spec: ...")
