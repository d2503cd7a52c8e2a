"""Benchmark: ``dradiag scan -A`` against node count, in two shapes, to show its growth.

For each node count (default 250, 500, 1,000, 2,000, 5,000) it writes the snapshot of
``bench/diagnose.py`` scaled to that size (eight GPUs and 20 claims per node, 40 % of
them allocated and running, two events per claim) and times, in fresh processes:

- the full decode ``scan`` starts with (``sources.manifests.load_snapshot``), and
- ``dradiag scan -A --from DIR -o json``, with its peak RSS and row count, and their
  ratio in wall time and in CPU time (the steadier one on a shared machine),

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
        # In a child: a scan child forked from a parent that built (or parsed) a large
        # object would count the parent's pages in its peak RSS.
        subprocess.run(
            [sys.executable, __file__, "--build", str(out), str(nodes), shape], check=True
        )
    return out


def _build(out: str, nodes: str, shape: str) -> None:
    _diagnose_bench().build(
        Path(out),
        int(nodes),
        claims_total=int(nodes) * CLAIMS_PER_NODE,
        events_total=int(nodes) * CLAIMS_PER_NODE * EVENTS_PER_CLAIM,
        plugin_labels=shape == "plugins",
    )


def _child(code: list[str], stdout: Path | None = None) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS KiB, exit code) of one fresh process, its stdout to
    ``stdout``. CPU time is the steadier measure on a shared machine.

    The output goes to a file, not through this process: a parent that read (and
    parsed) a 100 MB document grows, and the next child's peak RSS would count it.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    with open(stdout or os.devnull, "wb") as sink:
        t = time.perf_counter()
        proc = subprocess.Popen(code, stdout=sink, stderr=subprocess.DEVNULL, env=env)
        _pid, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def _rows(path: Path) -> int:
    """The number of items in the scan document at ``path``, counted in a child."""
    count = "import json, sys; print(len(json.load(open(sys.argv[1]))['items']))"
    done = subprocess.run(
        [sys.executable, "-c", count, str(path)], capture_output=True, text=True, check=False
    )
    return int(done.stdout) if done.returncode == 0 and done.stdout.strip() else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/dradiag-bench-scan")
    parser.add_argument("--nodes", default="250,500,1000,2000,5000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--timeout", type=float, default=900.0, help="per scan run, seconds")
    parser.add_argument("--build", nargs=3, help=argparse.SUPPRESS)  # OUT NODES SHAPE
    args = parser.parse_args()
    if args.build:
        _build(*args.build)
        return
    root = Path(args.out)
    exe = str(Path(sys.executable).with_name("dradiag"))
    decode = (
        "import sys, gc; gc.disable(); from dradiag.sources.manifests import load_snapshot; "
        "load_snapshot(sys.argv[1])"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        f"{'shape':<13}{'nodes':>7}{'claims':>9}{'decode s':>10}{'scan s':>9}"
        f"{'scan/decode':>12}{'CPU ratio':>10}{'ms/node':>9}{'RSS MiB':>9}{'rows':>7}"
        f"{'exit':>5}"
    )
    for shape in args.shapes.split(","):
        for nodes in (int(n) for n in args.nodes.split(",")):
            snap = _snapshot(root, nodes, shape)
            dec, dec_cpu, _rss, _code = _child([sys.executable, "-c", decode, str(snap)])
            document = root / f"{shape}-{nodes}.scan.json"
            try:
                wall, cpu, rss, code = _child(
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
                    ],
                    document,
                )
            except OSError as exc:  # pragma: no cover - no `timeout` binary
                print(f"{shape:<13}{nodes:>7}  failed: {exc}")
                continue
            rows = _rows(document) if code in (0, 1, 4) else -1
            document.unlink(missing_ok=True)
            print(
                f"{shape:<13}{nodes:>7}{nodes * CLAIMS_PER_NODE:>9}{dec:>10.2f}{wall:>9.2f}"
                f"{wall / dec:>12.2f}{cpu / dec_cpu:>10.2f}{wall * 1000 / nodes:>9.2f}"
                f"{rss / 1024:>9.0f}{rows:>7}{code:>5}",
                flush=True,
            )


if __name__ == "__main__":
    main()
