"""Durations as kubectl takes --request-timeout: bare integer = seconds, Go durations, 0."""

from __future__ import annotations

import math

import pytest

from dradiag.cli.app import run
from dradiag.cli.durations import INVALID_TIMEOUT, parse_seconds, parse_timeout


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("2m", 120.0),
        ("3h", 10800.0),
        ("90", 90.0),
        ("1h30m", 5400.0),
        ("1.5s", 1.5),
        ("300ms", 0.3),
        ("+5s", 5.0),
        ("0s", 0.0),
    ],
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "x", "5x", "1d", "-1s", "-5", "s", "1.2.3s", "5 s"])
def test_parse_seconds_rejects_with_kubectls_words(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid timeout value") as info:
        parse_seconds(text)
    assert str(info.value) == INVALID_TIMEOUT


def test_zero_means_no_timeout() -> None:
    assert parse_timeout("0") == math.inf
    assert parse_timeout("0s") == math.inf
    assert parse_timeout(10.0) == 10.0


@pytest.mark.parametrize("option", ["--request-timeout", "--timeout", "--stuck-after"])
def test_bad_duration_is_a_usage_error(option: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["claim", "ml/x", "--from", "/nonexistent", option, "5x"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"Invalid value for '{option}': {INVALID_TIMEOUT}" in err
    assert "Value error" not in err
