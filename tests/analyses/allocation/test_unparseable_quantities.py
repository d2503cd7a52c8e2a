"""Consumable capacity with quantities that do not parse: no exception, no false fit."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dradiag.analyses.allocation.counters import capacity_fits, consumed_capacity


def _entry(capacity: dict[str, Any]) -> Any:
    return SimpleNamespace(capacity=capacity)


def test_a_junk_request_or_policy_quantity_does_not_fit_and_consumes_nothing() -> None:
    junk_policy = _entry(
        {"memory": {"value": "80Gi", "requestPolicy": {"validRange": {"min": "x"}}}}
    )
    assert capacity_fits(junk_policy, {"requests": {"memory": "10Gi"}}, {}, {}) is False
    assert consumed_capacity(junk_policy, {"requests": {"memory": "10Gi"}}) == {}
    plain = _entry({"memory": {"value": "80Gi"}})
    assert capacity_fits(plain, {"requests": {"memory": "abcMi"}}, {}, {}) is False
    assert capacity_fits(plain, {"requests": {"memory": "10Gi"}}, {}, {}) is True
    assert consumed_capacity(plain, {"requests": {"memory": "10Gi"}})["memory"][1] == "10Gi"
