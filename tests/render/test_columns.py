"""render/columns.py and the console seam: widths decided before rich sees a table."""

from __future__ import annotations

from dradiag.render.columns import FOLD_MIN, Column, fit
from dradiag.render.console import forced_terminal, is_terminal, strip_line_ends, terminal_width

COLUMNS = (
    Column("ID"),
    Column("KIND", drop=1),
    Column("NAME", fold="tokens"),
    Column("NOTE", fold="words", drop=2),
)
ROWS = [("a-rule-id-of-20-char", "warn", "Pod ns/a-name-of-twenty-three", "some words " * 8)]
NAME = len("ns/a-name-of-twenty-three")


def test_unlimited_keeps_everything_unfolded() -> None:
    layout = fit(COLUMNS, ROWS, None, gap=2)
    assert layout.widths is None and layout.hidden == () and layout.kept == (0, 1, 2, 3)


def test_columns_give_way_in_drop_order_and_come_back_when_they_fit() -> None:
    # ID 20 + KIND 4 + NAME (its longest token) + NOTE (FOLD_MIN) + 3 gaps of 2.
    need = 20 + 4 + NAME + FOLD_MIN + 6
    assert fit(COLUMNS, ROWS, need, gap=2).hidden == ()
    # One column short: NOTE (drop 2) goes first, and KIND stays.
    assert fit(COLUMNS, ROWS, need - 1, gap=2).hidden == ("NOTE",)
    # Too narrow for ID + NAME + KIND: KIND goes too; NAME and ID never do.
    narrow = fit(COLUMNS, ROWS, 20 + NAME + 2 + 3, gap=2)
    assert narrow.hidden == ("KIND", "NOTE") and narrow.kept == (0, 2)


def test_identifiers_keep_their_width_and_spare_room_unfolds_the_label_cell_first() -> None:
    layout = fit(COLUMNS, ROWS, 20 + 4 + NAME + 4 + FOLD_MIN + 6, gap=2)
    widths = dict(zip([COLUMNS[i].header for i in layout.kept], layout.widths or (), strict=True))
    assert widths["ID"] == 20 and widths["NAME"] == NAME + 4  # "Pod ns/…" back on one line
    assert widths["NOTE"] == FOLD_MIN  # free text folds as a block, not a word a line


def test_strip_line_ends_keeps_colour_codes_and_drops_padding() -> None:
    assert strip_line_ends("a  \x1b[0m   \nb \n") == "a\x1b[0m\nb\n"


def test_forced_terminal_is_undone_on_exit() -> None:
    with forced_terminal(42):
        assert is_terminal() and terminal_width() == 42
    assert terminal_width() != 42 or not is_terminal()
