"""Field accuracy: how often dradiag names the right phase (and the right cause) on the
field corpus (``tests/field``), per expected phase, and what it said where it missed.

    python bench/field_accuracy.py            # table + misses
    python bench/field_accuracy.py --json     # the same as one JSON document

"Phase right" means verdict status and phase equal the case's expectation; "phase+cause"
also needs every cause phrase in the verdict summary or the deciding finding's title/detail.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _corpus() -> Any:
    path = REPO / "tests" / "field" / "corpus.py"
    spec = importlib.util.spec_from_file_location("dradiag_field_corpus", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    corpus = _corpus()
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    misses: list[dict[str, Any]] = []
    for case in corpus.all_cases():
        ans = corpus.answer(case)
        key = case.expected["phase"] or "healthy"
        phase_ok, cause_ok = corpus.phase_right(case, ans), corpus.cause_right(case, ans)
        row = rows[key]
        row[0] += 1
        row[1] += phase_ok
        row[2] += cause_ok
        if not cause_ok:
            misses.append(
                {
                    "case": case.name,
                    "expected": case.expected,
                    "got": {k: ans.verdict.get(k) for k in ("status", "phase", "rule", "summary")},
                    "missing_causes": corpus.missing_causes(case, ans.diagnosis),
                    "problems": ans.problems,
                }
            )
    order = [*corpus.PHASES, "healthy"]
    table = {k: rows[k] for k in order if k in rows}
    total = [sum(r[i] for r in table.values()) for i in range(3)]
    if args.json:
        print(json.dumps({"per_phase": table, "total": total, "misses": misses}, indent=2))
        return 0
    print(f"{'phase':<13}{'cases':>6}{'phase right':>13}{'phase+cause':>13}")
    for key, (n, p, c) in [*table.items(), ("TOTAL", total)]:
        print(f"{key:<13}{n:>6}{p:>8} {p / n:>4.0%}{c:>8} {c / n:>4.0%}")
    if misses:
        print(f"\n{len(misses)} miss(es):")
    for miss in misses:
        exp, got = miss["expected"], miss["got"]
        print(f"- {miss['case']}: expected {exp['status']}/{exp['phase']} {exp['cause']}")
        print(f"    got {got['status']}/{got['phase']}/{got['rule']}: {got['summary']}")
        same_phase = (got["status"], got["phase"]) == (exp["status"], exp["phase"])
        if miss["missing_causes"] and same_phase:
            print(f"    cause phrases not named: {miss['missing_causes']}")
        for problem in miss["problems"]:
            print(f"    problem: {problem}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
