"""The lint, format and type checks of pyproject.toml pass on the whole tree.

They run as tests so that the one test command CI runs (README) also holds the line the
house style sets (STYLE.md "Types, ruff, mypy"). A missing tool fails the test, saying
why: it comes with the `test` extra, like pytest itself, so its absence is a broken
environment, not a reason to pass.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed (pip install '.[test]')")
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_check():
    result = _run("ruff", "check", "--quiet", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = _run("ruff", "format", "--check", "--quiet", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    result = _run("mypy", "--no-error-summary")
    assert result.returncode == 0, result.stdout + result.stderr
