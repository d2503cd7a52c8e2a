"""CEL regular expressions (``matches``, ``find``, ``findAll``) with RE2 semantics via google-re2.

google-re2 is imported on the first regex compiled, not when the engine is imported
(cel-engines.md §5: re2 alone costs about 10 ms). Python's ``re`` is not a substitute:
``\\d``, ``\\w``, ``\\s`` and ``\\b`` are Unicode-aware there and ASCII in RE2, ``$`` also
matches before a trailing newline, and backreferences and lookarounds are accepted; RE2
rejects the last two as compile errors. A pattern with no RE2 metacharacter matches exactly
when it is a substring, so ``matches`` with such a pattern is a plain ``in`` test.
"""

from __future__ import annotations

from typing import Any

from .errors import CelRuntimeError

__all__ = ["is_literal_pattern", "matches", "find", "find_all", "compile_regex"]

_METACHARACTERS = frozenset("\\.+*?()|[]{}^$")
_CACHE: dict[str, Any] = {}


def is_literal_pattern(pattern: str) -> bool:
    """True when ``pattern`` has no RE2 metacharacter, so it matches as a plain substring."""
    return not (_METACHARACTERS & set(pattern))


def compile_regex(pattern: str) -> Any:
    """Compile with RE2 (cached); raise ``CelRuntimeError`` for a pattern RE2 rejects."""
    compiled = _CACHE.get(pattern)
    if compiled is None:
        import re2

        options = re2.Options()
        options.log_errors = False
        try:
            compiled = re2.compile(pattern, options)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else exc
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise CelRuntimeError(f"invalid regular expression: {detail}") from None
        _CACHE[pattern] = compiled
    return compiled


def matches(s: Any, pattern: Any) -> bool:
    if s.__class__ is not str or pattern.__class__ is not str:
        raise CelRuntimeError("no such overload")
    return compile_regex(pattern).search(s) is not None


def find(s: Any, pattern: Any) -> str:
    if s.__class__ is not str or pattern.__class__ is not str:
        raise CelRuntimeError("no such overload")
    m = compile_regex(pattern).search(s)
    return "" if m is None else str(m.group(0))


def find_all(s: Any, pattern: Any, limit: Any = -1) -> list[str]:
    if s.__class__ is not str or pattern.__class__ is not str or limit.__class__ is not int:
        raise CelRuntimeError("no such overload")
    if limit == 0:
        return []
    out: list[str] = []
    for m in compile_regex(pattern).finditer(s):
        out.append(str(m.group(0)))
        if 0 < limit <= len(out):
            break
    return out
