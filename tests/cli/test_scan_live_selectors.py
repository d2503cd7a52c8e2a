"""Live ``scan -l``/``--field-selector`` against the local API server: the selectors go to
the server with the pod and claim lists, the objects a kept row needs are read by name,
and the answer is the offline one. A closed port is "connection refused", not a timeout."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from scan_cluster import k8s, scan_cluster

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
    selected = [r for r in claim_lists if r.query.get("labelSelector") == "app=trainer"]
    assert selected
    # The claim the selected pod uses carries no app label: it was read by name; and
    # the one other list of claims is the allocated ones (devices held), as offline.
    assert server.requests_to(r"/namespaces/ml/resourceclaims/waiting$")
    assert len(claim_lists) == len(selected) + 1


def test_live_pod_only_field_selector_reads_claims_through_pods(
    kube_api_factory, tmp_path: Path, capsys
):
    root = scan_cluster(tmp_path / "in")
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    argv = ["scan", "--kubeconfig", kubeconfig, "-o", "json", "--field-selector", "spec.nodeName="]
    code, doc = _json(capsys, argv)
    assert code == 1 and {n for n, _ in _rows(doc)} == {"waiting", "pending"}
    # A claim has no spec.nodeName: the server would refuse that field on claims.
    assert all("fieldSelector" not in r.query for r in server.requests_to(r"/resourceclaims$"))
    assert server.requests_to(r"/namespaces/ml/resourceclaims/waiting$")
    assert server.requests_to(r"/namespaces/research/resourceclaims/pending$")


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


def test_zero_timeouts_mean_none(kube_api_factory, tmp_path: Path, capsys):
    """kubectl's --request-timeout 0: no limit; the reads still complete."""
    root = scan_cluster(tmp_path / "in")
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    argv = ["scan", "--kubeconfig", kubeconfig, "-o", "json"]
    code, doc = _json(capsys, [*argv, "--request-timeout", "0", "--timeout", "0"])
    assert code == 1 and len(doc["items"]) == 3
    assert not doc["collection"]["errors"]


def _verdicts(doc: dict) -> list[tuple]:
    return [
        (
            i["target"]["name"],
            i["verdict"]["rule"],
            i["verdict"]["summary"],
            tuple(sorted(f["rule"] for p in i["phases"] for f in p["findings"])),
            tuple(p["status"] for p in i["phases"]),
        )
        for i in doc["items"]
    ]


def test_live_selected_pending_claim_sees_the_devices_others_hold(
    kube_api_factory, tmp_path: Path, capsys
):
    """A selected claim that cannot be allocated, its pod unlabelled: live reads the pod
    waiting on it and the allocated claims (the devices others hold), so its diagnosis
    is the offline one, finding for finding."""
    import yaml

    root = scan_cluster(tmp_path / "in")
    wants = k8s.claim(name="wants", uid="u-wants", namespace="research")
    del wants["status"]
    wants["metadata"]["labels"] = {"team": "x"}
    waiter = k8s.pod(
        name="wants-0",
        uid="pod-wants",
        namespace="research",
        claim_name="wants",
        node=None,
        state="pending",
    )
    event = k8s.event(
        "FailedScheduling",
        "0/2 nodes are available: 2 cannot allocate all claims.",
        name="wants-0",
        namespace="research",
        uid="pod-wants",
    )
    (root / "wants.yaml").write_text(yaml.safe_dump_all([wants, waiter, event]))
    # Only gpu-node-1's device is left, and ml/train-gpu (not selected) holds it.
    slices = root / "resourceslices.json"
    listed = json.loads(slices.read_text())
    listed["items"] = [s for s in listed["items"] if s["spec"]["nodeName"] == "gpu-node-1"]
    slices.write_text(json.dumps(listed))
    server = kube_api_factory(root)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    argv = ["-o", "json", "-l", "team=x", "--now", "2026-05-01T12:00:00Z"]
    code_off, offline = _json(capsys, ["scan", "--from", str(root), *argv])
    code_live, live = _json(capsys, ["scan", "--kubeconfig", kubeconfig, *argv])
    assert [v[:2] for v in _verdicts(offline)] == [("wants", "DRA-ALLOC-ALL-IN-USE")]
    assert _verdicts(live) == _verdicts(offline)
    assert code_live == code_off == 1
