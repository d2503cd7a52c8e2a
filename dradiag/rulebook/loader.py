"""Finding, reading and validating the rule files, once per process: ``load_rulebook()``.

The files live at the top of the repository (``rules/*.yaml``, one per phase) and ship
inside the wheel as ``dradiag/_rules/`` (pyproject ``force-include``). The installed copy
wins; a source or editable checkout falls back to the repository's ``rules/``. Loading
is cached: every analysis and command shares one compiled Rulebook.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dradiag.rulebook.schema import Rule, RuleFileError, check_rule_set, validate_rule
from dradiag.vocabulary import PHASE_ORDER, Phase

PHASE_FILES: Mapping[Phase, str] = {phase: f"{phase.value}.yaml" for phase in PHASE_ORDER}
"""One file per phase; a rule's phase must agree with its file."""


@dataclass(frozen=True, slots=True)
class Rulebook:
    """Every rule, sorted by phase order then id, with look-ups by id, alias and phase."""

    rules: tuple[Rule, ...]
    location: str = ""
    _by_id: dict[str, Rule] = field(default_factory=dict, repr=False, compare=False)
    _aliases: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _events: dict[str | None, list[Rule]] = field(default_factory=dict, repr=False, compare=False)
    """Event rules by the exact reason they name; under None, those naming none."""
    _objects: dict[str, tuple[Rule, ...]] = field(default_factory=dict, repr=False, compare=False)
    """Object-predicate rules by the kind they match, indexed on first use."""
    _symptoms: dict[str, Rulebook] = field(default_factory=dict, repr=False, compare=False)
    """Per symptom part key: the known-issue rules reduced to that part; under ``""``,
    the known-issue rules themselves."""

    @classmethod
    def from_rules(cls, rules: Iterable[Rule], *, location: str = "") -> Rulebook:
        """Build a Rulebook, checking ids are unique and aliases and supersedes resolve."""
        ordered = sorted(rules, key=lambda r: (PHASE_ORDER.index(r.phase), r.id))
        check_rule_set(ordered)
        book = cls(rules=tuple(ordered), location=location)
        for rule in ordered:
            book._by_id[rule.id] = rule
            for alias in rule.aliases:
                book._aliases[alias] = rule.id
        return book

    def get(self, rule_id: str) -> Rule | None:
        """The rule with this id, or the rule a retired id (alias) now resolves to."""
        key = rule_id.strip().upper()
        rule = self._by_id.get(key)
        if rule is None and key in self._aliases:
            rule = self._by_id[self._aliases[key]]
        return rule

    def __contains__(self, rule_id: object) -> bool:
        return isinstance(rule_id, str) and self.get(rule_id) is not None

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def event_rules(self, reason: str) -> list[Rule]:
        """Rules whose event match may take an event with this reason: those naming it,
        then those whose reason is a pattern or absent. Indexed once: a diagnosis
        matches events one at a time."""
        if not self._events:
            self._events[None] = []
            for rule in self.rules:
                em = rule.match.event if rule.match is not None else None
                if em is None:
                    continue
                for reason_named in em.reasons or (None,):
                    self._events.setdefault(reason_named, []).append(rule)
        return self._events.get(reason, []) + self._events[None]

    def object_rules(self, kind: str) -> tuple[Rule, ...]:
        """Rules with an object predicate for objects of ``kind``, in catalogue order.
        Indexed once: a scan matches every walked claim's pods one at a time."""
        found = self._objects.get(kind)
        if found is None:
            found = self._objects[kind] = tuple(
                r
                for r in self.rules
                if r.match is not None
                and r.match.object is not None
                and r.match.object.kind == kind
            )
        return found

    @property
    def known_issues(self) -> tuple[Rule, ...]:
        """Rules with a ``match.known_issue`` block, in catalogue order."""
        if "" not in self._symptoms:
            known = tuple(r for r in self.rules if r.match is not None and r.match.known_issue)
            self._symptoms[""] = Rulebook(rules=known, location=self.location)
        return self._symptoms[""].rules

    def symptom_rulebook(self, key: str) -> Rulebook:
        """The known-issue rules whose symptom has part ``key`` (``event``, ``log``,
        ``object``, ``object#2``...), each reduced to that part: the ordinary matchers then
        find the symptom's evidence. Built once per rulebook, since every claim of a scan
        asks for it."""
        if key not in self._symptoms:
            derived = []
            for rule in self.known_issues:
                assert rule.match is not None and rule.match.known_issue is not None
                for part_key, part in rule.match.known_issue.symptom:
                    if part_key == key:
                        derived.append(
                            replace(rule, match=part, aliases=(), supersedes=(), fallback=False)
                        )
            self._symptoms[key] = Rulebook.from_rules(derived, location=self.location)
        return self._symptoms[key]

    @property
    def symptom_keys(self) -> tuple[str, ...]:
        """Every symptom part key the known-issue rules use, events and logs first."""
        keys = {k for r in self.known_issues for k, _ in r.match.known_issue.symptom}  # type: ignore[union-attr]
        return tuple(
            sorted(
                keys, key=lambda k: (("event", "log").index(k) if k in ("event", "log") else 2, k)
            )
        )

    def by_phase(self, phase: Phase | str) -> tuple[Rule, ...]:
        """Rules of one phase, sorted by id."""
        wanted = Phase(phase)
        return tuple(r for r in self.rules if r.phase is wanted)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every rule id, in catalogue order."""
        return tuple(r.id for r in self.rules)

    @property
    def aliases(self) -> Mapping[str, str]:
        """Retired id → current id."""
        return dict(self._aliases)

    def closest(self, rule_id: str, n: int = 3) -> list[str]:
        """The ids (and aliases) nearest to a mistyped one, best first."""
        import difflib

        names = list(self._by_id) + list(self._aliases)
        return difflib.get_close_matches(rule_id.strip().upper(), names, n=n, cutoff=0.5)


def default_rules_dir() -> Path:
    """Where the rule files are: the wheel's ``dradiag/_rules``, else the checkout's ``rules/``."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "_rules"
    if installed.is_dir():
        return installed
    return package_dir.parent / "rules"


def _yaml_loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_rule_file(path: Path) -> list[Rule]:
    """Validate every rule of one file; raise :class:`RuleFileError` on the first problem."""
    import yaml

    display = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(f"cannot read rule file: {exc}", path=display) from None
    loader = _yaml_loader()
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise RuleFileError(
            f"invalid YAML: {getattr(exc, 'problem', None) or exc}",
            path=display,
            line=mark.line + 1 if mark is not None else None,
            column=mark.column + 1 if mark is not None else None,
        ) from None
    if data is None:
        return []
    if not isinstance(data, list) or root is None:
        raise RuleFileError("a rule file is a YAML list of rules", path=display, line=1)
    lines = [node.start_mark.line + 1 for node in root.value]
    return [
        validate_rule(raw, path=display, line=line) for raw, line in zip(data, lines, strict=True)
    ]


def load_rulebook_from(directory: Path | str) -> Rulebook:
    """Load and validate every ``*.yaml`` in ``directory`` (no caching; tests use this)."""
    root = Path(directory)
    if not root.is_dir():
        raise RuleFileError("rules directory not found", path=str(root))
    rules: list[Rule] = []
    for path in sorted(root.glob("*.yaml")):
        file_rules = read_rule_file(path)
        expected = {v: k for k, v in PHASE_FILES.items()}.get(path.name)
        for rule in file_rules:
            if expected is not None and rule.phase is not expected:
                raise RuleFileError(
                    f"{rule.id}: phase: {rule.phase.value} rule in {path.name}",
                    path=rule.source,
                )
        rules.extend(file_rules)
    return Rulebook.from_rules(rules, location=str(root))


@functools.cache
def load_rulebook() -> Rulebook:
    """The shipped rulebook, loaded, validated and compiled once per process."""
    return load_rulebook_from(default_rules_dir())
