"""The claim walk's known-issue hits: this claim's evidence handed to analyses/known_issues.

Kept apart from ``context.py`` so the walk gains one call: ``ClaimWalk.hits()`` puts these
hits ahead of the ordinary ones. The evidence in scope is the claim's: its events and its
pods' events, the kubelet-plugin logs of its nodes and its pods' logs, the claim, its
pods and the plugin pods, the Nodes and their ResourceSlices (a few hundred at most for a
claim that has no node yet). A hit is tied to the pod it is about; one about the claim or
a node is tied to every bound pod in the phases that read hits per pod.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

from dradiag.analyses import plugin_health as ph
from dradiag.snapshot.model import K8sObject, name_of, namespace_of
from dradiag.vocabulary import Phase

if TYPE_CHECKING:
    from dradiag.diagnosis.context import ClaimWalk, RuleHit

MAX_SLICES = 200
"""ResourceSlices a symptom is looked for in, for a claim with no node yet."""

PER_POD_PHASES = frozenset({Phase.PREPARE, Phase.INJECTION, Phase.WORKLOAD})
"""Phases that read rule hits per pod."""


def known_issue_hits(walk: ClaimWalk) -> list[RuleHit]:
    """Known-issue rule hits over ``walk``'s evidence, as the walk's RuleHits."""
    from dradiag.diagnosis.context import RuleHit

    rulebook = walk.rulebook
    if rulebook is None or not getattr(rulebook, "known_issues", ()):
        return []
    try:
        from dradiag.analyses.known_issues import match_known_issues
    except ImportError:  # a build without rule matching (DRA-*-NOT-COLLECTED cases)
        return []
    snapshot = walk.snapshot
    plugin_pods = [h.pod for n in walk.publication_nodes() if (h := walk.plugin(n)).pod]
    pods = [*plugin_pods, *walk.pods]
    events = [*walk.claim_events()] + [e for p in walk.pods for e in walk.pod_events(p)]
    logs = [
        log for n in walk.publication_nodes() for log in ph.plugin_logs(snapshot, walk.plugin(n))
    ]
    logs += [log for p in walk.pods for log in snapshot.logs_for(namespace_of(p), name_of(p))]
    nodes = walk.nodes() or walk.publication_nodes()
    # The first MAX_SLICES only: a pending claim's driver publishes a slice per node, and
    # listing them all made every such walk grow with the fleet. Read lazily: the objects
    # are matched only where some version is affected (rarely).
    if nodes:
        slices = (s for name in nodes for s in snapshot.slices_for(node=name))
    else:
        slices = (s for d in walk.drivers() for s in snapshot.slices_for(driver=d))
    objects: Iterable[tuple[str, K8sObject]] = itertools.chain(
        [("ResourceClaim", walk.claim)],
        (("Pod", p) for p in pods),
        (("Node", n) for name in nodes if (n := snapshot.node(name)) is not None),
        (("ResourceSlice", s) for s in itertools.islice(slices, MAX_SLICES)),
    )
    by_key = {(namespace_of(p), name_of(p)): p for p in pods}
    out: list[RuleHit] = []
    found = match_known_issues(
        rulebook,
        snapshot,
        events=events,
        logs=logs,
        objects=objects,
        nodes=nodes,
        clean_nodes=walk.shared.known_issue_clean if walk.shared is not None else None,
    )
    for hit in found:
        subject = hit.subject
        pod = by_key.get((subject.namespace, subject.name)) if subject.kind == "Pod" else None
        if (
            pod is not None
            and hit.rule.phase is Phase.PREPARE
            and (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            # A pod being deleted no longer waits on Prepare: a symptom read from its
            # status (ContainerCreating) is the deletion's, not a stalled Prepare's.
            continue
        targets: list[K8sObject | None] = [pod]
        if pod is None and hit.rule.phase in PER_POD_PHASES:
            targets = [*walk.bound_pods()] or [None]
        for target in targets:
            out.append(
                RuleHit(
                    finding=hit.to_finding(),
                    pod=target,
                    log_previous="(previous)" in hit.evidence.ref,
                    log_container=subject.container or "",
                )
            )
    return out
