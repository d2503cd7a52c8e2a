"""Live collection end to end: the kubernetes client over real HTTP to the local API server."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import yaml
from kube_api.server import KubeAPIServer

from dradiag.cli.inputs import Target
from dradiag.cli.options import CommonOptions
from dradiag.errors import ClusterUnreachable, UsageError
from dradiag.snapshot.model import ContainerLog, Coverage, Kind, Snapshot, name_of
from dradiag.sources.live import collect_snapshot
from dradiag.sources.manifests import load_snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "kube_api" / "fixtures" / "cluster"
CLAIM = Target(kind="claim", namespace="ml", name="train-gpu")
PENDING = Target(kind="claim", namespace="ml", name="pending-h100")
POD = Target(kind="pod", namespace="ml", name="infer-0")
CLUSTER = Target(kind="cluster")


def collect(server: KubeAPIServer, tmp_path: Path, target: Target, **options: object) -> Snapshot:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    return collect_snapshot(CommonOptions(kubeconfig=str(kubeconfig), **options), target)  # type: ignore[arg-type]


def names(objects: object) -> list[str]:
    return sorted(name_of(o) for o in objects)  # type: ignore[attr-defined]


# -- targeted reads -------------------------------------------------------------------


def test_allocated_claim_reads_only_what_its_life_touched(kube_api, tmp_path):
    snap = collect(kube_api, tmp_path, CLAIM)

    assert kube_api.methods() == {"GET"}
    assert len(kube_api.requests) <= 12
    assert names(snap.claims) == ["train-gpu"]
    assert names(snap.pods) == ["dra-driver-nvidia-gpu-kubelet-plugin-x7k2q", "trainer-0"]
    assert names(snap.slices) == ["00000-gpu.nvidia.com-node-a-x7k2q"]
    assert names(snap.nodes) == ["node-a"]
    assert [e["reason"] for e in snap.events] == ["Scheduled"]
    assert [(lg.pod, lg.container, lg.previous) for lg in snap.logs] == [
        ("dra-driver-nvidia-gpu-kubelet-plugin-x7k2q", "gpus", False)
    ]
    # Slices by field selector for the allocation's node, never the whole list.
    slice_reads = kube_api.requests_to(r"/resourceslices$")
    assert [r.query.get("fieldSelector") for r in slice_reads] == ["spec.nodeName=node-a"]
    # Events by involvedObject, for the claim and for its pod.
    event_selectors = sorted(r.query["fieldSelector"] for r in kube_api.requests_to(r"/events$"))
    assert event_selectors == [
        "involvedObject.kind=Pod,involvedObject.name=trainer-0,involvedObject.namespace=ml",
        "involvedObject.kind=ResourceClaim,involvedObject.name=train-gpu,involvedObject.namespace=ml",
    ]
    # The plugin started long before the claim: its log is read as the head (start-up,
    # publication) and the window from shortly before the claim was created, capped.
    head, window = sorted(kube_api.requests_to(r"/log$"), key=lambda r: "sinceTime" in r.query)
    assert "sinceTime" not in head.query and "tailLines" not in head.query
    assert int(head.query["limitBytes"]) > 0
    assert window.query["sinceTime"] == "2026-07-22T02:10:00Z"
    assert int(window.query["tailLines"]) > 0 and int(window.query["limitBytes"]) > 0
    plugin_log = (
        FIXTURE / "logs/dra-driver-nvidia-gpu/dra-driver-nvidia-gpu-kubelet-plugin-x7k2q/gpus.log"
    )
    assert snap.logs[0].text == plugin_log.read_text()  # the two parts overlap: merged whole
    # Coverage says what was read, and how far.
    assert snap.coverage[Kind.RESOURCE_SLICE].coverage is Coverage.COLLECTED
    assert snap.coverage[Kind.RESOURCE_SLICE].scope == "slices on node node-a"
    assert snap.coverage[Kind.DEVICE_TAINT_RULE].coverage is Coverage.ABSENT
    assert snap.coverage[Kind.RESOURCE_CLAIM_TEMPLATE].coverage is Coverage.UNKNOWN
    assert snap.errors == ()
    assert snap.source.kind == "live"
    assert snap.source.server_version == "1.34"
    assert snap.source.server_git_version == "v1.34.0"  # patch level, for known issues
    assert snap.source.served_versions == ("v1",)
    assert snap.source.context == "kube-api-test"
    assert snap.pods_for_claim(snap.claim("ml", "train-gpu"))[0]["metadata"]["name"] == "trainer-0"


def test_long_plugin_log_is_read_as_head_and_claim_window(kube_api_factory, tmp_path):
    snapshot = load_snapshot(str(FIXTURE))
    plugin = "dra-driver-nvidia-gpu-kubelet-plugin-x7k2q"
    startup = "I0720 08:00:41.318211       1 nvlib.go:173] Traverse GPU devices\n"
    filler = "".join(
        f"I0721 10:{m % 60:02d}:00.000000       1 health.go:1] ok {m:06d}\n" for m in range(9000)
    )
    recent = "I0722 02:20:31.004512       1 driver.go:212] Returning newly prepared devices\n"
    server = kube_api_factory(objects=[o for _, o in snapshot.objects()])
    server.add_log(
        ContainerLog(
            namespace="dra-driver-nvidia-gpu",
            pod=plugin,
            container="gpus",
            text=startup + filler + recent,
        )
    )
    snap = collect(server, tmp_path, CLAIM)

    (log,) = snap.logs
    assert log.text.startswith(startup)  # start-up lines kept despite the tail cap
    assert log.text.endswith(recent)
    assert (
        "[dradiag: log lines between the head and 2026-07-22T02:10:00Z were not read]" in log.text
    )
    assert log.truncated
    assert len(log.text.encode()) < len(filler)


def test_pending_claim_reads_driver_slices_everywhere_and_the_in_use_set(kube_api, tmp_path):
    snap = collect(kube_api, tmp_path, PENDING)

    assert kube_api.methods() == {"GET"}
    assert [r.query.get("fieldSelector") for r in kube_api.requests_to(r"/resourceslices$")] == [
        "spec.driver=gpu.nvidia.com"
    ]
    assert names(snap.slices) == [
        "00000-gpu.nvidia.com-node-a-x7k2q",
        "node-b-gpu.nvidia.com-abc12",
    ]
    # The allocator's in-use set spans namespaces: research/other-gpu holds node-a gpu-1.
    assert [
        c["metadata"]["name"]
        for c in snap.claims_reserving_device("gpu.nvidia.com", "node-a", "gpu-1")
    ] == ["other-gpu"]
    assert names(snap.pods) == ["waiter"]
    assert [e["reason"] for e in snap.events] == ["FailedScheduling"]
    assert "allocated claims in all namespaces" in (snap.coverage[Kind.RESOURCE_CLAIM].scope or "")


def test_pod_target_follows_generated_claims_and_reads_the_previous_plugin_log(kube_api, tmp_path):
    snap = collect(kube_api, tmp_path, POD)

    assert names(snap.claims) == ["infer-0-gpu-7xk2p"]
    assert names(snap.nodes) == ["node-b"]
    # The v25.x chart's plugin pod (old label only) in its own namespace, found by node.
    assert "nvidia-dra-driver-gpu-kubelet-plugin-9m4tz" in names(snap.pods)
    logs = {(lg.pod, lg.previous): lg for lg in snap.logs}
    assert (
        "ERROR_LIBRARY_NOT_FOUND" in logs[("nvidia-dra-driver-gpu-kubelet-plugin-9m4tz", True)].text
    )
    assert (
        "Traverse GPU devices" in logs[("nvidia-dra-driver-gpu-kubelet-plugin-9m4tz", False)].text
    )
    # The events.k8s.io/v1 Prepare failure arrives as a core/v1 event with its note as message.
    (prepare,) = [e for e in snap.events if e["reason"] == "FailedPrepareDynamicResources"]
    assert "unknown GPU sharing strategy" in prepare["message"]
    assert len(kube_api.requests) <= 13


def test_missing_claim_is_a_finding_not_a_collection_error(kube_api, tmp_path):
    snap = collect(kube_api, tmp_path, Target(kind="claim", namespace="ml", name="nope"))

    assert snap.claim("ml", "nope") is None
    assert snap.errors == ()
    assert snap.coverage[Kind.RESOURCE_CLAIM].coverage is Coverage.COLLECTED


def test_whole_cluster_keeps_only_what_analyses_use(kube_api, tmp_path):
    snap = collect(kube_api, tmp_path, CLUSTER)

    assert kube_api.methods() == {"GET"}
    # web-5d8f7 uses no claim and runs no plugin: not kept; its event neither.
    assert "web-5d8f7" not in names(snap.pods)
    assert "Pulled" not in [e["reason"] for e in snap.events]
    assert len(snap.claims) == 4 and len(snap.slices) == 2 and len(snap.nodes) == 3
    for kind in (Kind.RESOURCE_SLICE, Kind.RESOURCE_CLAIM, Kind.NODE, Kind.EVENT):
        assert snap.coverage[kind].coverage is Coverage.COLLECTED
    # Logs only of the plugin that restarted.
    assert {lg.pod for lg in snap.logs} == {"nvidia-dra-driver-gpu-kubelet-plugin-9m4tz"}
    for request in kube_api.requests_to(r"^/api/v1/(pods|events|nodes)$|resource.k8s.io/v1/\w+$"):
        assert request.query.get("limit") == "500"


def test_whole_cluster_pages_through_long_lists(kube_api_factory, tmp_path):
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{i:05x}-gpu.nvidia.com-node-{i}-abcde"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": f"node-{i}",
                "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}],
            },
        }
        for i in range(1203)
    ]
    server = kube_api_factory(objects=slices)
    snap = collect(server, tmp_path, CLUSTER)

    pages = server.requests_to(r"/resourceslices$")
    assert len(pages) == 3
    assert "continue" not in pages[0].query and all("continue" in p.query for p in pages[1:])
    assert len(snap.slices) == 1203


# -- API versions ---------------------------------------------------------------------


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1", "v1alpha3"])
def test_older_served_versions_normalize_to_the_same_snapshot(kube_api_factory, tmp_path, version):
    expected = load_snapshot(str(FIXTURE))
    server = kube_api_factory(versions=(version,))
    snap = collect(server, tmp_path, CLUSTER)

    assert snap.source.served_versions == (version,)
    assert server.requests_to(f"/apis/resource.k8s.io/{version}/resourceslices$")
    assert not server.requests_to("/apis/resource.k8s.io/v1/")
    by_name = {name_of(s): s for s in snap.slices}
    for want in expected.slices:
        assert by_name[name_of(want)]["spec"] == want["spec"]
    claims = {name_of(c): c for c in snap.claims}
    for want in expected.claims:
        assert claims[name_of(want)]["spec"] == want["spec"]
    # The raw object keeps the served shape (basic: devices in v1beta1/v1alpha3).
    raw = snap.raw[("ResourceSlice", "", "00000-gpu.nvidia.com-node-a-x7k2q")]
    assert raw["apiVersion"] == f"resource.k8s.io/{version}"
    assert ("basic" in raw["spec"]["devices"][0]) == (version in ("v1beta1", "v1alpha3"))


def test_device_taint_rules_read_from_v1alpha3_when_only_served_there(kube_api_factory, tmp_path):
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "xid-79-node-a"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"},
            "taint": {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"},
        },
    }
    objects = [o for _, o in load_snapshot(str(FIXTURE)).objects()] + [rule]
    server = kube_api_factory(
        objects=objects, versions=("v1", "v1alpha3"), taint_rule_versions=("v1alpha3",)
    )
    snap = collect(server, tmp_path, CLAIM)

    assert snap.source.served_versions == ("v1", "v1alpha3")
    assert server.requests_to(r"^/apis/resource.k8s.io/v1alpha3/devicetaintrules$")
    assert names(snap.taint_rules) == ["xid-79-node-a"]
    assert snap.coverage[Kind.DEVICE_TAINT_RULE].coverage is Coverage.COLLECTED


def test_legacy_discovery_gives_the_same_snapshot(kube_api_factory, tmp_path):
    aggregated = kube_api_factory()
    legacy = kube_api_factory(aggregated_discovery=False, versions=("v1", "v1beta1"))
    snap_a = collect(aggregated, tmp_path, CLAIM)
    snap_b = collect(legacy, tmp_path, CLAIM)

    assert legacy.requests_to(r"^/apis/resource.k8s.io/v1$")
    assert not aggregated.requests_to(r"^/apis/resource.k8s.io/v1$")
    assert [o for _, o in snap_a.objects()] == [o for _, o in snap_b.objects()]


# -- partial access -------------------------------------------------------------------


def test_namespace_only_rbac_turns_cluster_kinds_unknown_and_names_the_permission(
    kube_api_factory, tmp_path, caplog
):
    server = kube_api_factory(bound_namespaces=["ml"])
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snap = collect(server, tmp_path, CLAIM)

    assert names(snap.claims) == ["train-gpu"]
    for kind in (Kind.RESOURCE_SLICE, Kind.DEVICE_CLASS, Kind.NODE):
        assert snap.coverage[kind].coverage is Coverage.UNKNOWN, kind
    forbidden = {(e.resource, e.verb) for e in snap.errors if e.status == 403}
    assert ("resourceslices", "list") in forbidden and ("deviceclasses", "list") in forbidden
    error = next(e for e in snap.errors if e.resource == "deviceclasses")
    assert error.reason == (
        'deviceclasses.resource.k8s.io is forbidden: User "system:serviceaccount:dradiag:dradiag" '
        'cannot list resource "deviceclasses" in API group "resource.k8s.io" at the cluster scope'
    )
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert (
        "forbidden: list deviceclasses at cluster scope (needs get/list on deviceclasses.resource.k8s.io)"
        in lines
    )
    assert len(lines) == len(set(lines))
    # 403 is final: never retried.
    assert len(server.requests_to(r"/deviceclasses$")) == 1


def test_forbidden_events_in_one_namespace(kube_api, tmp_path, caplog):
    kube_api.add_fault(r"^/api/v1/namespaces/ml/events", status=403)
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snap = collect(kube_api, tmp_path, CLAIM)

    assert snap.coverage[Kind.EVENT].coverage is Coverage.UNKNOWN
    assert snap.coverage[Kind.RESOURCE_SLICE].coverage is Coverage.COLLECTED
    assert "forbidden: list events in namespace ml (needs get/list on events)" in caplog.messages
    (error, *_) = [e for e in snap.errors if e.resource == "events"]
    assert (error.verb, error.namespace, error.status) == ("list", "ml", 403)
    assert 'cannot list resource "events" in API group "" in the namespace "ml"' in error.reason


def test_transient_500s_are_retried_and_succeed(kube_api, tmp_path):
    kube_api.add_fault(r"/resourceslices", status=500, times=2)
    snap = collect(kube_api, tmp_path, CLAIM)

    assert names(snap.slices) == ["00000-gpu.nvidia.com-node-a-x7k2q"]
    assert [r.status for r in kube_api.requests_to(r"/resourceslices$")] == [500, 500, 200]
    assert snap.errors == ()


def test_429_honours_retry_after(kube_api, tmp_path):
    kube_api.add_fault(r"/deviceclasses", status=429, times=1, retry_after=0.3)
    started = time.monotonic()
    snap = collect(kube_api, tmp_path, CLAIM)

    assert time.monotonic() - started >= 0.3
    assert [r.status for r in kube_api.requests_to(r"/deviceclasses$")] == [429, 200]
    assert names(snap.device_classes) == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_persistent_503_is_recorded_after_bounded_retries(kube_api, tmp_path):
    kube_api.add_fault(r"/nodes/", status=503)
    snap = collect(kube_api, tmp_path, CLAIM)

    assert len(kube_api.requests_to(r"/nodes/node-a$")) == 4
    assert snap.coverage[Kind.NODE].coverage is Coverage.UNKNOWN
    (error,) = snap.errors
    assert (error.resource, error.verb, error.name, error.status) == ("nodes", "get", "node-a", 503)


def test_slow_read_times_out_per_request_and_is_recorded(kube_api, tmp_path, caplog):
    kube_api.add_fault(r"/log\?", status=0, delay=1.5)
    with caplog.at_level(logging.WARNING, logger="dradiag"):
        snap = collect(kube_api, tmp_path, CLAIM, request_timeout=0.3)

    assert snap.coverage[Kind.LOG].coverage is Coverage.UNKNOWN
    assert snap.errors
    for error in snap.errors:
        assert error.resource == "pods/log" and error.status is None and "timed out" in error.reason
    assert any(m.startswith("timed out: get pods/log") for m in caplog.messages)
    assert snap.coverage[Kind.RESOURCE_SLICE].coverage is Coverage.COLLECTED


def test_overall_timeout_stops_collection_with_unknowns_not_a_crash(kube_api, tmp_path):
    kube_api.add_fault(r"/resourceclaims/", status=0, delay=1.2)
    started = time.monotonic()
    snap = collect(kube_api, tmp_path, CLAIM, timeout=1.0, request_timeout=5.0)

    assert time.monotonic() - started < 3.0
    assert snap.coverage[Kind.RESOURCE_CLAIM].coverage is Coverage.UNKNOWN
    assert any("timed out" in e.reason for e in snap.errors)


def test_unreachable_api_before_any_evidence_is_cluster_unreachable(tmp_path, kube_api_factory):
    server = kube_api_factory()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    server.stop()
    with pytest.raises(ClusterUnreachable, match="cannot reach the Kubernetes API"):
        collect_snapshot(CommonOptions(kubeconfig=str(kubeconfig)), CLAIM)


def test_wrong_credentials_are_cluster_unreachable(kube_api, tmp_path):
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig", token="expired")
    with pytest.raises(ClusterUnreachable, match="unauthorized"):
        collect_snapshot(CommonOptions(kubeconfig=str(kubeconfig)), CLAIM)


# -- configuration like kubectl -------------------------------------------------------


def test_impersonation_headers_are_sent(kube_api, tmp_path):
    collect(kube_api, tmp_path, CLAIM, as_user="jane", as_groups=("sre", "gpu-admins"))

    assert {r.headers.get("Impersonate-User") for r in kube_api.requests} == {"jane"}
    assert {r.headers.get("Impersonate-Group") for r in kube_api.requests} == {"sre,gpu-admins"}
    assert all(r.headers["User-Agent"].startswith("dradiag/") for r in kube_api.requests)


def test_kubeconfig_env_with_several_files_and_a_context(kube_api, tmp_path, monkeypatch):
    real = yaml.safe_load(kube_api.write_kubeconfig(tmp_path / "real").read_text())
    # File 1: a dead cluster as current context; file 2: the local server as "lab".
    dead = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "nobody", "user": {"token": "x"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "nobody"}}],
        "current-context": "dead",
    }
    real["contexts"][0]["name"] = "lab"
    del real["current-context"]
    first, second = tmp_path / "one.yaml", tmp_path / "two.yaml"
    first.write_text(yaml.safe_dump(dead))
    second.write_text(yaml.safe_dump(real))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{tmp_path / 'missing.yaml'}:{second}")

    snap = collect_snapshot(CommonOptions(context="lab"), CLAIM)

    assert snap.source.context == "lab"
    assert names(snap.claims) == ["train-gpu"]
    with pytest.raises(ClusterUnreachable):
        collect_snapshot(CommonOptions(request_timeout=1.0), CLAIM)  # "dead" is current


def test_unknown_context_and_missing_kubeconfig_are_usage_errors(kubeconfig, tmp_path):
    with pytest.raises(UsageError, match="--context nope"):
        collect_snapshot(CommonOptions(kubeconfig=str(kubeconfig), context="nope"), CLAIM)
    with pytest.raises(UsageError, match="no such file"):
        collect_snapshot(CommonOptions(kubeconfig=str(tmp_path / "absent")), CLAIM)


def test_no_kubeconfig_outside_a_cluster_is_cluster_unreachable(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ClusterUnreachable, match="no kubeconfig found"):
        collect_snapshot(CommonOptions(), CLAIM)
