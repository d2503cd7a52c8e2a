"""``dradiag inventory`` end to end: JSON against its schema, node filter, text table."""

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
        "big",
        [nv.exactly("r", "mig.nvidia.com")],
        namespace="team",
        allocated=[nv.result("node-h", "gpu-1-mig-7g80gb-0-0")],
    )
    items = [
        nv.node("node-h"),
        nv.node("node-a"),
        *nv.CLASSES,
        *nv.h100_split("node-h"),
        *nv.a100_static_mig("node-a"),
        holder,
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(items))
    return tmp_path


def test_json_is_schema_valid_and_filtered(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["inventory", "--from", str(cluster), "--node", "node-h", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc_schemas.validate(doc, "inventory")
    assert [n["node"] for n in doc["nodes"]] == ["node-h"]
    groups = {(g["type"], g["profile"]): g for g in doc["nodes"][0]["devices"]}
    assert groups[("mig", "7g.80gb")]["allocatedTo"] == [
        {"claim": "team/big", "devices": ["gpu-1-mig-7g80gb-0-0"]}
    ]
    assert groups[("mig", "1g.10gb")]["fits"] == 7  # GPU 1 is full; GPU 0 fits seven


def test_text_table(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["inventory", "--from", str(cluster), "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "1g.5gb" in out and "node-a" in out and "team/big" in out


def test_n_is_never_node(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-n means namespace everywhere; inventory (devices, no namespace) has no -n."""
    assert run(["inventory", "--from", str(cluster), "-n", "node-h"]) == 2
    assert "No such option: -n" in capsys.readouterr().err
