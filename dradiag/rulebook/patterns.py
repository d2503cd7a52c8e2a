"""Compiled rule regexes: RE2 where the pattern allows it, plus a literal prefilter.

Rule files are data written by people, and evidence (kubelet-plugin logs, events) is
large and untrusted, so a pattern is compiled with google-re2 whenever RE2 accepts it:
matching is linear in the input, and no pattern can backtrack for minutes on a 50 MB
log. A pattern RE2 rejects (look-around, back-references) falls back to Python's ``re``;
the loader records which engine runs each one.

Each pattern also carries the literal strings one of which every match must contain
(derived from the parse tree). Scanning a large log then costs one ``str.find`` per
distinct literal, and the regex runs only on the few lines that contain one. Both
imports (``re2`` and the stdlib parser) happen on first use, not at start-up.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class _Compiled(Protocol):
    def search(self, text: str) -> Any: ...


class PatternError(ValueError):
    """A pattern neither RE2 nor Python's ``re`` can compile."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One compiled rule regex with the facts the matcher and the loader need."""

    source: str
    engine: str
    """``re2`` or ``re`` (the fallback for patterns RE2 cannot express)."""
    compiled: _Compiled
    group_names: frozenset[str]
    ignore_case: bool

    @property
    def literals(self) -> tuple[str, ...]:
        """Every match contains at least one of these; empty when none could be derived.

        Derived on first use: a ``claim`` run matches a handful of events and never needs
        the prefilter of most of the rulebook's 300 patterns."""
        return _literals_of(self.source, self.ignore_case)

    def search(self, text: str) -> dict[str, str] | None:
        """The named captures of the first match in ``text`` (``{}`` if it has none), or None."""
        m = self.compiled.search(text)
        if m is None:
            return None
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        groups.setdefault("_match", m.group(0))
        return groups

    def may_match(self, text: str) -> bool:
        """False only when ``text`` cannot match (it holds none of the literals)."""
        if not self.literals:
            return True
        hay = text.lower() if self.ignore_case else text
        return any(lit in hay for lit in self.literals)


_RE2_OPTIONS: Any = None


def _re2_compile(source: str) -> _Compiled | None:
    global _RE2_OPTIONS
    try:
        import re2
    except ImportError:  # pragma: no cover - google-re2 is a runtime dependency
        return None
    if _RE2_OPTIONS is None:
        options = re2.Options()
        # RE2 prints parse failures to stderr by default; we fall back instead.
        options.log_errors = False
        _RE2_OPTIONS = options
    try:
        return re2.compile(source, options=_RE2_OPTIONS)  # type: ignore[no-any-return]
    except re2.error:
        return None


_LEADING_IGNORE_CASE = re.compile(r"\(\?[aLmsux]*i[aLmsux]*\)")
"""A leading inline flag group with ``i`` (Python accepts global flags only at the start)."""


def compile_pattern(source: str) -> Pattern:
    """Compile one rule regex; raise :class:`PatternError` with the reason if impossible.

    RE2 compiles (and so validates) a pattern in microseconds; Python's ``re`` parses it
    only when RE2 cannot express it, so loading the rulebook stays cheap.
    """
    compiled: _Compiled | None = _re2_compile(source)
    if compiled is not None:
        engine = "re2"
        group_names = frozenset(getattr(compiled, "groupindex", {}) or {})
        ignore_case = _LEADING_IGNORE_CASE.match(source) is not None
    else:
        try:
            fallback = re.compile(source)
        except re.error as exc:
            raise PatternError(f"invalid regex: {exc}") from None
        compiled, engine = fallback, "re"
        group_names = frozenset(fallback.groupindex)
        ignore_case = bool(fallback.flags & re.IGNORECASE)
    return Pattern(
        source=source,
        engine=engine,
        compiled=compiled,
        group_names=group_names,
        ignore_case=ignore_case,
    )


@functools.cache
def _literals_of(source: str, ignore_case: bool) -> tuple[str, ...]:
    literals = required_literals(source)
    return tuple(sorted({lit.lower() for lit in literals})) if ignore_case else literals


# -- literal prefilter -------------------------------------------------------------

_MIN_LITERAL = 3
"""Shorter literals filter too little to be worth a scan of their own."""


def required_literals(source: str) -> tuple[str, ...]:
    """Literals one of which every match of ``source`` contains; ``()`` if unknown.

    Read from the stdlib parse tree: a run of consecutive literal characters in the
    top-level sequence is required; a branch yields a set when every alternative has
    one. Of the candidates, the set whose shortest literal is longest wins (fewest
    false candidates per scan). Anything unusual yields ``()``, which only costs speed.
    """
    try:
        from re import _parser  # type: ignore[attr-defined]

        tree = _parser.parse(source)
    except Exception:  # noqa: BLE001 - a prefilter is an optimisation only
        return ()
    best = _best(_candidates(list(tree)))
    return tuple(sorted(best)) if best else ()


def _best(candidates: Iterable[frozenset[str]]) -> frozenset[str] | None:
    best: frozenset[str] | None = None
    score = -1
    for cand in candidates:
        if not cand:
            continue
        shortest = min(len(c) for c in cand)
        if shortest < _MIN_LITERAL:
            continue
        if shortest > score:
            best, score = cand, shortest
    return best


def _candidates(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
    """Required-literal sets of a parsed sequence (each set: one member must appear)."""
    from re import _constants as c  # type: ignore[attr-defined]

    found: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            found.append(frozenset({"".join(run)}))
            run.clear()

    for op, arg in items:
        if op is c.LITERAL:
            run.append(chr(arg))
            continue
        flush()
        if op is c.SUBPATTERN:
            # A scoped (?i:...) group matches any case: its characters filter nothing.
            if not arg[1] & re.IGNORECASE:
                found.extend(_candidates(list(arg[-1])))
        elif op is c.BRANCH:
            alternatives = [_best(_candidates(list(alt))) for alt in arg[1]]
            if alternatives and all(alternatives):
                found.append(frozenset().union(*(a for a in alternatives if a)))
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and arg[0] >= 1:
            found.extend(_candidates(list(arg[2])))
    flush()
    return found


def first_match(patterns: Iterable[Pattern], text: str) -> tuple[Pattern, dict[str, str]] | None:
    """The first pattern (in rule order) that matches ``text``, with its captures."""
    for pattern in patterns:
        if not pattern.may_match(text):
            continue
        captures = pattern.search(text)
        if captures is not None:
            return pattern, captures
    return None


def clean_captures(captures: Mapping[str, str]) -> dict[str, str]:
    """Captures without the internal ``_match`` entry."""
    return {k: v for k, v in captures.items() if not k.startswith("_")}
