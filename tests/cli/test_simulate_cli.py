"""``dradiag simulate`` end to end: exit codes, JSON against its schema, text, bad input."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import doc_schemas
import pytest
import yaml

from dradiag.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "allocation_fixtures", ROOT / "tests" / "analyses" / "allocation" / "conftest.py"
)
assert _spec is not None and _spec.loader is not None
nv: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nv)


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    holder = nv.claim(
        "inference",
        [nv.exactly("r", "mig.nvidia.com", count=6)],
        namespace="serving",
        allocated=[nv.result("node-a", f"gpu-0-mig-1g5gb-19-{i}") for i in range(6)],
    )
    wanted_one = nv.claim("one", [nv.exactly("r", "mig.nvidia.com")])
    wanted_two = nv.claim("two", [nv.exactly("r", "mig.nvidia.com", count=2)])
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-migs"}],
        },
    }
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "two-migs", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "r", "deviceClassName": "mig.nvidia.com", "count": 2}]
                }
            }
        },
    }
    items = [
        nv.node("node-a"),
        *nv.CLASSES,
        *nv.a100_static_mig("node-a"),
        holder,
        wanted_one,
        wanted_two,
        pod,
        template,
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(items))
    return tmp_path


def simulate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = run(["simulate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_allocated_exits_0_with_a_schema_valid_document(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = simulate(
        capsys, "--from", str(cluster), "--node", "node-a", "--claim", "ml/one", "-o", "json"
    )
    assert code == 0
    doc = json.loads(out)
    doc_schemas.validate(doc, "simulation")
    assert doc["outcome"] == "allocated"
    assert (
        doc["results"][0]["allocation"]["devices"]["results"][0]["device"] == "gpu-0-mig-1g5gb-19-6"
    )


def test_unschedulable_exits_1_and_names_the_holder(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = simulate(
        capsys, "--from", str(cluster), "--node", "node-a", "--claim", "ml/two", "-o", "json"
    )
    assert code == 1
    doc = json.loads(out)
    doc_schemas.validate(doc, "simulation")
    assert doc["error"] == "cannot allocate all claims"
    (funnel,) = doc["explanation"]
    assert funnel["blocking"] == "free" and funnel["holders"] == ["serving/inference"]
    code, out, _ = simulate(
        capsys, "--from", str(cluster), "--node", "node-a", "--claim", "ml/two", "--no-color"
    )
    assert code == 1
    assert "node-a: unschedulable" in out and "serving/inference" in out
    assert (
        simulate(
            capsys,
            "--from",
            str(cluster),
            "--node",
            "node-a",
            "--claim",
            "ml/two",
            "--exit-zero",
            "-o",
            "json",
        )[0]
        == 0
    )


def test_pod_with_ungenerated_template_claim(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = simulate(
        capsys, "--from", str(cluster), "--node", "node-a", "--pod", "ml/trainer", "-o", "yaml"
    )
    assert code == 1
    doc = yaml.safe_load(out)
    assert doc["explanation"][0]["claim"] == "ml/trainer-gpus"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--claim", "ml/missing"], "claim ml/missing not found"),
        (["--claim", "ml/one", "--feature-gates", "DRANope=true"], "unknown gate 'DRANope'"),
        ([], "give the claims to allocate"),
    ],
)
def test_bad_input_exits_2(
    cluster: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = simulate(capsys, "--from", str(cluster), "--node", "node-a", *args)
    assert code == 2
    assert out == ""
    assert message in err


@pytest.mark.parametrize("width", [60, 80])
def test_text_on_a_narrow_terminal_never_breaks_a_word(
    cluster: Path, capsys: pytest.CaptureFixture[str], width: int
) -> None:
    import re

    from dradiag.render.console import forced_terminal

    _, out, _ = simulate(
        capsys, "--from", str(cluster), "--node", "node-a", "--claim", "ml/two", "-o", "json"
    )
    doc = json.loads(out)
    with forced_terminal(width):
        _, out, _ = simulate(
            capsys, "--from", str(cluster), "--node", "node-a", "--claim", "ml/two"
        )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out)
    words = set(text.split())
    reason = doc["explanation"][0]["reason"]
    assert set(reason.split()) <= words  # the arrow line: every word whole
    for note in doc.get("notes") or []:
        assert set(note.split()) <= words  # the footnote too
    assert all(len(line) <= width for line in text.splitlines())
