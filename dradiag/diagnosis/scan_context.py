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
from dataclasses import dataclass, field, replace
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.diagnosis.context import ComponentMatch, component_matches
from dradiag.diagnosis.next_context import NextContext, node_context
from dradiag.diagnosis.next_steps import StepMemo
from dradiag.snapshot.model import K8sObject, Snapshot, key_of
from dradiag.vocabulary import Evidence, Finding

Simulated = tuple[list[Finding], list[str]]
"""The allocation simulator's findings for a claim, and the nodes where it fits now."""


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
    _simulations: dict[bytes, tuple[str, Simulated | None, tuple[bool, ...]]] = field(
        default_factory=dict
    )
    _selections: dict[bytes, tuple[str, list[Finding], tuple[bool, ...]]] = field(
        default_factory=dict
    )
    class_drivers: dict[str, list[str]] = field(default_factory=dict)
    """The drivers each DeviceClass names (``context.class_drivers``), once per scan."""
    _last_spec: tuple[K8sObject | None, bytes | None] = (None, None)
    _node_contexts: dict[tuple[str, int, bool], tuple[K8sObject | None, NextContext]] = field(
        default_factory=dict
    )
    _doubly: frozenset[tuple[str, str, str]] | None = None
    _component: list[ComponentMatch] | None = None
    next_steps: StepMemo = field(default_factory=StepMemo)
    """Concrete next steps worked out once per template and the context values it reads."""
    known_issue_clean: set[str | None] = field(default_factory=set)
    """Nodes with no affected known-issue reading (``match_known_issues``' clean_nodes)."""

    @classmethod
    def of(cls, snapshot: Snapshot, rulebook: Any | None) -> ScanContext:
        """The context of one scan of ``snapshot``: plugin pods indexed in one pass."""
        return cls(snapshot=snapshot, rulebook=rulebook, plugins=ph.PluginIndex(snapshot))

    def doubly_published(self) -> frozenset[tuple[str, str, str]]:
        """(driver, pool, device) of every device in a GPU-and-MIG double publication
        (``analyses.double_publication``), computed once per scan."""
        if self._doubly is None:
            from dradiag.analyses.double_publication import double_published

            self._doubly = frozenset(
                (pair.driver, pair.pool, name)
                for pair in double_published(self.snapshot.slices)
                for name in pair.devices()
            )
        return self._doubly

    def plugin(self, node: str) -> ph.PluginHealth:
        """The plugin health of ``node``, computed once per scan."""
        health = self._health.get(node)
        if health is None:
            health = ph.plugin_health(self.snapshot, node, index=self.plugins)
            self._health[node] = health
        return health

    def plugin_object_hits(self, node: str, match_objects: Callable[..., Any]) -> list[Finding]:
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

    def component_matches(
        self, match_events: Callable[..., Any], match_logs: Callable[..., Any]
    ) -> list[ComponentMatch]:
        """The rule hits of the component logs (``kubelet.log`` …), matched once per scan;
        each claim keeps those about it."""
        if self._component is None:
            self._component = component_matches(
                self.snapshot, self.rulebook, match_events, match_logs
            )
        return self._component

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

    def node_context(
        self, node: str, plugin: K8sObject | None, *, find_driver_namespace: bool
    ) -> NextContext:
        """``next_context.node_context`` of ``node`` and its plugin pod, once per scan: it
        reads the snapshot's source, node states and (maybe) every plugin pod's namespace,
        the same for every claim on the node. The entry holds the pod, so its id stays its
        own."""
        key = (node, id(plugin), find_driver_namespace)
        known = self._node_contexts.get(key)
        if known is None:
            built = node_context(
                self.snapshot, node, plugin, find_driver_namespace=find_driver_namespace
            )
            known = self._node_contexts[key] = (plugin, built)
        return known[1]

    def simulation(
        self, claim: K8sObject, simulate: Callable[[], Simulated | None]
    ) -> Simulated | None:
        """The simulator's answer for a pending ``claim``, run once per distinct spec.

        The allocator's outcome for an unallocated claim depends on its spec and the
        cluster, not on its name: thousands of pending claims from one template get one
        simulation (on every node), its findings re-addressed to each claim.
        """
        key = self._spec_key(claim)
        if key is None:
            return simulate()
        cached = self._simulations.get(key)
        if cached is None:
            result = simulate()
            first = key_of(claim)
            named = tuple(_mentions(f, first) for f in result[0]) if result else ()
            self._simulations[key] = (first, result, named)
            return result
        first, result, named = cached
        if result is None:
            return None
        findings, fits = result
        return _all_readdressed(findings, named, first, key_of(claim)), list(fits)

    def selection(self, claim: K8sObject, analyse: Callable[[], list[Finding]]) -> list[Finding]:
        """The selection analysis of ``claim``, run once per distinct spec (classes and
        selectors decide it, not the claim's name), re-addressed to it.

        Not once per namespace: the analysis reads the namespace only to label the claim
        (``ns/name``, analyses/selection/findings.py ``_claim_label``), which the
        re-addressing rewrites whole; 50 namespaces of one template were 50 analyses of
        every device in the cluster.
        """
        key = self._spec_key(claim)
        if key is None:
            return analyse()
        cached = self._selections.get(key)
        if cached is None:
            findings = analyse()
            first = key_of(claim)
            named = tuple(_mentions(f, first) for f in findings)
            self._selections[key] = (first, findings, named)
            return list(findings)
        first, findings, named = cached
        return _all_readdressed(findings, named, first, key_of(claim))

    def _spec_key(self, claim: K8sObject) -> bytes | None:
        """``_spec_key(claim)``, serialised once per walk: its selection and then its
        simulation ask for the same claim (only the last one is kept: a key per claim
        would be held for the whole scan)."""
        last, key = self._last_spec
        if last is not claim:
            key = _spec_key(claim)
            self._last_spec = (claim, key)
        return key


def _all_readdressed(
    findings: list[Finding], named: tuple[bool, ...], old: str, new: str
) -> list[Finding]:
    """``findings`` computed for claim ``old``, re-addressed to ``new``; ``named`` says
    which of them mention ``old`` at all (the others are shared as they are)."""
    return [_readdressed(f, old, new) if n else f for f, n in zip(findings, named, strict=True)]


def _spec_key(claim: K8sObject) -> bytes | None:
    """The claim's spec, canonically serialised; None when it cannot be."""
    import orjson

    try:
        return bytes(orjson.dumps(claim.get("spec"), option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return None


def _readdressed(finding: Finding, old: str, new: str) -> Finding:
    """``finding`` with the claim it was computed for (``ns/name``) replaced by ``new``."""
    if old == new or not _mentions(finding, old):
        return finding  # shared, not copied: 60,000 pending claims, one finding object
    import re

    # Whole keys only: team-0/claim-5 must not rewrite a holder named team-0/claim-50.
    pattern = re.compile(r"(?<![\w.-])" + re.escape(old) + r"(?![\w.-])")

    def swap(text: str) -> str:
        return pattern.sub(lambda _m: new, text) if old in text else text

    return replace(
        finding,
        title=swap(finding.title),
        detail=swap(finding.detail),
        evidence=tuple(
            Evidence(source=e.source, ref=swap(e.ref), excerpt=swap(e.excerpt))
            for e in finding.evidence
        ),
        next=tuple(swap(n) for n in finding.next),
        identifiers=tuple((layer, swap(value)) for layer, value in finding.identifiers),
    )


def _mentions(finding: Finding, key: str) -> bool:
    """Whether any text of ``finding`` contains ``key`` (then it must be re-addressed)."""
    texts = [finding.title, finding.detail, *finding.next]
    texts += [t for e in finding.evidence for t in (e.ref, e.excerpt)]
    texts += [value for _layer, value in finding.identifiers]
    return any(key in t for t in texts)
