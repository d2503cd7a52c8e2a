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


def test_text_says_what_the_counts_mean_and_a_held_gpu_is_not_free(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["inventory", "--from", str(cluster), "--node", "node-h", "--no-color"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header[:3] == ["NODE", "TYPE", "PROFILE"]
    assert {"ALLOC", "HELD", "FREE", "FITS"} <= set(header)
    gpu = next(line for line in lines if line.split()[1:2] == ["gpu"])

    # Plain columns line up under their headers: read each count below its header.
    def cell(name: str) -> str:
        start = lines[0].index(name)
        return gpu[start - 2 : start + len(name)].strip()

    # GPU 1 is taken whole by the 7g.80gb partition: of the two GPUs one is held, one free.
    assert (cell("DEVICES"), cell("ALLOC"), cell("HELD"), cell("FREE")) == ("2", "0", "1", "1")
    assert any(line.startswith("HELD: ") for line in lines)
    assert any(line.startswith("FREE: ") for line in lines)
    assert not any(line != line.rstrip() for line in lines)


def test_no_headers_and_wide(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dradiag.render.console import forced_terminal

    assert run(["inventory", "--from", str(cluster), "--no-headers"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and not any(line.startswith(("NODE", "FREE:", "ALLOC:")) for line in lines)
    with forced_terminal(60):
        assert run(["inventory", "--from", str(cluster)]) == 0
        narrow = capsys.readouterr().out
        assert run(["inventory", "--from", str(cluster), "-o", "wide"]) == 0
        wide = capsys.readouterr().out
    import re

    narrow = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", narrow).split())
    assert "hidden at 60 columns; -o wide shows all" in narrow
    assert "team/big" not in narrow and "team/big" in wide
    assert "hidden at" not in wide


def test_n_is_never_node(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-n means namespace everywhere; inventory (devices, no namespace) has no -n."""
    assert run(["inventory", "--from", str(cluster), "-n", "node-h"]) == 2
    assert "No such option: -n" in capsys.readouterr().err
