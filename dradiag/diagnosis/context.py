"""One claim's walk context: WalkOptions, the ClaimWalk it reads through, and pod/claim look-ups.

Everything a phase reads is gathered once here, through the Snapshot's indexes, so one
claim in a 5,000-node snapshot costs what it costs in a five-node one (``bench/diagnose.py``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from dradiag.analyses import plugin_health as ph
from dradiag.analyses import wiring
from dradiag.analyses.timeline import (
    DEFAULT_STUCK_AFTER,
    age,
    parse_time,
    reference_now,
)
from dradiag.diagnosis.links import ClaimLinks
from dradiag.diagnosis.resolve import pod_claim_names_for
from dradiag.diagnosis.rule_ids import NOT_COLLECTED
from dradiag.snapshot.driver_workloads import COMPUTE_DOMAIN_LABEL, compute_domain_ids
from dradiag.snapshot.model import (
    RESOURCE_OF_KIND,
    K8sObject,
    Kind,
    Snapshot,
    allocated_devices,
    key_of,
    name_of,
    namespace_of,
    node_selector_names,
    uid_of,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

if TYPE_CHECKING:
    from dradiag.diagnosis.lifecycle import Crossing
    from dradiag.diagnosis.scan_context import ScanContext

NVIDIA_DRIVER = "gpu.nvidia.com"
"""The driver dradiag knows best; the default when a claim's driver cannot be derived."""
MAX_PLUGIN_NODES = 20
"""Plugin pods examined when the claim has no node yet and its driver publishes nothing."""


# Container waiting reasons that prove the pod sandbox exists, hence Prepare succeeded.
_AFTER_SANDBOX_WAITING = frozenset(
    {
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
    }
)


# Kubelet event reasons emitted only once the sandbox exists (after Prepare).
_AFTER_SANDBOX_EVENTS = frozenset({"Pulling", "Pulled", "Created", "Started", "BackOff"})


_DRIVER_IN_CEL = re.compile(r"device\.driver\s*==\s*['\"]([^'\"]+)['\"]")


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkOptions:
    """What a walk needs besides the Snapshot: the reference time and the threshold."""

    now: datetime | None = None
    """The moment ages are measured against; None: the snapshot's collection time, else
    its newest timestamp (``timeline.reference_now``)."""
    stuck_after: timedelta = DEFAULT_STUCK_AFTER
    simulate: bool = True
    """Run the allocation simulator for an unallocated claim (every node: seconds on a
    5,000-node cluster). ``scan`` turns it off and relies on the scheduler's evidence."""


def optional_rulebook() -> Any | None:
    try:
        from dradiag.rulebook import load_rulebook
    except ImportError:  # pragma: no cover - the rulebook is part of the package
        return None
    return load_rulebook()


@functools.cache
def optional_matcher(name: str) -> Callable[..., Any] | None:
    """``analyses.rule_matching.<name>``, or None in a build without it; looked up once
    (every walk asks for three of them, and an import statement is not free)."""
    try:
        from dradiag.analyses import rule_matching
    except ImportError:
        return None
    fn = getattr(rule_matching, name, None)
    return fn if callable(fn) else None


def class_drivers(snapshot: Snapshot, cls_name: str) -> list[str]:
    """The drivers DeviceClass ``cls_name``'s selectors name (``device.driver == …``).

    A scan asks once per class (``ScanContext.class_drivers``), not once per claim."""
    cls = snapshot.device_class(cls_name)
    if cls is None:
        # The class is not in the input (or not in the cluster): the NVIDIA driver's own
        # classes are known, and their name says their driver.
        from dradiag.analyses.selection.build import builtin_device_classes

        cls = next((c for c in builtin_device_classes() if name_of(c) == cls_name), None)
    found: list[str] = []
    for sel in ((cls or {}).get("spec") or {}).get("selectors") or ():
        expr = str(((sel or {}).get("cel") or {}).get("expression") or "")
        found += _DRIVER_IN_CEL.findall(expr)
    return found


def pod_key(pod: K8sObject) -> str:
    return f"{namespace_of(pod)}/{name_of(pod)}"


def pod_status_of(pod: K8sObject) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if isinstance(status, Mapping) else {}


def container_statuses(pod: K8sObject) -> list[Mapping[str, Any]]:
    return [s for s in pod_status_of(pod).get("containerStatuses") or () if isinstance(s, Mapping)]


def pod_condition(pod: K8sObject, ctype: str) -> Mapping[str, Any] | None:
    for cond in pod_status_of(pod).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == ctype:
            return cond
    return None


def node_ready_since(node: K8sObject | None) -> datetime | None:
    """When the node last became Ready (its Ready=True condition's transition), or None.

    A node that came back after the pod started (a reboot) lost what Prepare left on it
    (CDI specs under /var/run, MIG devices), so later phases compare the two times."""
    for cond in ((node or {}).get("status") or {}).get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "Ready"
            and cond.get("status") == "True"
        ):
            return parse_time(cond.get("lastTransitionTime"))
    return None


def pod_done(pod: K8sObject) -> bool:
    return pod_status_of(pod).get("phase") in ("Succeeded", "Failed")


def pod_terminating(pod: K8sObject) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def pod_started(pod: K8sObject) -> bool:
    """True when the pod's sandbox exists, which the kubelet creates only after Prepare."""
    if pod_status_of(pod).get("phase") in ("Running", "Succeeded"):
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in pod_status_of(pod).get(key) or ():
            if not isinstance(cs, Mapping):
                continue
            state = cs.get("state") or {}
            if "running" in state or "terminated" in state:
                return True
            if "terminated" in (cs.get("lastState") or {}):
                return True
            if (state.get("waiting") or {}).get("reason") in _AFTER_SANDBOX_WAITING:
                return True
            if cs.get("containerID") or cs.get("imageID"):
                return True
    return False


def pod_all_running(pod: K8sObject) -> bool:
    statuses = container_statuses(pod)
    if pod_status_of(pod).get("phase") == "Succeeded":
        return True
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def scheduled_at(pod: K8sObject) -> datetime | None:
    cond = pod_condition(pod, "PodScheduled")
    if cond is not None and cond.get("status") == "True":
        if t := parse_time(cond.get("lastTransitionTime")):
            return t
    return parse_time(pod_status_of(pod).get("startTime")) or parse_time(
        (pod.get("metadata") or {}).get("creationTimestamp")
    )


def claim_devices(claim: K8sObject) -> list[tuple[str, str, str, str]]:
    """(request, driver, pool, slice device name) of every allocation result."""
    return [
        (
            str(r.get("request") or ""),
            str(r.get("driver") or ""),
            str(r.get("pool") or ""),
            str(r.get("device") or ""),
        )
        for r in allocated_devices(claim)
    ]


def class_names(claim: K8sObject) -> list[str]:
    names: list[str] = []
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or ():
        if not isinstance(req, Mapping):
            continue
        exactly = req.get("exactly") or {}
        if exactly.get("deviceClassName"):
            names.append(str(exactly["deviceClassName"]))
        for sub in req.get("firstAvailable") or ():
            if isinstance(sub, Mapping) and sub.get("deviceClassName"):
                names.append(str(sub["deviceClassName"]))
    return list(dict.fromkeys(names))


@dataclass(slots=True)
class RuleHit:
    """A rule match on one evidence item, and what it was about."""

    finding: Finding
    pod: K8sObject | None = None
    log_previous: bool = False
    log_container: str = ""
    last_seen: str | None = None
    """For an event hit: the event's last occurrence (current evidence outranks older)."""
    first_seen: str | None = None
    count: int = 1
    """For an event hit: its first occurrence and how many there were (how long it lasts)."""


@dataclass(slots=True)
class ClaimWalk:
    """Everything one claim's walk reads, gathered once through the Snapshot's indexes."""

    snapshot: Snapshot
    claim: K8sObject
    options: WalkOptions
    pods: list[K8sObject]
    rulebook: Any | None
    synthesized: bool = False
    _now: datetime | None = None
    _now_done: bool = False
    _hits: list[RuleHit] | None = None
    _plugin: dict[str, ph.PluginHealth] = field(default_factory=dict)
    _publication_nodes: list[str] | None = None
    _drivers: list[str] | None = None
    _allocation: Mapping[str, Any] | None = None
    _allocation_done: bool = False
    _nodes: list[str] | None = None
    _crossings: Mapping[Phase, Crossing] | None = None
    _events: dict[tuple[str, str, str] | None, list[K8sObject]] = field(default_factory=dict)
    """The claim's (key None) and each pod's (by namespace, name, UID) events, looked up
    once per walk: the hits, the known issues and every lifecycle crossing read them."""
    selection_cache: dict[tuple[str, str], list[Finding]] | None = None
    """Shared by ``scan``: claims with the same spec in a namespace select alike."""
    links: ClaimLinks = field(default_factory=ClaimLinks)
    """How each pod and event was tied to the claim (``diagnosis.links``)."""
    missing: dict[Phase, list[Kind]] = field(default_factory=dict)
    """Kinds each phase needed but the snapshot did not collect (its basis detail)."""
    unknown_reason: dict[Phase, str] = field(default_factory=dict)
    """Why a phase is unknown when it is not a missing kind (e.g. the claim's status)."""
    for_allocation: list[Finding] = field(default_factory=list)
    """Findings the selection analysis made that are the allocator's (counts, constraints):
    the selection phase hands them to the allocation phase."""
    shared: ScanContext | None = None
    """The scan's per-snapshot facts (plugin index, node health, plugin rule hits);
    None for a single ``claim`` or ``pod``, which reads only its own nodes."""

    # identity -------------------------------------------------------------------------
    @property
    def claim_key(self) -> str:
        return key_of(self.claim)

    @property
    def claim_uid(self) -> str:
        return uid_of(self.claim)

    @property
    def allocation(self) -> Mapping[str, Any] | None:
        """The claim's ``status.allocation`` when it has one (read once: every phase asks)."""
        if self._allocation_done:
            return self._allocation
        status = self.claim.get("status")
        alloc = status.get("allocation") if isinstance(status, Mapping) else None
        self._allocation = alloc if isinstance(alloc, Mapping) and alloc else None
        self._allocation_done = True
        return self._allocation

    @property
    def status_known(self) -> bool:
        """False when the claim came without a ``status`` (a manifest, or pasted spec).

        The API server always serves ``status`` (``{}`` while unallocated), so its
        absence says nothing about the allocation: it is unknown, not missing.
        """
        return self.synthesized or isinstance(self.claim.get("status"), Mapping)

    def crossings(self) -> Mapping[Phase, Crossing]:
        """The boundaries the claim provably crossed (``diagnosis.lifecycle``), worked out
        once per walk: the phases and the basis pass all ask."""
        if self._crossings is None:
            from dradiag.diagnosis.lifecycle import crossings

            self._crossings = crossings(self)
        return self._crossings

    @property
    def allocated(self) -> bool:
        """The claim is allocated: by its ``status.allocation``, or, when its status was not
        given, by later evidence (a kubelet prepare attempt, a started container). A
        status that was given is the truth: old evidence does not overrule it."""
        if self.allocation is not None:
            return True
        return not self.status_known and bool(self.allocation_proof())

    def allocation_proof(self) -> str:
        """Evidence that the claim is (or was) allocated, "" when there is none."""
        proof = self.crossings().get(Phase.ALLOCATION)
        return proof.ref if proof is not None else ""

    @property
    def now(self) -> datetime | None:
        if not self._now_done:
            self._now = reference_now(self.snapshot, self.options.now)
            self._now_done = True
        return self._now

    def older_than_threshold(self, since: datetime | None) -> bool | None:
        """True/False when both ``since`` and now are known, else None."""
        elapsed = age(since, self.now)
        return None if elapsed is None else elapsed > self.options.stuck_after

    # topology ----------------------------------------------------------------------------
    def drivers(self) -> list[str]:
        """The claim's drivers (its results', else its classes', else those publishing),
        worked out once per walk: publication, the known issues and the hits all ask."""
        if self._drivers is None:
            self._drivers = self._find_drivers()
        return list(self._drivers)

    def _find_drivers(self) -> list[str]:
        found = [d for _r, d, _p, _dev in claim_devices(self.claim) if d]
        if not found:
            for cls_name in class_names(self.claim):
                if self.shared is None:
                    found += class_drivers(self.snapshot, cls_name)
                    continue
                known = self.shared.class_drivers.get(cls_name)
                if known is None:
                    known = self.shared.class_drivers[cls_name] = class_drivers(
                        self.snapshot, cls_name
                    )
                found += known
        if found:
            return list(dict.fromkeys(found))
        # No class names its driver (or the class was not collected): the drivers that
        # publish on the claim's nodes are the candidates; with no node yet, every driver
        # publishing at all. Only when nothing is published is the NVIDIA driver assumed.
        if self.snapshot.is_collected(Kind.RESOURCE_SLICE):
            pods_nodes = [str(n) for p in self.pods if (n := (p.get("spec") or {}).get("nodeName"))]
            on_nodes = {
                str((s.get("spec") or {}).get("driver") or "")
                for n in pods_nodes
                for s in self.snapshot.slices_for(node=n)
            }
            publishing = sorted(d for d in on_nodes if d) or self.snapshot.drivers()
            if publishing:
                return publishing
        return [NVIDIA_DRIVER]

    def nodes(self) -> list[str]:
        """The claim's nodes (allocation, pods, reporting kubelets), once per walk."""
        if self._nodes is None:
            self._nodes = self._find_nodes()
        return list(self._nodes)

    def _find_nodes(self) -> list[str]:
        nodes: set[str] = set()
        if self.allocation:
            nodes |= set(node_selector_names(self.allocation.get("nodeSelector")))
            for _req, driver, pool, _dev in claim_devices(self.claim):
                for slc in self.snapshot.pool_slices(driver, pool):
                    if node := (slc.get("spec") or {}).get("nodeName"):
                        nodes.add(str(node))
        for pod in self.pods:
            if node := (pod.get("spec") or {}).get("nodeName"):
                nodes.add(str(node))
        if not nodes:
            # An event naming the claim says which kubelet reported it.
            nodes |= {link.node for link in self.links.mentioned_by if link.node}
        return sorted(nodes)

    def publication_nodes(self) -> list[str]:
        """Nodes whose plugin matters: the claim's, or, while the claim's driver publishes
        nothing at all, every node running a plugin pod (the cause is on one of them)."""
        if self._publication_nodes is not None:
            return self._publication_nodes
        nodes = self.nodes()
        if not nodes and not any(self.snapshot.slices_for(driver=d) for d in self.drivers()):
            if self.shared is not None:
                nodes = self.shared.plugins.nodes[:MAX_PLUGIN_NODES]
            else:
                found = {
                    str((p.get("spec") or {}).get("nodeName"))
                    for p in self.snapshot.pods
                    if (p.get("spec") or {}).get("nodeName") and ph.is_plugin_pod(p)
                }
                nodes = sorted(found)[:MAX_PLUGIN_NODES]
        self._publication_nodes = nodes
        return nodes

    def bound_pods(self) -> list[K8sObject]:
        return [p for p in self.pods if (p.get("spec") or {}).get("nodeName")]

    def prepared_on(self, node: str) -> bool:
        return any(
            (p.get("spec") or {}).get("nodeName") == node and pod_started(p) for p in self.pods
        )

    def plugin(self, node: str) -> ph.PluginHealth:
        if self.shared is not None:
            return self.shared.plugin(node)
        if node not in self._plugin:
            self._plugin[node] = ph.plugin_health(self.snapshot, node)
        return self._plugin[node]

    def any_plugin_pod(self) -> bool:
        """True when the snapshot holds any kubelet-plugin pod."""
        if self.shared is not None:
            return self.shared.plugins.any_plugin_pod
        return any(ph.is_plugin_pod(p) for p in self.snapshot.pods)

    # events and rule hits ---------------------------------------------------------------
    def claim_events(self) -> list[K8sObject]:
        if self.synthesized:
            return []
        found = self._events.get(None)
        if found is None:
            found = self._events[None] = self.snapshot.events_for(
                "ResourceClaim",
                namespace_of(self.claim),
                name_of(self.claim),
                self.claim_uid or None,
            )
        return list(found)

    def pod_events(self, pod: K8sObject) -> list[K8sObject]:
        key = (namespace_of(pod), name_of(pod), uid_of(pod))
        found = self._events.get(key)
        if found is None:
            found = self._events[key] = self.snapshot.events_for("Pod", *key[:2], key[2] or None)
        return list(found)

    def hits(self) -> list[RuleHit]:
        """Rule matches over this claim's events and logs, each tied to its pod."""
        if self._hits is not None:
            return self._hits
        out: list[RuleHit] = []
        match_events = optional_matcher("match_events")
        match_logs = optional_matcher("match_logs")
        if self.rulebook is not None and match_events is not None:
            sources: list[tuple[K8sObject | None, list[K8sObject]]] = [(None, self.claim_events())]
            sources += [(p, self.pod_events(p)) for p in self.pods]
            seen = {id(e) for _p, evs in sources for e in evs}
            sources += [
                (link.pod, [link.event])
                for link in self.links.mentioned_by
                if id(link.event) not in seen
            ]
            for pod, events in sources:
                for ev in events:
                    for hit in match_events(self.rulebook, [ev]):
                        out.append(
                            RuleHit(
                                finding=hit.to_finding(),
                                pod=pod,
                                last_seen=hit.last_seen,
                                first_seen=hit.first_seen,
                                count=hit.count,
                            )
                        )
        match_objects = optional_matcher("match_objects")
        if self.rulebook is not None and match_objects is not None:
            plugin_pods = [
                h.pod for n in self.publication_nodes() if (h := self.plugin(n)).pod is not None
            ]
            if self.shared is not None:
                for node in self.publication_nodes():
                    plugin_pod = self.plugin(node).pod
                    for found in self.shared.plugin_object_hits(node, match_objects):
                        out.append(RuleHit(finding=found, pod=plugin_pod))
                plugin_pods = []
            for pod in [*plugin_pods, *self.pods]:
                for hit in match_objects(self.rulebook, "Pod", [pod]):
                    out.append(RuleHit(finding=hit.to_finding(), pod=pod))
        if self.rulebook is not None and match_logs is not None:
            for node in self.publication_nodes():
                health = self.plugin(node)
                if self.shared is not None:
                    out += [
                        RuleHit(
                            finding=h.finding,
                            pod=health.pod,
                            log_previous=h.previous,
                            log_container=h.container,
                        )
                        for h in self.shared.plugin_log_hits(node, match_logs)
                    ]
                    continue
                for log in ph.plugin_logs(self.snapshot, health):
                    for hit in match_logs(self.rulebook, [log]):
                        out.append(
                            RuleHit(
                                finding=hit.to_finding(),
                                pod=health.pod,
                                log_previous=log.previous,
                                log_container=log.container,
                            )
                        )
            # The claim's pods' logs, tied to their pod; the claim's own ComputeDomain
            # daemons' logs (their failure is why a channel cannot be prepared) count for
            # the claim, not for a pod.
            logged: list[tuple[K8sObject, K8sObject | None]] = [(p, p) for p in self.pods]
            logged += [(d, None) for d in self.compute_domain_daemons()]
            for pod, tied in logged:
                for log in self.snapshot.logs_for(namespace_of(pod), name_of(pod)):
                    for hit in match_logs(self.rulebook, [log]):
                        out.append(
                            RuleHit(
                                finding=hit.to_finding(),
                                pod=tied,
                                log_previous=log.previous,
                                log_container=log.container,
                            )
                        )
        if self.rulebook is not None and match_events is not None and match_logs is not None:
            out += self._component_hits(match_events, match_logs)
        # Known issues first: a version-matched cause decides its phase ahead of the
        # generic rule on the same symptom (their rules also supersede it).
        from dradiag.diagnosis.known_issue_hits import known_issue_hits

        self._hits = known_issue_hits(self) + out
        return self._hits

    def _component_hits(
        self, match_events: Callable[..., Any], match_logs: Callable[..., Any]
    ) -> list[RuleHit]:
        """Rule hits in component logs given without a pod (``kubelet.log`` …).

        A line counts for this claim when it names it (UID, ``ns/name``, or the name
        labelled as a claim); a line naming no claim counts when the input holds no other
        claim it could be about, and a plugin's start-up error (publication) counts for
        every claim of the driver. The matching itself does not depend on the claim: a
        scan does it once (``ScanContext.component_matches``).
        """
        if not self.snapshot.component_logs():
            return []
        from dradiag.diagnosis.links import message_names_claim

        if self.shared is not None:
            matches = self.shared.component_matches(match_events, match_logs)
        else:
            matches = component_matches(self.snapshot, self.rulebook, match_events, match_logs)
        only_claim = len(self.snapshot.claims) <= 1
        ns = namespace_of(self.claim)
        by_key = {pod_key(p): p for p in self.pods}
        return [
            RuleHit(finding=m.finding, pod=by_key.get(m.pod), log_container=m.container)
            for m in matches
            if only_claim
            or message_names_claim(m.line, self.claim, ns)
            or (not m.from_event and m.finding.phase is Phase.PUBLICATION)
        ]

    def compute_domain_daemons(self) -> list[K8sObject]:
        """The ComputeDomain (IMEX) daemon pods of the claim's ComputeDomain, on its nodes.

        A ``compute-domain.nvidia.com`` claim names its domain in its opaque config
        (``domainID``); the driver labels that domain's daemon pods
        ``resource.nvidia.com/computeDomain: <domainID>``. A channel claim is prepared only
        once its domain's daemons are ready, so their logs are this claim's evidence.
        """
        domains = compute_domain_ids(self.claim)
        if not domains:
            return []
        nodes = set(self.nodes())
        out: list[K8sObject] = []
        for domain in domains:
            for pod in self.snapshot.mentioning(Kind.POD, domain):
                labels = (pod.get("metadata") or {}).get("labels") or {}
                if not isinstance(labels, Mapping) or labels.get(COMPUTE_DOMAIN_LABEL) != domain:
                    continue
                node = (pod.get("spec") or {}).get("nodeName")
                if nodes and node not in nodes:
                    continue
                out.append(pod)
        return out

    def hits_for(self, phase: Phase) -> list[RuleHit]:
        return [h for h in self.hits() if h.finding.phase is phase]

    # coverage ---------------------------------------------------------------------------
    def collected(self, kind: Kind) -> bool:
        return self.snapshot.is_collected(kind)

    def not_collected(self, phase: Phase, kinds: Sequence[Kind], needed_for: str) -> Finding:
        """The finding of a phase that cannot be decided: which kinds, why, which errors."""
        reasons = []
        evidence = []
        for kind in kinds:
            record = self.snapshot.coverage[kind]
            reasons.append(f"{kind.value}: {record.reason or 'not collected'}")
            resource = RESOURCE_OF_KIND[kind]
            for err in self.snapshot.errors:
                if err.resource == resource or err.resource.endswith("/" + resource):
                    status = f" ({err.status})" if err.status else ""
                    where = f" in {err.namespace}" if err.namespace else ""
                    evidence.append(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"collection error: {err.verb} {err.resource}{where}",
                            excerpt=f"{err.reason}{status}",
                        )
                    )
        self.missing.setdefault(phase, []).extend(
            k for k in kinds if k not in self.missing.get(phase, [])
        )
        names = ", ".join(k.value for k in kinds)
        return Finding(
            rule=NOT_COLLECTED[phase],
            phase=phase,
            severity=Severity.WARNING,
            title=f"evidence for {phase.value} was not collected",
            detail=f"{needed_for}, but the snapshot holds no {names} it can rely on "
            f"({'; '.join(reasons)}). dradiag will not call this phase healthy.",
            evidence=tuple(evidence),
            next=(
                f"collect {names} (kubectl get {','.join(RESOURCE_OF_KIND[k] for k in kinds)} "
                "-o yaml) or rerun with read access to them",
            ),
        )


@dataclass(frozen=True, slots=True)
class ComponentMatch:
    """A rule hit on one line of a component log, before it is tied to any claim."""

    finding: Finding
    line: str
    container: str
    pod: str = ""
    """``ns/name`` from the line's ``pod=`` field (kubelet lines), or ""."""
    from_event: bool = False
    """The line stands for an Event and matched an event rule."""


def component_matches(
    snapshot: Snapshot,
    rulebook: Any,
    match_events: Callable[..., Any],
    match_logs: Callable[..., Any],
) -> list[ComponentMatch]:
    """Every rule hit in the snapshot's component logs: log rules on their lines, and
    event rules on the lines that stand for an event (quoting the line as evidence)."""
    from dradiag.analyses.component_events import line_events
    from dradiag.analyses.error_chain import clip_middle

    out: list[ComponentMatch] = []
    for log in snapshot.component_logs():
        lines = log.text.splitlines()
        for hit in match_logs(rulebook, [log]):
            line = lines[hit.line - 1] if hit.line and hit.line <= len(lines) else ""
            out.append(ComponentMatch(hit.to_finding(), line, log.container))
        for item in line_events(log):
            evidence = Evidence(
                source=EvidenceSource.LOG,
                ref=f"log {log.source or log.component}:{item.line_number}",
                excerpt=clip_middle(item.line.strip(), 600),
            )
            out += [
                ComponentMatch(
                    replace(hit.to_finding(), evidence=(evidence,)),
                    item.line,
                    log.container,
                    pod=item.pod,
                    from_event=True,
                )
                for hit in match_events(rulebook, [item.event])
            ]
    return out


def pod_claim_names(walk: ClaimWalk, pod: K8sObject) -> list[str]:
    """The pod's claim entries that name this claim (the template's for a synthesized one)."""
    if walk.synthesized:
        annotations = (walk.claim.get("metadata") or {}).get("annotations") or {}
        return [str(annotations.get("resource.kubernetes.io/pod-claim-name", ""))]
    return pod_claim_names_for(walk.snapshot, pod, walk.claim)


def containers_given_devices(walk: ClaimWalk, pod: K8sObject) -> set[str]:
    """Containers the kubelet hands this claim's CDI devices: they list the claim, and not
    only under request names the claim does not have."""
    requests = set(wiring.claim_request_names(walk.claim))
    extended = {
        container
        for container, request, _res in wiring.extended_resource_mappings(pod, walk.claim)
        if request in requests or request.split("/", 1)[0] in requests
    }
    names = pod_claim_names(walk, pod)
    if not names:
        return extended
    wired = wiring.analyze_pod_wiring(pod, walk.claim, names)
    unknown = set(wired.unknown_requests)
    return extended | {
        use.container
        for use in wired.using
        if any((use.container, r) not in unknown for r in use.requests)
    }
