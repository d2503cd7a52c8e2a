"""``dradiag selector-check`` end to end: exit codes, streams, JSON schema, every input kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import doc_schemas
import pytest

from dradiag.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "selector_check"
SLICES = str(FIXTURES / "slices")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _run(capsys, *argv, "-o", "json")
    doc = json.loads(out)
    doc_schemas.validate(doc, "selector-check")
    return code, doc


def test_expr_per_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(
        capsys,
        "selector-check",
        "--expr",
        "device.attributes['gpu.nvidia.com'].type == 'mig'",
        "--slices",
        SLICES,
        "--per-device",
    )
    assert code == 0
    assert doc["summary"] == {"devices": 44, "matched": 38, "nomatch": 6, "errors": 0}
    rows = {r["device"]: r for r in doc["devices"]}
    assert rows["gpu.nvidia.com/node-h/gpu-0-mig-1g10gb-19-0"]["result"] == "match"
    assert rows["gpu.nvidia.com/node-v/gpu-vfio-0"]["result"] == "nomatch"


def test_expr_errors_exit_1_and_name_the_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(
        capsys,
        "selector-check",
        "--expr",
        "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-')",
        "--from",
        SLICES,
        "--per-device",
    )
    assert code == 1
    assert doc["summary"]["errors"] == 34
    row = next(r for r in doc["devices"] if r["result"] == "error")
    assert row == {
        "device": "gpu.nvidia.com/node-h/gpu-0-mig-1g10gb-19-0",
        "node": "node-h",
        "result": "error",
        "error": "no such key: uuid",
    }


def test_expr_matching_nothing_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(
        capsys, "selector-check", "--expr", "device.driver == 'x'", "--slices", SLICES
    )
    assert code == 1 and doc["summary"]["matched"] == 0
    assert "devices" not in doc
    assert (
        run(["selector-check", "--expr", "device.driver == 'x'", "--slices", SLICES, "--exit-zero"])
        == 0
    )


def test_expr_compile_error_is_exit_2_with_caret(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "selector-check",
        "--expr",
        "device.attributes['gpu.nvidia.com'].type ==",
        "--slices",
        SLICES,
    )
    assert code == 2 and out == ""
    first, expression, caret = err.rstrip("\n").split("\n")
    assert first.startswith("dradiag: error: --expr:1:44: CEL compile error:")
    assert expression == "device.attributes['gpu.nvidia.com'].type =="
    assert caret == " " * 43 + "^"


def test_expr_too_long_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    long_expr = " || ".join(["device.driver == 'gpu.nvidia.com'"] * 400)
    code, out, err = _run(capsys, "selector-check", "--expr", long_expr, "--slices", SLICES)
    assert code == 2 and out == ""
    assert err == (
        "dradiag: error: --expr: CEL compile error: Too long: may not be more than 10240 bytes\n"
    )


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("(" * 200 + "true" + ")" * 200, None),
        ("(" * 2000, "expression recursion limit exceeded: 250"),
        ("(" * 250 + "true" + ")" * 250, "expression recursion limit exceeded: 250"),
        (" + ".join(["1"] * 300) + " > 0", "max recursion depth exceeded"),
        (" && ".join(["device.driver == 'gpu.nvidia.com'"] * 250), None),
    ],
    ids=["200-nested", "2000-open", "250-nested", "300-sum", "250-and"],
)
def test_expr_nesting_limits_are_cel_gos(
    capsys: pytest.CaptureFixture[str], expression: str, reason: str | None
) -> None:
    code, out, err = _run(capsys, "selector-check", "--expr", expression, "--slices", SLICES)
    if reason is None:
        assert code == 0 and err == ""
        assert "44" in out  # every device judged
    else:
        assert code == 2 and out == ""
        assert err == f"dradiag: error: --expr: CEL compile error: {reason}\n"


def test_manifests_report_every_problem_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(capsys, "selector-check", str(FIXTURES / "manifests"), "--slices", SLICES)
    assert code == 1
    rules = {f["rule"] for f in doc["findings"]}
    assert {
        "DRA-SEL-CEL-RUNTIME-ERROR",
        "DRA-SEL-CEL-COMPILE-ERROR",
        "DRA-SEL-UNKNOWN-ATTRIBUTE",
        "DRA-SEL-TYPE-MISMATCH",
        "DRA-SEL-OPTIONAL-ATTRIBUTE",
        "DRA-SEL-COUNT-INFEASIBLE",
        "DRA-SEL-CONSTRAINT-INFEASIBLE",
        "DRA-SEL-SUBREQUEST-FALLBACK",
        "DRA-SEL-ALL-MODE",
        "DRA-SEL-CLAIM-NOT-FOUND",
        "DRA-SEL-BUILTIN-CLASSES",
    } <= rules
    compile_error = next(f for f in doc["findings"] if f["rule"] == "DRA-SEL-CEL-COMPILE-ERROR")
    path = FIXTURES / "manifests" / "broken-claims.yaml"
    line = path.read_text().splitlines()[compile_error["location"]["line"] - 1]
    assert compile_error["location"]["path"] == str(path)
    # Located at the end of the expression, where the parser expected more.
    assert line[: compile_error["location"]["column"] - 1].rstrip().endswith("&&")
    template = next(c for m in doc["manifests"] for c in m["claims"] if c["name"] == "mig-pair")
    assert template["status"] == "ok"
    assert template["usedBy"] == ["Deployment ml/trainer"]
    alt = template["requests"][0]["alternatives"][0]
    assert alt["requestStage"]["byProfile"]["1g.10gb"]["matched"] == 16
    template_file = (FIXTURES / "manifests" / "mig-pair-template.yaml").read_text().splitlines()
    line = alt["requestSelectors"][0]["location"]["line"]
    assert "profile == '1g.10gb'" in template_file[line - 1]


def test_manifests_all_good_exit_0_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys,
        "selector-check",
        str(FIXTURES / "manifests" / "mig-pair-template.yaml"),
        "--slices",
        SLICES,
        "--no-color",
    )
    assert code == 0
    assert "ResourceClaimTemplate ml/mig-pair: ok" in out
    assert "request mig [mig.nvidia.com, count 2]: ok — matches 16 device(s)" in out
    assert "DRA-SEL-BUILTIN-CLASSES" in out


def test_workloads_of_every_kind_and_stdin(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys

    text = (FIXTURES / "workloads" / "kinds.yaml").read_bytes()
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(text)})())
    code, doc = _json(capsys, "selector-check", "-", "--slices", SLICES)
    assert code == 0
    (manifest,) = doc["manifests"]
    assert manifest["path"] == "<stdin>"
    kinds = {w["kind"] for w in manifest["workloads"]}
    assert kinds == {"CronJob", "JobSet", "ClusterTrainingRuntime", "Pod"}
    assert all(
        u["resolved"] == "ResourceClaimTemplate ml/one-mig"
        for w in manifest["workloads"]
        for u in w["claims"]
    )


def test_templates_resolved_from_the_device_source(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "cluster"
    source.mkdir()
    for f in (FIXTURES / "slices").glob("*.yaml"):
        (source / f.name).write_text(f.read_text())
    (source / "templates.yaml").write_text(
        (FIXTURES / "manifests" / "mig-pair-template.yaml").read_text()
    )
    code, doc = _json(
        capsys,
        "selector-check",
        str(FIXTURES / "manifests" / "trainer-deployment.yaml"),
        "--from",
        str(source),
    )
    (manifest,) = doc["manifests"]
    (claim,) = manifest["claims"]
    assert claim["origin"] == "cluster" and claim["name"] == "mig-pair"
    missing = next(f for f in doc["findings"] if f["rule"] == "DRA-SEL-CLAIM-NOT-FOUND")
    # ResourceClaimTemplates were read from the source, so a missing one is definite.
    assert missing["severity"] == "error"
    assert code == 1


def test_node_restriction(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _json(
        capsys,
        "selector-check",
        str(FIXTURES / "manifests" / "mig-pair-template.yaml"),
        "--slices",
        SLICES,
        "--node",
        "node-a",
    )
    assert code == 1  # node-a has only 1g.5gb partitions
    assert doc["inventory"]["restrictedTo"] == ["node-a"]
    assert any(f["rule"] == "DRA-SEL-NO-MATCH" for f in doc["findings"])


def test_usage_and_input_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["selector-check", "--slices", SLICES]) == 2
    assert run(["selector-check", "x.yaml", "--expr", "true", "--slices", SLICES]) == 2
    assert run(["selector-check", "x.yaml", "--from", SLICES, "--slices", SLICES]) == 2
    capsys.readouterr()
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [\n")
    code, out, err = _run(capsys, "selector-check", str(bad), "--slices", SLICES)
    assert code == 2 and out == ""
    assert err.startswith(f"dradiag: error: {bad}:") and len(err.strip().splitlines()) == 1
    empty = tmp_path / "cm.yaml"
    empty.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, out, err = _run(capsys, "selector-check", str(empty), "--slices", SLICES)
    assert code == 2 and "nothing to check" in err


def test_now_counts_free_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "cluster"
    source.mkdir()
    (source / "a100.yaml").write_text((FIXTURES / "slices" / "a100-legacy-v0.4.yaml").read_text())
    # One of node-a's two 1g.5gb partitions is allocated to another claim.
    (source / "holder.yaml").write_text(
        """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: holder, namespace: other, uid: 0b6c3c1e-0000-4000-8000-000000000001}
spec:
  devices:
    requests: [{name: m, exactly: {deviceClassName: mig.nvidia.com}}]
status:
  allocation:
    devices:
      results: [{request: m, driver: gpu.nvidia.com, pool: node-a, device: gpu-0-mig-1g5gb-19-0}]
"""
    )
    claim = tmp_path / "claim.yaml"
    claim.write_text(
        """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: want, namespace: ml}
spec:
  devices:
    requests:
    - name: m
      exactly:
        deviceClassName: mig.nvidia.com
        count: 2
"""
    )
    code, doc = _json(capsys, "selector-check", str(claim), "--from", str(source), "--free")
    alt = doc["manifests"][0]["claims"][0]["requests"][0]["alternatives"][0]
    assert alt["matched"] == 2
    assert alt["freeNow"] == 1
    assert any(f["rule"] == "DRA-SEL-NONE-FREE" for f in doc["findings"])
    assert code == 0  # free-now is a warning: the claim can be satisfied once devices free up


def test_live_flags_reach_collection(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --from/--slices the devices are read live, with --timeout/--as/--as-group."""
    from dradiag.cli import inputs
    from dradiag.sources.manifests import load_snapshot

    seen: list[Any] = []

    def fake_obtain(options: Any, target: Any) -> Any:
        seen.append((options, target))
        return load_snapshot(SLICES)

    monkeypatch.setattr(inputs, "obtain_snapshot", fake_obtain)
    code, doc = _json(
        capsys,
        "selector-check",
        "--expr",
        "device.driver == 'gpu.nvidia.com'",
        "--timeout",
        "30",
        "--as",
        "jane",
        "--as-group",
        "ops",
        "--as-group",
        "dev",
        "--node",
        "node-a",
    )
    ((options, target),) = seen
    assert (options.timeout, options.as_user, options.as_groups) == (30.0, "jane", ("ops", "dev"))
    assert options.from_path is None
    assert target.kind == "cluster" and target.nodes == ("node-a",)
    assert code == 0 and doc["summary"]["matched"] > 0
