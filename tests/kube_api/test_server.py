"""The local API server's protocol, checked with a plain HTTP client (not dradiag's)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kube_api.query_selectors import SelectorError, labels_match, parse_label_selector
from kube_api.server import DEFAULT_TOKEN, KubeAPIServer


def call(
    server: KubeAPIServer, path: str, *, method: str = "GET", accept: str = "application/json"
) -> tuple[int, Any]:
    request = urllib.request.Request(
        server.url + path,
        method=method,
        headers={"Authorization": f"Bearer {DEFAULT_TOKEN}", "Accept": accept},
        data=b"{}" if method in ("POST", "PUT", "PATCH") else None,
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            body = response.read().decode()
            status = response.status
            kind = response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        body, status, kind = exc.read().decode(), exc.code, exc.headers.get("Content-Type", "")
    return status, json.loads(body) if "json" in kind else body


def test_discovery_legacy_and_aggregated(kube_api_factory):
    server = kube_api_factory(versions=("v1", "v1beta1"), taint_rule_versions=("v1beta1",))
    status, group = call(server, "/apis/resource.k8s.io")
    assert status == 200 and group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    _, resources = call(server, "/apis/resource.k8s.io/v1")
    assert "devicetaintrules" not in {r["name"] for r in resources["resources"]}
    _, agg = call(
        server,
        "/apis",
        accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
    )
    assert agg["kind"] == "APIGroupDiscoveryList"
    (dra,) = agg["items"]
    by_version = {v["version"]: {r["resource"] for r in v["resources"]} for v in dra["versions"]}
    assert (
        "devicetaintrules" in by_version["v1beta1"] and "devicetaintrules" not in by_version["v1"]
    )
    _, core = call(server, "/api/v1")
    assert {"pods", "pods/log", "events", "nodes"} <= {r["name"] for r in core["resources"]}
    assert call(server, "/apis/resource.k8s.io/v1alpha3/resourceslices")[0] == 404


def test_lists_strip_item_kinds_and_carry_a_resource_version(kube_api):
    status, doc = call(kube_api, "/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims")
    assert status == 200 and doc["kind"] == "ResourceClaimList"
    assert doc["metadata"]["resourceVersion"].isdigit()
    assert all("kind" not in i and "apiVersion" not in i for i in doc["items"])
    assert [i["metadata"]["name"] for i in doc["items"]] == [
        "infer-0-gpu-7xk2p",
        "pending-h100",
        "train-gpu",
    ]


def test_pagination_tokens_are_opaque_and_validated(kube_api):
    _, first = call(kube_api, "/api/v1/pods?limit=3")
    assert len(first["items"]) == 3 and first["metadata"]["remainingItemCount"] == 4
    token = first["metadata"]["continue"]
    _, rest = call(kube_api, f"/api/v1/pods?limit=10&continue={token}")
    assert "continue" not in rest["metadata"] and len(rest["items"]) == 4
    status, error = call(kube_api, "/api/v1/pods?limit=3&continue=garbage")
    assert status == 400 and error["reason"] == "BadRequest"


def test_field_selectors_as_the_real_server_registers_them(kube_api):
    _, doc = call(
        kube_api, "/api/v1/events?fieldSelector=involvedObject.kind%3DPod,reason!%3DScheduled"
    )
    assert sorted(e["reason"] for e in doc["items"]) == [
        "FailedPrepareDynamicResources",
        "FailedScheduling",
        "Pulled",
    ]
    status, error = call(
        kube_api, "/apis/resource.k8s.io/v1/resourceclaims?fieldSelector=status.allocation%3Dx"
    )
    assert status == 400 and error["message"] == "field label not supported: status.allocation"


def test_label_selector_grammar():
    labels = {"metadata": {"labels": {"app": "gpu", "tier": "plugin"}}}
    assert labels_match(parse_label_selector("app in (gpu,cpu),tier!=web,!missing"), labels)
    assert not labels_match(parse_label_selector("app notin (gpu)"), labels)
    assert labels_match(parse_label_selector("tier"), labels)
    assert labels_match(parse_label_selector("absent!=x"), labels)  # != matches the unlabelled
    with pytest.raises(SelectorError):
        parse_label_selector("app in gpu")


def test_pod_logs_honour_tail_bytes_since_and_previous(kube_api):
    base = "/api/v1/namespaces/nvidia-dra-driver-gpu/pods/nvidia-dra-driver-gpu-kubelet-plugin-9m4tz/log"
    status, full = call(kube_api, f"{base}?container=gpus")
    assert status == 200 and full.count("\n") == 4
    assert call(kube_api, f"{base}?container=gpus&tailLines=1")[1].startswith(
        "I0722 02:41:11.001877"
    )
    assert call(kube_api, f"{base}?container=gpus&limitBytes=5")[1] == "I0722"
    since = call(kube_api, f"{base}?container=gpus&sinceTime=2026-07-22T02:41:11Z")[1]
    assert since.count("\n") == 1 and "healthcheck" in since
    assert "ERROR_LIBRARY_NOT_FOUND" in call(kube_api, f"{base}?container=gpus&previous=true")[1]
    status, error = call(
        kube_api,
        "/api/v1/namespaces/dra-driver-nvidia-gpu/pods/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q/log?container=gpus&previous=true",
    )
    assert status == 400 and "previous terminated container" in error["message"]
    # One container (init containers aside): it is the default, as on the real server.
    plugin = "/api/v1/namespaces/dra-driver-nvidia-gpu/pods/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q/log"
    assert call(kube_api, plugin) == call(kube_api, f"{plugin}?container=gpus")
    status, error = call(kube_api, f"{plugin}?container=nope")
    assert (
        status == 400
        and error["message"]
        == "container nope is not valid for pod dra-driver-nvidia-gpu-kubelet-plugin-x7k2q"
    )


def test_writes_are_refused_and_recorded(kube_api_factory):
    rbac = kube_api_factory()
    assert call(rbac, "/api/v1/namespaces/ml/pods/trainer-0", method="DELETE")[0] == 403
    open_server = kube_api_factory(rbac=None)
    assert call(open_server, "/api/v1/namespaces/ml/pods", method="POST")[0] == 405
    assert open_server.methods() == {"POST"} and rbac.methods() == {"DELETE"}
    # Nothing changed.
    assert call(rbac, "/api/v1/namespaces/ml/pods/trainer-0")[0] == 200


def test_rbac_denies_what_the_role_does_not_grant(kube_api):
    status, error = call(kube_api, "/api/v1/namespaces/ml/pods/trainer-0?watch=true")
    assert status == 200  # GET of a named object is "get", which the role grants
    status, error = call(kube_api, "/api/v1/pods?watch=true")
    assert status == 403 and 'cannot watch resource "pods"' in error["message"]


def test_served_versions_convert_from_storage(kube_api_factory):
    server = kube_api_factory(versions=("v1alpha3",))
    _, slices = call(server, "/apis/resource.k8s.io/v1alpha3/resourceslices")
    device = slices["items"][0]["spec"]["devices"][0]
    assert device["basic"]["capacity"]["memory"] == "40Gi"  # v1alpha3: bare quantities
    _, claim = call(server, "/apis/resource.k8s.io/v1alpha3/namespaces/ml/resourceclaims/train-gpu")
    assert claim["spec"]["devices"]["requests"][0]["deviceClassName"] == "gpu.nvidia.com"
    assert claim["apiVersion"] == "resource.k8s.io/v1alpha3" and claim["kind"] == "ResourceClaim"


def test_faults_fire_the_given_number_of_times(kube_api):
    kube_api.add_fault(r"/nodes/node-a", status=503, times=1, retry_after=1)
    assert call(kube_api, "/api/v1/nodes/node-a")[0] == 503
    assert call(kube_api, "/api/v1/nodes/node-a")[0] == 200
    kube_api.add_fault(r"/nodes/node-b", status=403)
    status, error = call(kube_api, "/api/v1/nodes/node-b")
    assert status == 403 and error["message"].startswith('nodes "node-b" is forbidden: User')
