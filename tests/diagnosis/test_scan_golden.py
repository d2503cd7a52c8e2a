"""``scan -A -o json`` rows pinned: a faster scan must say exactly what the scan said before.

Performance work on ``scan`` (shared per-scan facts, memoized walks, streamed output) must
not change one row. This runs the real CLI, ``scan -A --from DIR -o json``, on every demo
sample, field case and scenario, and on ``bench/scan.py``'s two shapes at a small size
(built by the bench's own generator, which is deterministic), and compares the rows with
``golden/scan_rows.json``: every row, in order, field for field (the ``source.location``
path and the tool's version aside, and the ``--from`` path next steps quote read as
``<from>``, wherever it appears). Exit codes and the document's collection and summary blocks are pinned too.

To regenerate after an intended change of output, run with ``DRADIAG_REGEN_GOLDEN=1`` and
review the diff of the golden file.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.cli.app import run

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("golden") / "scan_rows.json"
BENCH_NODES, BENCH_CLAIMS = 3, 60
"""Three nodes, 24 GPUs: 24 claims allocated and running, 36 pending, one Prepare failing."""


def _cases() -> dict[str, Path]:
    cases = {
        f"sample/{p.parent.name}": p.parent
        for p in (REPO / "dradiag/samples").glob("*/sample.yaml")
    }
    cases |= {
        f"field/{p.parent.name}": p.parent / "input"
        for p in (REPO / "tests/field").glob("*/case.yaml")
    }
    cases |= {
        f"scenario/{p.name}": p for p in (REPO / "tests/fixtures/scenarios").iterdir() if p.is_dir()
    }
    return dict(sorted(cases.items()))


def _now(case: str, root: Path) -> list[str]:
    """``--now`` where the case fixes the clock (a field case's ``now:``)."""
    if case.startswith("field/"):
        spec = yaml.safe_load((root.parent / "case.yaml").read_text())
        if spec.get("now"):
            return ["--now", str(spec["now"])]
    return []


def _bench_snapshot(tmp: Path, shape: str) -> Path:
    spec = importlib.util.spec_from_file_location("bench_diagnose", REPO / "bench" / "diagnose.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(
        tmp,
        BENCH_NODES,
        claims_total=BENCH_CLAIMS,
        events_total=2 * BENCH_CLAIMS,
        plugin_labels=shape == "plugins",
    )
    return tmp


def _scan_rows(root: Path, extra: list[str]) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = run(["scan", "-A", "--from", str(root), "-o", "json", *extra])
    # Next steps and coverage reasons name the --from path, which differs per checkout
    # and temporary directory.
    text = out.getvalue().replace(json.dumps(str(root))[1:-1], "<from>")
    doc = json.loads(text) if text else {}
    rows = []
    for item in doc.get("items", []):
        item.get("source", {}).pop("location", None)
        item.pop("tool", None)
        rows.append(item)
    return {
        "exit": code,
        "rows": rows,
        "collection": doc.get("collection"),
        "summary": doc.get("summary"),
    }


def _dump(golden: dict[str, Any]) -> str:
    """One case a block, one row a line: a changed row is a one-line diff."""
    blocks = []
    for name, case in sorted(golden.items()):
        rows = ",\n".join(json.dumps(r, ensure_ascii=False) for r in case["rows"])
        blocks.append(
            f'{json.dumps(name)}: {{"exit": {case["exit"]}, '
            f'"collection": {json.dumps(case["collection"])}, '
            f'"summary": {json.dumps(case["summary"])},\n"rows": [\n{rows}]}}'
        )
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def _golden() -> dict[str, Any]:
    return dict(json.loads(GOLDEN.read_text())) if GOLDEN.exists() else {}


CASES = _cases()
SHAPES = ("plugins", "unrecognised")


def _check(name: str, got: dict[str, Any]) -> None:
    if os.environ.get("DRADIAG_REGEN_GOLDEN"):
        golden = _golden()
        golden[name] = got
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(_dump(golden))
        return
    golden = _golden()
    assert name in golden, f"{name}: no golden rows; run with DRADIAG_REGEN_GOLDEN=1"
    want = golden[name]
    assert got["exit"] == want["exit"]
    assert len(got["rows"]) == len(want["rows"])
    for i, (g, w) in enumerate(zip(got["rows"], want["rows"], strict=True)):
        assert g == w, f"{name}: row {i} ({w['target'].get('name')}) differs"
    assert got["collection"] == want["collection"]
    assert got["summary"] == want["summary"]


@pytest.mark.parametrize("name", list(CASES))
def test_scan_rows_match_the_golden(name: str) -> None:
    root = CASES[name]
    _check(name, _scan_rows(root, _now(name, root)))


@pytest.mark.parametrize("shape", SHAPES)
def test_bench_shaped_scan_rows_match_the_golden(tmp_path: Path, shape: str) -> None:
    got = _scan_rows(_bench_snapshot(tmp_path, shape), [])
    # The shape is what the bench measures: pending claims sharing one spec are rows.
    assert len(got["rows"]) > BENCH_CLAIMS // 2
    _check(f"bench/{shape}", got)
