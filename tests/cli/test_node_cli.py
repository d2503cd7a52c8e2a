"""``dradiag node`` end to end: JSON against its schema, exit codes, the host root read
live (NVML through the stand-in), NVML unavailable as one line, --save then --from, text."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dradiag.cli.app import run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "node"
SCHEMA = json.loads((ROOT / "docs" / "schema" / "node.schema.json").read_text())


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def _json(argv: list[str]) -> tuple[int, dict[str, Any], str]:
    code, out, err = _run([*argv, "-o", "json"])
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    return code, doc, err


def _standin() -> Any:
    spec = importlib.util.spec_from_file_location("nvml_standin", FIXTURES / "nvml_standin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nvml_standin"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("world", "code", "rules"),
    [
        ("healthy", 0, set()),
        ("stale-mig", 1, {"DRA-PUB-NODE-MIG-NOT-PUBLISHED", "DRA-PUB-NODE-MIG-STALE"}),
        ("corrupt-checkpoint", 1, {"DRA-PUB-NODE-CHECKPOINT-UNREADABLE"}),
    ],
)
def test_saved_worlds_validate_and_exit_by_their_findings(
    world: str, code: int, rules: set[str]
) -> None:
    got, doc, _ = _json(["node", "--node", "gpu-node-1", "--from", str(FIXTURES / world)])
    assert got == code
    assert {f["rule"] for f in doc["findings"]} == rules
    assert doc["source"]["node"] == "saved" and doc["source"]["cluster"]["kind"] == "bundle"


def test_leaky_world_document() -> None:
    code, doc, _ = _json(["node", "--node", "gpu-node-1", "--from", str(FIXTURES / "leaky")])
    assert code == 1 and doc["summary"] == {"errors": 7, "warnings": 3}
    gpu0 = doc["nvml"]["gpus"][0]
    assert gpu0["migCurrent"] is True and gpu0["mig"][0]["profile"] == "3g.20gb"
    started = next(c for c in doc["checkpoint"]["claims"] if c["state"] == "PrepareStarted")
    assert (started["namespace"], started["name"]) == ("ml", "mig-starter")
    assert doc["checkpoint"]["versions"] == ["v1", "v2"]
    assert [f["pciBusID"] for f in doc["pci"]["functions"] if f["vfio"]] == ["0000:3b:00.0"]


def test_exit_zero() -> None:
    code, _, _ = _json(
        ["node", "--node", "gpu-node-1", "--from", str(FIXTURES / "leaky"), "--exit-zero"]
    )
    assert code == 0


def test_host_root_read_live_with_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _standin()
    monkeypatch.setitem(sys.modules, "pynvml", s.FakeNvml([s.a100_static_mig(), s.gb200_full()]))
    code, doc, err = _json(
        [
            "node",
            "--node",
            "gpu-node-1",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-cluster",
        ]
    )
    assert code == 1 and "NVML unavailable" not in err
    assert doc["source"]["node"] == "live" and doc["source"]["cluster"]["kind"] == "none"
    assert [g["product"] for g in doc["nvml"]["gpus"]] == ["NVIDIA A100-SXM4-40GB", "NVIDIA GB200"]
    rules = {f["rule"] for f in doc["findings"]}
    assert "DRA-INJ-CDI-DEVICE-NODE-MISSING" in rules and "DRA-UNPREP-CHECKPOINT-LEAK" not in rules


def test_nvml_unavailable_is_one_line_and_the_rest_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    code, doc, err = _json(
        [
            "node",
            "--node",
            "gpu-node-1",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-cluster",
        ]
    )
    lines = [line for line in err.splitlines() if "NVML unavailable" in line]
    assert lines == [
        "dradiag: warning: NVML unavailable: nvidia-ml-py is not installed (pip install 'dradiag[node]')"
    ]
    assert doc["nvml"] == {"available": False, "reason": lines[0].split("NVML unavailable: ")[1]}
    assert doc["cdi"]["specs"] and code == 1
    _, text, _ = _run(
        [
            "node",
            "--node",
            "gpu-node-1",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-cluster",
        ]
    )
    assert "NVML unavailable: nvidia-ml-py is not installed" in text


def test_no_nvml_reads_no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    _, doc, err = _json(
        [
            "node",
            "--node",
            "n",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-cluster",
            "--no-nvml",
        ]
    )
    assert "NVML" not in err and doc["nvml"]["reason"] == "not read (--no-nvml)"


def test_node_defaults_to_node_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NODE_NAME", "from-env")
    _, doc, _ = _json(["node", "--host-root", str(tmp_path), "--no-cluster", "--no-nvml"])
    assert doc["node"] == "from-env" and doc["pci"]["read"] is False
    assert doc["checkpoint"]["present"] is False


def _cluster_copy(tmp_path: Path) -> Path:
    """The leaky world's cluster objects without its node state."""
    dest = tmp_path / "cluster"
    shutil.copytree(FIXTURES / "leaky", dest, ignore=shutil.ignore_patterns("node"))
    assert not (dest / "node").exists()
    return dest


def test_save_then_claim_from_uses_the_node_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _standin()
    a100 = s.a100_static_mig()
    from dataclasses import replace

    monkeypatch.setitem(sys.modules, "pynvml", s.FakeNvml([replace(a100, migs=a100.migs[:1])]))
    cluster = _cluster_copy(tmp_path)
    _, out, _ = _run(["claim", "serving/server-gpu", "--from", str(cluster), "-o", "json"])
    assert json.loads(out)["verdict"]["phase"] == "prepare"  # no node state: Prepare looks stalled
    code, _, err = _run(
        [
            "node",
            "--node",
            "gpu-node-1",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-cluster",
            "--save",
            str(cluster),
            "-o",
            "json",
        ]
    )
    assert code == 1 and "node state saved to" in err
    assert (cluster / "node" / "gpu-node-1" / "node.json").is_file()
    code, out, _ = _run(["claim", "serving/server-gpu", "--from", str(cluster), "-o", "json"])
    doc = json.loads(out)
    assert (doc["verdict"]["phase"], doc["verdict"]["rule"]) == (
        "injection",
        "DRA-INJ-NODE-CDI-SPEC-MISSING",
    )
    prepare = next(p for p in doc["phases"] if p["id"] == "prepare")
    assert prepare["status"] == "ok" and prepare["basis"]["kind"] == "checked"
    assert "PrepareCompleted" in prepare["basis"]["detail"]
    code, doc, _ = _json(["node", "--node", "gpu-node-1", "--from", str(cluster)])
    assert doc["source"]["node"] == "saved" and "DRA-UNPREP-CHECKPOINT-LEAK" in {
        f["rule"] for f in doc["findings"]
    }


def test_text_view_has_the_tree_the_tables_and_the_findings() -> None:
    code, text, _ = _run(
        ["node", "--node", "gpu-node-1", "--from", str(FIXTURES / "leaky"), "--no-color"]
    )
    assert code == 1
    assert "GPU 0 (minor 0) NVIDIA A100-SXM4-40GB" in text and "MIG 3g.20gb GI 2" in text
    assert (
        "CDI specs" in text
        and "checkpoint /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json" in text
    )
    assert text.index("CDI specs") < text.index("error DRA-")
    assert "PrepareStarted" in text and "VFIO-bound: 0000:3b:00.0 (vfio-pci)" in text


def test_usage_errors_are_one_line() -> None:
    code, _, err = _run(["node", "--no-cluster", "--from", str(FIXTURES / "leaky")])
    assert code == 2 and err.strip().count("\n") == 0 and "exclude each other" in err
    code, _, err = _run(
        ["node", "--node", "gpu-node-1", "--from", str(FIXTURES / "leaky"), "--save", "/tmp/x"]
    )
    assert code == 2 and "nothing to --save" in err


def test_an_unreachable_cluster_is_one_warning_and_the_node_checks_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    code, doc, err = _json(
        [
            "node",
            "--node",
            "gpu-node-1",
            "--host-root",
            str(FIXTURES / "hostroot-leaky"),
            "--no-nvml",
        ]
    )
    assert [line for line in err.splitlines() if "cluster unavailable" in line]
    assert doc["source"]["cluster"]["kind"] == "none" and code == 1
    assert "DRA-PREP-CHECKPOINT-PREPARE-STARTED" in {f["rule"] for f in doc["findings"]}


def test_text_follows_the_shared_console_policy(capsys) -> None:
    """Piped: no box or tree characters, lines not padded; on an 80-column terminal:
    tables fitted (a hidden column is named), finding text hangs under its indent."""
    import re

    from dradiag.render.console import forced_terminal

    argv = ["node", "--node", "gpu-node-1", "--from", str(FIXTURES / "leaky"), "--exit-zero"]
    assert run(argv) == 0
    plain = capsys.readouterr().out
    assert not re.search("[─━│┃└├┏┡]", plain)
    assert all(line == line.rstrip() for line in plain.splitlines())
    assert "CDI SPEC" in plain and "CLAIM UID" in plain
    with forced_terminal(80):
        assert run(argv) == 0
        drawn = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    lines = drawn.splitlines()
    assert all(line == line.rstrip() for line in lines)
    assert "hidden at 80 columns; -o wide shows all" in drawn
    # Every finding's continuation lines are indented, none restarts at column 0.
    body = lines[lines.index(next(ln for ln in lines if ln.startswith("error "))) :]
    assert all(ln.startswith(("error ", "warning ", "info ", "  ")) or not ln for ln in body)
