"""The field corpus: failures rebuilt from public reports, with only the evidence they gave.

Each ``tests/field/<case>/`` holds ``case.yaml`` (command, target, expected verdict and the
cause phrases the answer must name), ``source.md`` (where the report is, what its maintainers
confirmed, what in ``input/`` is verbatim and what was reconstructed) and ``input/`` (the
report's objects and logs, nothing more). This module loads cases and runs the real CLI on
them; ``test_field_cases.py`` asserts on the result and ``bench/field_accuracy.py`` scores it.
It is loaded by file path (the tests tree has no packages), so it imports nothing from tests.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

FIELD_ROOT = Path(__file__).resolve().parent
CASE_FILE = "case.yaml"
PHASES = ("publication", "selection", "allocation", "prepare", "injection", "workload", "unprepare")
STATUSES = ("broken", "ok", "inconclusive")
COMMANDS = ("claim", "pod")
CASE_KEYS = {"command", "target", "kubernetes", "driver", "expected", "live_parity"}
OPTIONAL_KEYS = {"now"}
EXPECTED_KEYS = {"status", "phase", "cause"}
PHASE_PREFIX = {
    "pub": "publication",
    "sel": "selection",
    "alloc": "allocation",
    "prep": "prepare",
    "inj": "injection",
    "work": "workload",
    "unprep": "unprepare",
    "ok": None,
}


@dataclass(frozen=True)
class FieldCase:
    """One reconstructed report and the verdict it must get."""

    name: str
    path: Path
    spec: dict[str, Any]

    @property
    def input(self) -> Path:
        return self.path / "input"

    @property
    def expected(self) -> dict[str, Any]:
        return dict(self.spec["expected"])

    def argv(self, *source: str) -> list[str]:
        """The CLI arguments; ``source`` is ``--from DIR`` by default, or e.g. ``--kubeconfig F``."""
        src = list(source) or ["--from", str(self.input)]
        now = ["--now", str(self.spec["now"])] if self.spec.get("now") else []
        return [self.spec["command"], self.spec["target"], *src, "-o", "json", *now]


@dataclass
class Answer:
    """What dradiag said about one case: exit code, the verdict it decided on, its document."""

    code: int
    doc: dict[str, Any]
    diagnosis: dict[str, Any]
    stderr: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> dict[str, Any]:
        return dict(self.diagnosis.get("verdict") or {})


def case_dirs(root: Path = FIELD_ROOT) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/{CASE_FILE}"))


def load_case(path: Path) -> FieldCase:
    return FieldCase(path.name, path, yaml.safe_load((path / CASE_FILE).read_text()) or {})


def all_cases(root: Path = FIELD_ROOT) -> list[FieldCase]:
    return [load_case(p) for p in case_dirs(root)]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Run ``dradiag`` in-process, capturing stdout and stderr."""
    from dradiag.cli.app import run

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def pick_diagnosis(doc: dict[str, Any]) -> dict[str, Any]:
    """The diagnosis the verdict is read from: the claim document, or for ``pod`` the worst item."""
    items = doc.get("items")
    if items is None:
        return doc
    for status in ("broken", "inconclusive"):
        for item in items:
            if (item.get("verdict") or {}).get("status") == status:
                return dict(item)
    return dict(items[0]) if items else {}


def answer(case: FieldCase, *source: str) -> Answer:
    code, out, err = run_cli(case.argv(*source))
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        return Answer(code, {}, {}, err, [f"stdout is not one JSON document; stderr: {err[-800:]}"])
    return Answer(code, doc, pick_diagnosis(doc), err)


def deciding_finding(diagnosis: dict[str, Any]) -> dict[str, Any] | None:
    """The finding whose rule is the verdict's rule, in the verdict's phase."""
    verdict = diagnosis.get("verdict") or {}
    for phase in diagnosis.get("phases") or []:
        if phase.get("id") != verdict.get("phase"):
            continue
        for finding in phase.get("findings") or []:
            if verdict.get("rule") and finding.get("rule") == verdict.get("rule"):
                return dict(finding)
    return None


def explanation_text(diagnosis: dict[str, Any]) -> str:
    """Where a cause must be named: the summary and the deciding finding's title and detail
    (not its evidence excerpts: quoting the report back is not naming the cause)."""
    verdict = diagnosis.get("verdict") or {}
    finding = deciding_finding(diagnosis) or {}
    parts = [verdict.get("summary"), finding.get("title"), finding.get("detail")]
    return "\n".join(str(p) for p in parts if p)


def missing_causes(case: FieldCase, diagnosis: dict[str, Any]) -> list[str]:
    text = explanation_text(diagnosis).lower()
    return [c for c in case.expected.get("cause") or [] if str(c).lower() not in text]


def phase_right(case: FieldCase, ans: Answer) -> bool:
    exp, got = case.expected, ans.verdict
    return got.get("status") == exp["status"] and got.get("phase") == exp["phase"]


def cause_right(case: FieldCase, ans: Answer) -> bool:
    return phase_right(case, ans) and not missing_causes(case, ans.diagnosis)


def describe(ans: Answer) -> str:
    """One line of what dradiag answered."""
    v = ans.verdict
    return f"{v.get('status')}/{v.get('phase')}/{v.get('rule')}: {v.get('summary')}"
