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
    # No --from and no reachable cluster: nothing, and no error.
    monkeypatch.setenv("KUBECONFIG", "/no/such/kubeconfig")
    assert complete(monkeypatch, capsys, "dradiag claim ") == []
    assert complete(monkeypatch, capsys, "dradiag claim --from /no/such/dir ") == []


def test_node_names_from_the_from_input(monkeypatch, capsys):
    assert complete(monkeypatch, capsys, f"dradiag simulate --from {SAMPLE} --node ") == [
        "a100-node-1"
    ]
    assert complete(monkeypatch, capsys, f"dradiag node --from {SAMPLE} --node a1") == [
        "a100-node-1"
    ]
    assert complete(monkeypatch, capsys, f"dradiag simulate --from {SAMPLE} --claim ml/") == [
        "ml/notebook-mig"
    ]


def test_live_names_come_from_one_list_of_the_cluster(kube_api, kubeconfig, monkeypatch, capsys):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    claims = complete(monkeypatch, capsys, "dradiag claim ")
    assert "ml/train-gpu" in claims and all("/" in c for c in claims)
    assert "train-gpu" in complete(monkeypatch, capsys, "dradiag claim -n ml ")
    assert "ml/infer-0" in complete(monkeypatch, capsys, "dradiag pod ml/")
    assert "node-a" in complete(monkeypatch, capsys, "dradiag simulate --node ")
    reads = [r for r in kube_api.requests if "/resourceclaims" in r.path]
    assert reads and all(r.method == "GET" for r in kube_api.requests)


def test_a_slow_or_refusing_cluster_completes_nothing_quickly(
    kube_api, kubeconfig, monkeypatch, capsys
):
    import time

    from dradiag.cli.completion import LIVE_TIMEOUT

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    kube_api.add_fault(r"/resourceclaims", status=0, delay=LIVE_TIMEOUT + 5)
    started = time.monotonic()
    assert complete(monkeypatch, capsys, "dradiag claim ") == []
    assert time.monotonic() - started < LIVE_TIMEOUT + 3
    # Refused across namespaces: the names of the context's namespace, as kubectl would list.
    kube_api.add_fault(r"^/api/v1/pods\?", status=403)
    assert complete(monkeypatch, capsys, "dradiag pod ") == ["default/web-5d8f7"]
    kube_api.add_fault(r"/pods\?", status=403)  # refused there too: nothing, and no error
    assert complete(monkeypatch, capsys, "dradiag pod ") == []


def test_kubectl_plugin_completion_protocol(capsys):
    from dradiag.cli.completion import kubectl_complete

    def ask(*args: str) -> list[str]:
        assert kubectl_complete(list(args)) == 0
        return capsys.readouterr().out.splitlines()

    assert ask("cl") == ["claim", ":4"]
    assert ask("claim", "--fr") == ["--from", ":4"]
    assert ask("claim", "--from", SAMPLE, "") == ["ml/notebook-mig", ":4"]
    assert ask("simulate", "--from", SAMPLE, "--node", "") == ["a100-node-1", ":4"]
    # A path: no candidates of dradiag's own, so the shell completes files (:0).
    assert ask("claim", "--from", "") == [":0"]
    assert ask("completion", "") == ["bash", "zsh", "fish", ":4"]
    commands = ask()  # kubectl always passes the word under the cursor; none at all still works
    assert commands[-1] == ":4" and {"claim", "rbac", "scan"} <= set(commands)


def test_the_kubectl_completion_executable_is_a_console_script():
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl_complete-dra_diag"] == "dradiag.cli.completion:kubectl_complete_main"
    assert scripts["kubectl-dra_diag"] == scripts["dradiag"]


def _shims(tmp_path):
    """``dradiag``, ``kubectl-dra_diag`` and ``kubectl_complete-dra_diag`` on a PATH, running
    this checkout as the console scripts would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    entries = {
        "dradiag": "from dradiag.cli.entry import main; main()",
        "kubectl-dra_diag": "from dradiag.cli.entry import main; main()",
        "kubectl_complete-dra_diag": "from dradiag.cli.completion import kubectl_complete_main; "
        "kubectl_complete_main()",
    }
    for name, code in entries.items():
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{code}" "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    env.pop("_DRADIAG_COMPLETE", None)
    env["KUBECONFIG"] = str(tmp_path / "no-kubeconfig")
    return env


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl")
def test_kubectl_calls_the_completion_executable(tmp_path):
    env = _shims(tmp_path)
    out = subprocess.run(
        ["kubectl", "__complete", "dra-diag", "claim", "--from", SAMPLE, ""],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["ml/notebook-mig", ":4"]


def test_rule_ids(monkeypatch, capsys):
    ids = complete(monkeypatch, capsys, "dradiag rules show DRA-PREP-MIG")
    assert ids and all(i.startswith("DRA-PREP-MIG") for i in ids)


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_sources_the_script_and_completes(tmp_path):
    env = _shims(tmp_path)
    env["SAMPLE"] = SAMPLE
    cases = {
        "dradiag sel": "selector-check",
        'dradiag claim --from "$SAMPLE" ""': "ml/notebook-mig",
        "dradiag claim --no-c": "--no-color",
        'dradiag simulate --from "$SAMPLE" --node ""': "a100-node-1",
        'dradiag pod --from "$SAMPLE" ml/n': "ml/notebook-0",
    }
    drive = "source <(dradiag completion bash)\n"
    for line in cases:
        drive += (
            f"COMP_WORDS=({line}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n"
            "_dradiag_completion dradiag\n"
            'printf "%s\\n" "${COMPREPLY[@]}"\n'
        )
    out = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", drive],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == list(cases.values())
