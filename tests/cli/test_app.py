"""The CLI shell: exit codes, one-line errors on stderr, documents on stdout."""

from __future__ import annotations

import json
import subprocess
import sys

from dradiag import __version__
from dradiag.cli.app import run
from dradiag.cli.exit_codes import ExitCode


def test_version_text(capsys):
    assert run(["version"]) == ExitCode.OK
    assert capsys.readouterr().out.startswith(f"dradiag {__version__} ")


def test_version_json_is_a_document(capsys):
    assert run(["version", "-o", "json"]) == ExitCode.OK
    out = capsys.readouterr()
    assert json.loads(out.out)["version"] == __version__
    assert out.err == ""


def test_unknown_command_is_a_usage_error(capsys):
    assert run(["no-such-command"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err.startswith("dradiag: error: ") and err.count("\n") == 1


def test_bad_option_value_is_a_usage_error(capsys):
    assert run(["version", "-o", "xml"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "xml" in err and err.count("\n") == 1


def test_help_lists_commands(capsys):
    assert run(["--help"]) == ExitCode.OK
    assert "version" in capsys.readouterr().out


def test_no_arguments_prints_help(capsys):
    assert run([]) == ExitCode.OK
    assert "Usage" in capsys.readouterr().out


def test_console_scripts_installed():
    for script in ("dradiag", "kubectl-dra_diag"):
        bindir = __import__("pathlib").Path(sys.executable).parent
        out = subprocess.run([str(bindir / script), "version"], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.startswith("dradiag "), (script, out.stderr)
