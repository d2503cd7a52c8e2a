"""Live, against the local API server: what could not be read is never reported as healthy.

Every list forbidden, or a cluster that serves no resource.k8s.io: ``scan`` and
``inventory`` say what they could not read and exit 4, and their JSON documents carry
``collection``. A forbidden claim read is "could not be read" (exit 4), not "not found".
A bare NAME means the kubeconfig context's namespace, as in kubectl.
"""

from __future__ import annotations

import json

import doc_schemas

from dradiag.cli.app import run

NOTHING = [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]
"""A ClusterRole that lets the reader list nothing dradiag needs."""
NO_CLAIMS = [
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/log", "events", "nodes"],
        "verbs": ["get", "list"],
    },
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices", "deviceclasses"],
        "verbs": ["get", "list"],
    },
]


def _run(capsys, argv):
    capsys.readouterr()
    code = run(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_scan_with_every_list_forbidden_is_inconclusive(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(rbac=NOTHING)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code, out, _err = _run(capsys, ["scan", "-A", "--kubeconfig", kubeconfig])
    assert code == 4
    assert "nothing unhealthy found" not in out
    assert out.startswith("inconclusive:") and "ResourceClaim (forbidden" in out
    code, out, _err = _run(capsys, ["scan", "-A", "--kubeconfig", kubeconfig, "-o", "json"])
    doc = json.loads(out)
    doc_schemas.validate(doc, "diagnoses")
    assert code == 4 and doc["items"] == []
    unread = {u["kind"]: u["coverage"] for u in doc["collection"]["unread"]}
    assert unread == {
        "ResourceClaim": "unknown",
        "Pod": "unknown",
        "ResourceSlice": "unknown",
        "DeviceClass": "unknown",
    }
    assert doc["collection"]["partial"] is True
    assert {e["status"] for e in doc["collection"]["errors"]} == {403}


def test_scan_of_a_cluster_without_dra_is_inconclusive(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(versions=())
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code, out, _err = _run(capsys, ["scan", "-n", "kube-system", "--kubeconfig", kubeconfig])
    assert code == 4 and out.startswith("inconclusive:")
    code, out, _err = _run(capsys, ["scan", "-A", "--kubeconfig", kubeconfig, "-o", "json"])
    doc = json.loads(out)
    doc_schemas.validate(doc, "diagnoses")
    # The pods that use claims are stuck for good (broken, exit 1); no "node publishes no
    # ResourceSlice" rows: the API for slices does not exist at all.
    assert code == 1
    rows = {(i["target"]["kind"], i["verdict"]["rule"]) for i in doc["items"]}
    assert rows == {("Pod", "DRA-ALLOC-CLAIM-NOT-FOUND")}
    assert all("DRA is not enabled" in json.dumps(i) for i in doc["items"])
    unread = {u["kind"]: u for u in doc["collection"]["unread"]}
    assert unread["ResourceClaim"]["coverage"] == "absent"
    assert "does not serve" in unread["ResourceSlice"]["reason"]


def test_inventory_with_every_list_forbidden_exits_4(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(rbac=NOTHING)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code, out, err = _run(capsys, ["inventory", "--kubeconfig", kubeconfig])
    assert code == 4
    assert "could not read ResourceSlice (forbidden" in out
    code, out, err = _run(capsys, ["inventory", "--kubeconfig", kubeconfig, "-o", "json"])
    doc = json.loads(out)
    doc_schemas.validate(doc, "inventory")
    assert code == 4
    assert {u["kind"] for u in doc["collection"]["unread"]} == {"ResourceSlice", "ResourceClaim"}


def test_inventory_of_a_cluster_without_dra_exits_4(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(versions=())
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code, out, _err = _run(capsys, ["inventory", "--kubeconfig", kubeconfig, "-o", "json"])
    assert code == 4
    assert json.loads(out)["collection"]["unread"][0]["coverage"] == "absent"


def test_inventory_that_reads_everything_exits_0_with_collection(kubeconfig, capsys):
    code, out, _err = _run(capsys, ["inventory", "--kubeconfig", str(kubeconfig), "-o", "json"])
    doc = json.loads(out)
    doc_schemas.validate(doc, "inventory")
    assert code == 0 and "unread" not in doc["collection"]


def test_forbidden_claim_read_is_not_not_found(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(rbac=NO_CLAIMS)
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kc"))
    code, _out, err = _run(capsys, ["claim", "ml/train-gpu", "--kubeconfig", kubeconfig])
    assert code == 4
    assert "could not be read" in err and "403" in err
    assert "not found" not in err


def test_bare_name_means_the_contexts_namespace(kube_api, tmp_path, capsys):
    kubeconfig = str(kube_api.write_kubeconfig(tmp_path / "kc", namespace="ml"))
    code, out, _err = _run(capsys, ["claim", "train-gpu", "--kubeconfig", kubeconfig, "-o", "json"])
    assert code in (0, 1)
    assert json.loads(out)["target"]["namespace"] == "ml"
    # -n still wins over the context.
    code, _out, err = _run(
        capsys, ["claim", "train-gpu", "-n", "default", "--kubeconfig", kubeconfig]
    )
    assert code == 2 and "default/train-gpu not found" in err
