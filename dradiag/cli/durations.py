"""Durations on the command line, read the way kubectl reads ``--request-timeout``.

kubectl (client-go ``clientcmd.ParseTimeout``) takes a bare non-negative integer as
seconds and anything else through Go's ``time.ParseDuration`` (``1s``, ``2m``, ``3h``,
``1h30m``, ``1.5s``, ``300ms``); ``0`` means no timeout. ``--request-timeout``,
``--timeout`` and ``--stuck-after`` all use this one grammar, so a value that works on
one works on the others, and a bad one gets kubectl's own words.
"""

from __future__ import annotations

import math
import re

INVALID_TIMEOUT = (
    "Invalid timeout value. Timeout must be a single integer in seconds, or an integer "
    "followed by a corresponding time unit (e.g. 1s | 2m | 3h)"
)
"""client-go's message for a value ``ParseTimeout`` rejects (kubectl prints it as is)."""

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # noqa: RUF001 - Go accepts both micro signs
    "μs": 1e-6,  # noqa: RUF001
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_COMPONENT = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")  # noqa: RUF001


def parse_go_duration(text: str) -> float:
    """Seconds of a Go ``time.ParseDuration`` string; ValueError when it is not one.

    Negative durations parse in Go but make no sense for a timeout; they are refused.
    """
    value = text.strip()
    if value.startswith("+"):
        value = value[1:]
    if value == "0":
        return 0.0
    if not value or value.startswith("-"):
        raise ValueError(text)
    total = 0.0
    position = 0
    while position < len(value):
        match = _COMPONENT.match(value, position)
        if match is None:
            raise ValueError(text)
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    return total


def parse_timeout(text: object) -> float:
    """``--request-timeout``/``--timeout``: seconds, ``math.inf`` for ``0`` (no timeout).

    ValueError with client-go's message otherwise. Numbers (the option defaults) pass
    through as seconds.
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        seconds = parse_seconds(str(text))
    return math.inf if seconds == 0 else seconds


def parse_seconds(text: str) -> float:
    """Seconds of a kubectl duration (bare integer = seconds); ValueError with client-go's
    message when unreadable. ``0`` stays ``0.0`` here: what zero means is the option's."""
    value = text.strip()
    if value.isdigit():
        return float(int(value))
    try:
        return parse_go_duration(value)
    except ValueError:
        raise ValueError(INVALID_TIMEOUT) from None
