"""Benchmark: ``dradiag scan -A`` against node count, in two shapes, to show its growth.

For each node count (default 250, 500, 1,000, 2,000, 5,000) it writes the snapshot of
``bench/diagnose.py`` scaled to that size (eight GPUs and 20 claims per node, 40 % of
them allocated and running, two events per claim) and times, in fresh processes:

- the full decode ``scan`` starts with (``sources.manifests.load_snapshot``), and
- ``dradiag scan -A --from DIR -o json``, with its peak RSS and row count,

in two shapes: ``plugins`` (every node's kubelet-plugin pod is recognised) and
``unrecognised`` (the plugin pods carry labels, names and containers nothing
recognises, so every node's plugin look-up comes back empty, the shape that once made
scan quadratic in nodes × pods). Time per node should stay flat as the count grows;
the target (issue 15 §5) is scan ≤ 2× the decode and ≤ 1 GiB peak RSS at 5,000 nodes.
Run by hand, not in CI::

    .venv/bin/python bench/scan.py [--out /tmp/dradiag-bench-scan] [--nodes 250,500,1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

CLAIMS_PER_NODE = 20
EVENTS_PER_CLAIM = 2
SHAPES = ("plugins", "unrecognised")


def _diagnose_bench() -> ModuleType:
    path = Path(__file__).with_name("diagnose.py")
    spec = importlib.util.spec_from_file_location("dradiag_bench_diagnose", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _snapshot(root: Path, nodes: int, shape: str) -> Path:
    out = root / f"{shape}-{nodes}"
    marker = out / ".complete"
    if not marker.exists():
        _diagnose_bench().build(
            out,
            nodes,
            claims_total=nodes * CLAIMS_PER_NODE,
            events_total=nodes * CLAIMS_PER_NODE * EVENTS_PER_CLAIM,
            plugin_labels=shape == "plugins",
        )
    return out


def _child(code: list[str]) -> tuple[float, int, int, bytes]:
    """(wall s, peak RSS KiB, exit code, stdout) of one fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    t = time.perf_counter()
    proc = subprocess.Popen(code, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    stdout = proc.stdout.read() if proc.stdout else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t, usage.ru_maxrss, os.waitstatus_to_exitcode(status), stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/dradiag-bench-scan")
    parser.add_argument("--nodes", default="250,500,1000,2000,5000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--timeout", type=float, default=900.0, help="per scan run, seconds")
    args = parser.parse_args()
    root = Path(args.out)
    exe = str(Path(sys.executable).with_name("dradiag"))
    decode = (
        "import sys, gc; gc.disable(); from dradiag.sources.manifests import load_snapshot; "
        "load_snapshot(sys.argv[1])"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'shape':<13}{'nodes':>7}{'claims':>9}{'decode s':>10}{'scan s':>9}"
        f"{'scan/decode':>12}{'ms/node':>9}{'RSS MiB':>9}{'rows':>7}{'exit':>5}"
    )
    for shape in args.shapes.split(","):
        for nodes in (int(n) for n in args.nodes.split(",")):
            snap = _snapshot(root, nodes, shape)
            dec, _rss, _code, _out = _child([sys.executable, "-c", decode, str(snap)])
            try:
                wall, rss, code, stdout = _child(
                    [
                        "timeout",
                        str(args.timeout),
                        exe,
                        "scan",
                        "-A",
                        "--from",
                        str(snap),
                        "-o",
                        "json",
                    ]
                )
            except OSError as exc:  # pragma: no cover - no `timeout` binary
                print(f"{shape:<13}{nodes:>7}  failed: {exc}")
                continue
            rows = len(json.loads(stdout)["items"]) if code in (0, 1, 4) and stdout else -1
            print(
                f"{shape:<13}{nodes:>7}{nodes * CLAIMS_PER_NODE:>9}{dec:>10.2f}{wall:>9.2f}"
                f"{wall / dec:>12.2f}{wall * 1000 / nodes:>9.2f}{rss / 1024:>9.0f}{rows:>7}{code:>5}",
                flush=True,
            )


if __name__ == "__main__":
    main()
