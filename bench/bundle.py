"""``dradiag bundle -A`` of the 5,000-node fleet through the local API server (issue 12).

The fleet is ``bench/collect.py``'s: 5,000 nodes with a slice of 8 GPUs and a
kubelet-plugin pod each (a short log each), 10,000 system pods that use no claim, and
10,001 claims with their pods. Prints, for the bundle run: wall and CPU time, requests
(all GET), archive size and members, peak RSS; then ``claim --from`` the bundle and
``scan --from`` the bundle, as a maintainer would run them.

Run by hand: ``python bench/bundle.py [--nodes 5000] [--gpus 8] [--claims-per-node 2]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from collect import TARGET_NS, _run, fleet  # noqa: E402
from kube_api.server import KubeAPIServer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--claims-per-node", type=int, default=2)
    args = parser.parse_args()

    t0 = time.perf_counter()
    objects, logs = fleet(args.nodes, args.gpus, args.claims_per_node)
    server = KubeAPIServer(objects, logs).start()
    print(
        f"fleet: {args.nodes} nodes x {args.gpus} GPUs, {len(objects)} objects, "
        f"{len(logs)} plugin logs (built and served in {time.perf_counter() - t0:.1f}s)"
    )
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    script = str(Path(sys.executable).parent / "dradiag")
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = server.write_kubeconfig(Path(tmp) / "kubeconfig")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": tmp}
        archive = Path(tmp) / "bundle.tar.gz"
        server.clear_requests()
        code, wall, cpu, rss, err = _run(
            [
                script,
                "bundle",
                "-A",
                "-o",
                str(archive),
                "--request-timeout",
                "60",
                "--timeout",
                "900",
            ],
            env,
            1200,
        )
        requests = len(server.requests)
        methods = "/".join(sorted(server.methods()))
        if code != 0:
            print(f"bundle failed: exit {code}: {err}")
            sys.exit(1)
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
        unpacked = sum(m.size for m in members)
        size = archive.stat().st_size
        print(
            f"dradiag bundle -A: exit {code}, {requests} requests ({methods}), {wall:.1f}s wall, "
            f"{cpu:.1f}s CPU, peak RSS {rss} MiB; archive {size / 2**20:.1f} MiB "
            f"({unpacked / 2**20:.1f} MiB unpacked, {len(members)} members)"
        )
        for argv in (
            ["claim", f"{TARGET_NS}/target-gpu", "--from", str(archive), "-o", "json"],
            ["scan", "--from", str(archive), "-o", "json"],
        ):
            code, wall, cpu, rss, err = _run([script, *argv], env, 1200)
            print(
                f"dradiag {argv[0]} --from bundle: exit {code}, {wall:.1f}s wall, {cpu:.1f}s CPU, "
                f"peak RSS {rss} MiB"
            )
    server.stop()


if __name__ == "__main__":
    main()
