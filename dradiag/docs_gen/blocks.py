"""The generated blocks of the docs: found between HTML comment markers, filled by a maker.

A page says what it wants and the generator writes the rest, so a page is never pasted
output that drifts from the tool::

    <!-- run: dradiag claim ml/notebook-mig --from samples/healthy-mig-claim -->
    (the command, its output and its exit status, written here)
    <!-- /run -->

    <!-- explain: Failed to prepare dynamic resources: ... -->
    (the rule, phase, meaning and next steps ``dradiag explain`` gives for the message)
    <!-- /explain -->

    <!-- generated: message-index -->
    (a table the generator computes from the rulebook)
    <!-- /generated -->

Markers are invisible in rendered Markdown; their content is replaced wholesale, so a
page can be regenerated any number of times with the same result.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

BLOCK = re.compile(
    r"<!-- (?P<kind>run|explain|generated): (?P<arg>.*?) -->\n(?P<body>.*?)<!-- /(?P=kind) -->",
    re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Block:
    """One marked block of a page."""

    kind: str
    """``run``, ``explain`` or ``generated``."""
    arg: str
    """What the opening marker names: a command, a message, a table's name."""
    body: str
    """The current content between the markers."""


def blocks(text: str) -> Iterator[Block]:
    """The marked blocks of a page, in order."""
    for m in BLOCK.finditer(text):
        yield Block(kind=m["kind"], arg=m["arg"], body=m["body"])


def fill(text: str, make: Callable[[Block], str]) -> str:
    """``text`` with each block's content replaced by ``make(block)`` (ending in a newline)."""

    def replace(m: re.Match[str]) -> str:
        body = make(Block(kind=m["kind"], arg=m["arg"], body=m["body"]))
        if body and not body.endswith("\n"):
            body += "\n"
        return f"<!-- {m['kind']}: {m['arg']} -->\n{body}<!-- /{m['kind']} -->"

    return BLOCK.sub(replace, text)


def outside_blocks(text: str) -> str:
    """``text`` with the generated content taken out (markers kept): the hand-written part."""
    return fill(text, lambda _b: "")


FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)
PROMPT = re.compile(
    r"^\$ ((?:dradiag|kubectl dra-diag|kubectl_complete-dra_diag)(?:\s.*)?)$", re.MULTILINE
)


def documented_commands(text: str) -> list[str]:
    """The ``$ dradiag ...`` (or ``$ kubectl dra-diag ...``) lines of a page's fenced blocks."""
    return [m.group(1) for f in FENCE.finditer(text) for m in PROMPT.finditer(f.group(2))]
