"""The rich Console of a command's text output on stdout, and the box of its tables.

One policy for every text view: colour and boxes on a terminal (fitted to its width);
piped, redirected, ``--no-color`` or ``NO_COLOR``: plain text, no box or rule
characters, and no wrapping (a pager, a log or a ticket wraps as it likes, and an
identifier is never split by a width fixed here). Either way no line ends in padding.

:func:`forced_terminal` is the seam for tests (and golden files): inside it, output is
drawn as on a terminal of the given width, whatever stdout really is.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

UNWRAPPED = 100_000
"""The width of plain output: wider than any line drawn."""

_forced_width: int | None = None


@contextmanager
def forced_terminal(width: int) -> Iterator[None]:
    """Draw as on a ``width``-column terminal while inside (tests and golden files)."""
    global _forced_width
    before, _forced_width = _forced_width, width
    try:
        yield
    finally:
        _forced_width = before


def is_terminal() -> bool:
    """Whether stdout is a terminal (or :func:`forced_terminal` says so)."""
    return _forced_width is not None or sys.stdout.isatty()


def terminal_width() -> int:
    """The terminal's width in columns: the forced one, else ``COLUMNS`` or the TTY's."""
    if _forced_width is not None:
        return _forced_width
    return shutil.get_terminal_size().columns


def plain(no_color: bool) -> bool:
    """True when the output is plain: not a terminal, ``--no-color`` or ``NO_COLOR``."""
    return no_color or bool(os.environ.get("NO_COLOR")) or not is_terminal()


def stdout_console(no_color: bool, file: Any = None) -> Any:
    """A Console following this module's policy, on ``file`` (default stdout)."""
    from rich.console import Console

    if plain(no_color):
        return Console(
            file=file,
            no_color=True,
            color_system=None,
            width=UNWRAPPED,
            highlight=False,
            soft_wrap=False,
        )
    return Console(
        file=file,
        force_terminal=True,
        width=terminal_width(),
        highlight=False,
        soft_wrap=False,
    )


def write_drawn(no_color: bool, draw: Callable[[Any], None]) -> None:
    """Run ``draw`` on a policy Console and write what it drew to stdout, line ends
    stripped: rich pads a table's last column to its width, which a pipe should not get."""
    buffer = io.StringIO()
    draw(stdout_console(no_color, file=buffer))
    sys.stdout.write(strip_line_ends(buffer.getvalue()))
    sys.stdout.flush()


_PADDED_END = re.compile(r"(?:\s|\x1b\[[0-9;]*m)+$")
_CODE = re.compile(r"\x1b\[[0-9;]*m")


def strip_line_ends(text: str) -> str:
    """``text`` without the spaces rich leaves at line ends (before a closing colour code too)."""

    def end(match: re.Match[str]) -> str:
        return "".join(_CODE.findall(match.group()))

    return "".join(_PADDED_END.sub(end, line) + "\n" for line in text.splitlines())


def box_for(console: Any) -> Any:
    """The table box for ``console``: none when plain, one rule under the header otherwise."""
    from rich import box

    return None if console.no_color else box.SIMPLE_HEAD


def print_hanging(console: Any, label: Any, body: Any, *, indent: int = 0) -> None:
    """``label`` then ``body`` (rich Texts) on one line; on a terminal too narrow,
    ``body`` folds at words under itself, not under ``label`` (unless one of its words
    is too long for that). Plain: one line."""
    from rich.table import Table
    from rich.text import Text

    longest = max((len(word) for word in body.plain.split()), default=0)
    if console.no_color or indent + label.cell_len + longest > console.width:
        # Plain, or a word of body is too long to fold under itself: the grid would cut
        # it, so it folds at words under the indent instead.
        from rich.padding import Padding

        console.print(Padding(label + body, (0, 0, 0, indent), expand=False))
        return
    grid = Table.grid(padding=0, pad_edge=False)
    grid.add_column(width=indent + label.cell_len, no_wrap=True)
    grid.add_column()
    grid.add_row(Text(" " * indent) + label, body)
    console.print(grid)
