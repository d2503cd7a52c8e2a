"""Device taints and request tolerations (``resourceclaim.ToleratesTaint``, k8s-dra-semantics §3.11).

Only ``NoSchedule`` and ``NoExecute`` block allocation; ``None`` and unknown effects are
ignored. Taints come from the slice and from DeviceTaintRules (merged into each
device's record in ``candidates.py``, as the scheduler's slice tracker does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["BLOCKING_EFFECTS", "blocking_taints", "tolerates"]

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates one taint.

    An empty toleration effect matches every effect; an empty key with ``Exists``
    matches every key; ``Equal`` (the default) compares values.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return operator == "Exists"


def blocking_taints(
    taints: Sequence[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The taints that keep a request off the device (empty when it may be allocated)."""
    return [
        t
        for t in taints
        if t.get("effect") in BLOCKING_EFFECTS and not any(tolerates(tol, t) for tol in tolerations)
    ]
