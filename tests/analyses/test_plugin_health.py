"""The kubelet-plugin pod on a node, both chart generations (nvidia-driver-facts §5.1)."""

from __future__ import annotations

import copy

import pytest

from dradiag.analyses.plugin_health import (
    PluginState,
    is_plugin_pod,
    plugin_chart_name,
    plugin_findings,
    plugin_health,
)
from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot
from dradiag.vocabulary import Severity


def _plugin(
    node="n1",
    *,
    chart="dra-driver-nvidia-gpu",
    labels=True,
    containers=("gpus",),
    gpus=None,
    init=None,
    name=None,
    owner=True,
):
    meta = {"name": name or f"{chart}-kubelet-plugin-abcde", "namespace": chart, "uid": f"u-{node}"}
    if labels:
        meta["labels"] = {f"{chart}-component": "kubelet-plugin"}
    if owner:
        meta["ownerReferences"] = [{"kind": "DaemonSet", "name": f"{chart}-kubelet-plugin"}]
    status = {
        "containerStatuses": [
            gpus or {"name": "gpus", "ready": True, "restartCount": 0, "state": {"running": {}}}
        ]
    }
    if init is not None:
        status["initContainerStatuses"] = [init]
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
        "status": status,
    }


def _snap(*pods, scope="cluster"):
    return Snapshot(
        objects={Kind.POD: list(pods)},
        coverage={Kind.POD: KindRecord(kind=Kind.POD, coverage=Coverage.COLLECTED, scope=scope)},
    )


@pytest.mark.parametrize("chart", ["dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu", "my-override"])
def test_chart_generations_by_label(chart):
    assert plugin_chart_name(_plugin(chart=chart, owner=False)) == chart


def test_identified_by_daemonset_owner_or_pod_name_without_labels():
    assert (
        plugin_chart_name(_plugin(chart="nvidia-dra-driver-gpu", labels=False))
        == "nvidia-dra-driver-gpu"
    )
    assert plugin_chart_name(_plugin(labels=False, owner=False)) == "dra-driver-nvidia-gpu"
    assert not is_plugin_pod({"metadata": {"name": "web-1", "labels": {"app": "web"}}})


def test_healthy_and_restarting():
    assert plugin_health(_snap(_plugin()), "n1").state is PluginState.HEALTHY
    restarting = _plugin(
        gpus={"name": "gpus", "ready": True, "restartCount": 5, "state": {"running": {}}}
    )
    health = plugin_health(_snap(restarting), "n1")
    assert health.state is PluginState.RESTARTING
    [finding] = plugin_findings(health, blocking=True, has_slices=True)
    assert (finding.rule, finding.severity) == ("DRA-PUB-PLUGIN-RESTARTS", Severity.WARNING)


def test_crashloop_is_error_only_while_blocking():
    crash = _plugin(
        gpus={
            "name": "gpus",
            "ready": False,
            "restartCount": 14,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {
                "terminated": {"exitCode": 1, "message": "Error: checkpoint is corrupted"}
            },
        }
    )
    health = plugin_health(_snap(crash), "n1")
    assert health.state is PluginState.CRASH_LOOP and health.exit_code == 1
    [blocking] = plugin_findings(health, blocking=True, has_slices=False)
    assert blocking.rule == "DRA-PUB-PLUGIN-CRASHLOOP" and blocking.severity is Severity.ERROR
    assert "checkpoint is corrupted" in blocking.detail
    [later] = plugin_findings(health, blocking=False, has_slices=True)
    assert later.severity is Severity.WARNING


def test_init_container_waiting():
    pod = _plugin(
        gpus={
            "name": "gpus",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "PodInitializing"}},
        },
        init={"name": "init-container", "state": {"running": {}}},
    )
    health = plugin_health(_snap(pod), "n1")
    assert health.state is PluginState.INIT_WAITING
    [finding] = plugin_findings(health, blocking=True, has_slices=False)
    assert finding.rule == "DRA-PUB-PLUGIN-INIT-STUCK"
    assert "init-container" in finding.next[0]


def test_pod_without_gpus_container():
    health = plugin_health(
        _snap(
            _plugin(
                containers=("compute-domains",),
                gpus={"name": "compute-domains", "ready": True, "state": {"running": {}}},
            )
        ),
        "n1",
    )
    assert health.state is PluginState.NO_GPU_CONTAINER
    assert (
        plugin_findings(health, blocking=True, has_slices=False)[0].rule
        == "DRA-PUB-PLUGIN-NO-GPU-CONTAINER"
    )


def test_missing_only_when_plugin_pods_were_collected():
    other_node = _plugin("n2")
    health = plugin_health(_snap(other_node), "n1")
    assert health.state is PluginState.MISSING
    [finding] = plugin_findings(health, blocking=True, has_slices=False)
    assert (finding.rule, finding.severity) == ("DRA-PUB-PLUGIN-MISSING", Severity.ERROR)
    [soft] = plugin_findings(health, blocking=True, has_slices=True)
    assert soft.severity is Severity.WARNING
    # A --from directory of only the workload proves nothing about plugin pods.
    workload = {"metadata": {"name": "w", "namespace": "ml"}, "spec": {"nodeName": "n1"}}
    assert plugin_health(_snap(workload, scope="files"), "n1").state is PluginState.NOT_COLLECTED
    assert plugin_health(_snap(workload, scope="cluster"), "n1").state is PluginState.MISSING


def _variants():
    base = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "d", "labels": {}},
        "spec": {"nodeName": "n1", "containers": []},
    }

    def pod(labels=None, owner=None, containers=()):
        p = copy.deepcopy(base)
        p["metadata"]["labels"] = labels or {}
        if owner:
            p["metadata"]["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
        p["spec"]["containers"] = list(containers)
        return p

    img = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
    return {
        "component label": (pod(labels={"x-component": "kubelet-plugin"}), True),
        "image run by a DaemonSet": (
            pod(
                owner=("DaemonSet", "gpu-dra-kubelet-plugin"),
                containers=[{"name": "p", "image": img}],
            ),
            True,
        ),
        "gpus running the plugin, mirrored image": (
            pod(
                containers=[
                    {"name": "gpus", "image": "reg.local/x:1", "command": ["gpu-kubelet-plugin"]}
                ]
            ),
            True,
        ),
        "controller Deployment on the same image": (
            pod(
                owner=("ReplicaSet", "x-controller-7d"),
                containers=[{"name": "compute-domain", "image": img}],
            ),
            False,
        ),
        "a workload": (pod(containers=[{"name": "main", "image": "pytorch:25"}]), False),
        # The ComputeDomain (IMEX) daemon: a DaemonSet of the driver image that consumes a
        # claim; once taken for a plugin without a 'gpus' container (a false publication
        # warning, and 'kubectl logs -c gpus' on it).
        "ComputeDomain daemon DaemonSet on the same image": (
            pod(
                owner=("DaemonSet", "nvbandwidth-test-compute-domain-pvl9g"),
                containers=[
                    {
                        "name": "compute-domain-daemon",
                        "image": img,
                        "command": ["compute-domain-daemon", "run"],
                    }
                ],
            ),
            False,
        ),
        # Named and running the plugin binary, it is the plugin whatever else it holds
        # (the two recognisers once disagreed here).
        "gpus running the plugin, with a claim": (
            {
                **pod(),
                "spec": {
                    "nodeName": "n1",
                    "containers": [
                        {
                            "name": "gpus",
                            "image": "reg.local/x:1",
                            "command": ["gpu-kubelet-plugin"],
                        }
                    ],
                    "resourceClaims": [{"name": "d", "resourceClaimTemplateName": "t"}],
                },
            },
            True,
        ),
        "ComputeDomain daemon with a claim and no command": (
            {
                **pod(
                    owner=("DaemonSet", "imex-x"),
                    containers=[{"name": "daemon", "image": img}],
                ),
                "spec": {
                    "nodeName": "n1",
                    "containers": [{"name": "daemon", "image": img}],
                    "resourceClaims": [{"name": "d", "resourceClaimTemplateName": "t"}],
                },
            },
            False,
        ),
    }


@pytest.mark.parametrize("case", sorted(_variants()))
def test_live_collection_keeps_exactly_the_pods_plugin_health_recognises(case):
    """What live scan keeps as a plugin pod and what the analysis calls one never differ:
    a plugin the collector dropped would read as 'no plugin on this node'."""
    from dradiag.sources.live_plan import is_kubelet_plugin_pod

    pod, expected = _variants()[case]
    assert is_plugin_pod(pod) is expected
    assert is_kubelet_plugin_pod(pod) is expected
