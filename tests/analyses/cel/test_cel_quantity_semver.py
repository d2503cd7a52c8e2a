"""Quantity and Semver models (apimachinery resource.Quantity, blang/semver strict)."""

from __future__ import annotations

import pytest

from dradiag.analyses.cel import Quantity, parse_quantity
from dradiag.analyses.cel.semver import normalize_semver, parse_semver


@pytest.mark.parametrize(
    ("text", "nanos", "canonical"),
    [
        ("0", 0, "0"),
        ("1", 10**9, "1"),
        ("1Ki", 1024 * 10**9, "1Ki"),
        ("40Gi", 40 * 2**30 * 10**9, "40Gi"),
        ("1536Mi", 1536 * 2**20 * 10**9, "1536Mi"),
        ("1.5", 1_500_000_000, "1500m"),
        ("1500m", 1_500_000_000, "1500m"),
        ("2000", 2000 * 10**9, "2k"),
        ("1e3", 1000 * 10**9, "1e3"),
        ("100n", 100, "100n"),
        ("0.1n", 1, "1n"),  # rounded up to nano precision
        ("-0.1n", -1, "-1n"),
        ("+5M", 5 * 10**15, "5M"),
        ("0.5Ki", 512 * 10**9, "512"),
    ],
)
def test_parse_and_canonical(text: str, nanos: int, canonical: str) -> None:
    q = parse_quantity(text)
    assert q.nanos == nanos
    assert str(q) == canonical


@pytest.mark.parametrize("bad", ["", "200K", "1.2.3", "Gi", "1 Gi", "abc", "1e", "--1", "1Gb"])
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_arithmetic_and_compare() -> None:
    a, b = parse_quantity("1Gi"), parse_quantity("1024Mi")
    assert a == b and a.compare(b) == 0 and hash(a) == hash(b)
    assert a.add(b) == parse_quantity("2Gi")
    assert a.sub(1).nanos == a.nanos - 10**9
    assert parse_quantity("1500m").is_integer() is False
    assert parse_quantity("2").as_integer() == 2
    assert parse_quantity("-3").sign() == -1
    assert isinstance(a, Quantity)


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("1.0.0-alpha", "1.0.0"),
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-beta.2", "1.0.0-beta.11"),
        ("1.0.0-rc.1", "1.0.0"),
        ("1.9.0", "1.10.0"),
        ("550.54.15", "580.65.6"),
    ],
)
def test_semver_ordering(lower: str, higher: str) -> None:
    assert parse_semver(lower) < parse_semver(higher)


def test_semver_build_metadata_ignored() -> None:
    assert parse_semver("1.0.0+a") == parse_semver("1.0.0+b")


@pytest.mark.parametrize(
    "bad", ["1.0", "v1.0.0", "01.0.0", "1.0.0-01", "1.0.0-", "", "1.0.0+", "a.b.c"]
)
def test_semver_strict(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_semver(bad)


@pytest.mark.parametrize(
    ("text", "normalized"),
    [("v1.2", "1.2.0"), ("1", "1.0.0"), ("1.02.003", "1.2.3"), ("v0.0.1-rc.1", "0.0.1-rc.1")],
)
def test_semver_normalize(text: str, normalized: str) -> None:
    assert normalize_semver(text) == normalized
