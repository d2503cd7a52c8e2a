"""Kubernetes' DRA CEL selector test table (conformance/k8s/dra-cel-vectors.yaml): every vector passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.analyses.cel import CelCompileError, CelRuntimeError, cel_device, compile_selector

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS = REPO_ROOT.parent / "shared" / "conformance" / "k8s" / "dra-cel-vectors.yaml"


def _load() -> list[dict[str, Any]]:
    return yaml.safe_load(VECTORS.read_text())


def _attributes(vector: dict[str, Any]) -> dict[str, Any]:
    attrs = dict(vector.get("attributes") or {})
    gen = vector.get("attributes_generator")
    if gen:
        # dra.example.com/{x_padding}-{i}: names padded with "x" to 32 characters.
        for i in range(gen["count"]):
            suffix = f"-{i}"
            attrs[f"dra.example.com/{'x' * (32 - len(suffix))}{suffix}"] = gen["value"]
    return attrs


def _gate_runs(vector: dict[str, Any]) -> list[bool]:
    gate = vector["features"].get("listTypeAttributes")
    return [False, True] if gate is None else [bool(gate)]


CASES = [
    pytest.param(v, gate, id=f"{v['name']}[list={gate}]") for v in _load() for gate in _gate_runs(v)
]


@pytest.mark.parametrize(("vector", "list_gate"), CASES)
def test_vector(vector: dict[str, Any], list_gate: bool) -> None:
    device = cel_device(
        vector["driver"],
        {
            "name": "dev",
            "attributes": _attributes(vector),
            "capacity": vector.get("capacity") or {},
            "allowMultipleAllocations": vector.get("allowMultipleAllocations"),
        },
    )
    expect = vector["expect"]
    try:
        selector = compile_selector(
            vector["expression"],
            environment=vector["env"],
            list_type_attributes=list_gate,
            consumable_capacity=bool(vector["features"].get("consumableCapacity")),
        )
        result: Any = selector.matches(device)
        phase = None
    except CelCompileError as exc:
        result, phase = exc, "compile"
    except CelRuntimeError as exc:
        result, phase = exc, "eval"
    if expect == "error":
        assert phase is not None, f"expected an error, got {result!r}"
        assert phase == vector.get("error_phase", phase)
        substring = vector.get("error_substring")
        if substring:
            assert substring in str(result)
    else:
        assert phase is None, f"unexpected {phase} error: {result}"
        assert result is expect


def test_every_vector_is_run() -> None:
    assert len(_load()) >= 80
