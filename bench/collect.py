"""Live collection against a 5,000-node fleet on the local API server (issue #7 targets).

Targets: ``dradiag claim NS/NAME`` makes at most 12 requests (discovery included) and
finishes in at most 2 s; a whole-cluster run (``dradiag scan -A``) pages through
everything (500 per page) with bounded memory. Prints request counts, wall time and
peak RSS of each run.

Run by hand: ``python bench/collect.py [--nodes 5000] [--gpus 8] [--claims-per-node 2]``.
The server runs in this process (a thread); each dradiag run is a separate process
using the ``dradiag`` console script next to this interpreter, so wall time includes
start-up, as a user sees it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from kube_api.server import KubeAPIServer  # noqa: E402

from dradiag.snapshot.model import ContainerLog  # noqa: E402

CLAIM_TARGET_REQUESTS = 12
CLAIM_TARGET_SECONDS = 2.0
PLUGIN_NS = "dra-driver-nvidia-gpu"
TARGET_NS = "bench"


def _gpu(node: int, minor: int) -> dict[str, Any]:
    bus = f"0000:{0x18 + minor * 0x10:02x}:00.0"
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "architecture": {"string": "Hopper"},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "resource.kubernetes.io/pciBusID": {"string": bus},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{minor // 4:02x}"},
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{node:08x}-{minor:04x}-4000-8000-{node * 8 + minor:012x}"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def fleet(
    nodes: int, gpus: int, claims_per_node: int
) -> tuple[list[dict[str, Any]], list[ContainerLog]]:
    """Nodes, one slice and one kubelet-plugin pod each, claims and pods holding GPUs."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu.nvidia.com"},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                        }
                    }
                ]
            },
        }
    ]
    logs: list[ContainerLog] = []
    for n in range(nodes):
        node = f"gpu-node-{n:05d}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "labels": {"kubernetes.io/hostname": node, "nvidia.com/gpu.present": "true"},
                },
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"00000-gpu.nvidia.com-{node}-x{n:04x}"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [_gpu(n, m) for m in range(gpus)],
                },
            }
        )
        plugin = f"dra-driver-nvidia-gpu-kubelet-plugin-{n:05x}"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": plugin,
                    "namespace": PLUGIN_NS,
                    "labels": {"dra-driver-nvidia-gpu-component": "kubelet-plugin"},
                },
                "spec": {
                    "nodeName": node,
                    "containers": [
                        {
                            "name": "gpus",
                            "image": "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.0",
                        }
                    ],
                },
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "gpus",
                            "ready": True,
                            "restartCount": 0,
                            "state": {"running": {"startedAt": "2026-07-01T00:00:00Z"}},
                        }
                    ],
                },
            }
        )
        logs.append(
            ContainerLog(
                namespace=PLUGIN_NS,
                pod=plugin,
                container="gpus",
                text="I0701 00:00:01.000000       1 nvlib.go:173] Traverse GPU devices\n"
                + "".join(
                    f"I0701 00:00:01.{m:06d}       1 nvlib.go:201] Adding device gpu-{m} to allocatable devices\n"
                    for m in range(gpus)
                ),
            )
        )
        for system in ("kube-proxy", "node-exporter"):
            # Per-node DaemonSet pods that use no claim: paged through, dropped page by page.
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{system}-{n:05x}",
                        "namespace": "kube-system",
                        "labels": {"k8s-app": system},
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {"name": system, "image": f"registry.k8s.io/{system}:v1.34.1"}
                        ],
                    },
                    "status": {"phase": "Running"},
                }
            )
        for c in range(claims_per_node):
            ns = f"team-{(n * claims_per_node + c) % 20:02d}"
            name = f"job-{n:05d}-{c}"
            objects += _claim_and_pod(ns, name, node, f"gpu-{c % gpus}")
    target_node = f"gpu-node-{nodes // 2:05d}"
    objects += _claim_and_pod(TARGET_NS, "target", target_node, f"gpu-{gpus - 1}")
    return objects, logs


def _claim_and_pod(ns: str, name: str, node: str, device: str) -> list[dict[str, Any]]:
    uid = f"{abs(hash((ns, name))):032x}"[:32]
    pod_uid = f"{abs(hash((ns, name, 'pod'))):032x}"[:32]
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": f"{name}-gpu",
            "namespace": ns,
            "uid": uid,
            "creationTimestamp": "2026-07-22T02:20:00Z",
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": node,
                            "device": device,
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": name, "uid": pod_uid}],
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": pod_uid},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}],
        },
        "status": {"phase": "Running"},
    }
    return [claim, pod]


_COLLECT_ONLY = """
from dradiag.cli.inputs import Target
from dradiag.cli.options import CommonOptions
from dradiag.sources.live import collect_snapshot
snap = collect_snapshot(CommonOptions(), Target(kind="cluster"))
assert len(snap.slices) > 0
"""
"""A whole-cluster collection with no analysis after it: what the live source holds."""

_MEASURE = """
import json, resource, subprocess, sys
code = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=open(sys.argv[1], "w"))
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss}))
"""
"""Runs the command from a small interpreter, so its peak RSS is its own: a child forked
straight from this process (which holds the whole fleet) would count our pages too."""


def _run(
    argv: list[str], env: dict[str, str], timeout: float
) -> tuple[int, float, float, int, str]:
    """(exit code, wall s, CPU s, peak RSS MiB, stderr tail) of one dradiag run.

    CPU time (user + system) is reported beside wall time: on a shared, loaded machine
    wall time measures the neighbours as much as dradiag.
    """
    with tempfile.NamedTemporaryFile(mode="r") as err:
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", _MEASURE, err.name, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        wall = time.perf_counter() - started
        result = json.loads(out.stdout)
        tail = err.read()[-300:]
    return result["code"], wall, result["cpu"], result["rss"] // 1024, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--claims-per-node", type=int, default=2)
    parser.add_argument("--skip-scan", action="store_true", help="only the targeted claim run")
    args = parser.parse_args()

    t0 = time.perf_counter()
    objects, logs = fleet(args.nodes, args.gpus, args.claims_per_node)
    server = KubeAPIServer(objects, logs).start()
    build = time.perf_counter() - t0
    print(
        f"fleet: {args.nodes} nodes, {args.nodes} slices x {args.gpus} GPUs, {args.nodes} plugin pods, "
        f"{2 * args.nodes} system pods, "
        f"{args.nodes * args.claims_per_node + 1} claims and pods  (built and served in {build:.1f}s)"
    )
    script = str(Path(sys.executable).parent / "dradiag")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = server.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": tmp}
        ok = True

        for _run_kind in ("warm-up", "measured"):
            server.clear_requests()
            code, wall, cpu, rss, err = _run(
                [script, "claim", f"{TARGET_NS}/target-gpu", "-o", "json"], env, 60
            )
        requests = len(server.requests)
        methods = sorted(server.methods())
        claim_ok = (
            requests <= CLAIM_TARGET_REQUESTS and wall <= CLAIM_TARGET_SECONDS and code in (0, 1)
        )
        ok &= claim_ok
        print(
            f"dradiag claim {TARGET_NS}/target-gpu: exit {code}, {requests} requests ({'/'.join(methods)}), "
            f"{wall:.2f}s wall, {cpu:.2f}s CPU, peak RSS {rss} MiB  "
            f"[target <= {CLAIM_TARGET_REQUESTS} requests, <= {CLAIM_TARGET_SECONDS:.0f}s: {'PASS' if claim_ok else 'FAIL'}]"
        )
        if code not in (0, 1):
            print(f"  stderr: {err}")
        for r in server.requests:
            print(f"    GET {r.target[:150]}")

        if not args.skip_scan:
            server.clear_requests()
            code, wall, cpu, rss, err = _run([script, "scan", "-A", "-o", "json"], env, 600)
            pages = [r for r in server.requests if "limit" in r.query]
            served = sum(1 for r in pages if "continue" in r.query)
            scan_ok = code in (0, 1, 4) and server.methods() == {"GET"}
            total_mib = sum(r.size for r in server.requests) / 2**20
            largest_mib = max(r.size for r in server.requests) / 2**20
            ok &= scan_ok
            print(
                f"dradiag scan -A: exit {code}, {len(server.requests)} requests "
                f"({len(pages)} list pages, {served} of them continued), {wall:.2f}s wall, {cpu:.2f}s CPU, "
                f"peak RSS {rss} MiB; {total_mib:.1f} MiB of JSON served, largest page "
                f"{largest_mib:.1f} MiB  [{'PASS' if scan_ok else 'FAIL'}]"
            )
            if code not in (0, 1, 4):
                print(f"  stderr: {err}")
            # The collection alone (no analysis): what the live source holds.
            server.clear_requests()
            code, wall, cpu, rss, err = _run([sys.executable, "-c", _COLLECT_ONLY], env, 600)
            print(
                f"whole-cluster collection only: exit {code}, {len(server.requests)} requests, "
                f"{wall:.2f}s wall, {cpu:.2f}s CPU, peak RSS {rss} MiB"
            )
            if code != 0:
                print(f"  stderr: {err}")
    server.stop()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
