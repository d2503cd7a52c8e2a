"""Kubernetes' DRA CEL selector test table (conformance/k8s/dra-cel-vectors.yaml): every vector passes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.analyses.cel import CelCompileError, CelRuntimeError, cel_device, compile_selector

VECTORS = Path(__file__).with_name("data") / "k8s" / "dra-cel-vectors.yaml"


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


# --------------------------------------------------------------------------------------
# Cost: cel-go's worst-case estimate (expect_cost) bounds what dradiag charges
# --------------------------------------------------------------------------------------
COST_LIMIT = 1_000_000  # Kubernetes' per-evaluation runtime cost limit (the vectors' header)
COSTED = [v for v in _load() if "expect_cost" in v]


def _compile(vector: dict[str, Any], list_gate: bool = True) -> Any:
    return compile_selector(
        vector["expression"],
        environment=vector["env"],
        list_type_attributes=list_gate,
        consumable_capacity=bool(vector["features"].get("consumableCapacity")),
    )


def test_the_costed_vectors_are_all_there() -> None:
    # 46 entries carry expect_cost (49 lines name it: three are header comments and notes).
    assert len(COSTED) == 46


@pytest.mark.parametrize("vector", COSTED, ids=[v["name"] for v in COSTED])
def test_cost_within_cel_gos_estimate(vector: dict[str, Any]) -> None:
    """Upstream: a compiled selector's actual runtime cost never exceeds its MaxCost estimate.

    dradiag's metered cost of the evaluation (what it charges against the limit) must stay
    within the estimate too, or dradiag could report a cost-limit error the scheduler
    would not; an estimate over the limit must trip the runtime limit.
    """
    list_gate = vector["features"].get("listTypeAttributes")
    try:
        selector = _compile(vector, True if list_gate is None else bool(list_gate))
    except CelCompileError:
        assert vector["expect"] == "error" and vector.get("error_phase", "compile") == "compile"
        return
    estimate = int(vector["expect_cost"])
    try:
        cost = selector.metered_cost(_device(vector))
    except CelRuntimeError as exc:
        assert vector["expect"] == "error"
        over = "actual cost limit exceeded" in str(exc)
        assert over == (estimate > COST_LIMIT), f"estimate {estimate}, got {exc}"
        return
    assert estimate <= COST_LIMIT
    assert 0 < cost <= estimate, f"dradiag charges {cost}, cel-go's estimate is {estimate}"


# --------------------------------------------------------------------------------------
# Batch API: sweep/select (plain and memoized) equal matches on every device
# --------------------------------------------------------------------------------------
def _device(vector: dict[str, Any]) -> Any:
    return cel_device(
        vector["driver"],
        {
            "name": vector["name"],
            "attributes": _attributes(vector),
            "capacity": vector.get("capacity") or {},
            "allowMultipleAllocations": vector.get("allowMultipleAllocations"),
        },
    )


def _outcome(value: Any) -> Any:
    """True/False, or the error's class and message."""
    if isinstance(value, CelRuntimeError):
        return (type(value).__name__, str(value))
    assert value is True or value is False, value
    return value


def _per_device(selector: Any, devices: list[Any]) -> list[Any]:
    out = []
    for device in devices:
        try:
            out.append(selector.matches(device))
        except CelRuntimeError as exc:
            out.append(exc)
    return [_outcome(v) for v in out]


def _memoized_per_device(selector: Any, devices: list[Any]) -> list[Any]:
    fn = selector.memoized()
    out = []
    for device in devices:
        try:
            out.append(fn(device))
        except CelRuntimeError as exc:
            out.append(exc)
    return [_outcome(v) for v in out]


def assert_batch_equals_matches(selector: Any, devices: list[Any]) -> None:
    expected = _per_device(selector, devices)
    assert [_outcome(v) for v in selector.sweep(devices)] == expected
    for memoize in (False, True):
        matched, errors = selector.select(devices, memoize=memoize)
        assert matched == [i for i, v in enumerate(expected) if v is True]
        assert [(i, _outcome(e)) for i, e in errors] == [
            (i, v) for i, v in enumerate(expected) if isinstance(v, tuple)
        ]
    # Twice: the first memoized sweep classifies and evaluates, the second hits.
    assert [_outcome(v) for v in selector.sweep(devices, memoize=True)] == expected
    assert [_outcome(v) for v in selector.sweep(devices, memoize=True)] == expected
    assert _memoized_per_device(selector, devices) == expected
    assert selector.sweep([]) == [] and selector.select([]) == ([], [])


ALL_DEVICES = [_device(v) for v in _load()]


@pytest.mark.parametrize(("vector", "list_gate"), CASES)
def test_vector_batch(vector: dict[str, Any], list_gate: bool) -> None:
    """Each vector's selector swept over every vector's device, its own included, in one batch."""
    try:
        selector = compile_selector(
            vector["expression"],
            environment=vector["env"],
            list_type_attributes=list_gate,
            consumable_capacity=bool(vector["features"].get("consumableCapacity")),
        )
    except CelCompileError:
        return
    # Each device twice, in two orders: results must not depend on the previous device.
    devices = ALL_DEVICES + ALL_DEVICES[::-1]
    if "cost limit" in str(vector.get("error_substring")):
        # Up to a second per evaluation: its own device, the plain sweep only.
        devices = [_device(vector)]
        assert [_outcome(v) for v in selector.sweep(devices)] == _per_device(selector, devices)
        return
    assert_batch_equals_matches(selector, devices)
