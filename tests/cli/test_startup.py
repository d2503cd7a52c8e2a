"""Start-up stays cheap: --help and version load no cluster client and no CEL oracle."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "celpy", "cel_expr_python", "urllib3", "re2", "jsonschema", "pynvml")

PROBE = """
import contextlib, io, json, sys
from dradiag.cli.app import run
with contextlib.redirect_stdout(io.StringIO()):
    code = run({argv!r})
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


@pytest.mark.parametrize("argv", [["--help"], ["version"], ["version", "-o", "json"]])
def test_cheap_commands_import_nothing_heavy(argv):
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    loaded = {m.split(".")[0] for m in result["modules"]}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("arg", ["version", "--version"])
def test_version_answers_without_importing_typer(arg: str) -> None:
    # A version check in a script must not pay for typer and pydantic (dradiag.cli.entry).
    code = (
        f"import sys; sys.argv = ['dradiag', {arg!r}]\n"
        "from dradiag.cli.entry import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('typer' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0].startswith("dradiag ") and "(Python " in out[0]
    assert out[-1] == "False"
