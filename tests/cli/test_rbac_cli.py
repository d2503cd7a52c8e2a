"""``dradiag rbac``: the shipped docs/rbac.yaml, verbatim, and its namespace-limited form."""

from __future__ import annotations

from pathlib import Path

import yaml

from dradiag.cli.app import run

RBAC = Path(__file__).resolve().parents[2] / "docs" / "rbac.yaml"


def test_rbac_prints_the_shipped_file_verbatim(capsys):
    assert run(["rbac"]) == 0
    out = capsys.readouterr().out
    assert out == RBAC.read_text()
    kinds = [d["kind"] for d in yaml.safe_load_all(out) if d]
    assert kinds == ["ClusterRole", "ServiceAccount", "ClusterRoleBinding"]


def test_the_role_only_reads():
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRole")
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert verbs == {"get", "list"}
    assert not resources & {"secrets", "configmaps", "pods/exec", "nodes/proxy"}


def test_namespaced_form_binds_the_same_role_per_namespace(capsys):
    assert run(["rbac", "-n", "ml", "--namespace", "research"]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    shipped = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    assert [d["kind"] for d in docs] == [
        "ClusterRole",
        "ServiceAccount",
        "RoleBinding",
        "RoleBinding",
    ]
    assert docs[0] == shipped[0]  # the role itself is unchanged
    bindings = docs[2:]
    assert [b["metadata"]["namespace"] for b in bindings] == ["ml", "research"]
    cluster_binding = shipped[2]
    for b in bindings:
        assert b["roleRef"] == cluster_binding["roleRef"]
        assert b["subjects"] == cluster_binding["subjects"]
