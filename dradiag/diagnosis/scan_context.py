"""What one ``scan`` computes once and every claim and node walk of it reads.

A scan walks tens of thousands of claims over thousands of nodes, and most of what a
walk needs is the same for thousands of them: which pods are kubelet plugins and on
which node, each node's plugin health, the rule matches over each plugin pod and its
logs, the selection analysis of a spec. Computing those per claim (or, worse, per
node over every pod) made scan grow with nodes × pods. One ScanContext per scan,
passed down explicitly, holds them; nothing is cached at module level, so two
snapshots in one process never share an answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.snapshot.model import K8sObject, Snapshot
from dradiag.vocabulary import Finding


@dataclass(frozen=True, slots=True)
class PluginLogHit:
    """One rule match in a plugin pod's log, with which log it came from."""

    finding: Finding
    previous: bool
    container: str


@dataclass(slots=True)
class ScanContext:
    """Per-scan facts shared by every walk of one snapshot (see the module docstring)."""

    snapshot: Snapshot
    rulebook: Any | None
    plugins: ph.PluginIndex
    selection_cache: dict[tuple[str, str], list[Finding]] = field(default_factory=dict)
    """Claims with the same spec in a namespace select alike."""
    _health: dict[str, ph.PluginHealth] = field(default_factory=dict)
    _object_hits: dict[str, list[Finding]] = field(default_factory=dict)
    _log_hits: dict[str, list[PluginLogHit]] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: Snapshot, rulebook: Any | None) -> ScanContext:
        """The context of one scan of ``snapshot``: plugin pods indexed in one pass."""
        return cls(snapshot=snapshot, rulebook=rulebook, plugins=ph.PluginIndex(snapshot))

    def plugin(self, node: str) -> ph.PluginHealth:
        """The plugin health of ``node``, computed once per scan."""
        health = self._health.get(node)
        if health is None:
            health = ph.plugin_health(self.snapshot, node, index=self.plugins)
            self._health[node] = health
        return health

    def plugin_object_hits(
        self, node: str, match_objects: Callable[..., Any]
    ) -> list[Finding]:
        """Object-rule findings on ``node``'s plugin pod, matched once per scan."""
        hits = self._object_hits.get(node)
        if hits is None:
            pod: K8sObject | None = self.plugin(node).pod
            hits = (
                [h.to_finding() for h in match_objects(self.rulebook, "Pod", [pod])]
                if pod is not None and self.rulebook is not None
                else []
            )
            self._object_hits[node] = hits
        return hits

    def plugin_log_hits(self, node: str, match_logs: Callable[..., Any]) -> list[PluginLogHit]:
        """Log-rule findings in ``node``'s plugin logs, matched once per scan."""
        hits = self._log_hits.get(node)
        if hits is None:
            hits = []
            if self.rulebook is not None:
                for log in ph.plugin_logs(self.snapshot, self.plugin(node)):
                    hits += [
                        PluginLogHit(h.to_finding(), log.previous, log.container)
                        for h in match_logs(self.rulebook, [log])
                    ]
            self._log_hits[node] = hits
        return hits
