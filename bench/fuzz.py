"""Long fuzz run: N seeded mutations of every input fixture through claim, pod and scan.

The CI test (``tests/robustness/test_fuzz.py``) runs a bounded number; this runs as many
as asked and prints the crash count and rate, each crash with its replay line. Run by
hand::

    .venv/bin/python bench/fuzz.py [-n 20000] [--seed 1] [--case tests/fixtures/scenarios/X]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(_TESTS))

from robustness import mutator  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--mutations", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", action="append", help="only this case directory (repeatable)")
    parser.add_argument("--replay", type=int, metavar="SEED", help="rerun one seed of --case")
    args = parser.parse_args()
    if args.replay is not None:
        found = []
        for case in args.case or []:
            crashes = mutator.replay(case, args.replay)
            for crash in crashes:
                print(crash)
                print(crash.stderr)
            if not crashes:
                print(f"{case} seed={args.replay}: no crash")
            found += crashes
        return 1 if found else 0
    roots = [mutator.REPO / c for c in args.case] if args.case else mutator.corpus_roots()
    cases = [mutator.load_case(r) for r in roots]
    classes: collections.Counter[str] = collections.Counter()

    def report(crash: mutator.Crash) -> None:
        line = next(
            (ln for ln in crash.stderr.splitlines() if "internal error" in ln),
            crash.stderr.strip().splitlines()[-1] if crash.stderr.strip() else "?",
        )
        classes[line.split(";")[0][-120:]] += 1
        print(f"CRASH {crash}\n  replay: bench/fuzz.py --case {crash.case} --replay {crash.seed}")

    start = time.perf_counter()
    runs, crashes = mutator.fuzz(cases, seed=args.seed, mutations=args.mutations, on_crash=report)
    elapsed = time.perf_counter() - start
    crashed = len({(c.case, c.seed) for c in crashes})
    print(
        f"{args.mutations} mutations ({runs} command runs) over {len(cases)} cases in "
        f"{elapsed:.1f} s: {args.mutations / elapsed:.0f} mutations/s; "
        f"{len(crashes)} crashing runs, {crashed} crashing mutations "
        f"({100 * crashed / max(args.mutations, 1):.2f} %)"
    )
    for line, count in classes.most_common():
        print(f"{count:6d}  {line}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
