"""cli.coercion: plain parameter values skip typer's pydantic coercion, with typer's answers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dradiag.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
SLICES = str(ROOT / "tests" / "fixtures" / "selector_check" / "slices")
EXPR = "device.attributes['gpu.nvidia.com'].type == 'mig'"

CASES = [
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "-o", "json"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "-o", "YAML", "--node", "a"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "--node", "a", "--node", "b"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "-o", "bogus"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "--request-timeout", "5s"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "--request-timeout", "soon"],
    ["selector-check", "--expr", EXPR, "--slices", SLICES, "--timeout", "0", "--per-device"],
    ["rules", "list", "-o", "json"],
    ["explain", "CDI device injection failed"],
]


def _outcomes(capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str, str]]:
    out = []
    for argv in CASES:
        code = run(list(argv))
        captured = capsys.readouterr()
        out.append((code, captured.out, captured.err))
    return out


def test_the_fast_path_answers_as_typer_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer import _coercion, core

    assert getattr(core.build_runtime_param, "_dradiag_plain", False)
    fast = _outcomes(capsys)
    monkeypatch.setattr(core, "build_runtime_param", _coercion.build_runtime_param)
    slow = _outcomes(capsys)
    assert fast == slow
    assert {code for code, _, _ in fast} >= {0, 2}  # successes and usage errors both


def test_selector_check_expr_does_not_import_pydantic() -> None:
    code = (
        "import io, sys\n"
        "from contextlib import redirect_stdout\n"
        "from dradiag.cli.app import run\n"
        "with redirect_stdout(io.StringIO()):\n"
        f"    run(['selector-check', '--expr', {EXPR!r}, '--slices', {SLICES!r}, '-o', 'json'])\n"
        "print('pydantic' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "False"
