"""The shipped rulebook loads once per process; patterns compile to RE2 with literal prefilters."""

from __future__ import annotations

from pathlib import Path

from dradiag.rulebook import Rulebook, load_rulebook
from dradiag.rulebook.loader import default_rules_dir
from dradiag.rulebook.patterns import compile_pattern, first_match, required_literals

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_load_rulebook_is_cached_and_reads_the_repository_rules() -> None:
    book = load_rulebook()
    assert isinstance(book, Rulebook)
    assert load_rulebook() is book
    assert default_rules_dir() == REPO_ROOT / "rules"
    assert {Path(r.source.split(":")[0]).name for r in book.rules} == {
        f"{p}.yaml"
        for p in (
            "publication",
            "selection",
            "allocation",
            "prepare",
            "injection",
            "workload",
            "unprepare",
            # Known issues by version, of every phase: one list to review against upstream.
            "known-issues",
        )
    }


def test_lookup_by_id_alias_phase_and_closest() -> None:
    book = load_rulebook()
    rule = book.get("DRA-PREP-MIG-CREATE-FAILED")
    assert rule is not None and book.get(" dra-prep-mig-create-failed ") is rule
    assert "DRA-PREP-MIG-CREATE-FAILED" in book and "DRA-NOPE-X" not in book
    assert all(r.phase.value == "prepare" for r in book.by_phase("prepare"))
    assert book.closest("DRA-PREP-MIG-CREATE")[0] == "DRA-PREP-MIG-CREATE-FAILED"
    ordered = [(r.phase, r.id) for r in book.rules]
    assert [p for p, _ in ordered] == sorted(
        (p for p, _ in ordered), key=list(type(ordered[0][0])).index
    )


def test_patterns_use_re2_and_fall_back_for_lookaround() -> None:
    assert compile_pattern(r"unknown field \"(?P<field>[^\"]+)\"").engine == "re2"
    fallback = compile_pattern(r"(?<!not )registered")
    assert fallback.engine == "re"
    assert fallback.search("DRA driver is registered") is not None
    assert fallback.search("DRA driver is not registered") is None


def test_required_literals_from_the_parse_tree() -> None:
    assert required_literals(r"error (?:GPU|MIG) instance for '(?P<d>[^']+)'") == (
        " instance for '",
    )
    assert set(required_literals(r"(?:alpha failure|beta failure) x")) == {
        "alpha failure",
        "beta failure",
    }
    assert required_literals(r"\d+ nodes?") == (" node",)  # the optional "s" ends the run
    assert required_literals(r"a|b") == ()  # too short to filter anything
    ci = compile_pattern(r"(?i)NVIDIA-SMI has failed")
    assert ci.literals == ("nvidia-smi has failed",) and ci.may_match("nvidia-smi HAS FAILED")


def test_first_match_prefers_the_earlier_variant() -> None:
    variants = [
        compile_pattern(r"is not allowed to use ResourceClaim (?P<claim>\S+)"),
        compile_pattern(r"ResourceClaim (?P<other>\S+)"),
    ]
    pattern, captures = first_match(variants, "pod p (u) is not allowed to use ResourceClaim c (x)")  # type: ignore[misc]
    assert pattern is variants[0] and captures["claim"] == "c"
