"""``dradiag completion bash|zsh|fish``: the shell completion script, as kubectl prints its own."""

from __future__ import annotations

from typing import Annotated

import typer

from dradiag.cli.completion import Shell


def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
) -> int:
    """Print the shell completion script: commands, flags, claim, pod and node names.

    \b
    Examples:
      source <(dradiag completion bash)        # this shell; add it to ~/.bashrc to keep it
      dradiag completion fish > ~/.config/fish/completions/dradiag.fish

    Names come from --from when it is given, else from the cluster (one short list call,
    nothing on failure). `kubectl dra-diag` completes through kubectl's own completion
    (kubectl 1.26 or later) with the `kubectl_complete-dra_diag` executable pip installs
    beside `kubectl-dra_diag`; no script is needed for it.
    """
    from dradiag.cli.completion import script

    typer.echo(script(shell))
    return 0


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("completion")(completion)
