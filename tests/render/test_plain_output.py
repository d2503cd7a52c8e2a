"""Piped / NO_COLOR output is plain: no box or rule characters, no wrapping at a fixed
width, identifiers whole; on an 80-column terminal ``scan`` folds instead of dropping."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from dradiag.cli.app import run
from dradiag.render.text import render_diagnoses, render_scan

SCENARIOS = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios"
SAMPLES = Path(__file__).resolve().parents[2] / "dradiag" / "samples"
BOXES = set("─━│┃┄┅╭╮╰╯┏┓┗┛┌┐└┘├┤┬┴┼═║╔╗╚╝")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MIXED = (
    "unprep-leaked-mig-of-gone-claim-blocks-prepare",
    "alloc-device-tainted-xid",
    "sel-productname-matches-nothing",
    "pub-pool-incomplete-split-slices",
)


def _json(argv: list[str]) -> dict:
    buffer = io.StringIO()
    with redirect_stdout(buffer):
        run([*argv, "-o", "json"])
    return json.loads(buffer.getvalue())


@pytest.fixture(scope="module")
def scan_doc() -> dict:
    docs = [_json(["scan", "--from", str(SCENARIOS / name)]) for name in MIXED]
    items = [item for doc in docs for item in doc["items"]]
    assert len(items) >= 4
    return {"items": items, "collection": docs[0]["collection"]}


def _identifiers(item: dict) -> tuple[str, str]:
    target = item["target"]
    label = f"{target['kind']} " + (
        f"{target['namespace']}/{target['name']}" if target.get("namespace") else target["name"]
    )
    return label, item["verdict"]["rule"]


def test_plain_scan_is_one_unboxed_line_per_row(scan_doc):
    text = render_scan(scan_doc, color=False)
    assert not set(text) & BOXES
    lines = text.splitlines()
    assert lines[0].split() == ["PHASE", "STATUS", "TARGET", "RULE", "WHY"]
    rows = lines[1 : 1 + len(scan_doc["items"])]
    for row, item in zip(rows, scan_doc["items"], strict=True):
        label, rule = _identifiers(item)
        assert label in row and rule in row
    assert any(len(line) > 100 for line in rows)  # no fixed width
    assert lines[len(scan_doc["items"]) + 1].endswith("inconclusive")


def _columns(text: str) -> list[dict[str, str]]:
    """Rows of an aligned table, each column's folded pieces joined back."""
    lines = ANSI.sub("", text).splitlines()
    header = lines[0]
    names = header.split()
    starts = [header.index(n) for n in names]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    rows: list[dict[str, list[str]]] = []
    for line in lines[2:]:
        if not line.strip() or re.match(r"^\d+ unhealthy", line):
            break
        cells = [line[a:b].strip() if b else line[a:].strip() for a, b in bounds]
        if cells[0]:
            rows.append({n: [] for n in names})
        for name, cell in zip(names, cells, strict=True):
            if cell:
                rows[-1][name].append(cell)
    return [{n: "".join(v) for n, v in row.items()} for row in rows]


@pytest.mark.parametrize("width", [80, 120, 160])
def test_scan_on_a_terminal_keeps_identifiers_whole_and_says_what_it_hid(scan_doc, width):
    # Was: every column kept at 80, the rule id folded mid-token. Now the prose and
    # then whole columns give way, and a line names them.
    text = render_scan(scan_doc, color=True, width=width)
    plain = ANSI.sub("", text)
    lines = plain.splitlines()
    assert all(len(line) <= width for line in lines)
    header = lines[0].split()
    assert header[:1] == ["PHASE"] and "TARGET" in header
    hidden = [c for c in ("PHASE", "STATUS", "TARGET", "RULE", "WHY") if c not in header]
    rows = _columns(text)
    assert len(rows) == len(scan_doc["items"])
    for row, item in zip(rows, scan_doc["items"], strict=True):
        label, rule = _identifiers(item)
        kind, _, name = label.partition(" ")
        assert any(name in line for line in lines)  # the name on one line, whole
        assert row["TARGET"].replace(" ", "") == label.replace(" ", "")
        if "RULE" in header:
            assert row["RULE"] == rule
    if hidden:
        assert f"{', '.join(hidden)} hidden at {width} columns; -o wide shows all" in plain
    else:
        assert "hidden at" not in plain


def test_scan_wide_shows_every_column_unfolded(scan_doc):
    text = ANSI.sub("", render_scan(scan_doc, color=True, width=80, wide=True))
    lines = text.splitlines()
    assert lines[0].split() == ["PHASE", "STATUS", "TARGET", "RULE", "WHY"]
    for item in scan_doc["items"]:
        label, rule = _identifiers(item)
        assert any(label in line and rule in line for line in lines)
    assert "hidden at" not in text


def test_scan_without_headers_is_the_rows_only(scan_doc):
    text = render_scan(scan_doc, color=False, headers=False)
    lines = text.splitlines()
    assert len(lines) == len(scan_doc["items"])
    assert not any(line.startswith("PHASE") or "unhealthy:" in line for line in lines)


def test_plain_pod_view_has_no_rules_or_track_boxes():
    doc = _json(
        [
            "pod",
            "ml/notebook-0",
            "--from",
            str(Path(__file__).resolve().parents[2] / "dradiag" / "samples" / "healthy-mig-claim"),
        ]
    )
    two = {**doc, "items": doc["items"] * 2}
    text = render_diagnoses(two, color=False)
    assert not set(text) & BOXES
    assert "\n---\n" in text


def test_piped_cli_output_is_plain(capsys):
    for argv in (
        ["scan", "--from", str(SCENARIOS / MIXED[0])],
        ["claim", "--from", str(SCENARIOS / MIXED[1]), "ml/bench-gpu"],
        ["inventory", "--from", str(SCENARIOS / MIXED[1])],
        ["inventory", "--from", str(SAMPLES / "dynamic-mig-counters-exhausted")],
        ["scan", "--from", str(SAMPLES / "mig-create-failed-at-prepare"), "-o", "wide"],
        [
            "simulate",
            "--node",
            "h100-node-b",
            "--claim",
            "ml/notebook-ana-mig",
            "--from",
            str(SAMPLES / "dynamic-mig-counters-exhausted"),
        ],
        ["rules", "list"],
    ):
        run(argv)
        out = capsys.readouterr().out
        assert out.strip() and not set(out) & BOXES, argv
        assert "\x1b[" not in out
        # Not wrapped and not padded: no line is longer than its content.
        assert all(line == line.rstrip() for line in out.splitlines()), argv


def test_scan_without_headers_and_without_rows_prints_nothing():
    empty = {"items": [], "collection": {"unread": [{"kind": "ResourceClaim", "reason": "x"}]}}
    assert render_scan(empty, headers=False) == ""
    assert render_scan(empty).startswith("inconclusive: nothing unhealthy")
