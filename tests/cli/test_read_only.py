"""Read-only, proven: every command, run against the local API server, sends only GETs.

Commands are discovered from the Typer app, so a new command is covered the day it is
added. Those that can read a cluster (they take ``--kubeconfig``) run against the local
server under the ClusterRole of ``docs/rbac.yaml`` and must reach a result (exit 0, 1
or 4) with no request refused: the shipped RBAC is enough for every command. The others
run with ``KUBECONFIG`` pointing at the server too, in case they reach for it anyway.
A command whose arguments cannot be guessed fails here with a request to add them to
``ARGUMENTS``, rather than going untested.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from dradiag.cli.app import app, run

FIXTURE = Path(__file__).resolve().parents[1] / "kube_api" / "fixtures" / "cluster"

ARGUMENTS: dict[str, list[str]] = {
    "claim": ["ml/train-gpu"],
    "pod": ["ml/infer-0"],
    "scan": ["-A"],
    "inventory": [],
    "selector-check": ["{claim_file}"],
    "simulate": ["--node", "node-a", "--claim", "ml/pending-h100"],
    "bundle": ["-o", "{tmp}/bundle.tar.gz"],
    "version": [],
    "demo": [],
    "rules list": [],
    "rules show": ["DRA-ALLOC-ALL-IN-USE"],
    "node": [],
    "explain": ["Failed to prepare dynamic resources: NodePrepareResources failed"],
    "completion": ["bash"],
}
"""Arguments per command path (``rules show``); ``{tmp}``/``{claim_file}`` are filled in."""


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in sorted(subcommands.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


COMMANDS = dict(_commands(typer.main.get_command(app)))


def _takes(command: Any, flag: str) -> bool:
    return any(flag in (getattr(p, "opts", None) or []) for p in command.params)


def _argv(name: str, tmp_path: Path) -> list[str]:
    if name not in ARGUMENTS:
        required = [p.name for p in COMMANDS[name].params if p.required]
        if required:
            pytest.fail(
                f"command {name!r} needs {required}: add its arguments to ARGUMENTS in {__file__}"
            )
    claim_file = tmp_path / "claim.yaml"
    claims = [d for d in yaml.safe_load_all((FIXTURE / "claims.yaml").read_text()) if d]
    claim_file.write_text(
        yaml.safe_dump(next(c for c in claims if c["metadata"]["name"] == "pending-h100"))
    )
    return [
        a.format(tmp=tmp_path, claim_file=claim_file)
        for a in (*name.split(), *ARGUMENTS.get(name, []))
    ]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_sends_only_gets(name, kube_api, tmp_path, monkeypatch, capsys):
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    live = _takes(COMMANDS[name], "--kubeconfig")
    argv = _argv(name, tmp_path) + (["--kubeconfig", str(kubeconfig)] if live else [])

    code = run(argv)
    captured = capsys.readouterr()

    assert kube_api.methods() <= {"GET"}, [r for r in kube_api.requests if r.method != "GET"]
    if live:
        assert code in (0, 1, 4), f"{argv} exited {code}: {captured.err}"
        assert kube_api.requests, f"{name} takes --kubeconfig but read nothing from the cluster"
        refused = [r.target for r in kube_api.requests if r.status == 403]
        assert refused == [], f"docs/rbac.yaml does not allow what {name} reads: {refused}"
        assert "forbidden" not in captured.err


def test_every_live_command_is_exercised():
    live = sorted(n for n, c in COMMANDS.items() if _takes(c, "--kubeconfig"))
    assert {"claim", "pod"} <= set(live)


def test_rbac_role_is_get_and_list_only():
    docs = list(
        yaml.safe_load_all((Path(__file__).resolve().parents[2] / "docs" / "rbac.yaml").read_text())
    )
    (role,) = [d for d in docs if d and d["kind"] == "ClusterRole"]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert verbs == {"get", "list"}
    assert not resources & {
        "secrets",
        "configmaps",
        "pods/exec",
        "pods/attach",
        "pods/portforward",
        "*",
    }
    (binding,) = [d for d in docs if d and d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
