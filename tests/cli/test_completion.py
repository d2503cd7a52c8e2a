"""Shell completion: the scripts, and the completions themselves over click's protocol
(``_DRADIAG_COMPLETE`` with ``COMP_WORDS``/``COMP_CWORD`` for bash), in process and
through a real bash sourcing the script."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dradiag.cli.app import run
from dradiag.cli.exit_codes import ExitCode

REPO = Path(__file__).resolve().parents[2]
SAMPLE = str(REPO / "dradiag" / "samples" / "healthy-mig-claim")


def complete(monkeypatch, capsys, line: str) -> list[str]:
    """What bash would get for ``line`` (the cursor at its end) from the env protocol."""
    words = line.split()
    cword = len(words) if line.endswith(" ") else len(words) - 1
    monkeypatch.setenv("_DRADIAG_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", line)
    monkeypatch.setenv("COMP_CWORD", str(cword))
    assert run([]) == ExitCode.OK
    out = capsys.readouterr()
    assert out.err == ""  # nothing printed into the user's prompt
    return [w for w in out.out.splitlines() if w]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script(shell, capsys):
    assert run(["completion", shell]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "_DRADIAG_COMPLETE=complete_" + shell in out
    assert "dradiag" in out


def test_completion_of_an_unknown_shell_is_a_usage_error(capsys):
    assert run(["completion", "tcsh"]) == ExitCode.USAGE


def test_commands_and_flags(monkeypatch, capsys):
    assert complete(monkeypatch, capsys, "dradiag cl") == ["claim"]
    assert {"explain", "completion", "scan"} <= set(complete(monkeypatch, capsys, "dradiag "))
    assert complete(monkeypatch, capsys, "dradiag claim --fr") == ["--from"]
    assert complete(monkeypatch, capsys, "dradiag scan --all") == ["--all-namespaces"]
    assert complete(monkeypatch, capsys, "dradiag completion z") == ["zsh"]


def test_claim_and_pod_names_from_the_from_input(monkeypatch, capsys):
    assert complete(monkeypatch, capsys, f"dradiag claim --from {SAMPLE} ") == ["ml/notebook-mig"]
    assert complete(monkeypatch, capsys, f"dradiag claim -n ml --from {SAMPLE} ") == [
        "notebook-mig"
    ]
    assert complete(monkeypatch, capsys, f"dradiag claim --from {SAMPLE} -n other ") == []
    assert complete(monkeypatch, capsys, f"dradiag pod --from {SAMPLE} ml/note") == [
        "ml/notebook-0"
    ]
    # No --from: names would need the cluster on every TAB; nothing, and no error.
    assert complete(monkeypatch, capsys, "dradiag claim ") == []
    assert complete(monkeypatch, capsys, "dradiag claim --from /no/such/dir ") == []


def test_rule_ids(monkeypatch, capsys):
    ids = complete(monkeypatch, capsys, "dradiag rules show DRA-PREP-MIG")
    assert ids and all(i.startswith("DRA-PREP-MIG") for i in ids)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_sources_the_script_and_completes(tmp_path):
    shim = tmp_path / "bin" / "dradiag"
    shim.parent.mkdir()
    shim.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -c "from dradiag.cli.app import main; main()" "$@"\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{shim.parent}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("_DRADIAG_COMPLETE", None)
    drive = (
        "source <(dradiag completion bash)\n"
        'COMP_WORDS=(dradiag claim --from "$SAMPLE" ""); COMP_CWORD=4\n'
        "_dradiag_completion dradiag\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "COMP_WORDS=(dradiag sel); COMP_CWORD=1\n"
        "_dradiag_completion dradiag\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env["SAMPLE"] = SAMPLE
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", drive],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ml/notebook-mig", "selector-check"]
