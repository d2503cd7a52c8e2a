"""Shell completion: the scripts ``dradiag completion SHELL`` prints, the kubectl plugin's
completion executable, and the values completed from the user's own input.

Two protocols, one set of candidates:

- click's (typer vendors click): the shell calls ``dradiag`` with
  ``_DRADIAG_COMPLETE=complete_bash`` and ``COMP_WORDS``/``COMP_CWORD`` (zsh and fish
  pass ``_TYPER_COMPLETE_ARGS``), and the program prints the candidates.
- kubectl's for plugins (kubectl 1.26 and later): on ``kubectl dra-diag ...<TAB>``,
  kubectl runs the executable ``kubectl_complete-dra_diag`` from ``PATH`` with the words
  after the plugin name, the last one being the word under the cursor (empty for a new
  word). It prints one candidate per line, then cobra's directive line: ``:4`` (no file
  completion) or ``:0`` (the shell's default, files) where dradiag has no candidates of
  its own, as for ``--from PATH``.

Claim, pod and node names come from ``--from`` when given, else from the live cluster:
one capped list of names (metadata only, ``sources.live_names``; discovery's ``/version``
and ``/apis`` before it pick the served version) with a short time limit, and nothing at
all on any failure. The callbacks here never raise: a TAB press must never print an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

PROG = "dradiag"
COMPLETE_VAR = "_DRADIAG_COMPLETE"
"""One variable whatever the name typed: ``kubectl dra-diag`` has no valid variable name."""
LIVE_REQUEST_TIMEOUT = 2.0
LIVE_TIMEOUT = 3.0
"""Seconds a TAB press may wait on the cluster, per request and in all."""
NO_FILE_COMP = 4
DEFAULT_COMP = 0
"""cobra's ShellCompDirective values kubectl understands: no file completion, default."""


class Shell(StrEnum):
    """The shells a completion script is written for."""

    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


def script(shell: Shell) -> str:
    """The completion script to ``source`` (bash, zsh) or save (fish)."""
    from typer.completion import get_completion_script

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell.value)


def _live_names(params: dict[str, Any], kind: Any) -> list[tuple[str, str]]:
    """(namespace, name) of ``kind`` from the cluster the options point at; [] on failure."""
    from dradiag.cli.options import CommonOptions
    from dradiag.sources.live_names import object_names

    options = CommonOptions(
        kubeconfig=params.get("kubeconfig"),
        context=params.get("context"),
        namespace=params.get("namespace"),
        request_timeout=LIVE_REQUEST_TIMEOUT,
        timeout=LIVE_TIMEOUT,
    )
    return object_names(options, kind, params.get("namespace") or "default")


def _offline_names(from_path: str, kind: Any) -> list[tuple[str, str]]:
    from dradiag.snapshot.model import Kind, name_of, namespace_of
    from dradiag.sources.manifests import load_snapshot

    snapshot = load_snapshot(from_path)
    objects = {Kind.RESOURCE_CLAIM: snapshot.claims, Kind.POD: snapshot.pods}.get(
        kind, snapshot.nodes
    )
    return [(namespace_of(o) or "", name_of(o)) for o in objects]


def _names(ctx: Any, incomplete: str, kind_name: str) -> list[str]:
    params = getattr(ctx, "params", None) or {}
    from_path = params.get("from_path")
    if from_path == "-":
        return []  # stdin is the user's terminal during a TAB press
    try:
        from dradiag.snapshot.model import Kind

        kind = Kind(kind_name)
        found = _offline_names(str(from_path), kind) if from_path else _live_names(params, kind)
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    if kind is Kind.NODE:
        names = sorted({name for _ns, name in found})
    else:
        namespace = params.get("namespace")
        names = sorted(
            name if namespace else f"{ns}/{name}"
            for ns, name in found
            if not namespace or ns == namespace
        )
    return [n for n in names if n.startswith(incomplete)]


def claim_names(ctx: Any, incomplete: str) -> list[str]:
    """``NS/NAME`` (``NAME`` under ``-n``) of the claims in ``--from`` or the cluster."""
    return _names(ctx, incomplete, "ResourceClaim")


def pod_names(ctx: Any, incomplete: str) -> list[str]:
    """``NS/NAME`` (``NAME`` under ``-n``) of the pods in ``--from`` or the cluster."""
    return _names(ctx, incomplete, "Pod")


def node_names(ctx: Any, incomplete: str) -> list[str]:
    """The names of the Nodes in ``--from`` or the cluster."""
    return _names(ctx, incomplete, "Node")


def rule_ids(incomplete: str) -> list[str]:
    """The rule ids starting with ``incomplete`` (case-insensitive)."""
    try:
        from dradiag.rulebook import load_rulebook

        ids = [r.id for r in load_rulebook().rules]
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        return []
    return [i for i in ids if i.startswith(incomplete.upper())]


def candidates(words: Sequence[str], incomplete: str) -> tuple[list[str], int]:
    """What to offer for ``incomplete`` after ``words`` (the arguments before it), and the
    cobra directive: :data:`NO_FILE_COMP`, or :data:`DEFAULT_COMP` where a parameter has
    no completion of its own (a path, a free value), so the shell completes files."""
    import typer

    # The helpers that walk click's parser to the parameter under the cursor; typer
    # vendors click, and its completion classes use these same two functions.
    from typer._click.shell_completion import _resolve_context, _resolve_incomplete

    from dradiag.cli.app import app, split_global_flags

    args, _flags = split_global_flags(list(words))
    command = typer.main.get_command(app)
    ctx = _resolve_context(command, {}, PROG, args)
    obj, incomplete = _resolve_incomplete(ctx, args, incomplete)
    items = obj.shell_complete(ctx, incomplete)
    values = [str(item.value) for item in items]
    own = bool(getattr(obj, "_custom_shell_complete", None)) or bool(
        getattr(getattr(obj, "type", None), "choices", None)
    )
    is_parameter = hasattr(obj, "param_type_name")
    if is_parameter and not own and not values:
        return values, DEFAULT_COMP
    return values, NO_FILE_COMP


def kubectl_complete(argv: Sequence[str] | None = None) -> int:
    """``kubectl_complete-dra_diag WORD... INCOMPLETE``: kubectl's plugin completion.

    Prints the candidates one per line and the directive line last; prints ``:4`` alone
    on any failure, so a broken install never puts a traceback into the prompt.
    """
    import logging
    import sys

    from dradiag.cli import invocation

    invocation.set_prog("kubectl dra-diag")
    logging.getLogger("dradiag").setLevel(logging.CRITICAL + 1)
    args = list(sys.argv[1:] if argv is None else argv)
    words, incomplete = (args[:-1], args[-1]) if args else ([], "")
    try:
        values, directive = candidates(words, incomplete)
    except Exception:  # noqa: BLE001 - completion must never fail the shell
        values, directive = [], NO_FILE_COMP
    sys.stdout.write("".join(f"{v}\n" for v in values) + f":{directive}\n")
    sys.stdout.flush()
    return 0


def kubectl_complete_main() -> None:
    """Console-script entry point of ``kubectl_complete-dra_diag``."""
    raise SystemExit(kubectl_complete())
