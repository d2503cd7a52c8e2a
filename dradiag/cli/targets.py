"""The object a ``claim`` or ``pod`` command is about, written the ways kubectl users write it.

``NS/NAME``, ``NAME`` with ``-n NS`` (or the context's namespace), and kubectl's
``TYPE/NAME`` (``resourceclaim/x``, ``pods/x``, ``po/x``) all name one object. A name
that is not there gets the closest names, from its namespace first, then from others
(most often the claim is right and the namespace is not).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal

from dradiag.errors import UsageError

TargetCommand = Literal["claim", "pod"]

TYPE_WORDS: dict[TargetCommand, frozenset[str]] = {
    "claim": frozenset(
        {
            "resourceclaim",
            "resourceclaims",
            "resourceclaim.resource.k8s.io",
            "resourceclaims.resource.k8s.io",
        }
    ),
    "pod": frozenset({"pod", "pods", "po"}),
}
"""kubectl's names of each kind (singular, plural, short, qualified); kubectl gives
ResourceClaims no short name."""

NOT_A_TARGET: dict[str, str] = {
    "rc": "'rc' is kubectl's short name of ReplicationController, not of ResourceClaim",
    "resourceclaimtemplate": "a ResourceClaimTemplate is not a claim: diagnose the pod that "
    "uses it ('{prog} pod NS/POD') or the claim generated from it",
    "resourceclaimtemplates": "a ResourceClaimTemplate is not a claim: diagnose the pod that "
    "uses it ('{prog} pod NS/POD') or the claim generated from it",
}


def parse_target(
    value: str,
    command: TargetCommand,
    *,
    namespace: str | None,
    default_namespace: str,
) -> tuple[str, str]:
    """(namespace, name) of ``value``; UsageError for what names no object of ``command``.

    ``namespace`` is ``-n`` as given (None when absent), ``default_namespace`` what a bare
    name means without it.
    """
    from dradiag.cli.invocation import prog

    text = value.strip()
    if not text:
        raise UsageError(f"expected NAMESPACE/NAME or NAME, got {value!r}")
    parts = text.split("/")
    if len(parts) > 2 or not all(parts):
        raise UsageError(
            f"expected NAMESPACE/NAME, TYPE/NAME or NAME, got {value!r} "
            f"(e.g. ml/trainer-0, or -n ml {'resourceclaim' if command == 'claim' else 'pod'}/x)"
        )
    if len(parts) == 1:
        return namespace or default_namespace, text
    head, name = parts
    word = head.lower()
    if word in TYPE_WORDS[command]:
        return namespace or default_namespace, name
    other: TargetCommand = "pod" if command == "claim" else "claim"
    if word in TYPE_WORDS[other]:
        raise UsageError(f"{value!r} names a {_kind(other)}: use '{prog()} {other} {value}'")
    if word in NOT_A_TARGET:
        raise UsageError(f"{value!r}: " + NOT_A_TARGET[word].format(prog=prog()))
    if namespace and namespace != head:
        raise UsageError(
            f"{value!r} names namespace {head!r} but -n says {namespace!r}; give one of them"
        )
    return head, name


def _kind(command: TargetCommand) -> str:
    return "ResourceClaim" if command == "claim" else "Pod"


def did_you_mean(
    namespace: str, name: str, existing: Iterable[tuple[str, str]], *, limit: int = 3
) -> list[str]:
    """``NS/NAME`` of the existing objects closest to ``namespace/name``: close names in
    the same namespace and the same name in other namespaces; only when neither exists,
    close names in other namespaces."""
    same: list[str] = []
    elsewhere: dict[str, list[str]] = {}
    for ns, other in existing:
        if ns == namespace:
            same.append(other)
        else:
            elsewhere.setdefault(other, []).append(ns)
    out = [f"{namespace}/{n}" for n in difflib.get_close_matches(name, same, n=limit)]
    exact = sorted(elsewhere.get(name, ()))
    out += [f"{ns}/{name}" for ns in exact]
    if not out:
        close = difflib.get_close_matches(name, [n for n in elsewhere if n != name], n=limit)
        out += [f"{ns}/{n}" for n in close for ns in sorted(elsewhere[n])]
    return out[:limit]


def not_found_hint(suggestions: list[str]) -> str:
    """``; did you mean a/b or c/d?`` (empty without suggestions)."""
    if not suggestions:
        return ""
    return "; did you mean " + " or ".join(suggestions) + "?"


def with_suggestions(
    exc: UsageError,
    existing: Iterable[tuple[str, str]],
    namespace: str,
    name: str,
) -> UsageError:
    """``exc`` (a "not found") with the closest existing names appended."""
    hint = not_found_hint(did_you_mean(namespace, name, existing))
    return UsageError(str(exc) + hint) if hint else exc
