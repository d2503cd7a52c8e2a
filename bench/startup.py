"""Start-up time of `dradiag --help` (target: median < 0.25 s wall over 10 runs).

Run by hand: `python bench/startup.py [--runs N]`. Uses the `dradiag` console script
next to this interpreter, so it measures what a user runs, not an import in-process.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.25


def _script() -> str:
    local = Path(sys.executable).parent / "dradiag"
    found = str(local) if local.exists() else shutil.which("dradiag")
    if not found:
        sys.exit("dradiag is not installed in this environment (pip install .)")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    script = _script()
    for argv in (["--help"], ["version"]):
        subprocess.run([script, *argv], capture_output=True, check=True)  # warm the caches
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run([script, *argv], capture_output=True, check=True)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        verdict = "ok" if median < TARGET_S else "OVER TARGET"
        print(
            f"dradiag {' '.join(argv):<8} median {median * 1000:6.1f} ms "
            f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}, n={args.runs}) "
            f"target < {TARGET_S * 1000:.0f} ms: {verdict}"
        )


if __name__ == "__main__":
    main()
