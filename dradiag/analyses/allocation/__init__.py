"""The scheduler's DRA allocator, reproduced and explained (k8s-dra-semantics §3).

Public API (stable names other analyses and commands call):

- :class:`FeatureGates` — enabled DRA gates and the Kubernetes version; picks the
  allocator variant (stable / incubating / experimental).
- :func:`simulate_allocation` — one pod's claims on one node: the allocator's outcome,
  its witness allocation and, per request, the funnel that explains a failure.
- :class:`Simulation` — that result; ``to_dict()`` is the ``dradiag simulate`` document.
- :func:`explain_across_nodes` — the same on every node, summarized, with findings for
  the diagnosis engine's allocation phase.
"""

from __future__ import annotations

from dradiag.analyses.allocation.candidates import AllocatorError
from dradiag.analyses.allocation.explain import (
    ClusterExplanation,
    NodeOutcome,
    RequestFunnel,
    Simulation,
    explain_across_nodes,
    simulate_allocation,
)
from dradiag.analyses.allocation.features import FeatureGates

__all__ = [
    "AllocatorError",
    "ClusterExplanation",
    "FeatureGates",
    "NodeOutcome",
    "RequestFunnel",
    "Simulation",
    "explain_across_nodes",
    "simulate_allocation",
]
