"""Benchmark: ``dradiag claim`` on one claim of a 5,000-node / 40,000-GPU snapshot file.

Builds (once, cached under the output directory) a snapshot of 5,000 GPU nodes with
eight A100s each (one legacy-mode slice per node, nvidia-driver-facts §9.1), one
kubelet-plugin pod per node, 100,000 ResourceClaims (40,000 allocated and reserved for
running pods, the rest pending with pending pods) and 200,000 events, written as one
JSON ``List`` per kind with the fastest serializer available (orjson). Then it times:

- load, as ``claim`` does it: ``sources.manifests.load_snapshot(defer=True)`` reads the
  files and splits each list without decoding it (``sources/json_lists.py``);
- analysis: ``diagnosis.build.diagnose_claim`` on a broken claim (Prepare failing) and on
  a healthy one, decoding what its look-ups need, plus rendering the JSON document;
- for reference, the whole-snapshot load ``scan`` and ``inventory`` do;
- the whole CLI, ``dradiag claim NS/NAME --from DIR -o json``, in a fresh process (median
  of five, after a warm-up run), with its peak RSS.

Target (issue #6): ≤ 2 s wall for the CLI run. Run by hand, not in CI::

    .venv/bin/python bench/diagnose.py [--out /tmp/dradiag-bench] [--nodes 5000]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GPUS_PER_NODE = 8
CLAIMS = 100_000
EVENTS = 200_000
BROKEN_CLAIM = ("team-0", "claim-50")


def _dumps(obj: Any) -> bytes:
    try:
        import orjson

        return bytes(orjson.dumps(obj))
    except ImportError:  # pragma: no cover - orjson is a dependency
        return json.dumps(obj, separators=(",", ":")).encode()


def _node(i: int) -> str:
    return f"gpu-node-{i:05d}"


def _gpu(node_index: int, minor: int) -> dict[str, Any]:
    bus = f"0000:{(minor * 16 + 0x1B) % 256:02x}:00.0"
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "architecture": {"string": "Ampere"},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"},
            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
            "resource.kubernetes.io/pciBusID": {"string": bus},
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{node_index:08x}-{minor:04x}-4a5b-8c9d-0e1f2a3b4c5d"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def build(
    out: Path,
    nodes: int,
    *,
    claims_total: int = CLAIMS,
    events_total: int = EVENTS,
    plugin_labels: bool = True,
) -> None:
    """Write the snapshot directory (one JSON List per kind, plus collection.json).

    ``bench/scan.py`` scales claims and events with the node count, and with
    ``plugin_labels=False`` writes plugin pods that nothing recognises as such (a
    relabelled DaemonSet), the shape where every node's plugin look-up finds nothing.
    """
    out.mkdir(parents=True, exist_ok=True)
    collected_at = "2026-05-01T12:00:00Z"
    node_objs, slices, plugins = [], [], []
    for i in range(nodes):
        name = _node(i)
        node_objs.append(
            {
                "metadata": {
                    "name": name,
                    "uid": f"node-{i}",
                    "labels": {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": name},
                },
                "status": {"nodeInfo": {"kubeletVersion": "v1.34.2"}},
            }
        )
        slices.append(
            {
                "metadata": {"name": f"00000-gpu.nvidia.com-{name}-x7k2q"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": [_gpu(i, m) for m in range(GPUS_PER_NODE)],
                },
            }
        )
        plugins.append(
            {
                "metadata": {
                    "name": f"dra-driver-nvidia-gpu-kubelet-plugin-{i:05x}"
                    if plugin_labels
                    else f"gpu-plugin-{i:05x}",
                    "namespace": "dra-driver-nvidia-gpu",
                    "uid": f"plugin-{i}",
                    "labels": {"dra-driver-nvidia-gpu-component": "kubelet-plugin"}
                    if plugin_labels
                    else {"app": "gpu-plugin"},
                },
                "spec": {"nodeName": name, "containers": [{"name": "gpus"}]}
                if plugin_labels
                else {"nodeName": name, "containers": [{"name": "plugin"}]},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "gpus",
                            "ready": True,
                            "restartCount": 0,
                            "state": {"running": {"startedAt": "2026-05-01T08:00:00Z"}},
                        }
                    ],
                },
            }
        )
    total_gpus = nodes * GPUS_PER_NODE
    claims, pods, events = [], [], []
    for c in range(claims_total):
        ns = f"team-{c % 50}"
        name = f"claim-{c}"
        claim_uid = f"c{c:07d}-0000-4000-8000-000000000000"
        pod_uid = f"p{c:07d}-0000-4000-8000-000000000000"
        pod_name = f"job-{c}"
        claim: dict[str, Any] = {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": claim_uid,
                "creationTimestamp": "2026-05-01T10:00:00Z",
            },
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            },
            "status": {},
        }
        pod: dict[str, Any] = {
            "metadata": {
                "name": pod_name,
                "namespace": ns,
                "uid": pod_uid,
                "creationTimestamp": "2026-05-01T10:00:00Z",
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            },
            "status": {"phase": "Pending"},
        }
        if c < total_gpus:
            node = _node(c // GPUS_PER_NODE)
            claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
            claim["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.nvidia.com",
                                "pool": node,
                                "device": f"gpu-{c % GPUS_PER_NODE}",
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
                "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
            }
            pod["spec"]["nodeName"] = node
            running = (ns, name) != BROKEN_CLAIM
            pod["status"] = {
                "phase": "Running" if running else "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-05-01T10:00:05Z",
                    }
                ],
                "containerStatuses": [
                    {
                        "name": "main",
                        "ready": running,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-05-01T10:01:00Z"}}
                        if running
                        else {"waiting": {"reason": "ContainerCreating"}},
                    }
                ],
            }
        claims.append(claim)
        pods.append(pod)
    pods += plugins
    broken_ns, broken_name = BROKEN_CLAIM
    broken_index = int(broken_name.split("-")[1])
    for e in range(events_total):
        c = e % claims_total
        ns = f"team-{c % 50}"
        reason, message, etype = (
            (
                "Scheduled",
                f"Successfully assigned {ns}/job-{c} to {_node(c // GPUS_PER_NODE)}",
                "Normal",
            )
            if e < claims_total
            else ("Started", "Started container main", "Normal")
        )
        if c == broken_index and e >= claims_total:
            reason, etype = "FailedPrepareDynamicResources", "Warning"
            message = (
                "Failed to prepare dynamic resources: prepare dynamic resources: "
                f"NodePrepareResources failed for ResourceClaim {broken_name}: error preparing "
                f"devices for claim {broken_ns}/{broken_name}:c{broken_index:07d}-0000-4000-8000-"
                '000000000000: prepare devices failed: allocatable not found for device "gpu-7"'
            )
        events.append(
            {
                "metadata": {"name": f"job-{c}.{e:x}", "namespace": ns},
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": ns,
                    "name": f"job-{c}",
                    "uid": f"p{c:07d}-0000-4000-8000-000000000000",
                },
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1,
                "firstTimestamp": "2026-05-01T10:00:05Z",
                "lastTimestamp": "2026-05-01T11:59:00Z",
            }
        )
    files = {
        "nodes.json": ("v1", "NodeList", node_objs),
        "resourceslices.json": ("resource.k8s.io/v1", "ResourceSliceList", slices),
        "deviceclasses.json": (
            "resource.k8s.io/v1",
            "DeviceClassList",
            [
                {
                    "metadata": {"name": "gpu.nvidia.com"},
                    "spec": {
                        "selectors": [
                            {
                                "cel": {
                                    "expression": "device.driver == 'gpu.nvidia.com' && "
                                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                                }
                            }
                        ]
                    },
                }
            ],
        ),
        "resourceclaims.json": ("resource.k8s.io/v1", "ResourceClaimList", claims),
        "pods.json": ("v1", "PodList", pods),
        "events.json": ("v1", "EventList", events),
    }
    for file, (api, kind, items) in files.items():
        (out / file).write_bytes(_dumps({"apiVersion": api, "kind": kind, "items": items}))
    (out / "collection.json").write_bytes(
        _dumps(
            {
                "kinds": {
                    k: {"coverage": "collected"}
                    for k in (
                        "ResourceSlice",
                        "DeviceClass",
                        "ResourceClaim",
                        "Pod",
                        "Node",
                        "Event",
                    )
                },
                "source": {"kind": "bundle", "collectedAt": collected_at, "context": "bench"},
            }
        )
    )
    (out / ".complete").write_text(f"{nodes} {BROKEN_CLAIM}")


def _cli(argv: list[str]) -> tuple[float, float, int, int, bytes]:
    """(wall s, CPU s, peak RSS KiB, exit code, stdout) of one fresh ``dradiag`` process.

    Run before this process loads anything large: a child's peak RSS counts what it
    inherited at fork.

    Bytecode caching is on, as for an installed package (pip compiles it at install
    time); some environments set PYTHONDONTWRITEBYTECODE, which would charge every run
    the compilation of every module it imports.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    exe = Path(sys.executable).with_name("dradiag")
    t = time.perf_counter()
    proc = subprocess.Popen(
        [str(exe), *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    stdout = proc.stdout.read() if proc.stdout else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss, proc.returncode, stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/dradiag-bench-diagnose")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5, help="CLI runs to take the median of")
    parser.add_argument("--profile", action="store_true", help="profile the in-process run")
    parser.add_argument(
        "--scan", action="store_true", help="also time `dradiag scan -A` over the whole snapshot"
    )
    args = parser.parse_args()
    out = Path(args.out)
    marker = out / ".complete"
    if not marker.exists() or marker.read_text() != f"{args.nodes} {BROKEN_CLAIM}":
        t = time.perf_counter()
        build(out, args.nodes)
        print(f"built {out} in {time.perf_counter() - t:.1f} s")
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"snapshot: {args.nodes} nodes, {args.nodes * GPUS_PER_NODE} GPUs, {CLAIMS} claims, "
        f"{EVENTS} events, {size / 1e6:.0f} MB of JSON"
    )

    argv = ["claim", "/".join(BROKEN_CLAIM), "--from", str(out), "-o", "json"]
    _cli(argv)  # warm-up: the page cache and the bytecode cache
    runs = sorted(_cli(argv) for _ in range(args.runs))
    wall, cpu, _rss, code, stdout = runs[len(runs) // 2]
    rss = max(r[2] for r in runs)
    verdict = json.loads(stdout)["verdict"] if stdout else {}
    print(
        f"CLI `dradiag claim {'/'.join(BROKEN_CLAIM)} --from <dir> -o json` (median of "
        f"{len(runs)}): {wall:.2f} s wall, {cpu:.2f} s CPU, peak RSS {rss / 1024:.0f} MiB, "
        f"exit {code}, verdict {verdict.get('phase')} {verdict.get('rule')} (target ≤ 2 s)"
    )

    from dradiag.diagnosis.build import diagnose_claim
    from dradiag.render.document import collection_of, diagnosis_document, dump_document
    from dradiag.sources.manifests import load_snapshot

    # As the CLI runs `claim`: lists split, not decoded (sources/json_lists.py); the
    # analysis decodes what its look-ups need, so its time includes that decoding.
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    t0, cpu0 = time.perf_counter(), time.process_time()
    snapshot = load_snapshot(str(out), defer=True)
    t1, cpu1 = time.perf_counter(), time.process_time()
    broken = diagnose_claim(snapshot, *BROKEN_CLAIM)
    t2 = time.perf_counter()
    healthy = diagnose_claim(snapshot, "team-1", "claim-1")
    t3 = time.perf_counter()
    dump_document(diagnosis_document(broken, snapshot.source, collection_of(snapshot)), "json")
    t4 = time.perf_counter()
    if profiler:
        profiler.disable()
    decoded = ", ".join(
        f"{kind.value} {done}/{total}" for kind, (done, total) in snapshot.undecoded.items()
    )
    print(f"load (read, split): {t1 - t0:.2f} s wall, {cpu1 - cpu0:.2f} s CPU")
    print(
        f"analysis, broken claim {'/'.join(BROKEN_CLAIM)}: {(t2 - t1) * 1000:.0f} ms "
        f"-> {broken.verdict.status.value} {broken.verdict.phase} {broken.verdict.rule}"
    )
    print(
        f"analysis, healthy claim team-1/claim-1: {(t3 - t2) * 1000:.0f} ms "
        f"-> {healthy.verdict.status.value}"
    )
    print(f"render JSON document: {(t4 - t3) * 1000:.0f} ms")
    print(f"decoded of the deferred kinds: {decoded or 'everything'}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    del snapshot

    import gc

    gc.collect()
    gc.disable()
    t0 = time.perf_counter()
    load_snapshot(str(out))
    print(f"for reference, decoding everything (scan, inventory): {time.perf_counter() - t0:.2f} s")
    gc.enable()

    if args.scan:
        wall, cpu, rss, code, stdout = _cli(["scan", "-A", "--from", str(out), "-o", "json"])
        rows = len(json.loads(stdout)["items"]) if stdout else 0
        print(
            f"CLI `dradiag scan -A --from <dir> -o json`: {wall:.1f} s wall, {cpu:.1f} s CPU, "
            f"{rows} unhealthy rows, exit {code}"
        )


if __name__ == "__main__":
    main()
