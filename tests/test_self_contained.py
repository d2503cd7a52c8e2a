"""The test suite reads nothing outside the repository.

A user who clones the repository has no ``../shared`` beside it: conformance data the tests
use is vendored under ``tests/conformance/data`` (PROVENANCE.md there). This test fails when
any test file names the ``shared`` folder as a path again.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "conformance" / "data"

# `shared/` as a path in test code: "../shared", "/work/shared/...", "shared/conformance/...",
# or a Path built with "shared" as one component (`/ "shared"`).
_SHARED_PATH = re.compile(r"""\.\./shared\b|/shared/|["']shared/|/\s*["']shared["']""")


def test_no_test_file_references_the_shared_folder() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*")):
        if not path.is_file() or path.suffix != ".py":
            continue
        if DATA in path.parents or path == Path(__file__).resolve():
            continue  # upstream data, vendored byte for byte; this file's own examples
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _SHARED_PATH.search(line):
                offenders.append(f"{path.relative_to(TESTS)}:{number}: {line.strip()}")
    assert not offenders, "tests must read only from inside the repository:\n" + "\n".join(
        offenders
    )


def test_the_pattern_catches_the_forms_it_must() -> None:
    for text in (
        'SPEC = REPO_ROOT.parent / "shared" / "conformance"',
        "data = Path('../shared/conformance/k8s/x.yaml')",
        "open('/work/shared/conformance/cel-spec/basic.textproto')",
        'Path("shared/conformance/k8s")',
    ):
        assert _SHARED_PATH.search(text), text
    for text in (
        '"sharedCounters": []',
        "claim ml/shared-gpu",
        "ResourceClaim shared/gpu-pool",
        "def test_shared_store():",
    ):
        assert not _SHARED_PATH.search(text), text


def test_vendored_data_carries_its_license_and_provenance() -> None:
    assert (DATA / "PROVENANCE.md").is_file()
    for folder in ("cel-spec", "k8s"):
        assert "Apache License" in (DATA / folder / "LICENSE").read_text()
