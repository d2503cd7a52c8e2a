"""Live ``scan -l``/``--field-selector`` against the local API server: the selectors go to
the server with the pod and claim lists, the objects a kept row needs are read by name,
and the answer is the offline one. A closed port is "connection refused", not a timeout."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from scan_cluster import scan_cluster

from dradiag.cli.app import run


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    capsys.readouterr()
    code = run(argv)
    return code, json.loads(capsys.readouterr().out)


def _rows(doc: dict) -> list[tuple[str, str]]:
    return [(i["target"]["name"], i["verdict"]["rule"]) for i in doc["items"]]


@pytest.mark.parametrize(
    "argv",
    [
        ["-l", "app=trainer"],
        ["-l", "team=vision"],
        ["--field-selector", "spec.nodeName="],
        ["--field-selector", "metadata.namespace=research", "-l", "app"],
    ],
)
def test_live_selected_scan_matches_offline(kube_api_factory, tmp_path: Path, capsys, argv):
    root = scan_cluster(tmp_path / "in")
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code_off, offline = _json(capsys, ["scan", "--from", str(root), "-o", "json", *argv])
    server.clear_requests()
    code_live, live = _json(capsys, ["scan", "--kubeconfig", kubeconfig, "-o", "json", *argv])
    assert _rows(live) == _rows(offline) and _rows(live)
    assert code_live == code_off == 1
    assert server.methods() == {"GET"}
    pod_lists = [r for r in server.requests_to(r"/pods$") if "labelSelector" in r.query]
    pod_lists += [r for r in server.requests_to(r"/pods$") if "fieldSelector" in r.query]
    sent = {(r.query.get("labelSelector"), r.query.get("fieldSelector")) for r in pod_lists}
    selector = argv[argv.index("-l") + 1] if "-l" in argv else None
    fields = argv[argv.index("--field-selector") + 1] if "--field-selector" in argv else None
    assert (selector, fields) in sent


def test_live_label_selector_reaches_the_claim_list(kube_api_factory, tmp_path: Path, capsys):
    root = scan_cluster(tmp_path / "in")
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    _json(capsys, ["scan", "--kubeconfig", kubeconfig, "-o", "json", "-l", "app=trainer"])
    claim_lists = server.requests_to(r"/resourceclaims$")
    assert claim_lists and all(r.query.get("labelSelector") == "app=trainer" for r in claim_lists)
    # The claim the selected pod uses carries no app label: it was read by name.
    assert server.requests_to(r"/namespaces/ml/resourceclaims/waiting$")


def test_live_pod_only_field_selector_lists_no_claims(kube_api_factory, tmp_path: Path, capsys):
    root = scan_cluster(tmp_path / "in")
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    argv = ["scan", "--kubeconfig", kubeconfig, "-o", "json", "--field-selector", "spec.nodeName="]
    code, doc = _json(capsys, argv)
    assert code == 1 and {n for n, _ in _rows(doc)} == {"waiting", "pending"}
    assert not [
        r for r in server.requests_to(r"/resourceclaims$") if "labelSelector" not in r.query
    ]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_connection_refused_is_named_with_the_address(tmp_path: Path, capsys, scheme: str):
    port = _closed_port()
    kubeconfig = tmp_path / "kc"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: c, cluster: {{server: '{scheme}://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    capsys.readouterr()
    assert run(["claim", "ml/x", "--kubeconfig", str(kubeconfig)]) == 3
    err = capsys.readouterr().err
    assert f"{scheme}://127.0.0.1:{port}" in err
    assert "connection refused" in err
    assert "timed out" not in err
