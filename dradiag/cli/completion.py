"""Shell completion: the scripts ``dradiag completion SHELL`` prints, and the values
completed from the user's own input (claim and pod names from ``--from``, rule ids).

The protocol is click's (typer vendors click): the shell calls ``dradiag`` with
``_DRADIAG_COMPLETE=complete_bash`` and ``COMP_WORDS``/``COMP_CWORD`` (zsh and fish
pass ``_TYPER_COMPLETE_ARGS``), and the program prints the candidates. The callbacks
here never raise: a broken ``--from`` simply completes nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

PROG = "dradiag"
COMPLETE_VAR = "_DRADIAG_COMPLETE"
"""One variable whatever the name typed: ``kubectl dra-diag`` has no valid variable name."""


class Shell(StrEnum):
    """The shells a completion script is written for."""

    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def script(shell: Shell) -> str:
    """The completion script to ``source`` (bash, zsh) or save (fish)."""
    from typer.completion import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell.value)


def _names(ctx: Any, incomplete: str, kind: str) -> list[str]:
    params = getattr(ctx, "params", None) or {}
    from_path = params.get("from_path")
    if not from_path or from_path == "-":
        return []  # live names would need a cluster round trip on every TAB
    try:
        from dradiag.snapshot.model import name_of, namespace_of
        from dradiag.sources.manifests import load_snapshot

        snapshot = load_snapshot(str(from_path))
        objects = snapshot.claims if kind == "claim" else snapshot.pods
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    namespace = params.get("namespace")
    names = sorted(
        name_of(o) if namespace else f"{namespace_of(o)}/{name_of(o)}"
        for o in objects
        if not namespace or namespace_of(o) == namespace
    )
    return [n for n in names if n.startswith(incomplete)]


def claim_names(ctx: Any, incomplete: str) -> list[str]:
    """``NS/NAME`` (``NAME`` under ``-n``) of the claims in ``--from``."""
    return _names(ctx, incomplete, "claim")


def pod_names(ctx: Any, incomplete: str) -> list[str]:
    """``NS/NAME`` (``NAME`` under ``-n``) of the pods in ``--from``."""
    return _names(ctx, incomplete, "pod")


def rule_ids(incomplete: str) -> list[str]:
    """The rule ids starting with ``incomplete`` (case-insensitive)."""
    try:
        from dradiag.rulebook import load_rulebook

        ids = [r.id for r in load_rulebook().rules]
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    return [i for i in ids if i.startswith(incomplete.upper())]
