"""Time in a Snapshot: parsing Kubernetes timestamps, the reference "now", and ages.

Analyses never read the clock (STYLE "Analyses are pure functions"): a diagnosis of a
bundle collected last week must give the answer it would have given then. The caller
passes ``now`` in; when it does not, :func:`reference_now` takes the snapshot's
``source.collected_at`` or, failing that, the newest timestamp the snapshot holds, so
"stuck for more than five minutes" is measured against the moment the evidence was read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.snapshot.model import K8sObject, Snapshot

DEFAULT_STUCK_AFTER = timedelta(minutes=5)
"""How long an allocated, scheduled pod may sit in ContainerCreating (or Terminating)
without any event before dradiag calls the phase stuck. The kubelet retries Prepare on
every pod sync and emits an event per failure, so five silent minutes are not a retry."""


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``2026-05-01T10:00:00Z``, fractional seconds, offsets)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    # Python 3.11's fromisoformat takes at most 6 fractional digits; MicroTime may carry 9.
    if "." in text:
        head, _, tail = text.partition(".")
        digits = ""
        rest = tail
        while rest and rest[0].isdigit():
            digits, rest = digits + rest[0], rest[1:]
        text = f"{head}.{digits[:6].ljust(6, '0')}{rest}" if digits else head + rest
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(value: datetime) -> str:
    """``value`` as RFC 3339 UTC with a ``Z`` suffix (the Kubernetes spelling)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_age(delta: timedelta) -> str:
    """A kubectl-style age: ``45s``, ``7m``, ``3h12m``, ``2d4h``."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def event_first_time(event: K8sObject) -> datetime | None:
    """When an Event was first seen (``firstTimestamp``, ``eventTime``, creation)."""
    for key in ("firstTimestamp", "eventTime", "lastTimestamp"):
        if parsed := parse_time(event.get(key)):
            return parsed
    meta = event.get("metadata") or {}
    return parse_time(meta.get("creationTimestamp"))


def event_last_time(event: K8sObject) -> datetime | None:
    """When an Event was last seen (``lastTimestamp``, ``eventTime``, ``firstTimestamp``)."""
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        if parsed := parse_time(event.get(key)):
            return parsed
    meta = event.get("metadata") or {}
    return parse_time(meta.get("creationTimestamp"))


def event_count(event: K8sObject) -> int:
    """How often the Event was emitted (``count``, at least 1)."""
    try:
        return max(1, int(event.get("count") or 1))
    except (TypeError, ValueError):
        return 1


def _object_times(obj: K8sObject) -> Iterable[Any]:
    meta = obj.get("metadata") or {}
    yield meta.get("creationTimestamp")
    yield meta.get("deletionTimestamp")
    status = obj.get("status") or {}
    if isinstance(status, Mapping):
        yield status.get("startTime")
        for cond in status.get("conditions") or ():
            if isinstance(cond, Mapping):
                yield cond.get("lastTransitionTime")
        for key in ("containerStatuses", "initContainerStatuses"):
            for cs in status.get(key) or ():
                if not isinstance(cs, Mapping):
                    continue
                for state in (cs.get("state") or {}, cs.get("lastState") or {}):
                    for detail in state.values() if isinstance(state, Mapping) else ():
                        if isinstance(detail, Mapping):
                            yield detail.get("startedAt")
                            yield detail.get("finishedAt")


def newest_timestamp(snapshot: Snapshot) -> datetime | None:
    """The latest timestamp anywhere in the snapshot's events and objects, or None.

    RFC 3339 strings in UTC sort as text, so events (the bulk) are compared as strings
    and only the winner is parsed.
    """
    best: datetime | None = None
    newest_event = ""
    for ev in snapshot.events:
        for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
            value = ev.get(key)
            if value:
                if isinstance(value, str) and value > newest_event:
                    newest_event = value
                break
    if newest_event:
        best = parse_time(newest_event)
    for objs in (snapshot.pods, snapshot.claims, snapshot.nodes, snapshot.slices):
        for obj in objs:
            for value in _object_times(obj):
                parsed = parse_time(value)
                if parsed is not None and (best is None or parsed > best):
                    best = parsed
    return best


def reference_now(snapshot: Snapshot, now: datetime | None = None) -> datetime | None:
    """``now`` if given, else the collection time, else the newest timestamp seen."""
    if now is not None:
        return now if now.tzinfo else now.replace(tzinfo=UTC)
    collected = parse_time(snapshot.source.collected_at)
    if collected is not None:
        return collected
    return newest_timestamp(snapshot)


def age(since: datetime | None, now: datetime | None) -> timedelta | None:
    """``now - since`` when both are known."""
    if since is None or now is None:
        return None
    return now - since


def parse_duration(text: str) -> timedelta:
    """``300``, ``90s``, ``5m``, ``1h30m`` → timedelta; ValueError otherwise."""
    value = text.strip().lower()
    if not value:
        raise ValueError("empty duration")
    if value.isdigit():
        return timedelta(seconds=int(value))
    total = 0.0
    number = ""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    for ch in value:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"not a duration: {text!r} (use e.g. 300, 90s, 5m, 1h)")
    if number:
        raise ValueError(f"not a duration: {text!r} (a number needs a unit: s, m, h, d)")
    return timedelta(seconds=total)
