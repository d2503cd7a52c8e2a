"""How this run was invoked: the program name users typed, and the global flags.

Messages name the command the way the user typed it, so a copied hint works: installed
as the kubectl plugin ``kubectl-dra_diag`` the tool is run as ``kubectl dra-diag``,
and its errors and help say so.
"""

from __future__ import annotations

import os

PLUGIN_EXECUTABLE = "kubectl-dra_diag"
PLUGIN_PROG = "kubectl dra-diag"
DEFAULT_PROG = "dradiag"

_prog = DEFAULT_PROG


def prog_for(argv0: str | None) -> str:
    """The name to show for an executable path: ``kubectl dra-diag`` for the plugin."""
    base = os.path.basename(argv0 or "")
    if base.startswith(PLUGIN_EXECUTABLE):  # kubectl-dra_diag, kubectl-dra_diag.exe
        return PLUGIN_PROG
    return DEFAULT_PROG


def set_prog(name: str) -> None:
    """Record the name of this run (``cli.app.run`` does, once per run)."""
    global _prog
    _prog = name


def prog() -> str:
    """The command name to put in messages and hints (``dradiag`` or ``kubectl dra-diag``)."""
    return _prog
