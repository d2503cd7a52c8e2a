"""Wrapped error messages: the innermost cause, and clipping that keeps it.

Kubelet, plugin and runtime errors are Go error chains, each layer prefixing its own
context (``prepare dynamic resources: NodePrepareResources failed for claim …: error
preparing devices …: error applying GPU config: <the cause>``). The cause a user needs
is the innermost, last link; a clip that keeps the start of a long message cuts exactly
that. Both helpers here keep the end.
"""

from __future__ import annotations

import re

_LINK = re.compile(r":\s+")
_CONTEXT_ONLY = re.compile(
    r"^(?:rpc error|code = \w+ desc =|failed to \w+|error \w+ing|prepare\b|unprepare\b)"
    r"[\w\s/=-]*$",
    re.I,
)
MIN_CAUSE = 24
"""A last link shorter than this (a value such as ``3g.40gb``, ``EOF``, ``permission
denied`` or ``Insufficient Resources``) is taken with the link before it, so the cause
says what failed as well as how."""


def innermost_error(message: str) -> str:
    """The innermost cause of a wrapped error message ("" for an empty one).

    Splits on the ``": "`` a Go ``fmt.Errorf("…: %w")`` chain inserts and returns the last
    link, joined with the one before it when it is only a value or an error code.
    """
    text = " ".join(str(message).split()).rstrip(".")
    if not text:
        return ""
    links = [part for part in _LINK.split(text) if part]
    if len(links) <= 1:
        return text
    cause = links[-1]
    at = len(links) - 1
    while at > 0 and (len(cause) < MIN_CAUSE or _CONTEXT_ONLY.match(cause)):
        at -= 1
        cause = f"{links[at]}: {cause}"
    return cause


def clip_middle(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, cut in the middle so its end survives."""
    text = str(text).strip()
    if len(text) <= limit:
        return text
    if limit < 8:
        return text[: max(limit - 1, 0)] + "…"
    tail = (limit - 3) * 2 // 3
    head = limit - 3 - tail
    return f"{text[:head].rstrip()} … {text[-tail:].lstrip()}"
