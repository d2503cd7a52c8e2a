"""The rule format (DESIGN §6): the dataclasses a rule file becomes, and their validation.

A rule file is a YAML list of rules. Each rule is checked here once, when the rulebook
is loaded, and a problem is one line naming the file, the rule and the field
(``rules/prepare.yaml:12: DRA-PREP-X: match.event.message[0]: invalid regex: ...``), in
the way sqlfluff rejects a malformed rule code at definition time. What passes is frozen
data: regexes compiled (RE2 where possible, see ``patterns.py``), paths split, explain
placeholders checked against what the match can capture.

The match vocabulary, all optional, any of which fires the rule:

``event``  ``reason`` (a list of exact reasons, or a regex), ``message`` (regex, or a list
           of regexes: one per wording variant, the first that matches supplies the
           captures), ``type``, ``involvedKind``, ``source`` (regex on the component).
``log``    ``pattern`` (regex or list, as ``message``), ``container`` and ``pod`` (regexes).
``object`` ``kind``, ``path`` (dotted; ``[]`` walks a list; ``["a.b/c"]`` quotes a key),
           then either one test on the selected value (``equals``/``in``/``regex``/
           ``exists``) or ``where:``, a list of ``{path, test}`` that must all hold on the
           *same* selected element; ``not: true`` negates one; ``capture:`` maps names to
           paths read from that element for the explain text.

``known_issue`` (alone: it replaces the three above) a published bug of one component:
           ``component`` (one of ``KNOWN_COMPONENTS``), ``affected`` (a list of
           ``{introduced, fixed}`` ranges, one per release branch, as Kubernetes
           backports fixes), ``fixed_in`` and ``upstream`` (the issue or PR URL), and an
           optional ``symptom`` of ``event``/``log``/``object`` blocks as above that must
           *all* be present. It fires when the version is affected and the symptom is
           there; a rule without a symptom fires on the version alone, so it may not be an
           error. The explain text may use ``{component}``, ``{version}``,
           ``{fixed_in}`` and ``{upstream}``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dradiag.errors import InputError
from dradiag.rulebook.patterns import Pattern, PatternError, compile_pattern
from dradiag.rulebook.versions import VersionRange, parse_component_version
from dradiag.vocabulary import Phase, Severity

PHASE_CODES: Mapping[str, Phase] = {
    "PUB": Phase.PUBLICATION,
    "SEL": Phase.SELECTION,
    "ALLOC": Phase.ALLOCATION,
    "PREP": Phase.PREPARE,
    "INJ": Phase.INJECTION,
    "WORK": Phase.WORKLOAD,
    "UNPREP": Phase.UNPREPARE,
}
"""The phase code inside a rule id, and the phase it must name."""

RULE_ID_RE = re.compile(r"^DRA-(PUB|SEL|ALLOC|PREP|INJ|WORK|UNPREP)-[A-Z0-9]+(?:-[A-Z0-9]+)*$")

DOC_HEADINGS: tuple[str, ...] = (
    "## What it detects",
    "## Why it breaks the claim",
    "## Example evidence",
    "## Next",
)
"""The headings every rule's ``docs`` carries, in this order (ruff's per-rule doc shape)."""

REMEDIATION_PREFIX = "remediation:"
"""A ``next`` entry that changes something must say so with this prefix."""

# Words that start a mutating command; a `next` entry using one must be a remediation.
_MUTATING = re.compile(
    r"\bkubectl\s+(delete|apply|create|edit|patch|replace|scale|drain|cordon|uncordon|"
    r"label|annotate|taint|rollout\s+restart)\b|\bhelm\s+(upgrade|install|uninstall)\b|"
    r"\brm\s+-|\bnvidia-smi\s+.*(-mig\s|\bmig\s+-d|--gpu-reset|-r\b)"
)

CONTEXT_FIELDS: Mapping[str, frozenset[str]] = {
    "event": frozenset(
        {
            "reason",
            "message",
            "count",
            "kind",
            "namespace",
            "name",
            "object",
            "pod",
            "claim",
            "node",
        }
    ),
    "log": frozenset({"namespace", "pod", "container", "line", "line_number", "node"}),
    "object": frozenset({"kind", "namespace", "name", "object", "pod", "claim", "node"}),
}
"""Placeholders the matcher fills in besides regex captures, per evidence type."""

KNOWN_COMPONENTS: tuple[str, ...] = (
    "kubelet",
    "kube-scheduler",
    "kube-apiserver",
    "containerd",
    "cri-o",
    "nvidia-dra-driver",
    "nvidia-gpu-driver",
)
"""Components whose versions ``analyses/component_versions.py`` reads from a Snapshot."""

KNOWN_ISSUE_FIELDS = frozenset({"component", "version", "fixed_in", "upstream", "affected"})
"""Placeholders a known-issue rule's explain may use besides its symptom's."""

_TOP_KEYS = frozenset(
    {
        "id",
        "aliases",
        "phase",
        "severity",
        "title",
        "match",
        "explain",
        "next",
        "docs",
        "versions",
        "fallback",
        "supersedes",
    }
)
_REQUIRED = ("id", "phase", "severity", "title", "explain", "next", "docs")


class RuleFileError(InputError):
    """A rule file that cannot be used: one line naming file, line, rule and field."""


# -- the validated model --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PathStep:
    """One step of an object path: a key, and whether to walk the list found there."""

    key: str
    each: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueTest:
    """A test on the values one path selects: true when any selected value passes."""

    path: tuple[PathStep, ...]
    equals: Any = None
    one_of: tuple[Any, ...] | None = None
    pattern: Pattern | None = None
    exists: bool | None = None
    negate: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class EventMatch:
    """Which Events a rule fires on."""

    reasons: frozenset[str] | None = None
    reason_pattern: Pattern | None = None
    messages: tuple[Pattern, ...] = ()
    type: str | None = None
    involved_kind: str | None = None
    source: Pattern | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogMatch:
    """Which log lines a rule fires on (kubelet-plugin, init-container or workload logs)."""

    patterns: tuple[Pattern, ...]
    container: Pattern | None = None
    pod: Pattern | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMatch:
    """A predicate over normalized objects of one kind."""

    kind: str
    path: tuple[PathStep, ...]
    tests: tuple[ValueTest, ...]
    """Relative to each element ``path`` selects; all must hold on the same element."""
    captures: tuple[tuple[str, tuple[PathStep, ...]], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownIssueMatch:
    """A published bug: the component, the versions it affects, and what it looks like."""

    component: str
    affected: tuple[VersionRange, ...]
    fixed_in: tuple[str, ...]
    """The releases with the fix, one per branch that got it (``1.34.4``, ``1.35.1``)."""
    upstream: str
    symptom: tuple[tuple[str, Match], ...] = ()
    """The evidence that must all be present, one part per entry: (key, a Match with one
    field set); keys are ``event``, ``log``, ``object``, ``object#2``... Empty: the
    version alone fires the rule."""

    @property
    def fixed_in_text(self) -> str:
        """``1.34.4`` or ``1.34.4 / 1.35.1``: what the explain text cites."""
        return " / ".join(self.fixed_in)

    @property
    def affected_text(self) -> str:
        """The ranges as people read them: ``>=1.34.0 <1.34.2; >=1.35.0 <1.35.1``."""
        return "; ".join(str(r) for r in self.affected)


@dataclass(frozen=True, slots=True, kw_only=True)
class Match:
    """The evidence a data rule fires on; any of the parts may fire it.

    ``known_issue`` stands alone: its own ``symptom`` holds the event/log/object parts,
    and all of them must match (the matchers of the other parts skip such a rule).
    """

    event: EventMatch | None = None
    log: LogMatch | None = None
    object: ObjectMatch | None = None
    known_issue: KnownIssueMatch | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One catalogue entry: a data rule (``match`` set) or a code-backed one (``match`` None).

    Code-backed rules carry ids that analyses emit (CEL, allocation, pools, wiring), so
    everything a user sees has one registry entry with its docs (STYLE "Rules as data").
    """

    id: str
    phase: Phase
    severity: Severity
    title: str
    match: Match | None
    explain: str
    next: tuple[str, ...]
    docs: str
    aliases: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    """Driver / Kubernetes versions whose wording the rule's patterns cover."""
    fallback: bool = False
    """A catch-all: dropped for an evidence item that a specific rule also matched."""
    supersedes: tuple[str, ...] = ()
    """Rules this one replaces when both match the same evidence item."""
    source: str = ""
    """``file:line`` the rule was read from."""

    @property
    def code_backed(self) -> bool:
        """True when analyses emit this rule rather than the matcher."""
        return self.match is None

    @property
    def placeholders(self) -> frozenset[str]:
        """The ``{names}`` the explain template uses."""
        return explain_placeholders(self.explain)

    def render_explain(self, values: Mapping[str, object]) -> str:
        """The explain text with ``values`` filled in; a missing value reads ``(unknown)``."""
        return render_template(self.explain, values)

    def render_next(self, values: Mapping[str, object]) -> tuple[str, ...]:
        """The ``next`` observations with known ``{names}`` filled in, others left as written."""
        return tuple(render_template(item, values, missing=None) for item in self.next)


_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*(?:\|[a-z_][a-z0-9_]*)*)\}")
"""``{name}`` or ``{a|b}``; anything else in braces (kubectl jsonpath) is left alone."""


def explain_placeholders(template: str) -> frozenset[str]:
    """Names used as ``{name}`` (or ``{a|b}``) in a template."""
    names: set[str] = set()
    for m in _PLACEHOLDER.finditer(template):
        names.update(m.group(1).split("|"))
    return frozenset(names)


def render_template(
    template: str, values: Mapping[str, object], *, missing: str | None = "(unknown)"
) -> str:
    """Fill a template's placeholders with ``values`` (plain text, never code).

    ``{a|b}`` takes the first of ``a``, ``b`` that has a value, for rules whose wording
    variants capture different names. A placeholder with no value reads ``missing``, or
    stays as written when ``missing`` is None (``next`` entries, whose braces may be
    kubectl jsonpath).
    """

    def fill(m: re.Match[str]) -> str:
        for name in m.group(1).split("|"):
            value = values.get(name)
            if value is not None and value != "":
                return str(value)
        return m.group(0) if missing is None else missing

    return _PLACEHOLDER.sub(fill, template)


# -- validation -----------------------------------------------------------------------


class _Where:
    """Where in which file the validator is, to name it in the one-line error."""

    def __init__(self, path: str, line: int | None, rule_id: str | None) -> None:
        self.path, self.line, self.rule_id = path, line, rule_id

    def fail(self, field: str, reason: str) -> RuleFileError:
        who = f"{self.rule_id}: " if self.rule_id else ""
        return RuleFileError(f"{who}{field}: {reason}", path=self.path, line=self.line)


def _str(raw: Mapping[str, Any], key: str, where: _Where, *, field: str | None = None) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise where.fail(field or key, "must be a non-empty string")
    return value


def _str_list(value: Any, field: str, where: _Where) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise where.fail(field, "must be a string or a list of non-empty strings")
    return tuple(value)


def _pattern(value: Any, field: str, where: _Where) -> Pattern:
    if not isinstance(value, str) or not value:
        raise where.fail(field, "must be a non-empty regex string")
    try:
        return compile_pattern(value)
    except PatternError as exc:
        raise where.fail(field, str(exc)) from None


def _patterns(value: Any, field: str, where: _Where) -> tuple[Pattern, ...]:
    items = value if isinstance(value, list) else [value]
    if not items:
        raise where.fail(field, "must not be empty")
    if len(items) == 1 and not isinstance(value, list):
        return (_pattern(items[0], field, where),)
    return tuple(_pattern(v, f"{field}[{i}]", where) for i, v in enumerate(items))


def _only(raw: Mapping[str, Any], allowed: frozenset[str], field: str, where: _Where) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        prefix = f"{field}." if field else ""
        raise where.fail(
            f"{prefix}{unknown[0]}", f"unknown field (allowed: {', '.join(sorted(allowed))})"
        )


_PATH_TOKEN = re.compile(r'\["([^"]+)"\]|(\[\])|([^.\[\]]+)|(\.)')


def parse_path(text: str) -> tuple[PathStep, ...]:
    """``status.containerStatuses[].state`` → steps; ``["a.b/c"]`` quotes a key with dots."""
    steps: list[PathStep] = []
    if text.startswith(".") or text.endswith(".") or ".." in text:
        raise ValueError(f"empty path segment in {text!r}")
    pos = 0
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"bad path syntax at {text[pos:]!r}")
        quoted, each, key, _dot = m.groups()
        if each:
            if not steps or steps[-1].each:
                raise ValueError("'[]' must follow a key")
            steps[-1] = PathStep(steps[-1].key, each=True)
        elif quoted or key:
            steps.append(PathStep(quoted or key or ""))
        pos = m.end()
    if not steps:
        raise ValueError("empty path")
    return tuple(steps)


def _path(value: Any, field: str, where: _Where) -> tuple[PathStep, ...]:
    if not isinstance(value, str) or not value:
        raise where.fail(field, "must be a dotted path string")
    try:
        return parse_path(value)
    except ValueError as exc:
        raise where.fail(field, str(exc)) from None


_TEST_KEYS = frozenset({"equals", "in", "regex", "exists"})


def _value_test(
    raw: Mapping[str, Any], path: tuple[PathStep, ...], field: str, where: _Where
) -> ValueTest:
    tests = sorted(_TEST_KEYS & set(raw))
    if len(tests) != 1:
        raise where.fail(field, "needs exactly one of equals, in, regex, exists")
    negate = raw.get("not", False)
    if not isinstance(negate, bool):
        raise where.fail(f"{field}.not", "must be true or false")
    test = tests[0]
    if test == "equals":
        return ValueTest(path=path, equals=raw["equals"], negate=negate)
    if test == "in":
        values = raw["in"]
        if not isinstance(values, list) or not values:
            raise where.fail(f"{field}.in", "must be a non-empty list")
        return ValueTest(path=path, one_of=tuple(values), negate=negate)
    if test == "regex":
        pattern = _pattern(raw["regex"], f"{field}.regex", where)
        return ValueTest(path=path, pattern=pattern, negate=negate)
    exists = raw["exists"]
    if not isinstance(exists, bool):
        raise where.fail(f"{field}.exists", "must be true or false")
    return ValueTest(path=path, exists=exists, negate=negate)


def _event_match(raw: Any, where: _Where) -> EventMatch:
    if not isinstance(raw, Mapping):
        raise where.fail("match.event", "must be a mapping")
    _only(
        raw,
        frozenset({"reason", "message", "type", "involvedKind", "source"}),
        "match.event",
        where,
    )
    reasons: frozenset[str] | None = None
    reason_pattern: Pattern | None = None
    reason = raw.get("reason")
    if isinstance(reason, list):
        reasons = frozenset(_str_list(reason, "match.event.reason", where))
    elif reason is not None:
        reason_pattern = _pattern(reason, "match.event.reason", where)
    messages = _patterns(raw["message"], "match.event.message", where) if "message" in raw else ()
    if reasons is None and reason_pattern is None and not messages:
        raise where.fail("match.event", "needs a reason or a message")
    type_ = raw.get("type")
    if type_ is not None and type_ not in ("Normal", "Warning"):
        raise where.fail("match.event.type", "must be Normal or Warning")
    kind = raw.get("involvedKind")
    if kind is not None and not isinstance(kind, str):
        raise where.fail("match.event.involvedKind", "must be a kind name")
    source = _pattern(raw["source"], "match.event.source", where) if "source" in raw else None
    return EventMatch(
        reasons=reasons,
        reason_pattern=reason_pattern,
        messages=messages,
        type=type_,
        involved_kind=kind,
        source=source,
    )


def _log_match(raw: Any, where: _Where) -> LogMatch:
    if not isinstance(raw, Mapping):
        raise where.fail("match.log", "must be a mapping")
    _only(raw, frozenset({"pattern", "container", "pod"}), "match.log", where)
    if "pattern" not in raw:
        raise where.fail("match.log.pattern", "is required")
    return LogMatch(
        patterns=_patterns(raw["pattern"], "match.log.pattern", where),
        container=(
            _pattern(raw["container"], "match.log.container", where) if "container" in raw else None
        ),
        pod=_pattern(raw["pod"], "match.log.pod", where) if "pod" in raw else None,
    )


def _object_match(raw: Any, where: _Where) -> ObjectMatch:
    if not isinstance(raw, Mapping):
        raise where.fail("match.object", "must be a mapping")
    _only(
        raw,
        frozenset({"kind", "path", "where", "capture", "not"}) | _TEST_KEYS,
        "match.object",
        where,
    )
    kind = _str(raw, "kind", where, field="match.object.kind")
    path = _path(raw.get("path"), "match.object.path", where)
    tests: list[ValueTest] = []
    if "where" in raw:
        if _TEST_KEYS & set(raw):
            raise where.fail("match.object", "has both a test and where: use one")
        items = raw["where"]
        if not isinstance(items, list) or not items:
            raise where.fail("match.object.where", "must be a non-empty list")
        for i, item in enumerate(items):
            field = f"match.object.where[{i}]"
            if not isinstance(item, Mapping):
                raise where.fail(field, "must be a mapping")
            _only(item, frozenset({"path", "not"}) | _TEST_KEYS, field, where)
            sub = _path(item.get("path"), f"{field}.path", where)
            tests.append(_value_test(item, sub, field, where))
    else:
        tests.append(_value_test(raw, (), "match.object", where))
    captures: list[tuple[str, tuple[PathStep, ...]]] = []
    cap = raw.get("capture") or {}
    if not isinstance(cap, Mapping):
        raise where.fail("match.object.capture", "must map names to paths")
    for name, sub_path in cap.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise where.fail("match.object.capture", f"bad capture name {name!r}")
        captures.append((name, _path(sub_path, f"match.object.capture.{name}", where)))
    return ObjectMatch(kind=kind, path=path, tests=tuple(tests), captures=tuple(captures))


def _match(raw: Any, where: _Where) -> Match | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise where.fail("match", "must be a mapping with event, log and/or object")
    _only(raw, frozenset({"event", "log", "object", "known_issue"}), "match", where)
    if "known_issue" in raw:
        if len(raw) > 1:
            raise where.fail(
                "match.known_issue", "stands alone: put event, log and object under its symptom"
            )
        return Match(known_issue=_known_issue(raw["known_issue"], where))
    return Match(
        event=_event_match(raw["event"], where) if "event" in raw else None,
        log=_log_match(raw["log"], where) if "log" in raw else None,
        object=_object_match(raw["object"], where) if "object" in raw else None,
    )


class _Prefixed(_Where):
    """A ``_Where`` whose field names sit under a parent (``match.known_issue.symptom.``)."""

    def __init__(self, parent: _Where, prefix: str, strip: str = "match.") -> None:
        super().__init__(parent.path, parent.line, parent.rule_id)
        self.prefix, self.strip = prefix, strip

    def fail(self, field: str, reason: str) -> RuleFileError:
        if field.startswith(self.strip):
            field = field[len(self.strip) :]
        return super().fail(f"{self.prefix}{field}", reason)


_KNOWN_ISSUE_KEYS = frozenset({"component", "affected", "fixed_in", "upstream", "symptom"})
_UPSTREAM = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|commit)/\w+$")


def _known_issue(raw: Any, where: _Where) -> KnownIssueMatch:
    field = "match.known_issue"
    if not isinstance(raw, Mapping):
        raise where.fail(field, "must be a mapping")
    _only(raw, _KNOWN_ISSUE_KEYS, field, where)
    for key in ("component", "affected", "fixed_in", "upstream"):
        if key not in raw:
            raise where.fail(f"{field}.{key}", "is required")
    component = raw["component"]
    if component not in KNOWN_COMPONENTS:
        raise where.fail(
            f"{field}.component", f"{component!r} is not one of {', '.join(KNOWN_COMPONENTS)}"
        )
    upstream = raw["upstream"]
    if not isinstance(upstream, str) or not _UPSTREAM.match(upstream):
        raise where.fail(f"{field}.upstream", "must be a GitHub issue, pull request or commit URL")
    items = raw["affected"]
    if not isinstance(items, list) or not items:
        raise where.fail(f"{field}.affected", "must be a non-empty list of {introduced, fixed}")
    ranges: list[VersionRange] = []
    for i, item in enumerate(items):
        item_field = f"{field}.affected[{i}]"
        if not isinstance(item, Mapping) or not item:
            raise where.fail(item_field, "must be a mapping with introduced and/or fixed")
        _only(item, frozenset({"introduced", "fixed"}), item_field, where)
        bounds = {}
        for key in ("introduced", "fixed"):
            if key not in item:
                continue
            version = parse_component_version(component, item[key])
            if version is None or version.patch is None:
                raise where.fail(
                    f"{item_field}.{key}",
                    f"{item[key]!r} is not a {component} version (major.minor.patch)",
                )
            bounds[key] = version
        low, high = bounds.get("introduced"), bounds.get("fixed")
        if low is not None and high is not None and low.key() >= high.key():
            raise where.fail(item_field, f"introduced {low} is not below fixed {high}")
        ranges.append(VersionRange(introduced=low, fixed=high))
    fixed_in = _str_list(raw["fixed_in"], f"{field}.fixed_in", where)
    if not fixed_in:
        raise where.fail(f"{field}.fixed_in", "names the release(s) with the fix")
    for text in fixed_in:
        fixed_version = parse_component_version(component, text)
        if fixed_version is None:
            raise where.fail(f"{field}.fixed_in", f"{text!r} is not a {component} version")
        if not any(r.fixed is not None and r.fixed.key() == fixed_version.key() for r in ranges):
            raise where.fail(f"{field}.fixed_in", f"{text} is the fixed bound of no range")
    symptom: list[tuple[str, Match]] = []
    if "symptom" in raw:
        sraw = raw["symptom"]
        sfield = f"{field}.symptom"
        if not isinstance(sraw, Mapping) or not sraw:
            raise where.fail(sfield, "must be a mapping with event, log and/or object")
        _only(sraw, frozenset({"event", "log", "object"}), sfield, where)
        at = _Prefixed(where, f"{sfield}.")
        if "event" in sraw:
            symptom.append(("event", Match(event=_event_match(sraw["event"], at))))
        if "log" in sraw:
            symptom.append(("log", Match(log=_log_match(sraw["log"], at))))
        objects = sraw.get("object")
        items = objects if isinstance(objects, list) else [objects] if objects is not None else []
        if isinstance(objects, list) and not objects:
            raise where.fail(f"{sfield}.object", "must not be an empty list")
        for i, item in enumerate(items):
            key = "object" if i == 0 else f"object#{i + 1}"
            part = (
                _Prefixed(where, f"{sfield}.object[{i}]", strip="match.object")
                if len(items) > 1
                else at
            )
            symptom.append((key, Match(object=_object_match(item, part))))
    return KnownIssueMatch(
        component=str(component),
        affected=tuple(ranges),
        fixed_in=fixed_in,
        upstream=upstream,
        symptom=tuple(symptom),
    )


def _available_names(match: Match) -> frozenset[str]:
    """Everything an explain template of this match may name."""
    names: set[str] = set()
    if match.known_issue is not None:
        names |= KNOWN_ISSUE_FIELDS | {"node"}
        for _key, part in match.known_issue.symptom:
            names |= _available_names(part)
    if match.event is not None:
        names |= CONTEXT_FIELDS["event"]
        for p in match.event.messages:
            names |= p.group_names
    if match.log is not None:
        names |= CONTEXT_FIELDS["log"]
        for p in match.log.patterns:
            names |= p.group_names
    if match.object is not None:
        names |= CONTEXT_FIELDS["object"]
        names |= {name for name, _ in match.object.captures}
        for t in match.object.tests:
            if t.pattern is not None:
                names |= t.pattern.group_names
    return frozenset(names)


def validate_rule(raw: Any, *, path: str, line: int | None = None) -> Rule:
    """Turn one raw rule mapping into a :class:`Rule`, or raise :class:`RuleFileError`."""
    where = _Where(path, line, None)
    if not isinstance(raw, Mapping):
        raise where.fail("rule", "each entry must be a mapping")
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not RULE_ID_RE.match(rule_id):
        raise where.fail("id", f"{rule_id!r} is not of the form DRA-<PHASE>-<NAME>")
    where.rule_id = rule_id
    _only(raw, _TOP_KEYS, "", where)
    for key in _REQUIRED:
        if key not in raw:
            raise where.fail(key, "is required")
    phase_code = rule_id.split("-")[1]
    try:
        phase = Phase(raw["phase"])
    except ValueError:
        raise where.fail("phase", f"{raw['phase']!r} is not a phase") from None
    if PHASE_CODES[phase_code] is not phase:
        raise where.fail("phase", f"{phase.value} does not match the id's {phase_code}")
    try:
        severity = Severity(raw["severity"])
    except ValueError:
        raise where.fail("severity", "must be error, warning or info") from None
    title = _str(raw, "title", where)
    explain = _str(raw, "explain", where)
    docs = _str(raw, "docs", where)
    next_items = _str_list(raw["next"], "next", where)
    if not next_items:
        raise where.fail("next", "needs at least one observation")
    for i, item in enumerate(next_items):
        if _MUTATING.search(item) and not item.startswith(REMEDIATION_PREFIX):
            raise where.fail(
                f"next[{i}]", f"changes the cluster; prefix it with '{REMEDIATION_PREFIX}'"
            )
    positions = [docs.find(h) for h in DOC_HEADINGS]
    for heading, pos in zip(DOC_HEADINGS, positions, strict=True):
        if pos < 0:
            raise where.fail("docs", f"lacks the heading '{heading}'")
    if positions != sorted(positions):
        raise where.fail("docs", "headings out of order: " + ", ".join(DOC_HEADINGS))
    aliases = _str_list(raw.get("aliases"), "aliases", where)
    for alias in aliases:
        if not RULE_ID_RE.match(alias):
            raise where.fail("aliases", f"{alias!r} is not of the form DRA-<PHASE>-<NAME>")
    fallback = raw.get("fallback", False)
    if not isinstance(fallback, bool):
        raise where.fail("fallback", "must be true or false")
    supersedes = _str_list(raw.get("supersedes"), "supersedes", where)
    match = _match(raw.get("match"), where)
    if match is None and fallback:
        # A code-backed rule may still supersede others (it names the cause they only
        # describe); a fallback is by definition a match of last resort.
        raise where.fail("match", "fallback needs a match")
    if match is not None and match.known_issue is not None:
        if not match.known_issue.symptom and severity is Severity.ERROR:
            raise where.fail(
                "severity",
                "a known issue without a symptom cannot be an error: the version "
                "alone proves no failure",
            )
    if match is not None:
        unknown = sorted(explain_placeholders(explain) - _available_names(match))
        if unknown:
            raise where.fail(
                "explain", f"uses {{{unknown[0]}}}, which no capture or context field supplies"
            )
    return Rule(
        id=rule_id,
        phase=phase,
        severity=severity,
        title=title.strip(),
        match=match,
        explain=explain.strip(),
        next=next_items,
        docs=docs.strip() + "\n",
        aliases=aliases,
        versions=_str_list(raw.get("versions"), "versions", where),
        fallback=fallback,
        supersedes=supersedes,
        source=f"{path}:{line}" if line else path,
    )


def check_rule_set(rules: Sequence[Rule]) -> None:
    """Cross-rule checks: unique ids, aliases that clash with nothing, known supersedes."""
    ids: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in ids:
            raise RuleFileError(
                f"{rule.id}: id: duplicate (also at {ids[rule.id].source})", path=rule.source
            )
        ids[rule.id] = rule
    aliases: dict[str, str] = {}
    for rule in rules:
        for alias in rule.aliases:
            if alias in ids or alias in aliases:
                raise RuleFileError(
                    f"{rule.id}: aliases: {alias} is already an id or another rule's alias",
                    path=rule.source,
                )
            aliases[alias] = rule.id
        for target in rule.supersedes:
            if target not in ids:
                raise RuleFileError(
                    f"{rule.id}: supersedes: unknown rule {target}", path=rule.source
                )
