"""Tables that fit a terminal without cutting an identifier: the one table style of every command.

rich, given a table wider than the terminal, narrows every column, folding claim names
and rule ids mid-token or cutting them with an ellipsis. Here the widths are decided
before rich sees the table, in this order of giving way:

1. identifier and number columns (``fold="never"``) keep their widest cell on one line;
2. columns that may fold do so at word boundaries, free text (``fold="words"``) down to
   :data:`FOLD_MIN` columns so it folds as a block, never one word per line, and a
   label-plus-identifier cell (``fold="tokens"``, e.g. ``ResourceClaim ns/name``) down
   to its longest token, so the identifier stays whole;
3. when that is still too wide, the droppable column of highest ``drop`` goes, and
   the caller says so in one dim line (:func:`hidden_note`).

Plain output (a pipe, ``--no-color``) and ``-o wide`` do none of this: every column,
nothing folded. Headers are upper case and bold with one rule under them on a terminal,
no box characters when plain, in every command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.table import Table
from rich.text import Text

from dradiag.render.console import UNWRAPPED, box_for

FOLD_MIN = 24
"""The narrowest a free-text column folds to: a few words a line, read as a block."""

Cell = str | Text


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, how its cells may fold, and when it gives way."""

    header: str
    fold: Literal["never", "words", "tokens"] = "never"
    drop: int = 0
    """0: never dropped; otherwise dropped before every column of lower ``drop``."""
    justify: Literal["left", "right"] = "left"


@dataclass(frozen=True, slots=True)
class Layout:
    """The columns kept (by index), their widths, and the headers of those hidden."""

    kept: tuple[int, ...]
    widths: tuple[int, ...] | None
    """None: natural widths, nothing folded (plain output and ``-o wide``)."""
    hidden: tuple[str, ...]
    total: int


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _need(column: Column, texts: Sequence[str]) -> tuple[int, int]:
    """(the narrowest the column may be, its natural width)."""
    natural = max([len(column.header), *(len(t) for t in texts)])
    if column.fold == "never":
        return natural, natural
    longest = max([len(column.header), *(len(w) for t in texts for w in t.split())])
    if column.fold == "tokens":
        return longest, natural
    return max(longest, min(natural, FOLD_MIN)), natural


def fit(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int | None, *, gap: int
) -> Layout:
    """The widths of ``columns`` for ``rows`` in ``width`` columns (None: unlimited)."""
    texts = [[_plain(row[i]) for row in rows] for i in range(len(columns))]
    needs = [_need(c, t) for c, t in zip(columns, texts, strict=True)]
    if width is None:
        kept = tuple(range(len(columns)))
        natural = sum(n[1] for n in needs) + gap * (len(columns) - 1)
        return Layout(kept=kept, widths=None, hidden=(), total=natural)
    kept_list = list(range(len(columns)))

    def total(indexes: Sequence[int]) -> int:
        return sum(needs[i][0] for i in indexes) + gap * (len(indexes) - 1)

    while total(kept_list) > width:
        droppable = [i for i in kept_list if columns[i].drop]
        if not droppable:
            break
        kept_list.remove(max(droppable, key=lambda i: (columns[i].drop, i)))
    # A column dropped early may fit again once a wider one has gone: the most useful first.
    for i in sorted(set(range(len(columns))) - set(kept_list), key=lambda i: columns[i].drop):
        if total(sorted([*kept_list, i])) <= width:
            kept_list = sorted([*kept_list, i])
    widths = {i: needs[i][0] for i in kept_list}
    extra = width - total(kept_list)
    # Label-plus-identifier cells get back onto one line first, then free text unfolds.
    for kind in ("tokens", "words"):
        for i in kept_list:
            if extra <= 0 or columns[i].fold != kind:
                continue
            add = min(extra, needs[i][1] - widths[i])
            widths[i] += add
            extra -= add
    hidden = tuple(c.header for i, c in enumerate(columns) if i not in kept_list)
    return Layout(
        kept=tuple(kept_list),
        widths=tuple(widths[i] for i in kept_list),
        hidden=hidden,
        total=total(kept_list) + sum(widths[i] - needs[i][0] for i in kept_list),
    )


def fitted_table(
    console: Any,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    wide: bool = False,
    headers: bool = True,
    title: str | None = None,
) -> tuple[Table, Layout]:
    """The table of ``rows`` fitted to ``console`` (see the module docstring).

    Print it with :func:`print_table`: a table whose identifiers alone are wider than
    the console (or ``wide``) then runs past the edge, where the terminal wraps it,
    rather than being cut.
    """
    box = box_for(console)
    gap = 2 if box is None else 3
    unlimited = wide or console.no_color or console.width >= UNWRAPPED
    layout = fit(columns, rows, None if unlimited else console.width, gap=gap)
    table = Table(
        box=box,
        show_edge=False,
        pad_edge=False,
        expand=False,
        show_header=headers,
        header_style="bold",
        title=title,
        title_justify="left",
        title_style="bold" if box is not None else None,
    )
    for n, index in enumerate(layout.kept):
        column = columns[index]
        fixed = None if layout.widths is None else layout.widths[n]
        table.add_column(
            column.header,
            width=fixed,
            no_wrap=column.fold == "never" or layout.widths is None,
            overflow="fold",
            justify=column.justify,
        )
    for row in rows:
        table.add_row(*(row[i] for i in layout.kept))
    return table, layout


def print_table(console: Any, table: Table, layout: Layout) -> None:
    """Print ``table`` at its own width when wider than ``console`` (never cut)."""
    # Console.print never draws wider than the console, so widen it for this table.
    before = console.width
    console.width = max(before, layout.total)
    try:
        console.print(table, crop=False)
    finally:
        console.width = before


def hidden_note(layout: Layout, width: int, *, wide_flag: bool = True) -> Text | None:
    """The dim line that says which columns gave way, or None when none did."""
    if not layout.hidden:
        return None
    names = ", ".join(layout.hidden)
    how = "-o wide shows all" if wide_flag else "piped output shows all"
    noun = "column" if len(layout.hidden) == 1 else "columns"
    return Text(f"({noun} {names} hidden at {width} columns; {how})", style="dim")
