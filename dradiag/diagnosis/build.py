"""The seven-phase walk: one function per phase, each a PhaseResult from the Snapshot.

A claim's life crosses seven boundaries (DESIGN §2). Each phase function reads only
what that boundary leaves behind (slices and the plugin pod, selectors, ``status.
allocation`` and scheduler evidence, kubelet events, container states, reservations)
plus the analyses that compute over them, and says ``ok``, ``broken``, ``warn``,
``unknown`` or ``not-reached``. :mod:`dradiag.diagnosis.verdict` then picks the first
broken phase.

Three rules shape every phase:

- *Never a false ok.* A phase that needs a kind the snapshot did not collect (events
  for a pod stuck in ContainerCreating, slices for publication) is ``unknown`` with a
  finding naming what is missing and why (the 403 from ``snapshot.errors``).
- *Evidence has a time.* An event or log line that matches a rule is a current symptom
  only while the boundary it describes is still uncrossed; once the pod runs, an old
  FailedPrepareDynamicResources is history and is shown as such (info), never as the cause.
- *Targeted.* Only the claim's own nodes, pools, pods and events are read through the
  Snapshot's indexes, so one claim in a 5,000-node snapshot costs what it costs in a
  five-node one (``bench/diagnose.py``).

The data-driven part (which event or log text means what) comes from the rulebook via
``dradiag.analyses.rule_matching``; what needs computation (CEL selection, allocation
simulation, pool validity, wiring, plugin health) comes from the analyses. Where one of
those is not available, the phase reports what direct evidence shows.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from dradiag.analyses import plugin_health as ph
from dradiag.analyses import wiring
from dradiag.analyses.timeline import (
    DEFAULT_STUCK_AFTER,
    age,
    event_count,
    event_first_time,
    event_last_time,
    format_age,
    parse_time,
    reference_now,
)
from dradiag.diagnosis import placement
from dradiag.diagnosis.model import (
    PHASE_ORDER,
    Diagnosis,
    Evidence,
    EvidenceSource,
    Finding,
    Phase,
    PhaseResult,
    PhaseStatus,
    Severity,
    Target,
)
from dradiag.diagnosis.resolve import is_synthesized, pod_claim_names_for, resolve_pod_claims
from dradiag.diagnosis.verdict import CROSS_CLAIM_CAUSE_RULES, decide_verdict
from dradiag.errors import UsageError
from dradiag.snapshot.model import (
    Coverage,
    K8sObject,
    Kind,
    Snapshot,
    allocated_devices,
    key_of,
    name_of,
    namespace_of,
    uid_of,
)

logger = logging.getLogger(__name__)

NVIDIA_DRIVER = "gpu.nvidia.com"
MAX_PLUGIN_NODES = 20
"""Plugin pods examined when the claim has no node yet and its driver publishes nothing."""
"""The driver dradiag knows best; the default when a claim's driver cannot be derived."""

PHASE_CODE: Mapping[Phase, str] = {
    Phase.PUBLICATION: "PUB",
    Phase.SELECTION: "SEL",
    Phase.ALLOCATION: "ALLOC",
    Phase.PREPARE: "PREP",
    Phase.INJECTION: "INJ",
    Phase.WORKLOAD: "WORK",
    Phase.UNPREPARE: "UNPREP",
}

# Code-backed rule ids this module emits (each has an entry in rules/<phase>.yaml).
PUB_DRIVER_NO_SLICES = "DRA-PUB-NO-SLICES"  # cluster-wide: the same rule
PUB_NODE_NO_SLICES = "DRA-PUB-NO-SLICES"
PUB_POOL_INCOMPLETE = "DRA-PUB-POOL-INCOMPLETE"
PUB_POOL_INVALID = "DRA-PUB-POOL-INCOMPLETE"  # one rule: incomplete or invalid
PUB_POOL_STALE = "DRA-PUB-POOL-STALE"
SEL_CLASS_MISSING = "DRA-SEL-CLASS-NOT-FOUND"
SEL_NOT_EVALUATED = "DRA-SEL-NOT-EVALUATED"
ALLOC_UNSCHEDULABLE = "DRA-ALLOC-NOT-ALLOCATED"
ALLOC_NO_CONSUMER = "DRA-ALLOC-NO-CONSUMER"
ALLOC_PENDING_SILENT = "DRA-ALLOC-PENDING-SILENT"
ALLOC_CLAIM_NOT_CREATED = "DRA-ALLOC-CLAIM-NOT-FOUND"
ALLOC_BOUND_UNALLOCATED = "DRA-ALLOC-BOUND-UNALLOCATED"
ALLOC_NODE_AFFINITY = "DRA-ALLOC-NODE-AFFINITY"
PREP_FAILED = "DRA-PREP-FAILED"
PREP_STUCK = "DRA-PREP-STALLED"
INJ_CREATE_FAILED = "DRA-INJ-CREATE-CONTAINER-ERROR"
INJ_CDI_NOT_APPLIED = "DRA-INJ-CDI-NOT-APPLIED"
INJ_CDI_SPEC_MISSING = "DRA-INJ-CDI-SPEC-MISSING"
WORK_CONTAINER_CRASHING = "DRA-WORK-CONTAINER-CRASHLOOP"
UNPREP_STALE_RESERVATION = "DRA-UNPREP-RESERVED-FOR-GONE-POD"
UNPREP_POD_STUCK_TERMINATING = "DRA-UNPREP-POD-STUCK-TERMINATING"
UNPREP_DELETION_STUCK = "DRA-UNPREP-DELETION-STUCK"
UNPREP_LEAKED_BY_OTHER_CLAIM = "DRA-UNPREP-LEAKED-STATE"

NOT_COLLECTED: Mapping[Phase, str] = {p: f"DRA-{c}-NOT-COLLECTED" for p, c in PHASE_CODE.items()}
"""Per phase, the rule of "the evidence this phase needs was not collected"."""

CODE_RULE_IDS: tuple[str, ...] = (
    PUB_NODE_NO_SLICES,
    PUB_POOL_INCOMPLETE,
    PUB_POOL_STALE,
    SEL_CLASS_MISSING,
    SEL_NOT_EVALUATED,
    ALLOC_UNSCHEDULABLE,
    ALLOC_NO_CONSUMER,
    ALLOC_PENDING_SILENT,
    ALLOC_CLAIM_NOT_CREATED,
    ALLOC_BOUND_UNALLOCATED,
    ALLOC_NODE_AFFINITY,
    PREP_FAILED,
    PREP_STUCK,
    INJ_CREATE_FAILED,
    INJ_CDI_NOT_APPLIED,
    INJ_CDI_SPEC_MISSING,
    WORK_CONTAINER_CRASHING,
    UNPREP_STALE_RESERVATION,
    UNPREP_POD_STUCK_TERMINATING,
    UNPREP_DELETION_STUCK,
    UNPREP_LEAKED_BY_OTHER_CLAIM,
    *NOT_COLLECTED.values(),
    *ph.RULE_IDS,
    *wiring.RULE_IDS,
)
"""Every rule id the walk and its own analyses can emit without the rule matcher."""

_RESOURCE_OF_KIND: Mapping[Kind, str] = {
    Kind.RESOURCE_SLICE: "resourceslices",
    Kind.DEVICE_CLASS: "deviceclasses",
    Kind.DEVICE_TAINT_RULE: "devicetaintrules",
    Kind.RESOURCE_CLAIM: "resourceclaims",
    Kind.RESOURCE_CLAIM_TEMPLATE: "resourceclaimtemplates",
    Kind.POD: "pods",
    Kind.NODE: "nodes",
    Kind.EVENT: "events",
    Kind.LOG: "pods/log",
}

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
_INJECTION_WAITING = frozenset({"CreateContainerError", "RunContainerError"})

_DRIVER_IN_CEL = re.compile(r"device\.driver\s*==\s*['\"]([^'\"]+)['\"]")
_NODES_AVAILABLE = re.compile(r"0/(?P<total>\d+) nodes are available:(?P<rest>.*)", re.S)
_OTHER_CLAIM_UID = re.compile(
    r"already allocated to different claim (?P<uid>[0-9a-fA-F-]{8,})", re.I
)
_MIG_CREATE_PARENT = re.compile(
    r"error creating GPU instance for '(?P<dev>gpu-(?P<minor>\d+)-[^']*)'"
)
_OLD_CLAIM_SAME_NAME = re.compile(
    r"old ResourceClaim with same name (?P<name>\S+) and different UID (?P<uid>\S+) still exists"
)


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


# -- rulebook and matcher (other engineers' modules; optional at run time) ---------------


def _rulebook() -> Any | None:
    try:
        from dradiag.rulebook import load_rulebook
    except ImportError:  # pragma: no cover - the rulebook is part of the package
        return None
    return load_rulebook()


def _matcher(name: str) -> Callable[..., Any] | None:
    try:
        from dradiag.analyses import rule_matching
    except ImportError:
        return None
    fn = getattr(rule_matching, name, None)
    return fn if callable(fn) else None


def _enrich(finding: Finding, rulebook: Any | None) -> Finding:
    """Title and generic next steps of a code-backed finding from its rule entry.

    The code knows the specifics (names, counts, commands for this claim); the rule file
    holds the catalogue text, so ``rules show ID`` and the diagnosis say the same thing.
    """
    if rulebook is None:
        return finding
    rule = rulebook.get(finding.rule)
    if rule is None or rule.match is not None:
        # Data-rule hits arrive rendered by the matcher; only code-backed ones need this.
        return finding
    extra = tuple(n for n in rule.next if n not in finding.next and not _context_placeholders(n))
    return replace(finding, title=rule.title or finding.title, next=finding.next + extra)


def _context_placeholders(text: str) -> frozenset[str]:
    """Evidence placeholders (``{pod}``, ``{node}``) in a catalogue line. Only the matcher
    fills them; a code-backed finding states its own commands, so such a line is left out
    rather than shown with the braces (kubectl jsonpath braces are not placeholders)."""
    from dradiag.rulebook.schema import CONTEXT_FIELDS, explain_placeholders

    known = frozenset().union(*CONTEXT_FIELDS.values()) | _EXTRA_PLACEHOLDERS
    return explain_placeholders(text) & known


_EXTRA_PLACEHOLDERS = frozenset({"container", "driver", "request", "nodes", "age", "cause"})


# -- evidence helpers ------------------------------------------------------------------


def event_evidence(event: K8sObject) -> Evidence:
    """An Event as evidence: reference it can be read again by, and its message."""
    io = event.get("involvedObject") or {}
    count = event_count(event)
    ns = namespace_of(event) or str(io.get("namespace") or "")
    ref = f"Event {ns}/{name_of(event)}" if ns else f"Event {name_of(event)}"
    times = ""
    first, last = event_first_time(event), event_last_time(event)
    if count > 1 and first and last:
        times = f" (x{count} over {format_age(last - first)})"
    elif count > 1:
        times = f" (x{count})"
    excerpt = (
        f"{event.get('type') or 'Normal'} {event.get('reason') or ''}{times} "
        f"{io.get('kind') or ''}/{io.get('name') or ''}: {str(event.get('message') or '')[:600]}"
    )
    return Evidence(source=EvidenceSource.EVENT, ref=ref, excerpt=excerpt)


def _pod_key(pod: K8sObject) -> str:
    return f"{namespace_of(pod)}/{name_of(pod)}"


def _pod_status(pod: K8sObject) -> Mapping[str, Any]:
    status = pod.get("status")
    return status if isinstance(status, Mapping) else {}


def _container_statuses(pod: K8sObject) -> list[Mapping[str, Any]]:
    return [s for s in _pod_status(pod).get("containerStatuses") or () if isinstance(s, Mapping)]


def _pod_condition(pod: K8sObject, ctype: str) -> Mapping[str, Any] | None:
    for cond in _pod_status(pod).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == ctype:
            return cond
    return None


def _pod_done(pod: K8sObject) -> bool:
    return _pod_status(pod).get("phase") in ("Succeeded", "Failed")


def _pod_terminating(pod: K8sObject) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _pod_started(pod: K8sObject) -> bool:
    """True when the pod's sandbox exists, which the kubelet creates only after Prepare."""
    if _pod_status(pod).get("phase") in ("Running", "Succeeded"):
        return True
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _pod_status(pod).get(key) or ():
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


def _pod_all_running(pod: K8sObject) -> bool:
    statuses = _container_statuses(pod)
    if _pod_status(pod).get("phase") == "Succeeded":
        return True
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def _scheduled_at(pod: K8sObject) -> datetime | None:
    cond = _pod_condition(pod, "PodScheduled")
    if cond is not None and cond.get("status") == "True":
        if t := parse_time(cond.get("lastTransitionTime")):
            return t
    return parse_time(_pod_status(pod).get("startTime")) or parse_time(
        (pod.get("metadata") or {}).get("creationTimestamp")
    )


def _claim_devices(claim: K8sObject) -> list[tuple[str, str, str, str]]:
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


def _class_names(claim: K8sObject) -> list[str]:
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


def _node_names_in_selector(selector: Mapping[str, Any] | None) -> set[str]:
    out: set[str] = set()
    for term in (selector or {}).get("nodeSelectorTerms") or ():
        if not isinstance(term, Mapping):
            continue
        for req in list(term.get("matchFields") or ()) + list(term.get("matchExpressions") or ()):
            if not isinstance(req, Mapping) or req.get("operator") != "In":
                continue
            if req.get("key") in ("metadata.name", "kubernetes.io/hostname"):
                out.update(str(v) for v in req.get("values") or ())
    return out


# -- the per-claim context -------------------------------------------------------------


@dataclass(slots=True)
class _Hit:
    """A rule match on one evidence item, and what it was about."""

    finding: Finding
    pod: K8sObject | None = None
    log_previous: bool = False
    log_container: str = ""


@dataclass(slots=True)
class _Walk:
    """Everything one claim's walk reads, gathered once through the Snapshot's indexes."""

    snapshot: Snapshot
    claim: K8sObject
    options: WalkOptions
    pods: list[K8sObject]
    rulebook: Any | None
    synthesized: bool = False
    _now: datetime | None = None
    _now_done: bool = False
    _hits: list[_Hit] | None = None
    _plugin: dict[str, ph.PluginHealth] = field(default_factory=dict)
    _publication_nodes: list[str] | None = None
    selection_cache: dict[tuple[str, str], list[Finding]] | None = None
    """Shared by ``scan``: claims with the same spec in a namespace select alike."""

    # identity -------------------------------------------------------------------------
    @property
    def claim_key(self) -> str:
        return key_of(self.claim)

    @property
    def claim_uid(self) -> str:
        return uid_of(self.claim)

    @property
    def allocation(self) -> Mapping[str, Any] | None:
        alloc = (self.claim.get("status") or {}).get("allocation")
        return alloc if isinstance(alloc, Mapping) and alloc else None

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
        found = [d for _r, d, _p, _dev in _claim_devices(self.claim) if d]
        if not found:
            for cls_name in _class_names(self.claim):
                cls = self.snapshot.device_class(cls_name)
                for sel in ((cls or {}).get("spec") or {}).get("selectors") or ():
                    expr = str(((sel or {}).get("cel") or {}).get("expression") or "")
                    found += _DRIVER_IN_CEL.findall(expr)
        return list(dict.fromkeys(found)) or [NVIDIA_DRIVER]

    def nodes(self) -> list[str]:
        nodes: set[str] = set()
        if self.allocation:
            nodes |= _node_names_in_selector(self.allocation.get("nodeSelector"))
            for _req, driver, pool, _dev in _claim_devices(self.claim):
                for slc in self.snapshot.pool_slices(driver, pool):
                    if node := (slc.get("spec") or {}).get("nodeName"):
                        nodes.add(str(node))
        for pod in self.pods:
            if node := (pod.get("spec") or {}).get("nodeName"):
                nodes.add(str(node))
        return sorted(nodes)

    def publication_nodes(self) -> list[str]:
        """Nodes whose plugin matters: the claim's, or, while the claim's driver publishes
        nothing at all, every node running a plugin pod (the cause is on one of them)."""
        if self._publication_nodes is not None:
            return self._publication_nodes
        nodes = self.nodes()
        if not nodes and not any(self.snapshot.slices_for(driver=d) for d in self.drivers()):
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
            (p.get("spec") or {}).get("nodeName") == node and _pod_started(p) for p in self.pods
        )

    def plugin(self, node: str) -> ph.PluginHealth:
        if node not in self._plugin:
            self._plugin[node] = ph.plugin_health(self.snapshot, node)
        return self._plugin[node]

    # events and rule hits ---------------------------------------------------------------
    def claim_events(self) -> list[K8sObject]:
        if self.synthesized:
            return []
        return self.snapshot.events_for(
            "ResourceClaim", namespace_of(self.claim), name_of(self.claim), self.claim_uid or None
        )

    def pod_events(self, pod: K8sObject) -> list[K8sObject]:
        return self.snapshot.events_for("Pod", namespace_of(pod), name_of(pod), uid_of(pod) or None)

    def hits(self) -> list[_Hit]:
        """Rule matches over this claim's events and logs, each tied to its pod."""
        if self._hits is not None:
            return self._hits
        out: list[_Hit] = []
        match_events = _matcher("match_events")
        match_logs = _matcher("match_logs")
        if self.rulebook is not None and match_events is not None:
            sources: list[tuple[K8sObject | None, list[K8sObject]]] = [(None, self.claim_events())]
            sources += [(p, self.pod_events(p)) for p in self.pods]
            for pod, events in sources:
                for ev in events:
                    for hit in match_events(self.rulebook, [ev]):
                        out.append(_Hit(finding=hit.to_finding(), pod=pod))
        match_objects = _matcher("match_objects")
        if self.rulebook is not None and match_objects is not None:
            plugin_pods = [
                h.pod for n in self.publication_nodes() if (h := self.plugin(n)).pod is not None
            ]
            for pod in [*plugin_pods, *self.pods]:
                for hit in match_objects(self.rulebook, "Pod", [pod]):
                    out.append(_Hit(finding=hit.to_finding(), pod=pod))
        if self.rulebook is not None and match_logs is not None:
            for node in self.publication_nodes():
                health = self.plugin(node)
                for log in ph.plugin_logs(self.snapshot, health):
                    for hit in match_logs(self.rulebook, [log]):
                        out.append(
                            _Hit(
                                finding=hit.to_finding(),
                                pod=health.pod,
                                log_previous=log.previous,
                                log_container=log.container,
                            )
                        )
            for pod in self.pods:
                for log in self.snapshot.logs_for(namespace_of(pod), name_of(pod)):
                    for hit in match_logs(self.rulebook, [log]):
                        out.append(
                            _Hit(
                                finding=hit.to_finding(),
                                pod=pod,
                                log_previous=log.previous,
                                log_container=log.container,
                            )
                        )
        self._hits = out
        return out

    def hits_for(self, phase: Phase) -> list[_Hit]:
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
            resource = _RESOURCE_OF_KIND[kind]
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
                f"collect {names} (kubectl get {' '.join(_RESOURCE_OF_KIND[k] for k in kinds)} "
                "-o yaml) or rerun with read access to them",
            ),
        )


def _status_of(findings: Sequence[Finding], base: PhaseStatus) -> PhaseStatus:
    if any(f.severity is Severity.ERROR for f in findings):
        return PhaseStatus.BROKEN
    if base is PhaseStatus.UNKNOWN:
        return PhaseStatus.UNKNOWN
    if any(f.severity is Severity.WARNING for f in findings):
        return PhaseStatus.WARN if base is not PhaseStatus.NOT_REACHED else PhaseStatus.NOT_REACHED
    return base


def _result(
    rulebook: Any | None,
    phase: Phase,
    findings: Iterable[Finding],
    base: PhaseStatus,
    summary: str = "",
) -> PhaseResult:
    enriched = [_enrich(f, rulebook) for f in findings]
    # The same rule saying the same thing twice (a current and a previous log, a claim
    # and a pod event) is one finding with the evidence of both.
    merged: dict[tuple[str, str, Severity], Finding] = {}
    for f in enriched:
        key = (f.rule, f.detail, f.severity)
        if key in merged:
            kept = merged[key]
            extra = tuple(e for e in f.evidence if e not in kept.evidence)
            merged[key] = replace(kept, evidence=kept.evidence + extra)
        else:
            merged[key] = f
    deduped = list(merged.values())
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    # A finding whose rule another finding here supersedes (rules/*.yaml `supersedes`)
    # describes what that one explains: it never decides the verdict ahead of it.
    superseded = {
        target
        for f in deduped
        if rulebook is not None and (rule := rulebook.get(f.rule)) is not None
        for target in getattr(rule, "supersedes", ())
    }
    deduped.sort(key=lambda f: (order[f.severity], f.rule in superseded, _specificity(f, rulebook)))
    return PhaseResult(
        phase=phase,
        status=_status_of(deduped, base),
        findings=tuple(deduped),
        summary=summary,
    )


UMBRELLA_RULES: frozenset[str] = frozenset(
    {
        PUB_DRIVER_NO_SLICES,
        PUB_NODE_NO_SLICES,
        "DRA-ALLOC-CANNOT-ALLOCATE",
        ALLOC_UNSCHEDULABLE,
        PREP_FAILED,
        PREP_STUCK,
        INJ_CREATE_FAILED,
        UNPREP_POD_STUCK_TERMINATING,
        UNPREP_STALE_RESERVATION,
        UNPREP_DELETION_STUCK,
    }
)
"""Rules that name a symptom many causes share ("no slices", "cannot allocate all claims",
"Prepare failed"). Within a phase a more specific finding, a log line or a computed
explanation, decides the verdict ahead of them."""


def _specificity(finding: Finding, rulebook: Any | None) -> int:
    """0: a specific cause; 1: the plugin's state; 2: an umbrella symptom or a catch-all."""
    if finding.rule in UMBRELLA_RULES:
        return 2
    rule = rulebook.get(finding.rule) if rulebook is not None else None
    if rule is not None and getattr(rule, "fallback", False):
        return 2
    if finding.rule in ph.RULE_IDS:
        return 1
    return 0


def _historical(finding: Finding, why: str) -> Finding:
    """A matched symptom whose boundary has since been crossed: shown, never the cause."""
    return replace(
        finding,
        severity=Severity.INFO,
        detail=f"Earlier, since resolved ({why}): {finding.detail}".strip(),
    )


# -- 1. publication --------------------------------------------------------------------


def _pool_finding(problem: Any, blocking: bool) -> Finding:
    kind = str(problem.kind)
    rule = {"incomplete": PUB_POOL_INCOMPLETE, "invalid": PUB_POOL_INVALID}.get(
        kind, PUB_POOL_STALE
    )
    if kind == "stale":
        severity = Severity.INFO
    else:
        severity = Severity.ERROR if blocking else Severity.WARNING
    why = {
        "incomplete": "the scheduler (≥1.35) allocates from no incomplete pool",
        "invalid": "the allocator refuses an invalid pool",
        "stale": "older-generation slices are ignored once the new generation is complete",
    }.get(kind, "")
    return Finding(
        rule=rule,
        phase=Phase.PUBLICATION,
        severity=severity,
        title=f"pool {problem.pool_id} is {kind}",
        detail=f"Pool {problem.pool_id} (generation {problem.generation}): {problem.reason}; "
        f"{why}.",
        evidence=(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"ResourceSlices of pool {problem.pool_id}",
                excerpt=", ".join(problem.slices[:8])
                + (f" (+{len(problem.slices) - 8} more)" if len(problem.slices) > 8 else ""),
            ),
        ),
        next=(
            f"kubectl get resourceslices --field-selector spec.driver={problem.driver},"
            f"spec.pool.name={problem.pool} -o yaml  (pool.generation, pool.resourceSliceCount)",
        ),
        identifiers=(("pool", problem.pool), *(("node", n) for n in problem.nodes[:3])),
    )


def pool_findings(
    snapshot: Snapshot, pools: Iterable[tuple[str, str]], *, blocking: bool
) -> list[Finding]:
    """Problems of just these pools, via ``analyses.pools`` on a sub-snapshot of their slices.

    A sub-snapshot keeps a claim's walk from sweeping every pool of a 5,000-node cluster.
    """
    try:
        from dradiag.analyses.pools import pool_problems
    except ImportError:
        return []
    slices = [s for driver, pool in pools for s in snapshot.pool_slices(driver, pool)]
    if not slices:
        return []
    sub = Snapshot(objects={Kind.RESOURCE_SLICE: slices})
    return [_pool_finding(p, blocking) for p in pool_problems(sub)]


MAX_POOL_FINDINGS = 5
"""Pool problems listed for an unplaced claim before the rest are only counted."""


_CANDIDATE_POOL_CACHE: dict[tuple[int, tuple[str, ...]], tuple[Snapshot, list[Finding]]] = {}
"""Per (snapshot, drivers): the cluster-wide pool findings every unplaced claim shares.
Holds the snapshot itself so its id cannot be reused while cached; at most a few entries."""


def _candidate_pool_findings(snap: Snapshot, drivers: Sequence[str]) -> list[Finding]:
    """Pool problems of every pool of the claim's drivers, for a claim not yet placed.

    An incomplete or invalid pool blocks this claim only when it leaves the driver no
    usable pool at all; otherwise the claim may fit elsewhere and it is a warning. The
    answer is the same for every unplaced claim of a snapshot, so it is computed once.
    """
    key = (id(snap), tuple(drivers))
    cached = _CANDIDATE_POOL_CACHE.get(key)
    if cached is not None and cached[0] is snap:
        return list(cached[1])
    found = _compute_candidate_pool_findings(snap, drivers)
    if len(_CANDIDATE_POOL_CACHE) >= 4:
        _CANDIDATE_POOL_CACHE.pop(next(iter(_CANDIDATE_POOL_CACHE)))
    _CANDIDATE_POOL_CACHE[key] = (snap, found)
    return list(found)


def _compute_candidate_pool_findings(snap: Snapshot, drivers: Sequence[str]) -> list[Finding]:
    pools = sorted({p for p in snap.pools() if p[0] in drivers})
    if not pools:
        return []
    problems = pool_findings(snap, pools, blocking=False)
    bad = {f.identifiers[0][1] for f in problems if f.rule == PUB_POOL_INCOMPLETE and f.identifiers}
    blocking = len(bad) >= len(pools)
    out = [
        replace(f, severity=Severity.ERROR) if blocking and f.rule == PUB_POOL_INCOMPLETE else f
        for f in problems
    ]
    if len(out) > MAX_POOL_FINDINGS:
        rest = len(out) - MAX_POOL_FINDINGS
        out = out[:MAX_POOL_FINDINGS]
        out.append(
            replace(
                out[-1],
                severity=Severity.INFO,
                title=f"{rest} more pool problem(s)",
                detail=f"{rest} more pools of {', '.join(drivers)} have problems; "
                "run dradiag scan for the list.",
                evidence=(),
            )
        )
    return out


def phase_publication(walk: _Walk) -> PhaseResult:
    """Slices exist for the driver on the claim's nodes; pools valid; plugin healthy."""
    phase = Phase.PUBLICATION
    snap = walk.snapshot
    if not walk.collected(Kind.RESOURCE_SLICE):
        return _result(
            walk.rulebook,
            phase,
            [walk.not_collected(phase, [Kind.RESOURCE_SLICE], "Publication is read from slices")],
            PhaseStatus.UNKNOWN,
        )
    findings: list[Finding] = []
    drivers = walk.drivers()
    nodes = walk.publication_nodes()
    claim_nodes = walk.nodes()
    claim_pending = walk.allocation is None
    for driver in drivers:
        if not snap.slices_for(driver=driver):
            plugin_note = ""
            if snap.is_collected(Kind.POD) and not any(ph.is_plugin_pod(p) for p in snap.pods):
                plugin_note = " No kubelet-plugin pod of the DRA driver is in the snapshot either."
            findings.append(
                Finding(
                    rule=PUB_DRIVER_NO_SLICES,
                    phase=phase,
                    severity=Severity.ERROR,
                    title=f"driver {driver} publishes no ResourceSlices",
                    detail=f"No ResourceSlice in the cluster has spec.driver={driver}: no node "
                    f"offers a device of this driver, so no claim for it can be allocated."
                    + plugin_note,
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref="ResourceSlices",
                            excerpt=f"drivers publishing: {', '.join(snap.drivers()) or 'none'}",
                        ),
                    ),
                    next=(
                        f"kubectl get resourceslices --field-selector spec.driver={driver}",
                        "kubectl get pods -A -l 'app.kubernetes.io/name in "
                        "(dra-driver-nvidia-gpu,nvidia-dra-driver-gpu)' -o wide",
                    ),
                    identifiers=(("driver", driver),),
                )
            )
    pools: set[tuple[str, str]] = set()
    for node in nodes:
        node_slices = [
            s for s in snap.slices_for(node=node) if (s.get("spec") or {}).get("driver") in drivers
        ]
        for s in node_slices:
            spec = s.get("spec") or {}
            pools.add(
                (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
            )
        health = walk.plugin(node)
        blocking = not walk.prepared_on(node)
        if not node_slices and all(snap.slices_for(driver=d) for d in drivers):
            findings.append(
                Finding(
                    rule=PUB_NODE_NO_SLICES,
                    phase=phase,
                    severity=Severity.ERROR if blocking else Severity.WARNING,
                    title="the claim's node has no slices of the driver",
                    detail=f"Node {node} publishes no ResourceSlice of {', '.join(drivers)}: the "
                    "driver is not running or not registered there (the kubelet wipes a "
                    "driver's slices 30 s after it unregisters)."
                    + (f" Plugin state: {health.state.value}." if health.pod is not None else ""),
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceSlices with spec.nodeName={node}",
                            excerpt="none for " + ", ".join(drivers),
                        ),
                    ),
                    next=(
                        f"kubectl get resourceslices --field-selector spec.nodeName={node}",
                        f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} "
                        "| grep kubelet-plugin",
                    ),
                    identifiers=(("node", node),),
                )
            )
        plugin_hits = [
            h for h in walk.hits_for(phase) if health.pod is not None and h.pod is health.pod
        ]
        matched = {h.finding.rule for h in plugin_hits}
        findings += [
            f
            for f in ph.plugin_findings(health, blocking=blocking, has_slices=bool(node_slices))
            if f.rule not in matched
        ]
        for hit in plugin_hits:
            # Plugin signatures (state, startup errors, dropped fields): current logs and
            # state always count; a previous instance's log only while the plugin is still
            # unhealthy. Once the claim is prepared there, a dead plugin no longer blocks it.
            if hit.log_previous and health.healthy:
                findings.append(_historical(hit.finding, "the plugin has since restarted and runs"))
            elif not blocking and hit.finding.severity is Severity.ERROR:
                findings.append(replace(hit.finding, severity=Severity.WARNING))
            else:
                findings.append(hit.finding)
    if claim_nodes:
        findings += pool_findings(snap, sorted(pools), blocking=claim_pending)
    elif claim_pending:
        findings += _candidate_pool_findings(snap, drivers)
    plugin_pods = {id(walk.plugin(n).pod) for n in nodes if walk.plugin(n).pod is not None}
    findings += [
        h.finding for h in walk.hits_for(phase) if h.pod is None or id(h.pod) not in plugin_pods
    ]
    summary = f"{', '.join(drivers)} on {', '.join(nodes)}" if nodes else f"{', '.join(drivers)}"
    return _result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)


# -- 2. selection ----------------------------------------------------------------------


def _selection_analysis(walk: _Walk) -> list[Finding] | None:
    """Findings of the selector-check analysis, or None when it is not available."""
    try:
        selection = importlib.import_module("dradiag.analyses.selection")
    except ImportError:
        return None
    analyze = getattr(selection, "analyze_claim_selection", None)
    to_findings = getattr(selection, "selection_findings", None)
    if analyze is None or to_findings is None:
        return None
    key = None
    if walk.selection_cache is not None:
        import json

        key = (namespace_of(walk.claim), json.dumps(walk.claim.get("spec") or {}, sort_keys=True))
        if key in walk.selection_cache:
            return list(walk.selection_cache[key])
    result = analyze(
        walk.snapshot,
        walk.claim.get("spec") or {},
        namespace=namespace_of(walk.claim),
        claim_name=None if walk.synthesized or key is not None else name_of(walk.claim),
        # Classes were collected (checked by the caller): a missing one is real.
        builtin_classes_fallback=False,
    )
    findings = list(to_findings(result))
    if key is not None and walk.selection_cache is not None:
        walk.selection_cache[key] = findings
    return findings


def phase_selection(walk: _Walk) -> PhaseResult:
    """DeviceClasses exist and the selectors match at least one published device."""
    phase = Phase.SELECTION
    if walk.allocation is not None:
        devices = ", ".join(d for _r, _drv, _p, d in _claim_devices(walk.claim))
        hits = [_historical(h.finding, "the claim is now allocated") for h in walk.hits_for(phase)]
        return _result(
            walk.rulebook, phase, hits, PhaseStatus.OK, f"selected {devices}" if devices else ""
        )
    classes = _class_names(walk.claim)
    missing_kinds = [k for k in (Kind.DEVICE_CLASS, Kind.RESOURCE_SLICE) if not walk.collected(k)]
    findings: list[Finding] = [h.finding for h in walk.hits_for(phase)]
    if missing_kinds and classes:
        findings.append(
            walk.not_collected(
                phase, missing_kinds, "Selection evaluates the classes' and requests' selectors"
            )
        )
        return _result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
    analysed = _selection_analysis(walk)
    if analysed is not None:
        return _result(walk.rulebook, phase, findings + analysed, PhaseStatus.OK)
    for cls in classes:
        if walk.snapshot.device_class(cls) is None:
            installed = ", ".join(sorted(name_of(c) for c in walk.snapshot.device_classes))
            findings.append(
                Finding(
                    rule=SEL_CLASS_MISSING,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the claim names a DeviceClass that does not exist",
                    detail=f"ResourceClaim {walk.claim_key} requests devices of class "
                    f"{cls!r}, which is not in the cluster; the scheduler reports "
                    f"'device class {cls} does not exist'. Installed classes: "
                    f"{installed or 'none'}.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceClaim {walk.claim_key} .spec.devices.requests",
                            excerpt=f"deviceClassName: {cls}",
                        ),
                    ),
                    next=("kubectl get deviceclasses",),
                    identifiers=(("device class", cls),),
                )
            )
    if any(f.severity is Severity.ERROR for f in findings):
        return _result(walk.rulebook, phase, findings, PhaseStatus.OK)
    findings.append(
        Finding(
            rule=SEL_NOT_EVALUATED,
            phase=phase,
            severity=Severity.WARNING,
            title="the selectors were not evaluated",
            detail="The claim is not allocated and this build of dradiag could not evaluate "
            "its CEL selectors against the published devices.",
            next=(f"dradiag selector-check <file with ResourceClaim {walk.claim_key}>",),
        )
    )
    return _result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)


# -- 3. allocation ---------------------------------------------------------------------


def decompose_fit_error(message: str) -> list[tuple[int, str]]:
    """``0/N nodes are available: 3 reason a, 2 reason b.`` → [(3, "reason a"), ...].

    The scheduler's FitError lists per-node reasons sorted, comma-separated, after an
    optional PreFilter message (k8s-dra-semantics §5.1); only the counted parts are kept.
    """
    m = _NODES_AVAILABLE.search(message)
    if not m:
        return []
    head = m.group("rest").split(" preemption:", 1)[0]
    out = []
    for part in re.split(r"[,.]\s+", head):
        part = part.strip().rstrip(".")
        count, _, reason = part.partition(" ")
        if count.isdigit() and reason:
            out.append((int(count), reason.strip()))
    return out


def _allocation_simulation(walk: _Walk) -> tuple[list[Finding], list[str]] | None:
    """The simulator's findings for the claim, and the nodes where it fits now."""
    try:
        allocation = importlib.import_module("dradiag.analyses.allocation")
    except ImportError:
        return None
    explain = getattr(allocation, "explain_across_nodes", None)
    if explain is None:
        return None
    try:
        explanation = explain(walk.snapshot, [walk.claim])
    except TypeError:
        return None
    findings = getattr(explanation, "findings", None)
    if not callable(findings):
        return None
    return list(findings()), list(getattr(explanation, "fitting_nodes", None) or [])


_AFFINITY_MISMATCH = "didn't match Pod's node affinity/selector"


def _node_affinity_findings(
    walk: _Walk, pods: Sequence[K8sObject], fits: Sequence[str]
) -> list[Finding]:
    """Pods whose node selector or required affinity excludes every node where the claim fits.

    The scheduler filters nodes by the pod's placement before the allocator looks at them
    (k8s-dra-semantics §5.1), so devices free only on excluded nodes do not count. Decided
    only when every fitting node's Node object is readable (its labels prove exclusion).
    """
    if not fits or not walk.collected(Kind.NODE):
        return []
    nodes = {n: walk.snapshot.node(n) for n in fits}
    if any(obj is None for obj in nodes.values()):
        return []
    out = []
    for pod in pods:
        if not placement.has_node_selection(pod):
            continue
        why = {n: placement.placement_mismatch(pod, obj) for n, obj in nodes.items() if obj}
        if not all(why.values()):
            continue
        shown = sorted(why)[:5]
        evidence = [
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Pod {_pod_key(pod)} .spec.nodeSelector/.spec.affinity",
                excerpt=placement.describe_selection(pod),
            ),
            *(
                Evidence(
                    source=EvidenceSource.OBJECT,
                    ref=f"Node {n} .metadata.labels",
                    excerpt=f"excluded: {why[n]}",
                )
                for n in shown
            ),
        ]
        events = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedScheduling"]
        if events and _AFFINITY_MISMATCH in str(events[-1].get("message") or ""):
            evidence.append(event_evidence(events[-1]))
        where = ", ".join(shown) + (f" (+{len(fits) - len(shown)} more)" if len(fits) > 5 else "")
        out.append(
            Finding(
                rule=ALLOC_NODE_AFFINITY,
                phase=Phase.ALLOCATION,
                severity=Severity.ERROR,
                title="the nodes that have matching devices are excluded by the pod's placement",
                detail=f"The allocator finds devices for ResourceClaim {walk.claim_key} only on "
                f"{where}, but pod {_pod_key(pod)} may not run there: "
                + "; ".join(f"{n}: {why[n]}" for n in shown)
                + ". The scheduler filters those nodes out before it allocates devices, so the "
                "claim stays unallocated however many devices are free.",
                evidence=tuple(evidence),
                next=(
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.spec.nodeSelector} {.spec.affinity.nodeAffinity}'",
                    f"kubectl get node {shown[0]} --show-labels",
                ),
                identifiers=(("pod", _pod_key(pod)), *(("node", n) for n in shown)),
            )
        )
    return out


def phase_allocation(walk: _Walk, selection: PhaseResult | None = None) -> PhaseResult:
    """``status.allocation`` and the reservation for each pod, or why the scheduler failed."""
    phase = Phase.ALLOCATION
    findings: list[Finding] = []
    hits = walk.hits_for(phase)
    if walk.allocation is not None:
        for pod in walk.bound_pods():
            if _pod_done(pod) or _pod_terminating(pod):
                continue
            if (f := wiring.reservation_finding(walk.claim, pod)) is not None:
                findings.append(f)
        findings += [_historical(h.finding, "the claim is now allocated") for h in hits]
        devices = _claim_devices(walk.claim)
        summary = "allocated " + ", ".join(f"{pool}/{dev}" for _r, _d, pool, dev in devices)
        return _result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)
    if walk.synthesized:
        return _result(walk.rulebook, phase, _not_created(walk), PhaseStatus.NOT_REACHED)
    if not walk.pods:
        if not walk.collected(Kind.POD):
            return _result(
                walk.rulebook,
                phase,
                [walk.not_collected(phase, [Kind.POD], "Allocation happens for a pod")],
                PhaseStatus.UNKNOWN,
            )
        findings.append(
            Finding(
                rule=ALLOC_NO_CONSUMER,
                phase=phase,
                severity=Severity.INFO,
                title="no pod uses the claim yet",
                detail=f"ResourceClaim {walk.claim_key} is not allocated and no pod references "
                "it: the scheduler allocates a claim only while scheduling a pod that uses it.",
                next=(
                    f"kubectl get pods -n {namespace_of(walk.claim)} -o json | jq '.items[] | "
                    f'select(.spec.resourceClaims[]?.resourceClaimName=="{name_of(walk.claim)}")'
                    " | .metadata.name'",
                ),
            )
        )
        return _result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "no consumer pod")
    for pod in walk.bound_pods():
        if _pod_done(pod):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        findings.append(
            Finding(
                rule=ALLOC_BOUND_UNALLOCATED,
                phase=phase,
                severity=Severity.ERROR,
                title="the pod is bound to a node but its claim is not allocated",
                detail=f"Pod {_pod_key(pod)} runs on node {node} while ResourceClaim "
                f"{walk.claim_key} has no status.allocation: the pod bypassed the scheduler "
                "(spec.nodeName set directly), so nothing allocated its devices; the kubelet "
                "fails Prepare with 'claim ... not allocated'.",
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"ResourceClaim {walk.claim_key} .status.allocation",
                        excerpt="absent",
                    ),
                ),
                next=(
                    f"kubectl get pod -n {namespace_of(pod)} {name_of(pod)} "
                    "-o jsonpath='{.spec.schedulerName} {.spec.nodeName}'",
                ),
                identifiers=(("pod UID", uid_of(pod)), ("claim UID", walk.claim_uid)),
            )
        )
    pending = [
        p for p in walk.pods if not (p.get("spec") or {}).get("nodeName") and not _pod_done(p)
    ]
    findings += [h.finding for h in hits]
    matched_pods = {id(h.pod) for h in hits if h.pod is not None}
    saw_evidence = bool(hits)
    for pod in pending:
        cond = _pod_condition(pod, "PodScheduled")
        message = str((cond or {}).get("message") or "")
        events = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedScheduling"]
        if cond is not None and cond.get("status") == "False" and message:
            saw_evidence = True
        if events:
            saw_evidence = True
            message = message or str(events[-1].get("message") or "")
        if id(pod) in matched_pods or not message:
            continue
        parts = decompose_fit_error(message)
        breakdown = "; ".join(f"{n} node(s): {r}" for n, r in parts)
        evidence = [
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"Pod {_pod_key(pod)} .status.conditions[PodScheduled]",
                excerpt=f"{(cond or {}).get('reason') or ''}: {message[:600]}",
            )
        ]
        if events:
            evidence.append(event_evidence(events[-1]))
        findings.append(
            Finding(
                rule=ALLOC_UNSCHEDULABLE,
                phase=phase,
                severity=Severity.ERROR,
                title="the scheduler cannot place the pod with its claim",
                detail=f"Pod {_pod_key(pod)} is unschedulable and ResourceClaim "
                f"{walk.claim_key} is not allocated."
                + (f" Per node: {breakdown}." if breakdown else f" Scheduler: {message[:300]}"),
                evidence=tuple(evidence),
                next=(
                    f"dradiag simulate --node <node> --claim {walk.claim_key}  (the allocator explained)",
                    f"kubectl get events -n {namespace_of(pod)} --field-selector "
                    f"involvedObject.name={name_of(pod)},reason=FailedScheduling",
                ),
                identifiers=(("pod", _pod_key(pod)),),
            )
        )
    # The simulator explains an allocation failure; when selection already broke (nothing
    # matches), the verdict is decided earlier and the simulation would only repeat it. When
    # selection is unknown (classes or slices not collected), the simulator would read the
    # missing objects as absent ("could not retrieve device class"): it does not run either.
    selection_undecided = selection is not None and selection.status in (
        PhaseStatus.BROKEN,
        PhaseStatus.UNKNOWN,
    )
    if walk.options.simulate and pending and not selection_undecided:
        simulated = _allocation_simulation(walk)
        if simulated is not None:
            findings += simulated[0]
            findings += _node_affinity_findings(walk, pending, simulated[1])
    if any(f.severity is Severity.ERROR for f in findings):
        return _result(walk.rulebook, phase, findings, PhaseStatus.OK)
    if not saw_evidence and pending:
        if not walk.collected(Kind.EVENT):
            findings.append(
                walk.not_collected(
                    phase,
                    [Kind.EVENT],
                    "The pod is pending and its scheduling failure is reported in events",
                )
            )
            return _result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
        oldest = min(
            (parse_time((p.get("metadata") or {}).get("creationTimestamp")) for p in pending),
            key=lambda t: t or datetime.max.replace(tzinfo=None),
            default=None,
        )
        stuck = walk.older_than_threshold(oldest)
        if stuck:
            findings.append(
                Finding(
                    rule=ALLOC_PENDING_SILENT,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the pod has been pending without any scheduler verdict",
                    detail=f"Pod {_pod_key(pending[0])} has been pending for "
                    f"{format_age(age(oldest, walk.now) or timedelta())} with no FailedScheduling "
                    "event and no PodScheduled condition. The scheduler's PreEnqueue check "
                    "(claim missing, being deleted, or not owned by the pod) rejects silently.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pending[0])} .status",
                            excerpt=f"phase: {_pod_status(pending[0]).get('phase') or 'Pending'}; "
                            "no PodScheduled condition",
                        ),
                    ),
                    next=(
                        f"kubectl get pod -n {namespace_of(pending[0])} {name_of(pending[0])} "
                        "-o jsonpath='{.spec.schedulerName}'",
                        f"kubectl get resourceclaim -n {namespace_of(walk.claim)} {name_of(walk.claim)} "
                        "-o jsonpath='{.metadata.deletionTimestamp} {.metadata.ownerReferences}'",
                    ),
                )
            )
            return _result(walk.rulebook, phase, findings, PhaseStatus.OK)
        return _result(
            walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "waiting for the scheduler"
        )
    base = PhaseStatus.NOT_REACHED if not pending else PhaseStatus.WARN
    return _result(walk.rulebook, phase, findings, base)


def _not_created(walk: _Walk) -> list[Finding]:
    """The generated claim does not exist yet (template claim, k8s-dra-semantics §6)."""
    pods = walk.pods
    pod = pods[0] if pods else None
    if pod is None:
        return []
    findings: list[Finding] = []
    ev = [e for e in walk.pod_events(pod) if e.get("reason") == "FailedResourceClaimCreation"]
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    stuck = walk.older_than_threshold(created)
    template = ((walk.claim.get("metadata") or {}).get("annotations") or {}).get(
        "dradiag.io/synthesized-from-template", ""
    )
    if ev or stuck:
        findings.append(
            Finding(
                rule=ALLOC_CLAIM_NOT_CREATED,
                phase=Phase.ALLOCATION,
                severity=Severity.ERROR,
                title="the pod's generated ResourceClaim was never created",
                detail=f"Pod {_pod_key(pod)} uses template {namespace_of(pod)}/{template}, "
                "but no ResourceClaim was generated for it"
                + (f" after {format_age(age(created, walk.now) or timedelta())}" if stuck else "")
                + "; the scheduler waits silently ('ResourceClaim not created yet'). "
                "The diagnosis reads the template's spec instead.",
                evidence=tuple(event_evidence(e) for e in ev[-2:])
                or (
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Pod {_pod_key(pod)} .status.resourceClaimStatuses",
                        excerpt="no entry for the pod claim",
                    ),
                ),
                next=(
                    f"kubectl get events -n {namespace_of(pod)} --field-selector "
                    f"involvedObject.name={name_of(pod)},reason=FailedResourceClaimCreation",
                    "kubectl logs -n kube-system -l component=kube-controller-manager | grep -i "
                    "resourceclaim",
                ),
                identifiers=(("pod UID", uid_of(pod)),),
            )
        )
    return findings


# -- 4. prepare ------------------------------------------------------------------------


def _prepare_events(walk: _Walk, pod: K8sObject) -> list[K8sObject]:
    return [e for e in walk.pod_events(pod) if e.get("reason") == "FailedPrepareDynamicResources"]


def phase_prepare(walk: _Walk) -> PhaseResult:
    """The kubelet prepared the claim on each pod's node, or why it did not."""
    phase = Phase.PREPARE
    bound = [p for p in walk.bound_pods() if not _pod_terminating(p)]
    if walk.allocation is None or not bound:
        if walk.allocation is not None and not walk.collected(Kind.POD):
            return _result(
                walk.rulebook,
                phase,
                [walk.not_collected(phase, [Kind.POD], "Prepare is observed on the claim's pods")],
                PhaseStatus.UNKNOWN,
            )
        return _result(walk.rulebook, phase, [], PhaseStatus.NOT_REACHED)
    findings: list[Finding] = []
    waiting: list[K8sObject] = []
    hits_by_pod: dict[int, list[_Hit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    for pod in bound:
        pod_hits = hits_by_pod.get(id(pod), [])
        if _pod_started(pod) or _pod_done(pod):
            findings += [_historical(h.finding, "the pod's containers started") for h in pod_hits]
            continue
        waiting.append(pod)
        findings += [h.finding for h in pod_hits]
        if pod_hits:
            continue
        failed = _prepare_events(walk, pod)
        if failed:
            last = failed[-1]
            findings.append(
                Finding(
                    rule=PREP_FAILED,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the kubelet could not prepare the claim's devices",
                    detail=f"Pod {_pod_key(pod)} waits in ContainerCreating: NodePrepareResources "
                    f"failed on node {(pod.get('spec') or {}).get('nodeName')}: "
                    f"{str(last.get('message') or '')[:500]}",
                    evidence=tuple(event_evidence(e) for e in failed[-2:]),
                    next=(
                        f"kubectl get events -n {namespace_of(pod)} --field-selector "
                        f"involvedObject.name={name_of(pod)}",
                        "kubectl logs -n <driver namespace> <kubelet-plugin pod on the node> -c gpus",
                    ),
                    identifiers=(("claim UID", walk.claim_uid),),
                )
            )
    for pod in waiting:
        if any(f.severity is Severity.ERROR for f in findings):
            break
        if not walk.collected(Kind.EVENT):
            findings.append(
                walk.not_collected(
                    phase,
                    [Kind.EVENT],
                    f"Pod {_pod_key(pod)} is not running yet and Prepare failures are reported "
                    "only in pod events (the plugin logs them only at verbosity 6)",
                )
            )
            return _result(walk.rulebook, phase, findings, PhaseStatus.UNKNOWN)
        events = walk.pod_events(pod)
        last_event = max((t for e in events if (t := event_last_time(e))), default=None)
        since = max((t for t in (_scheduled_at(pod), last_event) if t), default=None)
        if walk.older_than_threshold(since):
            node = (pod.get("spec") or {}).get("nodeName")
            findings.append(
                Finding(
                    rule=PREP_STUCK,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="Prepare never completed: the pod is stuck without any event",
                    detail=f"ResourceClaim {walk.claim_key} is allocated and reserved and pod "
                    f"{_pod_key(pod)} is bound to node {node}, but no container has started and "
                    f"nothing was reported for {format_age(age(since, walk.now) or timedelta())} "
                    f"(threshold {format_age(walk.options.stuck_after)}): NodePrepareResources "
                    "is hanging or the kubelet never called it.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pod)} .status",
                            excerpt=_waiting_summary(pod) or "no container status",
                        ),
                    ),
                    next=(
                        f"journalctl -u kubelet on {node} | grep -i 'dynamic resources\\|{walk.claim_uid}'",
                        "kubectl get --raw /api/v1/nodes/"
                        f"{node}/proxy/metrics | grep nvidia_dra_requests_inflight",
                    ),
                    identifiers=(("claim UID", walk.claim_uid), ("node", str(node))),
                )
            )
    if waiting and not findings:
        return _result(
            walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED, "Prepare in progress"
        )
    prepared = sorted(
        {str((p.get("spec") or {}).get("nodeName")) for p in bound if _pod_started(p)}
    )
    summary = f"prepared on {', '.join(prepared)}" if prepared else ""
    return _result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)


def _waiting_summary(pod: K8sObject) -> str:
    parts = []
    for cs in _container_statuses(pod):
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting:
            parts.append(f"{cs.get('name')}: waiting {waiting.get('reason') or ''}".strip())
    return "; ".join(parts) or f"phase {_pod_status(pod).get('phase') or 'Pending'}"


# -- 5. injection ----------------------------------------------------------------------


def _cdi_ids(walk: _Walk) -> list[str]:
    return [
        f"k8s.{driver}/claim={walk.claim_uid}-{dev}"
        for _r, driver, _p, dev in _claim_devices(walk.claim)
        if driver == NVIDIA_DRIVER and walk.claim_uid
    ]


def phase_injection(walk: _Walk, prepare: PhaseResult) -> PhaseResult:
    """The runtime created the containers with the claim's CDI devices."""
    phase = Phase.INJECTION
    if walk.allocation is not None and not walk.collected(Kind.POD):
        return _result(
            walk.rulebook,
            phase,
            [
                walk.not_collected(
                    phase,
                    [Kind.POD],
                    "Injection is read from the container states of the claim's pods",
                )
            ],
            PhaseStatus.UNKNOWN,
        )
    started = [p for p in walk.bound_pods() if _pod_started(p)]
    if (
        prepare.status is not PhaseStatus.OK
        and prepare.status is not PhaseStatus.WARN
        or not started
    ):
        return _result(walk.rulebook, phase, [], PhaseStatus.NOT_REACHED)
    findings: list[Finding] = []
    hits_by_pod: dict[int, list[_Hit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    cdi = _cdi_ids(walk)
    for pod in started:
        pod_hits = hits_by_pod.get(id(pod), [])
        failing = [
            cs
            for cs in _container_statuses(pod)
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") in _INJECTION_WAITING
        ]
        if _pod_all_running(pod) or (_pod_done(pod) and not failing):
            findings += [_historical(h.finding, "the containers run") for h in pod_hits]
            continue
        findings += [h.finding for h in pod_hits]
        if pod_hits or not failing:
            continue
        for cs in failing:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            findings.append(
                Finding(
                    rule=INJ_CREATE_FAILED,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the runtime could not create the container",
                    detail=f"Container {cs.get('name')!r} of pod {_pod_key(pod)} is waiting with "
                    f"{waiting.get('reason')}: {str(waiting.get('message') or '')[:500]}",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pod)} .status.containerStatuses[{cs.get('name')}]",
                            excerpt=f"{waiting.get('reason')}: {str(waiting.get('message') or '')[:400]}",
                        ),
                    ),
                    next=(
                        f"kubectl describe pod -n {namespace_of(pod)} {name_of(pod)}",
                        f"ls /var/run/cdi/k8s.gpu.nvidia.com-claim_{walk.claim_uid}.yaml on the node",
                    ),
                    identifiers=tuple(("CDI device ID", c) for c in cdi[:4]),
                )
            )
    findings += _cdi_spec_missing(walk, started)
    findings += _cdi_not_applied(walk, started)
    summary = f"CDI {', '.join(cdi[:2])}" + (" …" if len(cdi) > 2 else "") if cdi else ""
    return _result(walk.rulebook, phase, findings, PhaseStatus.OK, summary)


def _pod_claim_names(walk: _Walk, pod: K8sObject) -> list[str]:
    """The pod's claim entries that name this claim (the template's for a synthesized one)."""
    if walk.synthesized:
        annotations = (walk.claim.get("metadata") or {}).get("annotations") or {}
        return [str(annotations.get("resource.kubernetes.io/pod-claim-name", ""))]
    return pod_claim_names_for(walk.snapshot, pod, walk.claim)


def _containers_given_devices(walk: _Walk, pod: K8sObject) -> set[str]:
    """Containers the kubelet hands this claim's CDI devices: they list the claim, and not
    only under request names the claim does not have."""
    names = _pod_claim_names(walk, pod)
    if not names:
        return set()
    wired = wiring.analyze_pod_wiring(pod, walk.claim, names)
    unknown = set(wired.unknown_requests)
    return {
        use.container
        for use in wired.using
        if any((use.container, r) not in unknown for r in use.requests)
    }


def _container_spec(pod: K8sObject, name: str) -> Mapping[str, Any]:
    spec = pod.get("spec") or {}
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        if isinstance(c, Mapping) and c.get("name") == name:
            return c
    return {}


def _container_status(pod: K8sObject, name: str) -> Mapping[str, Any]:
    for key in ("containerStatuses", "initContainerStatuses"):
        for cs in _pod_status(pod).get(key) or ():
            if isinstance(cs, Mapping) and cs.get("name") == name:
                return cs
    return {}


_HIDING_ENV = {
    "NVIDIA_VISIBLE_DEVICES": ("void", "none", ""),
    "CUDA_VISIBLE_DEVICES": ("", "-1", "none"),
}
"""Container env values that hide the GPU from the workload whatever the runtime injects."""


def _hides_gpu(container: Mapping[str, Any]) -> str:
    for env in container.get("env") or ():
        if not isinstance(env, Mapping) or "valueFrom" in env:
            continue
        hidden = _HIDING_ENV.get(str(env.get("name") or ""))
        if hidden is not None and str(env.get("value") or "").strip().lower() in hidden:
            return f"{env.get('name')}={env.get('value') or ''}"
    return ""


_NO_DEVICE_RULES = frozenset({"DRA-WORK-NO-CUDA-DEVICE", "DRA-WORK-NVIDIA-SMI-FAILED"})
"""Workload signatures that mean no GPU reached the container at all."""


def _cdi_not_applied(walk: _Walk, started: Sequence[K8sObject]) -> list[Finding]:
    """A container that lists the claim, started after Prepare succeeded, and sees no GPU.

    The kubelet passed the claim's CDI device IDs with the container (it lists the claim);
    a runtime without CDI enabled (containerd before 1.7 or ``enable_cdi = false``,
    cri-dockerd) drops them silently and starts the container anyway (peers §6 P4). A
    container whose own env hides the GPU (``NVIDIA_VISIBLE_DEVICES=void``) is left out.
    """
    hits = [
        h
        for h in walk.hits_for(Phase.WORKLOAD)
        if h.finding.rule in _NO_DEVICE_RULES and h.pod is not None and h.log_container
    ]
    out: list[Finding] = []
    for pod in started:
        pod_hits = [h for h in hits if h.pod is pod]
        if not pod_hits:
            continue
        given = _containers_given_devices(walk, pod)
        reported: set[str] = set()
        for hit in pod_hits:
            name = hit.log_container
            if name not in given or name in reported:
                continue
            running = "running" in (_container_status(pod, name).get("state") or {})
            if hit.log_previous and running:
                continue  # an earlier instance's complaint; the current one may see the GPU
            hiding = _hides_gpu(_container_spec(pod, name))
            if hiding:
                continue
            reported.add(name)
            node = (pod.get("spec") or {}).get("nodeName")
            out.append(
                Finding(
                    rule=INJ_CDI_NOT_APPLIED,
                    phase=Phase.INJECTION,
                    severity=Severity.ERROR,
                    title="the runtime started the container without applying the claim's CDI "
                    "devices",
                    detail=f"Container {name!r} of pod {_pod_key(pod)} lists ResourceClaim "
                    f"{walk.claim_key} in resources.claims and the claim was prepared on node "
                    f"{node} (the container started), yet the container sees no GPU "
                    f"({hit.finding.title}). The kubelet passed the claim's CDI device IDs; a "
                    "runtime without CDI enabled drops them silently and starts the container "
                    "without the device nodes and driver libraries.",
                    evidence=(
                        *hit.finding.evidence[:1],
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pod)} .spec.containers[{name}].resources.claims",
                            excerpt=str(
                                list(
                                    (_container_spec(pod, name).get("resources") or {}).get(
                                        "claims"
                                    )
                                    or []
                                )
                            ),
                        ),
                    ),
                    next=(
                        f"grep -n -A3 enable_cdi /etc/containerd/config.toml on {node}  "
                        "(containerd >= 1.7 with enable_cdi = true, or CRI-O)",
                        f"kubectl exec -n {namespace_of(pod)} {name_of(pod)} -c {name} -- "
                        "ls -l /dev/nvidia*",
                        f"kubectl get node {node} "
                        "-o jsonpath='{.status.nodeInfo.containerRuntimeVersion}'",
                    ),
                    identifiers=(
                        ("pod", _pod_key(pod)),
                        ("container", name),
                        *(("CDI device ID", c) for c in _cdi_ids(walk)[:2]),
                    ),
                )
            )
    return out


_UNRESOLVABLE_CDI = re.compile(r"unresolvable CDI devices (?P<ids>.+)$")
_PREPARE_SKIPPED = "Skip prepare: claim already in PrepareCompleted state"


def _unresolved_ids(message: str) -> list[str]:
    m = _UNRESOLVABLE_CDI.search(message.strip())
    if not m:
        return []
    return [i.strip() for i in m.group("ids").split(",") if i.strip()]


def _cdi_spec_missing(walk: _Walk, started: Sequence[K8sObject]) -> list[Finding]:
    """The runtime cannot resolve CDI devices of the claim that the same container was
    created with before, on the same node: the spec file is gone, not CDI support.

    ``/var/run/cdi`` is a tmpfs: a reboot empties it, and the plugin, whose checkpoint
    still holds the claim as PrepareCompleted, does not write the spec again (Prepare is
    idempotent; nvidia-driver-facts §6, §7, §12 #14). An earlier successful start of this
    container rules out the other causes of ``unresolvable CDI devices`` (CDI disabled in
    the runtime, another spec directory). Without the node probe the file itself cannot be
    listed, so the evidence is the container's history, the node's restart and the plugin's
    skipped Prepare.
    """
    out: list[Finding] = []
    for pod in started:
        given = _containers_given_devices(walk, pod)
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        for cs in _container_statuses(pod):
            name = str(cs.get("name") or "")
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if name not in given or waiting.get("reason") not in _INJECTION_WAITING:
                continue
            ids = _unresolved_ids(str(waiting.get("message") or ""))
            mine = [i for i in ids if "/claim=" not in i or f"/claim={walk.claim_uid}-" in i]
            before = (cs.get("lastState") or {}).get("terminated") or {}
            if not mine or not before.get("startedAt"):
                continue
            ran_from = parse_time(before.get("startedAt"))
            message = str(waiting.get("message") or "")[:300]
            evidence = [
                Evidence(
                    source=EvidenceSource.OBJECT,
                    ref=f"Pod {_pod_key(pod)} .status.containerStatuses[{name}]",
                    excerpt=f"waiting {waiting.get('reason')}: {message}; lastState.terminated: "
                    f"started {before.get('startedAt')}, finished {before.get('finishedAt')} "
                    f"({before.get('reason') or 'exit'} {before.get('exitCode')})",
                )
            ]
            rebooted = ""
            node_obj = walk.snapshot.node(node) if node else None
            ready = _node_ready_since(node_obj) if node_obj is not None else None
            if ready is not None and ran_from is not None and ready > ran_from:
                rebooted = (
                    f" Node {node} became Ready again at {ready:%Y-%m-%dT%H:%M:%SZ}, after the "
                    "container had started: a node restart empties /var/run/cdi."
                )
                evidence.append(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"Node {node} .status.conditions[Ready]",
                        excerpt=f"lastTransitionTime {ready:%Y-%m-%dT%H:%M:%SZ}",
                    )
                )
            skipped = _skipped_prepare_line(walk, node)
            if skipped is not None:
                evidence.append(skipped)
            claim_spec = f"k8s.gpu.nvidia.com-claim_{walk.claim_uid}.yaml"
            spec_file = (
                f"/var/run/cdi/{claim_spec}"
                if any("/claim=" in i for i in mine)
                else "the driver's spec file under /var/run/cdi"
            )
            out.append(
                Finding(
                    rule=INJ_CDI_SPEC_MISSING,
                    phase=Phase.INJECTION,
                    severity=Severity.ERROR,
                    title="the node has no CDI spec for a claim the plugin considers prepared",
                    detail=f"Container {name!r} of pod {_pod_key(pod)} was created with the "
                    f"claim's CDI devices on node {node} before (it ran from "
                    f"{before.get('startedAt')}), and now the runtime cannot resolve "
                    f"{', '.join(mine[:2])}. CDI worked for this container, which rules out a "
                    "runtime without CDI or one reading another spec directory: "
                    f"{spec_file} is gone (/var/run is a tmpfs), and the plugin does not write "
                    "it again for a claim its checkpoint holds as PrepareCompleted." + rebooted,
                    evidence=tuple(evidence),
                    next=(
                        f"ls -l /var/run/cdi/ on {node}  ({claim_spec})",
                        "kubectl exec -n <driver namespace> <kubelet-plugin pod on the node> -c gpus "
                        "-- cat /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json  "
                        f"(claim UID {walk.claim_uid}: PrepareCompleted, and its boot ID)",
                        "dradiag node  (checkpoint vs CDI specs, on the node)",
                    ),
                    identifiers=(
                        ("pod", _pod_key(pod)),
                        ("claim UID", walk.claim_uid),
                        *(("CDI device ID", i) for i in mine[:2]),
                    ),
                )
            )
    return out


def _node_ready_since(node: K8sObject) -> datetime | None:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if (
            isinstance(cond, Mapping)
            and cond.get("type") == "Ready"
            and cond.get("status") == "True"
        ):
            return parse_time(cond.get("lastTransitionTime"))
    return None


def _skipped_prepare_line(walk: _Walk, node: str) -> Evidence | None:
    """The plugin's "Skip prepare: claim already in PrepareCompleted state" for this claim."""
    if not node:
        return None
    health = walk.plugin(node)
    for log in ph.plugin_logs(walk.snapshot, health):
        if _PREPARE_SKIPPED not in log.text:
            continue
        for number, line in enumerate(log.text.splitlines(), 1):
            if _PREPARE_SKIPPED in line and walk.claim_uid and walk.claim_uid in line:
                where = f"{log.namespace or ''}/{log.pod}/{log.container}"
                return Evidence(
                    source=EvidenceSource.LOG,
                    ref=f"log {where}{' (previous)' if log.previous else ''}:{number}",
                    excerpt=line.strip()[:600],
                )
    return None


# -- 6. workload -----------------------------------------------------------------------


def phase_workload(walk: _Walk, injection: PhaseResult) -> PhaseResult:
    """The containers that need the device list the claim, run, and see a GPU."""
    phase = Phase.WORKLOAD
    findings: list[Finding] = []
    for pod in walk.pods:
        names = _pod_claim_names(walk, pod)
        if not names:
            continue
        findings += wiring.wiring_findings(
            wiring.analyze_pod_wiring(pod, walk.claim, names), walk.claim
        )
    reached = injection.status in (PhaseStatus.OK, PhaseStatus.WARN)
    if not reached:
        return _result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED)
    hits_by_pod: dict[int, list[_Hit]] = {}
    for h in walk.hits_for(phase):
        hits_by_pod.setdefault(id(h.pod), []).append(h)
    base = PhaseStatus.OK
    for pod in walk.bound_pods():
        if not _pod_started(pod):
            continue
        pod_hits = hits_by_pod.get(id(pod), [])
        findings += [h.finding for h in pod_hits]
        crashing = [
            cs
            for cs in _container_statuses(pod)
            if ((cs.get("state") or {}).get("waiting") or {}).get("reason") == "CrashLoopBackOff"
            or (((cs.get("state") or {}).get("terminated") or {}).get("exitCode") not in (None, 0))
        ]
        if not crashing or any(h.finding.severity is Severity.ERROR for h in pod_hits):
            continue
        if not walk.collected(Kind.LOG):
            findings.append(
                walk.not_collected(
                    phase,
                    [Kind.LOG],
                    f"Container(s) {', '.join(str(c.get('name')) for c in crashing)} of pod "
                    f"{_pod_key(pod)} exit with errors; whether they saw a GPU is in their logs",
                )
            )
            base = PhaseStatus.UNKNOWN
            continue
        if pod_hits:
            continue
        for cs in crashing:
            term = (
                (cs.get("lastState") or {}).get("terminated")
                or (cs.get("state") or {}).get("terminated")
                or {}
            )
            findings.append(
                Finding(
                    rule=WORK_CONTAINER_CRASHING,
                    phase=phase,
                    severity=Severity.WARNING,
                    title="a container that uses the claim keeps failing",
                    detail=f"Container {cs.get('name')!r} of pod {_pod_key(pod)} exits "
                    f"(exit code {term.get('exitCode')}, {cs.get('restartCount') or 0} restarts); "
                    "its log shows no known GPU-visibility signature, so the failure may be the "
                    "application's own.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pod)} .status.containerStatuses[{cs.get('name')}]",
                            excerpt=f"{term.get('reason') or ''} exit {term.get('exitCode')}: "
                            f"{str(term.get('message') or '')[:300]}",
                        ),
                    ),
                    next=(
                        f"kubectl logs -n {namespace_of(pod)} {name_of(pod)} -c {cs.get('name')} "
                        "--previous",
                        f"kubectl exec -n {namespace_of(pod)} {name_of(pod)} -c {cs.get('name')} "
                        "-- nvidia-smi -L",
                    ),
                )
            )
    running = [
        f"{_pod_key(p)}" for p in walk.bound_pods() if _pod_all_running(p) and not _pod_done(p)
    ]
    summary = f"running: {', '.join(running[:3])}" + (" …" if len(running) > 3 else "")
    return _result(walk.rulebook, phase, findings, base, summary if running else "")


# -- 7. unprepare ----------------------------------------------------------------------


def _leaked_by_other_claim(walk: _Walk, prepare: PhaseResult) -> list[Finding]:
    """This claim's Prepare fails because another claim's state was never released.

    The signatures (nvidia-driver-facts §5.4 C, §8.3, §12 #12): the double-allocation
    guard names the other claim's UID; a DynamicMIG ``Insufficient Resources`` on GPU
    ``<minor>`` while a claim with a MIG device on the same GPU is gone or terminating on
    that node; the kubelet's "old ResourceClaim with same name" after a force-delete.
    """
    messages = " ".join(
        e.excerpt for f in prepare.findings if f.severity is Severity.ERROR for e in f.evidence
    ) + " ".join(f.detail for f in prepare.findings if f.severity is Severity.ERROR)
    if not messages:
        return []
    snap = walk.snapshot
    out: list[Finding] = []
    culprits: list[tuple[K8sObject | None, str, str]] = []  # (claim, uid, why)
    other_names: dict[str, str] = {}
    extra_evidence: list[Evidence] = []
    for m in _OTHER_CLAIM_UID.finditer(messages):
        other = snap.claim_by_uid(m.group("uid"))
        if other is walk.claim:
            continue
        why = "" if other is None else _release_pending(walk, other)
        if other is None or why:
            culprits.append(
                (
                    other,
                    m.group("uid"),
                    why or "it is gone, yet the driver's checkpoint still holds the device for it",
                )
            )
    for m in _OLD_CLAIM_SAME_NAME.finditer(messages):
        culprits.append(
            (None, m.group("uid"), "the kubelet still holds the claim of a force-deleted pod")
        )
    mig = _MIG_CREATE_PARENT.search(messages)
    if mig and not culprits:
        minor = mig.group("minor")
        for partial in _partial_prepares(walk):
            same_gpu = any(
                d == mig.group("dev") or d.startswith(f"gpu-{minor}-") for d in partial.devices
            )
            if not same_gpu or partial.uid == walk.claim_uid:
                continue
            other = snap.claim_by_uid(partial.uid)
            why = "" if other is None else _release_pending(walk, other)
            if other is not None and not why:
                continue
            culprits.append(
                (
                    other,
                    partial.uid,
                    f"its Prepare of {', '.join(partial.devices)} started but never completed, "
                    "and the plugin's clean-up dropped it without tearing those devices down"
                    + (f" ({why})" if why else " (the claim is gone from the API server)"),
                )
            )
            extra_evidence.append(partial.evidence)
            if other is None:
                other_names[partial.uid] = partial.claim
    if mig and not culprits:
        for node in walk.nodes():
            for other in _claims_on_node(snap, node):
                if other is walk.claim:
                    continue
                if not any(
                    d.startswith(f"gpu-{minor}-") or d == f"gpu-{minor}"
                    for _r, _drv, _p, d in _claim_devices(other)
                ):
                    continue
                why = _release_pending(walk, other)
                if why:
                    culprits.append((other, uid_of(other), why))
    for other, other_uid, why in culprits:
        other_key = (
            key_of(other)
            if other is not None
            else other_names.get(other_uid, "(no longer in the cluster)")
        )
        out.append(
            Finding(
                rule=UNPREPARE_CAUSE_RULE,
                phase=Phase.UNPREPARE,
                severity=Severity.ERROR,
                title="another claim's devices were never released on the node",
                detail=f"Prepare of {walk.claim_key} fails because ResourceClaim {other_key} "
                f"(UID {other_uid}) was not fully unprepared: {why}. The broken boundary is "
                "that claim's Unprepare, not this claim's Prepare.",
                evidence=(
                    *tuple(
                        e
                        for f in prepare.findings
                        if f.severity is Severity.ERROR
                        for e in f.evidence
                    )[:2],
                    *extra_evidence[:2],
                ),
                next=(
                    *((f"dradiag claim {other_key}",) if other is not None else ()),
                    "kubectl exec -n <driver namespace> <kubelet-plugin pod on the node> -c gpus "
                    "-- cat /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json  "
                    f"(entries for claim UID {other_uid})",
                    "nvidia-smi mig -lgi on the node  (a GPU instance no prepared claim owns)",
                ),
                identifiers=(("claim UID", other_uid), ("claim", other_key)),
            )
        )
    return out


UNPREPARE_CAUSE_RULE = UNPREP_LEAKED_BY_OTHER_CLAIM

_PARTIAL_PREPARE = re.compile(
    r"(?:preparation started but not completed for claim|no MIG rollback \(DynamicMIG "
    r"disabled\) for partially prepared claim) (?P<ns>[^/\s]+)/(?P<name>[^:\s]+):"
    r"(?P<uid>[0-9a-fA-F-]{8,}) \(devices: \[(?P<devices>[^\]]*)\]\)"
)


@dataclass(frozen=True, slots=True)
class _PartialPrepare:
    """A claim the plugin dropped from its checkpoint without tearing its devices down."""

    claim: str
    uid: str
    devices: tuple[str, ...]
    evidence: Evidence


def _partial_prepares(walk: _Walk) -> list[_PartialPrepare]:
    """No-op unprepares of partially prepared claims in the plugin logs of the claim's nodes
    (nvidia-driver-facts §5.4 D/E, §8.3: the orphaned GI/CI behind ``Insufficient Resources``)."""
    out: list[_PartialPrepare] = []
    for node in walk.nodes():
        health = walk.plugin(node)
        for log in ph.plugin_logs(walk.snapshot, health):
            if "partially prepared" not in log.text and "not completed for claim" not in log.text:
                continue
            for number, line in enumerate(log.text.splitlines(), 1):
                m = _PARTIAL_PREPARE.search(line)
                if not m:
                    continue
                devices = tuple(d for d in re.split(r"[\s,]+", m.group("devices")) if d)
                where = f"{log.namespace or ''}/{log.pod}/{log.container}"
                out.append(
                    _PartialPrepare(
                        claim=f"{m.group('ns')}/{m.group('name')}",
                        uid=m.group("uid"),
                        devices=devices,
                        evidence=Evidence(
                            source=EvidenceSource.LOG,
                            ref=f"log {where}{' (previous)' if log.previous else ''}:{number}",
                            excerpt=line.strip()[:600],
                        ),
                    )
                )
    return out


def _claims_on_node(snap: Snapshot, node: str) -> list[K8sObject]:
    """Claims allocated from the node's pools (targeted: the node's slices name its pools)."""
    seen: dict[int, K8sObject] = {}
    for slc in snap.slices_for(node=node):
        spec = slc.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        for dev in spec.get("devices") or ():
            for claim in snap.claims_reserving_device(
                driver, pool, str((dev or {}).get("name") or "")
            ):
                seen[id(claim)] = claim
    for pod in snap.pods_on_node(node):
        for pc in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
            if isinstance(pc, Mapping) and pc.get("resourceClaimName"):
                c = snap.claim(namespace_of(pod), str(pc["resourceClaimName"]))
                if c is not None:
                    seen[id(c)] = c
    return sorted(seen.values(), key=key_of)


def _release_pending(walk: _Walk, claim: K8sObject) -> str:
    """Why ``claim`` still holds its devices although its consumers are gone, or ``""``."""
    snap = walk.snapshot
    meta = claim.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return f"it is being deleted since {meta['deletionTimestamp']}"
    reserved = wiring.reserved_pod_uids(claim)
    pods = [snap.pod_by_uid(u) for u in reserved]
    if reserved and snap.is_collected(Kind.POD) and all(p is None for p in pods):
        return "every pod it is reserved for is gone"
    for pod in pods:
        if pod is not None and _pod_terminating(pod):
            return f"its pod {_pod_key(pod)} is stuck terminating"
        if pod is not None and _pod_done(pod):
            return f"its pod {_pod_key(pod)} has finished"
    return ""


def phase_unprepare(walk: _Walk, prepare: PhaseResult) -> PhaseResult:
    """Release: reservations of gone pods, stuck termination or deletion, leaked state."""
    phase = Phase.UNPREPARE
    snap = walk.snapshot
    findings: list[Finding] = list(_leaked_by_other_claim(walk, prepare))
    hits = walk.hits_for(phase)
    meta = walk.claim.get("metadata") or {}
    releasing = False
    if not walk.synthesized and walk.allocation is not None:
        for uid, pod in wiring.pods_of_reservations(snap, walk.claim):
            if pod is None and snap.is_collected(Kind.POD):
                releasing = True
                findings.append(_stale_reservation(walk, uid, None, "is gone"))
            elif pod is not None and _pod_done(pod):
                releasing = True
                finished = max(
                    (
                        parse_time(
                            ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
                        )
                        for cs in _container_statuses(pod)
                    ),
                    key=lambda t: t.timestamp() if t else 0.0,
                    default=None,
                )
                if walk.older_than_threshold(finished) is not False:
                    findings.append(
                        _stale_reservation(walk, uid, pod, f"has {_pod_status(pod).get('phase')}")
                    )
    for pod in walk.pods:
        if not _pod_terminating(pod):
            continue
        releasing = True
        since = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
        # deletionTimestamp is already the end of the grace period: past it, the pod
        # should be gone.
        if walk.older_than_threshold(since):
            findings.append(
                Finding(
                    rule=UNPREP_POD_STUCK_TERMINATING,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the pod is stuck terminating with the claim prepared",
                    detail=f"Pod {_pod_key(pod)} was due to be gone at {since:%Y-%m-%dT%H:%M:%SZ} "
                    f"and still exists after {format_age(age(since, walk.now) or timedelta())}: "
                    "the kubelet runs NodeUnprepareResources after the containers stop and keeps "
                    "the pod until it succeeds.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"Pod {_pod_key(pod)} .metadata.deletionTimestamp",
                            excerpt=str((pod.get("metadata") or {}).get("deletionTimestamp")),
                        ),
                    ),
                    next=(
                        f"journalctl -u kubelet on {(pod.get('spec') or {}).get('nodeName')} | grep "
                        "NodeUnprepareResources",
                        "kubectl logs -n <driver namespace> <kubelet-plugin pod> -c gpus | grep -i "
                        "unprepar",
                    ),
                    identifiers=(("pod UID", uid_of(pod)), ("claim UID", walk.claim_uid)),
                )
            )
    if meta.get("deletionTimestamp") and not walk.synthesized:
        releasing = True
        since = parse_time(meta.get("deletionTimestamp"))
        if walk.older_than_threshold(since) and meta.get("finalizers"):
            findings.append(
                Finding(
                    rule=UNPREP_DELETION_STUCK,
                    phase=phase,
                    severity=Severity.ERROR,
                    title="the claim's deletion is stuck on its finalizer",
                    detail=f"ResourceClaim {walk.claim_key} was deleted "
                    f"{format_age(age(since, walk.now) or timedelta())} ago but keeps finalizers "
                    f"{list(meta.get('finalizers') or [])}: the resourceclaim controller removes "
                    "resource.kubernetes.io/delete-protection only after deallocating, which "
                    "waits for every reserved pod to be gone.",
                    evidence=(
                        Evidence(
                            source=EvidenceSource.OBJECT,
                            ref=f"ResourceClaim {walk.claim_key} .metadata",
                            excerpt=f"deletionTimestamp {meta.get('deletionTimestamp')}; "
                            f"finalizers {list(meta.get('finalizers') or [])}; reservedFor "
                            f"{wiring.reserved_pod_uids(walk.claim)}",
                        ),
                    ),
                    next=(
                        f"kubectl get resourceclaim -n {namespace_of(walk.claim)} "
                        f"{name_of(walk.claim)} -o jsonpath='{{.status.reservedFor}}'",
                    ),
                    identifiers=(("claim UID", walk.claim_uid),),
                )
            )
    for h in hits:
        if releasing or h.finding.severity is not Severity.ERROR:
            findings.append(h.finding)
        else:
            findings.append(_historical(h.finding, "no release of this claim is pending"))
    if findings:
        return _result(
            walk.rulebook, phase, findings, PhaseStatus.OK if releasing else PhaseStatus.NOT_REACHED
        )
    active = [p for p in walk.pods if not _pod_done(p) and not _pod_terminating(p)]
    if active or (walk.allocation is None and not walk.pods):
        return _result(walk.rulebook, phase, findings, PhaseStatus.NOT_REACHED)
    if releasing:
        return _result(walk.rulebook, phase, findings, PhaseStatus.OK, "release in progress")
    if not walk.collected(Kind.POD):
        return _result(
            walk.rulebook,
            phase,
            [walk.not_collected(phase, [Kind.POD], "Release is judged from the claim's pods")],
            PhaseStatus.UNKNOWN,
        )
    return _result(walk.rulebook, phase, findings, PhaseStatus.OK)


def _stale_reservation(walk: _Walk, pod_uid: str, pod: K8sObject | None, what: str) -> Finding:
    label = _pod_key(pod) if pod is not None else f"with UID {pod_uid}"
    return Finding(
        rule=UNPREP_STALE_RESERVATION,
        phase=Phase.UNPREPARE,
        severity=Severity.ERROR,
        title="the claim is still reserved for a pod that no longer needs it",
        detail=f"ResourceClaim {walk.claim_key} is allocated and reserved for pod {label}, which "
        f"{what}: the resourceclaim controller should have removed the reservation and "
        "deallocated the devices, so they stay unavailable to every other claim.",
        evidence=(
            Evidence(
                source=EvidenceSource.OBJECT,
                ref=f"ResourceClaim {walk.claim_key} .status.reservedFor",
                excerpt=str(wiring.reserved_pod_uids(walk.claim)),
            ),
        ),
        next=(
            "kubectl logs -n kube-system -l component=kube-controller-manager | grep -i "
            f"resourceclaim.*{name_of(walk.claim)}",
            f"kubectl get resourceclaim -n {namespace_of(walk.claim)} {name_of(walk.claim)} -o yaml",
        ),
        identifiers=(("pod UID", pod_uid), ("claim UID", walk.claim_uid)),
    )


# -- the walk --------------------------------------------------------------------------


def _as_symptom(prepare: PhaseResult, unprepare: PhaseResult) -> PhaseResult:
    """Prepare's failure, once traced to another claim's unfinished release, as a symptom.

    DESIGN §2: the broken boundary is the other claim's unprepare; this claim's Prepare
    failure stays visible (as a warning pointing there) but is not a second break.
    """
    causes = [
        f
        for f in unprepare.findings
        if f.rule in CROSS_CLAIM_CAUSE_RULES and f.severity is Severity.ERROR
    ]
    if not causes or prepare.status is not PhaseStatus.BROKEN:
        return prepare
    culprit = dict(causes[0].identifiers).get("claim", "another claim")
    findings = tuple(
        replace(
            f,
            severity=Severity.WARNING,
            detail=f"Symptom of {culprit}'s unfinished Unprepare (see unprepare): {f.detail}",
        )
        if f.severity is Severity.ERROR
        else f
        for f in prepare.findings
    )
    return replace(prepare, status=PhaseStatus.WARN, findings=findings)


def _target(walk: _Walk) -> Target:
    return Target(
        kind="ResourceClaim",
        namespace=namespace_of(walk.claim) or None,
        name=name_of(walk.claim),
        uid=walk.claim_uid or None,
        pods=tuple(_pod_key(p) for p in walk.pods),
        synthesized=walk.synthesized,
    )


def walk_claim(
    snapshot: Snapshot,
    claim: K8sObject,
    *,
    options: WalkOptions | None = None,
    pods: Sequence[K8sObject] | None = None,
    selection_cache: dict[tuple[str, str], list[Finding]] | None = None,
) -> Diagnosis:
    """Diagnose one claim object (real or synthesized) through the seven phases."""
    walk = _Walk(
        snapshot=snapshot,
        claim=claim,
        options=options or WalkOptions(),
        pods=list(pods) if pods is not None else snapshot.pods_for_claim(claim),
        rulebook=_rulebook(),
        synthesized=is_synthesized(claim),
        selection_cache=selection_cache,
    )
    publication = phase_publication(walk)
    selection = phase_selection(walk)
    allocation = phase_allocation(walk, selection)
    prepare = phase_prepare(walk)
    injection = phase_injection(walk, prepare)
    workload = phase_workload(walk, injection)
    unprepare = phase_unprepare(walk, prepare)
    prepare = _as_symptom(prepare, unprepare)
    phases = (publication, selection, allocation, prepare, injection, workload, unprepare)
    assert tuple(p.phase for p in phases) == PHASE_ORDER
    target = _target(walk)
    return Diagnosis(target=target, verdict=decide_verdict(target, phases), phases=phases)


def diagnose_claim(
    snapshot: Snapshot, namespace: str, name: str, *, options: WalkOptions | None = None
) -> Diagnosis:
    """Diagnose ResourceClaim ``namespace/name``; UsageError when it is not in the snapshot."""
    claim = snapshot.claim(namespace, name)
    if claim is None:
        where = snapshot.source.location or snapshot.source.kind
        coverage = snapshot.coverage[Kind.RESOURCE_CLAIM]
        hint = (
            f" (ResourceClaims were not collected: {coverage.reason})"
            if coverage.coverage is Coverage.UNKNOWN
            else ""
        )
        raise UsageError(f"ResourceClaim {namespace}/{name} not found in {where}{hint}")
    return walk_claim(snapshot, claim, options=options)


def diagnose_pod(
    snapshot: Snapshot, namespace: str, name: str, *, options: WalkOptions | None = None
) -> list[Diagnosis]:
    """One diagnosis per claim the pod uses (generated claims included, or synthesized)."""
    pod = snapshot.pod(namespace, name)
    if pod is None:
        where = snapshot.source.location or snapshot.source.kind
        raise UsageError(f"Pod {namespace}/{name} not found in {where}")
    out = []
    for pc in resolve_pod_claims(snapshot, pod):
        if pc.claim is None:
            continue
        pods = [pod] if pc.synthesized else None
        out.append(walk_claim(snapshot, pc.claim, options=options, pods=pods))
    return out


def unresolved_pod_claims(snapshot: Snapshot, namespace: str, name: str) -> list[str]:
    """Notes about the pod's claim entries that resolve to no claim object at all."""
    pod = snapshot.pod(namespace, name)
    if pod is None:
        return []
    return [
        f"pod claim {pc.pod_claim_name!r}: {pc.note or pc.resolution.value}"
        for pc in resolve_pod_claims(snapshot, pod)
        if pc.claim is None
    ]


# -- nodes and scan --------------------------------------------------------------------

GPU_NODE_LABELS: Mapping[str, str] = {
    "nvidia.com/gpu.present": "true",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "feature.node.kubernetes.io/pci-0302_10de.present": "true",
    "feature.node.kubernetes.io/pci-0300_10de.present": "true",
    "feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA",
}
"""Labels the kubelet-plugin DaemonSet's node affinity accepts (nvidia-driver-facts §5.1)."""


def is_gpu_node(node: K8sObject) -> bool:
    """True when NFD or the GPU Operator labelled the node as having NVIDIA GPUs."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(str(labels.get(k)).lower() == v.lower() for k, v in GPU_NODE_LABELS.items())


def diagnose_node(
    snapshot: Snapshot,
    node: str,
    *,
    options: WalkOptions | None = None,
    pool_problems_by_node: Mapping[str, Sequence[Any]] | None = None,
) -> Diagnosis:
    """The publication phase of one node: slices, pools, the kubelet plugin and its logs.

    For ``scan``: problems that belong to no claim yet (a GPU node publishing nothing, a
    crash-looping plugin, an incomplete pool) are what the next claim there will hit.
    """
    del options  # node publication has no time-based checks yet
    phase = Phase.PUBLICATION
    rulebook = _rulebook()
    findings: list[Finding] = []
    health = ph.plugin_health(snapshot, node)
    node_slices = snapshot.slices_for(node=node, driver=NVIDIA_DRIVER)
    node_obj = snapshot.node(node)
    if (
        not node_slices
        and snapshot.is_collected(Kind.RESOURCE_SLICE)
        and ((node_obj is not None and is_gpu_node(node_obj)) or health.pod is not None)
    ):
        findings.append(
            Finding(
                rule=PUB_NODE_NO_SLICES,
                phase=phase,
                severity=Severity.ERROR,
                title="the node publishes no ResourceSlice for the driver",
                detail=f"Node {node} "
                + (
                    "is labelled as an NVIDIA GPU node"
                    if node_obj is not None and is_gpu_node(node_obj)
                    else "runs a DRA kubelet-plugin pod"
                )
                + f" but no ResourceSlice of {NVIDIA_DRIVER} names it: claims cannot get its GPUs."
                + (
                    f" Plugin state: {health.state.value}."
                    if health.state is not ph.PluginState.NOT_COLLECTED
                    else ""
                ),
                evidence=(
                    Evidence(
                        source=EvidenceSource.OBJECT,
                        ref=f"ResourceSlices with spec.nodeName={node}",
                        excerpt=f"none for {NVIDIA_DRIVER}",
                    ),
                ),
                next=(f"kubectl get resourceslices --field-selector spec.nodeName={node}",),
                identifiers=(("node", node),),
            )
        )
    hits: list[Finding] = []
    if rulebook is not None and health.pod is not None:
        match_objects = _matcher("match_objects")
        match_logs = _matcher("match_logs")
        if match_objects is not None:
            hits += [h.to_finding() for h in match_objects(rulebook, "Pod", [health.pod])]
        if match_logs is not None:
            for log in ph.plugin_logs(snapshot, health):
                for h in match_logs(rulebook, [log]):
                    f = h.to_finding()
                    hits.append(
                        _historical(f, "the plugin has since restarted and runs")
                        if log.previous and health.healthy
                        else f
                    )
    hits = [h for h in hits if h.phase is phase]
    matched = {h.rule for h in hits}
    if health.state is not ph.PluginState.MISSING or (
        node_obj is not None and is_gpu_node(node_obj)
    ):
        findings += [
            f
            for f in ph.plugin_findings(health, blocking=True, has_slices=bool(node_slices))
            if f.rule not in matched
        ]
    findings += hits
    for problem in (pool_problems_by_node or {}).get(node, ()):
        findings.append(_pool_finding(problem, blocking=True))
    result = _result(rulebook, phase, findings, PhaseStatus.OK, NVIDIA_DRIVER)
    target = Target(kind="Node", name=node)
    return Diagnosis(target=target, verdict=decide_verdict(target, (result,)), phases=(result,))


def _quick_healthy(snapshot: Snapshot, claim: K8sObject) -> bool:
    """A cheap, conservative test that a claim needs no walk: allocated, reserved, not
    being deleted, and every consumer pod running all containers with one listing it."""
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = claim.get("status") or {}
    if not status.get("allocation") or not status.get("reservedFor"):
        return False
    pods = snapshot.pods_for_claim(claim)
    reserved = wiring.reserved_pod_uids(claim)
    if not pods or len(pods) < len(reserved):
        return False
    for pod in pods:
        if _pod_terminating(pod) or not _pod_all_running(pod) or _pod_done(pod):
            return False
        if not wiring.is_reserved_for(claim, pod):
            return False
        names = pod_claim_names_for(snapshot, pod, claim)
        if not wiring.analyze_pod_wiring(pod, claim, names).wired:
            return False
        if any(int(cs.get("restartCount") or 0) for cs in _container_statuses(pod)):
            return False
    return True


def _scan_sort_key(d: Diagnosis) -> tuple[int, int, str, str, str]:
    phase_index = PHASE_ORDER.index(d.verdict.phase) if d.verdict.phase else len(PHASE_ORDER)
    kind_rank = 0 if d.target.kind == "Node" else 1
    return (phase_index, kind_rank, d.target.namespace or "", d.target.name, d.target.kind)


def scan(
    snapshot: Snapshot,
    *,
    namespace: str | None = None,
    options: WalkOptions | None = None,
    include_nodes: bool = True,
) -> list[Diagnosis]:
    """Every claim (or pod whose claim is not created yet) that is not healthy, plus
    node-level publication problems, sorted by phase."""
    from dradiag.diagnosis.model import VerdictStatus

    base = options or WalkOptions()
    options = WalkOptions(now=base.now, stuck_after=base.stuck_after, simulate=False)
    cache: dict[tuple[str, str], list[Finding]] = {}
    out: list[Diagnosis] = []
    for claim in snapshot.claims:
        if namespace is not None and namespace_of(claim) != namespace:
            continue
        if _quick_healthy(snapshot, claim):
            continue
        diagnosis = walk_claim(snapshot, claim, options=options, selection_cache=cache)
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    for pod in snapshot.pods:
        if namespace is not None and namespace_of(pod) != namespace:
            continue
        if not (pod.get("spec") or {}).get("resourceClaims") or _pod_done(pod):
            continue
        for pc in resolve_pod_claims(snapshot, pod):
            if pc.synthesized and pc.claim is not None:
                diagnosis = walk_claim(
                    snapshot, pc.claim, options=options, pods=[pod], selection_cache=cache
                )
                if diagnosis.verdict.status is not VerdictStatus.OK:
                    out.append(diagnosis)
    if include_nodes:
        out += scan_nodes(snapshot, options=options)
    return sorted(out, key=_scan_sort_key)


def scan_nodes(snapshot: Snapshot, *, options: WalkOptions | None = None) -> list[Diagnosis]:
    """Node-level publication problems: GPU nodes publishing nothing, unhealthy plugins,
    incomplete or invalid pools."""
    from dradiag.diagnosis.model import VerdictStatus

    by_node: dict[str, list[Any]] = {}
    try:
        from dradiag.analyses.pools import pool_problems
    except ImportError:
        pool_problems = None  # type: ignore[assignment]
    if pool_problems is not None and snapshot.is_collected(Kind.RESOURCE_SLICE):
        for problem in pool_problems(snapshot):
            if problem.kind == "stale":
                continue
            for problem_node in problem.nodes or ("",):
                by_node.setdefault(problem_node, []).append(problem)
    nodes: set[str] = {n for n in by_node if n}
    for node_obj in snapshot.nodes:
        if is_gpu_node(node_obj):
            nodes.add(name_of(node_obj))
    for pod in snapshot.pods:
        pod_node = (pod.get("spec") or {}).get("nodeName")
        if pod_node and ph.is_plugin_pod(pod):
            nodes.add(str(pod_node))
    out = []
    for node in sorted(nodes):
        diagnosis = diagnose_node(snapshot, node, options=options, pool_problems_by_node=by_node)
        if diagnosis.verdict.status is not VerdictStatus.OK:
            out.append(diagnosis)
    return out
