"""Golden text views: what a person reads, at a pipe and on 80- and 120-column terminals.

Each case runs the real CLI in-process: plain (stdout is not a terminal) and on a forced
terminal of fixed width (``render.console.forced_terminal``; colour codes are stripped
before comparing, so the files show the layout). The files are meant to be read in
review, like ruff's snapshots: regenerate them with
``DRADIAG_UPDATE_GOLDEN=1 pytest tests/render/test_golden.py`` and read the diff.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest
import yaml

from dradiag.cli.app import run
from dradiag.render.console import forced_terminal

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("DRADIAG_UPDATE_GOLDEN") == "1"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
SAMPLES = sorted(p.name for p in (ROOT / "dradiag" / "samples").iterdir() if p.is_dir())
FIELD = (
    "alloc-xid-79-taint-blocks-untolerating-claim",
    "inj-cdi-unresolvable-device-id-talos-v25-8",
    "prep-dynmig-partial-rollback-not-found",
    "sel-mig-profile-1g5gb-not-on-80gb-card",
)


def _sample_claim(name: str) -> str:
    index = yaml.safe_load((ROOT / "dradiag" / "samples" / "index.yaml").read_text())
    return str(index["samples"][name]["claim"])


def _field_argv(name: str) -> list[str]:
    spec = yaml.safe_load((ROOT / "tests" / "field" / name / "case.yaml").read_text())
    now = ["--now", str(spec["now"])] if spec.get("now") else []
    return [spec["command"], spec["target"], "--from", f"tests/field/{name}/input", *now]


def _cases() -> list[tuple[str, list[str], tuple[str, ...]]]:
    """(golden name, argv, modes)."""
    cases = []
    for name in SAMPLES:
        src = ["--from", f"dradiag/samples/{name}"]
        cases.append(
            (f"claim-{name}", ["claim", _sample_claim(name), *src], ("plain", "80", "120"))
        )
        cases.append((f"scan-{name}", ["scan", "-A", *src], ("plain", "80", "120")))
        cases.append((f"inventory-{name}", ["inventory", *src], ("80", "120")))
    for name in FIELD:
        cases.append((f"field-{name}", _field_argv(name), ("plain", "80", "120")))
    cases.append(("rules-list", ["rules", "list"], ("80", "120")))
    return cases


PARAMS = [
    pytest.param(argv, f"{name}.{mode}.txt", mode, id=f"{name}.{mode}")
    for name, argv, modes in _cases()
    for mode in modes
]


def _render(argv: list[str], mode: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        if mode == "plain":
            run(argv)
        else:
            with forced_terminal(int(mode)):
                run(argv)
    return ANSI.sub("", out.getvalue())


@pytest.mark.parametrize(("argv", "golden", "mode"), PARAMS)
def test_text_view_matches_golden(
    argv: list[str], golden: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # paths in the output ("source: bundle dradiag/samples/…") stay fixed
    monkeypatch.delenv("NO_COLOR", raising=False)
    text = _render(argv, mode)
    if mode != "plain":
        width = int(mode)
        long = [line for line in text.splitlines() if len(line) > width]
        assert not long, f"lines wider than {width} columns: {long}"
    assert all(line == line.rstrip() for line in text.splitlines()), "padding at a line end"
    path = GOLDEN / golden
    if UPDATE:
        path.write_text(text)
    assert path.exists(), f"no golden file {path.name}; run with DRADIAG_UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs; DRADIAG_UPDATE_GOLDEN=1 rewrites it"


NOTE = re.compile(r"^\(columns? .* hidden at \d+ columns; .*\)$")


@pytest.mark.parametrize(
    ("name", "width"),
    [
        pytest.param(name, int(mode), id=f"{name}.{mode}")
        for name, _argv, modes in _cases()
        if "plain" in modes
        for mode in modes
        if mode != "plain"
    ],
)
def test_terminal_view_splits_no_word_of_the_plain_view(name: str, width: int) -> None:
    """Folding moves whole words: each word on the terminal is a word of the plain view,
    unless the plain word is wider than the terminal itself (nothing can keep that whole)."""
    plain = (GOLDEN / f"{name}.plain.txt").read_text().split()
    lines = (GOLDEN / f"{name}.{width}.txt").read_text().splitlines()
    words = {w for line in lines if not NOTE.match(line.strip()) for w in line.split()}
    too_wide = [w for w in plain if len(w) > width - 6]
    for word in words - set(plain):
        if set(word) <= set("─│|"):
            continue
        assert any(word in w for w in too_wide), f"{name} at {width}: {word!r} was split"
