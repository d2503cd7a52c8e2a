"""The rich Console of a command's text output on stdout, and the box of its tables.

One policy for every text view: colour and boxes on a terminal (fitted to its width);
piped, redirected, ``--no-color`` or ``NO_COLOR``: plain text, no box or rule
characters, and no wrapping (a pager, a log or a ticket wraps as it likes, and an
identifier is never split by a width fixed here).
"""

from __future__ import annotations

import os
import sys
from typing import Any

UNWRAPPED = 100_000
"""The width of plain output: wider than any line drawn."""


def plain(no_color: bool) -> bool:
    """True when the output is plain: not a terminal, ``--no-color`` or ``NO_COLOR``."""
    return no_color or bool(os.environ.get("NO_COLOR")) or not sys.stdout.isatty()


def stdout_console(no_color: bool) -> Any:
    """A Console on stdout following this module's policy."""
    from rich.console import Console

    if plain(no_color):
        return Console(
            no_color=True, color_system=None, width=UNWRAPPED, highlight=False, soft_wrap=False
        )
    return Console(highlight=False, soft_wrap=False)


def box_for(console: Any) -> Any:
    """The table box for ``console``: none when plain, rich's default otherwise."""
    from rich import box

    return None if console.no_color else box.HEAVY_HEAD
