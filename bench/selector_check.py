"""Benchmark: `dradiag selector-check` on a device fleet, against a bare JSON parse of the same file.

Generates ``kubectl get resourceslices -o json`` for 1,000 nodes × 8 H100 80GB in the
DynamicMIG split model (nvidia-driver-facts §1.5, §9.3: a counters slice per node, then
one devices slice per GPU; 20 devices per GPU: the full GPU and 19 partitions), then
prints in one run:

- the time to parse the file with the fastest JSON parser available (orjson, with the
  cyclic GC paused as a fast loader would), in a fresh process;
- the time for ``dradiag selector-check TEMPLATE --slices FILE -o json`` on a template
  with two requests, in a fresh process;
- the ratio of the two (target ≤ 2), and each process's peak RSS against the file size
  (target ≤ 3×).

``--case distinct`` measures the case memoization cannot help: 100,000 full GPUs
(``--devices``), every one distinct in what the selector reads (its own ``uuid``,
``serial`` and ``pciBusID``), checked with ``selector-check --expr`` on an expression that
reads the ``uuid``; the time then goes into converting and evaluating each device.

Wall and CPU time are both shown, with the load average before and after: on a shared
machine the wall ratio moves with other people's work, the CPU ratio much less.
``--repeat N`` keeps the fastest of N runs of each side.

Run by hand: ``.venv/bin/python bench/selector_check.py [--case fleet|distinct]
[--nodes 1000] [--devices 100000] [--keep DIR] [--repeat N]``.
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

# (profile, GI profile id, placements, slices, memory, SMs, copy engines, decoders, jpeg, ofa)
PROFILES = [
    ("1g.10gb", 19, range(7), 1, "10Gi", 16, 1, 1, 1, 0),
    ("1g.10gb+me", 20, [0], 1, "10Gi", 16, 1, 1, 1, 1),
    ("1g.20gb", 15, [0, 2, 4, 6], 2, "20Gi", 16, 1, 1, 1, 0),
    ("2g.20gb", 14, [0, 2, 4], 2, "20Gi", 32, 2, 2, 2, 0),
    ("3g.40gb", 9, [0, 4], 4, "40Gi", 48, 3, 3, 3, 0),
    ("4g.40gb", 5, [0], 4, "40Gi", 64, 4, 4, 4, 0),
    ("7g.80gb", 0, [0], 8, "80Gi", 112, 8, 7, 7, 1),
]

TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bench, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: pair
        exactly:
          deviceClassName: mig.nvidia.com
          count: 2
          selectors:
          - cel:
              expression: >-
                device.attributes['gpu.nvidia.com'].profile == '1g.10gb' &&
                device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.0.0')) >= 0
      - name: full
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel:
              expression: >-
                device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100') &&
                device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0
      constraints:
      - requests: [pair]
        matchAttribute: gpu.nvidia.com/parentUUID
"""


def _attributes(gpu: int, device_type: str, uuid: str) -> dict[str, object]:
    attrs: dict[str, object] = {
        "architecture": {"string": "Hopper"},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.126.20"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + gpu * 0x10:02x}:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{0x10 + gpu * 0x10:02x}"},
        "type": {"string": device_type},
    }
    attrs["uuid" if device_type == "gpu" else "parentUUID"] = {"string": uuid}
    return attrs


def _capacity(ce: int, dec: int, jpg: int, mem: str, sm: int, ofa: int) -> dict[str, object]:
    return {
        "copyEngines": {"value": str(ce)},
        "decoders": {"value": str(dec)},
        "encoders": {"value": "0"},
        "jpegEngines": {"value": str(jpg)},
        "memory": {"value": mem},
        "multiprocessors": {"value": str(sm)},
        "ofaEngines": {"value": str(ofa)},
    }


def _counters(
    ce: int, dec: int, jpg: int, mem: str, sm: int, ofa: int, slices: range
) -> dict[str, object]:
    out: dict[str, object] = {
        "copy-engines": {"value": str(ce)},
        "decoders": {"value": str(dec)},
        "encoders": {"value": "0"},
        "jpeg-engines": {"value": str(jpg)},
        "memory": {"value": mem},
        "multiprocessors": {"value": str(sm)},
        "ofa-engines": {"value": str(ofa)},
    }
    for i in slices:
        out[f"memory-slice-{i}"] = {"value": "1"}
    return out


def generate(path: Path, nodes: int, gpus: int = 8) -> int:
    """Write the fleet file; return its device count."""
    devices_total = 0
    with path.open("w") as out:
        out.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        first = True
        for n in range(nodes):
            node = f"node-{n:04d}"
            pool = {"name": node, "generation": 1, "resourceSliceCount": gpus + 1}
            items = [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"00000-gpu.nvidia.com-{node}-4lpks"},
                    "spec": {
                        "driver": "gpu.nvidia.com",
                        "nodeName": node,
                        "pool": pool,
                        "sharedCounters": [
                            {
                                "name": f"gpu-{g}-counter-set",
                                "counters": _counters(8, 7, 7, "80Gi", 112, 1, range(8)),
                            }
                            for g in range(gpus)
                        ],
                    },
                }
            ]
            for g in range(gpus):
                uuid = f"GPU-{n:08x}-{g:04x}-4000-8000-{n * gpus + g:012x}"
                devices = [
                    {
                        "name": f"gpu-{g}",
                        "attributes": _attributes(g, "gpu", uuid),
                        "capacity": _capacity(8, 7, 7, "80Gi", 112, 1),
                        "consumesCounters": [
                            {
                                "counterSet": f"gpu-{g}-counter-set",
                                "counters": _counters(8, 7, 7, "80Gi", 112, 1, range(8)),
                            }
                        ],
                    }
                ]
                for prof, gid, starts, size, mem, sm, ce, dec, jpg, ofa in PROFILES:
                    for start in starts:
                        attrs = _attributes(g, "mig", uuid)
                        attrs["profile"] = {"string": prof}
                        name = prof.replace(".", "").replace("+", "-")
                        devices.append(
                            {
                                "name": f"gpu-{g}-mig-{name}-{gid}-{start}",
                                "attributes": attrs,
                                "capacity": _capacity(ce, dec, jpg, mem, sm, ofa),
                                "consumesCounters": [
                                    {
                                        "counterSet": f"gpu-{g}-counter-set",
                                        "counters": _counters(
                                            ce, dec, jpg, mem, sm, ofa, range(start, start + size)
                                        ),
                                    }
                                ],
                            }
                        )
                devices_total += len(devices)
                items.append(
                    {
                        "apiVersion": "resource.k8s.io/v1",
                        "kind": "ResourceSlice",
                        "metadata": {"name": f"{g + 1:05x}-gpu.nvidia.com-{node}-9qz7m"},
                        "spec": {
                            "driver": "gpu.nvidia.com",
                            "nodeName": node,
                            "pool": pool,
                            "devices": devices,
                        },
                    }
                )
            for item in items:
                out.write(("" if first else ",\n") + json.dumps(item, separators=(",", ":")))
                first = False
        out.write("\n]}\n")
    return devices_total


DISTINCT_EXPR = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-0000')"


def generate_distinct(path: Path, devices: int, gpus: int = 8) -> int:
    """Write a fleet of full GPUs, each with its own uuid, serial and PCI address."""
    nodes = max(1, devices // gpus)
    with path.open("w") as out:
        out.write('{"apiVersion": "v1", "kind": "List", "items": [\n')
        for n in range(nodes):
            node = f"node-{n:05d}"
            slice_devices = []
            for g in range(gpus):
                i = n * gpus + g
                attrs = _attributes(g, "gpu", f"GPU-{n:08x}-{g:04x}-4000-8000-{i:012x}")
                attrs["serial"] = {"string": f"{1_650_000_000_000 + i}"}
                attrs["resource.kubernetes.io/pciBusID"] = {
                    "string": f"{n // 256:04x}:{n % 256:02x}:{g:02x}.0"
                }
                attrs["index"] = {"int": g}
                slice_devices.append(
                    {
                        "name": f"gpu-{g}",
                        "attributes": attrs,
                        "capacity": _capacity(8, 7, 7, "80Gi", 132, 1),
                    }
                )
            item = {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-gpu.nvidia.com-x7k2p"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": slice_devices,
                },
            }
            out.write(("" if n == 0 else ",\n") + json.dumps(item, separators=(",", ":")))
        out.write("\n]}\n")
    return nodes * gpus


_PARSE = """
import gc, resource, sys, time
import orjson
t, c = time.perf_counter(), time.process_time()
gc.disable()
data = open(sys.argv[1], "rb").read()
doc = orjson.loads(data)
elapsed, cpu = time.perf_counter() - t, time.process_time() - c
print(elapsed, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""

_CHECK = """
import io, resource, sys, time
from contextlib import redirect_stdout
t, c = time.perf_counter(), time.process_time()
from dradiag.cli.app import run
buffer = io.StringIO()
with redirect_stdout(buffer):
    args = ["--expr", sys.argv[3]] if len(sys.argv) > 3 else [sys.argv[2]]
    code = run(["selector-check", *args, "--slices", sys.argv[1], "-o", "json"])
elapsed, cpu = time.perf_counter() - t, time.process_time() - c
print(elapsed, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, code,
      len(buffer.getvalue()))
"""


def _child(code: str, *args: str) -> list[float]:
    """One fresh process's printed figures.

    Bytecode caching is on, as for an installed package (pip compiles it at install
    time; bench/diagnose.py and bench/scan.py do the same); some environments set
    PYTHONDONTWRITEBYTECODE, which would charge every run the compilation of every
    module dradiag imports.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env
    )
    return [float(v) for v in done.stdout.split()]


def _best(code: str, repeat: int, *args: str) -> list[float]:
    """The run with the least wall time of ``repeat`` (the VM is shared: others' load)."""
    return min((_child(code, *args) for _ in range(repeat)), key=lambda r: r[0])


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--case",
        choices=["fleet", "distinct"],
        default="fleet",
        help="fleet: the DynamicMIG fleet and a claim template (memoization pays); "
        "distinct: every device distinct in what --expr reads (memoization cannot)",
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--devices", type=int, default=100_000, help="devices of --case distinct")
    parser.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each side N times, keep the fastest (wall)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        where.mkdir(parents=True, exist_ok=True)
        fleet = where / "fleet.json"
        template = where / "template.yaml"
        template.write_text(TEMPLATE)
        start = time.perf_counter()
        check_args = [str(fleet), str(template)]
        if args.case == "distinct":
            devices = generate_distinct(fleet, args.devices)
            check_args.append(DISTINCT_EXPR)
            what = f"--expr {DISTINCT_EXPR!r}"
        else:
            devices = generate(fleet, args.nodes)
            what = "2 requests"
        size = fleet.stat().st_size
        print(
            f"fleet ({args.case}): {devices} devices, {size / 2**20:.1f} MiB "
            f"(generated in {time.perf_counter() - start:.1f} s)"
        )
        print(f"before: {_load()}")
        parse_s, parse_cpu, parse_rss = _best(_PARSE, args.repeat, str(fleet))
        print(
            f"orjson.loads (fastest parser available, GC off): {parse_s:.2f} s wall, "
            f"{parse_cpu:.2f} s CPU, peak RSS {parse_rss / 2**20:.0f} MiB "
            f"({parse_rss / size:.1f}x file)"
        )
        check_s, check_cpu, check_rss, code, out_len = _best(_CHECK, args.repeat, *check_args)
        print(
            f"dradiag selector-check ({what}, -o json): {check_s:.2f} s wall, "
            f"{check_cpu:.2f} s CPU, exit {int(code)}, {int(out_len) / 2**10:.0f} KiB of JSON, "
            f"peak RSS {check_rss / 2**20:.0f} MiB ({check_rss / size:.1f}x file)"
        )
        print(f"after: {_load()}")
        print(
            f"ratio selector-check / parse: {check_s / parse_s:.2f} wall, "
            f"{check_cpu / parse_cpu:.2f} CPU (target <= 2); "
            f"RSS / file size: {check_rss / size:.2f} (target <= 3)"
        )


if __name__ == "__main__":
    main()
