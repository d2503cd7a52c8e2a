"""``dradiag bundle`` end to end against the local API server (issue 12).

Planted credentials (env values, a secret reference's value, command-line tokens,
annotations, a node annotation, an event message, plugin log lines, the kubeconfig's
token) must appear nowhere in the archive, and ``redactions.json`` must count each; the
archive must be deterministic; the manifest must validate against its JSON Schema and
record failures (a refused node log query) instead of leaving gaps.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from dradiag.cli.app import run
from dradiag.snapshot.model import ContainerLog

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "schema"
FIXTURE = ROOT / "tests" / "kube_api" / "fixtures" / "cluster"
PLUGIN = ("dra-driver-nvidia-gpu", "dra-driver-nvidia-gpu-kubelet-plugin-x7k2q")

KUBECONFIG_TOKEN = "kubeconfig-planted-0123456789abcdef"
PLANTED = {
    "env by name": "env-password-value-1",
    "secret ref value": "secretref-value-2",
    "url password": "urlpass3value",
    "command token": "cmdtoken4value0000",
    "annotation bearer": "annbearer5valueABCDEFGH",
    "node annotation": "node-annotation-secret-6",
    "event jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJldmVudCJ9.c2lnbmF0dXJlNw",
    "log bearer": "logbearer8valueABCDEFGH",
    "log aws key": "AKIAIOSFODNN7EXAMPL9",
    "log private key": "MIIEpAIBAAKCAQEAplantedkey10",
    "log password": "logpassword11value",
    "last applied": "lastapplied12value",
}


def _workload_pod() -> dict[str, Any]:
    env = [
        {"name": "DB_PASSWORD", "value": PLANTED["env by name"]},
        {
            "name": "FROM_SECRET",
            "value": PLANTED["secret ref value"],
            "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
        },
        {"name": "DB_URL", "value": f"postgres://app:{PLANTED['url password']}@db:5432/x"},
        {"name": "LOG_VERBOSITY", "value": "4"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "leaky-0",
            "namespace": "ml",
            "uid": "leaky-uid",
            "annotations": {
                "example.com/auth": f"Authorization: Bearer {PLANTED['annotation bearer']}",
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    {"env": [{"name": "X", "value": PLANTED["last applied"]}]}
                ),
            },
        },
        "spec": {
            "nodeName": "node-a",
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "train-gpu"}],
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "args": [f"--token={PLANTED['command token']}"],
                    "env": env,
                }
            ],
        },
        "status": {"phase": "Pending"},
    }


def _event() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "leaky-0.1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "leaky-0"},
        "reason": "Failed",
        "type": "Warning",
        "message": f"pull failed with token {PLANTED['event jwt']}",
        "lastTimestamp": "2026-07-22T03:00:00Z",
    }


PLUGIN_LOG = (
    "I0722 02:41:10.552301       1 main.go:245] starting\n"
    f"I0722 02:41:11.000000       1 client.go:10] Authorization: Bearer {PLANTED['log bearer']}\n"
    f"I0722 02:41:12.000000       1 cloud.go:10] using key {PLANTED['log aws key']} for s3\n"
    "-----BEGIN RSA PRIVATE KEY-----\n"
    f"{PLANTED['log private key']}\n"
    "-----END RSA PRIVATE KEY-----\n"
    f'I0722 02:41:13.000000       1 db.go:10] password="{PLANTED["log password"]}"\n'
    "I0722 02:41:14.000000       1 driver.go:10] Prepared GPU-1234abcd-0001 for claim ml/train-gpu\n"
)


@pytest.fixture
def leaky(kube_api_factory):
    server = kube_api_factory(FIXTURE, token=KUBECONFIG_TOKEN)
    server.add_object(_workload_pod())
    server.add_object(_event())
    node = server._by_key[("nodes", "", "node-a")]
    node.setdefault("metadata", {}).setdefault("annotations", {})["example.com/creds"] = PLANTED[
        "node annotation"
    ]
    server.add_log(
        ContainerLog(namespace=PLUGIN[0], pod=PLUGIN[1], container="gpus", text=PLUGIN_LOG)
    )
    return server


def _bundle(server, tmp_path: Path, capsys, *args: str, name: str = "b.tar.gz") -> Path:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig", context="customer-prod-ctx")
    out = tmp_path / name
    capsys.readouterr()
    code = run(["bundle", "-o", str(out), "--kubeconfig", str(kubeconfig), *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == f"{out}\n"
    return out


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]


def test_planted_credentials_appear_nowhere(leaky, tmp_path, capsys):
    archive = _bundle(leaky, tmp_path, capsys)
    raw = gzip.decompress(archive.read_bytes())
    for label, value in [*PLANTED.items(), ("kubeconfig token", KUBECONFIG_TOKEN)]:
        assert value.encode() not in raw, f"{label} leaked into the bundle"
    assert b"customer-prod-ctx" not in raw
    assert b"/dradiag-bundle-" not in raw  # no temp dir path in analysis.json's evidence
    members = _members(archive)
    # The evidence around the secrets survives.
    log = members[f"logs/{PLUGIN[0]}/{PLUGIN[1]}/gpus.log"].decode()
    assert "Prepared GPU-1234abcd-0001 for claim ml/train-gpu" in log
    assert "Authorization: Bearer ***REDACTED***" in log
    pods = json.loads(members["resources/core/v1/pods/ml.json"])
    leaky_pod = next(p for p in pods["items"] if p["metadata"]["name"] == "leaky-0")
    env = {e["name"]: e.get("value") for e in leaky_pod["spec"]["containers"][0]["env"]}
    assert env["LOG_VERBOSITY"] == "4"
    assert env["DB_PASSWORD"] == env["FROM_SECRET"] == "***REDACTED***"
    assert env["DB_URL"] == "postgres://app:***REDACTED***@db:5432/x"
    nodes = json.loads(members["resources/core/v1/nodes.json"])["items"]
    assert all("annotations" not in n["metadata"] for n in nodes)
    assert all(n["metadata"].get("labels") for n in nodes)


def test_redaction_counts(leaky, tmp_path, capsys):
    members = _members(_bundle(leaky, tmp_path, capsys))
    report = json.loads(members["redactions.json"])
    log_place = f"logs/{PLUGIN[0]}/{PLUGIN[1]}/gpus.log"
    assert report["byPlace"][log_place] == {
        "AWSKey": 1,
        "BearerToken": 1,
        "Keyword": 1,
        "PrivateKey": 1,
    }
    container = "Pod ml/leaky-0 container main"
    assert report["byPlace"][container] == {
        "CredentialEnvName": 1,
        "SecretRefValue": 1,
        "TokenAssignment": 1,
        "URLCredentials": 1,
    }
    assert report["byPlace"]["Pod ml/leaky-0 annotations"] == {
        "BearerToken": 1,
        "LastAppliedConfiguration": 1,
    }
    assert report["byPlace"]["Event ml/leaky-0.1"] == {"JWT": 1}
    assert report["total"] == sum(report["byRule"].values()) == 11
    assert not any(v.encode() in members["redactions.json"] for v in PLANTED.values())
    manifest = json.loads(members["manifest.json"])
    assert manifest["redaction"] == {"enabled": True, "library": report["library"]}


def test_no_redact_keeps_values_and_says_so(leaky, tmp_path, capsys):
    members = _members(_bundle(leaky, tmp_path, capsys, "--no-redact"))
    manifest = json.loads(members["manifest.json"])
    assert manifest["redaction"] == {"enabled": False, "library": None}
    assert PLANTED["env by name"].encode() in members["resources/core/v1/pods/ml.json"]
    assert json.loads(members["redactions.json"])["enabled"] is False


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    item = json.loads((SCHEMAS / "diagnosis.schema.json").read_text())
    registry = Registry().with_resource(item["$id"], Resource.from_contents(item))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def test_manifest_and_analysis_validate(kube_api, tmp_path, capsys):
    members = _members(_bundle(kube_api, tmp_path, capsys))
    manifest = json.loads(members["manifest.json"])
    _validator("bundle-manifest.schema.json").validate(manifest)
    analysis = json.loads(members["analysis.json"])
    _validator("diagnoses.schema.json").validate(analysis)
    assert manifest["analysis"] == {"status": "collected", "diagnoses": len(analysis["items"])}
    by_kind = {c["kind"]: c for c in manifest["collectors"]}
    assert by_kind["ResourceClaim"]["objects"] == 4 and by_kind["ResourceClaim"]["bytes"] > 0
    assert by_kind["DeviceTaintRule"]["status"] == "absent"
    assert by_kind["Log"]["objects"] >= 3
    assert manifest["server"]["version"] == "1.34"
    assert manifest["contextHash"].startswith("sha256:")
    # Both chart generations' plugin pods, current and previous logs.
    assert (
        "logs/nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-9m4tz/gpus.previous.log"
        in members
    )
    assert f"logs/{PLUGIN[0]}/{PLUGIN[1]}/gpus.log" in members


def test_forbidden_kind_is_a_failed_collector_and_unknown_offline(
    kube_api_factory, tmp_path, capsys
):
    server = kube_api_factory(FIXTURE)
    server.add_fault(r"^/api/v1/(namespaces/[^/]+/)?(pods|events)([/?]|$)", status=403)
    archive = _bundle(server, tmp_path, capsys)
    manifest = json.loads(_members(archive)["manifest.json"])
    for kind, resource in (("Pod", "pods"), ("Event", "events")):
        entry = next(c for c in manifest["collectors"] if c["kind"] == kind)
        assert entry["status"] == "failed" and entry["coverage"] == "unknown"
        assert "forbidden" in entry["reason"]
        assert any(e["resource"] == resource and e["status"] == 403 for e in manifest["errors"])
    kubeconfig = str(tmp_path / "kubeconfig")
    results = []
    for source in (["--from", str(archive)], ["--kubeconfig", kubeconfig]):
        capsys.readouterr()
        code = run(["claim", "ml/pending-h100", *source, "-o", "json"])
        doc = json.loads(capsys.readouterr().out)
        assert doc["collection"]["partial"] is True
        results.append((code, doc["verdict"]["status"], [p["status"] for p in doc["phases"]]))
    assert results[0] == results[1]
    assert "unknown" in results[0][2]
    assert doc["source"]["kind"] == "live"


def test_archive_is_deterministic(kube_api, tmp_path, capsys, monkeypatch):
    # The collection time is an input (the manifest and analysis.json carry it); pinned,
    # everything but the manifest's durations is byte-identical.
    monkeypatch.setattr("dradiag.sources.bundle_write.now_rfc3339", lambda: "2026-07-22T03:00:00Z")
    first = _bundle(kube_api, tmp_path, capsys, name="one.tar.gz")
    second = _bundle(kube_api, tmp_path, capsys, name="two.tar.gz")
    a, b = _members(first), _members(second)
    assert list(a) == sorted(a) == list(b)
    for name in a:
        if name != "manifest.json":
            assert a[name] == b[name], name
    volatile = ("durationMs",)

    def stable(doc: dict[str, Any]) -> dict[str, Any]:
        doc = {k: v for k, v in doc.items() if k not in volatile}
        doc["collectors"] = [
            {k: v for k, v in c.items() if k != "durationMs"} for c in doc["collectors"]
        ]
        return doc

    assert stable(json.loads(a["manifest.json"])) == stable(json.loads(b["manifest.json"]))
    assert a["manifest.json"].decode().index('"analysis"') >= 0  # sorted keys: analysis first
    with tarfile.open(first) as tar:
        assert {(m.mtime, m.uid, m.gid, m.uname, m.mode) for m in tar.getmembers()} == {
            (0, 0, 0, "", 0o644)
        }
    header = first.read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0"  # no gzip timestamp


def test_kubelet_logs_collected_where_allowed(kube_api_factory, tmp_path, capsys):
    server = kube_api_factory(FIXTURE, rbac=None)
    server.node_logs["node-a"] = "Jul 22 03:00:00 node-a kubelet[1]: token=kubelettoken0123456\n"
    members = _members(_bundle(server, tmp_path, capsys, "--kubelet-logs"))
    assert members["node/node-a/kubelet.log"].decode().startswith("Jul 22 03:00:00 node-a")
    assert b"kubelettoken0123456" not in members["node/node-a/kubelet.log"]
    status = json.loads(members["manifest.json"])["extraCollectors"]["kubeletLogs"]
    assert status["objects"] == 1
    assert any(r.path.endswith("/proxy/logs/") for r in server.requests)


def test_kubelet_logs_refused_is_recorded_not_fatal(kube_api, tmp_path, capsys):
    members = _members(_bundle(kube_api, tmp_path, capsys, "--kubelet-logs"))
    status = json.loads(members["manifest.json"])["extraCollectors"]["kubeletLogs"]
    assert status["status"] == "failed"
    assert {e["status"] for e in status["errors"]} == {403}
    assert not [m for m in members if m.startswith("node/")]


def test_unpacked_folder_reads_like_the_archive(kube_api, tmp_path, capsys):
    archive = _bundle(kube_api, tmp_path, capsys)
    folder = tmp_path / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    outputs = []
    for source in (archive, folder):
        capsys.readouterr()
        code = run(["claim", "ml/train-gpu", "--from", str(source), "-o", "json"])
        doc = json.loads(capsys.readouterr().out)
        outputs.append((code, doc["verdict"], [p["status"] for p in doc["phases"]]))
        assert "warning" not in capsys.readouterr().err
    assert outputs[0] == outputs[1]


def test_scoped_bundle_records_scope(kube_api, tmp_path, capsys):
    members = _members(_bundle(kube_api, tmp_path, capsys, "-n", "research", "--since", "2h"))
    manifest = json.loads(members["manifest.json"])
    assert manifest["scope"]["namespaces"] == ["research"]
    assert manifest["scope"]["allNamespaces"] is False
    assert manifest["scope"]["sinceSeconds"] == 7200
    assert not [
        m for m in members if m.startswith("resources/resource.k8s.io/v1/resourceclaims/ml")
    ]
    assert "resources/resource.k8s.io/v1/resourceclaims/research.json" in members


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "ml", "-A"],
        ["--claim", "no-slash-but/too/many"],
        ["-o", "bundle.zip"],
        ["--since", "soon"],
    ],
)
def test_usage_errors_exit_2(args, kube_api, tmp_path, capsys):
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig")
    assert run(["bundle", *args, "--kubeconfig", str(kubeconfig)]) == 2
    assert capsys.readouterr().out == ""


def test_default_name_is_a_utc_timestamp(kube_api, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig")
    capsys.readouterr()
    assert run(["bundle", "--kubeconfig", str(kubeconfig)]) == 0
    name = capsys.readouterr().out.strip()
    assert name.startswith("dradiag-bundle-") and name.endswith("Z.tar.gz")
    assert (tmp_path / name).is_file()
    assert io.BytesIO((tmp_path / name).read_bytes()).read(2) == b"\x1f\x8b"


def test_pod_scoped_bundle_gives_the_live_pod_verdicts(kube_api, tmp_path, capsys):
    archive = _bundle(kube_api, tmp_path, capsys, "--pod", "ml/infer-0")
    manifest = json.loads(_members(archive)["manifest.json"])
    assert manifest["scope"]["pods"] == ["ml/infer-0"]
    assert manifest["scope"]["allNamespaces"] is False
    kubeconfig = str(tmp_path / "kubeconfig")
    results = []
    for source in (["--from", str(archive)], ["--kubeconfig", kubeconfig]):
        capsys.readouterr()
        code = run(["pod", "ml/infer-0", *source, "-o", "json"])
        doc = json.loads(capsys.readouterr().out)
        results.append(
            (code, [(i["target"]["name"], i["verdict"]["status"]) for i in doc["items"]])
        )
    assert results[0] == results[1]
    assert results[0][1]
